// STUB for compiling pocketbert's generated app code on Linux only; never shipped, never run. ExecuTorch's Swift API
// (the `executorch` product of its Swift package) as its iOS guide documents it, with only what the templates call:
// https://docs.pytorch.org/executorch/stable/using-executorch-ios.html ("Runtime API"); bodies trap.
@_exported import Foundation

// https://docs.pytorch.org/executorch/stable/using-executorch-ios.html (Tensor: "Scalar" element types)
public protocol Scalar {}
extension Float: Scalar {}
extension Int32: Scalar {}
extension Int64: Scalar {}

// https://docs.pytorch.org/executorch/stable/using-executorch-ios.html (ValueConvertible: what forward takes)
public protocol ValueConvertible {}

// https://docs.pytorch.org/executorch/stable/using-executorch-ios.html (Tensor<T>)
public final class Tensor<T: Scalar>: ValueConvertible {
    // Tensor<Float>([1.0, 2.0, 3.0, 4.0], shape: [2, 2])
    public init(_ scalars: [T], shape: [Int]) { fatalError("stub") }
    // tensor.scalars(): a copy of the data as a Swift array
    public func scalars() -> [T] { fatalError("stub") }
}

// https://docs.pytorch.org/executorch/stable/using-executorch-ios.html (Value)
public final class Value: ValueConvertible {
    // let output: Tensor<Float> = try module.forward(input)[0].tensor()!  (nil when the value is no tensor)
    public func tensor<T: Scalar>() -> Tensor<T>? { fatalError("stub") }
}

// https://docs.pytorch.org/executorch/stable/using-executorch-ios.html (Module)
public final class Module {
    // Module(filePath: "model.pte")
    public init(filePath: String) { fatalError("stub") }
    // try module.forward([input, ...]) and try module.forward(input)
    public func forward(_ inputs: [ValueConvertible]) throws -> [Value] { fatalError("stub") }
    public func forward(_ input: ValueConvertible) throws -> [Value] { fatalError("stub") }
}
