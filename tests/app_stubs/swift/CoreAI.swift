// STUB for compiling pocketbert's generated app code on Linux only; never shipped, never run. Core AI (iOS 27,
// macOS 27), declared as Apple's documentation shows each call the templates make (read November 2026; the
// templates' header lists the same calls); bodies trap. NDArray.View's element access is not in that documentation
// (the templates mark it unverified): declared here as the templates use it.
@_exported import Foundation

// https://developer.apple.com/documentation/coreai/specializationoptions
public struct SpecializationOptions: Sendable {
    // https://developer.apple.com/documentation/coreai/specializationoptions/default
    public static var `default`: SpecializationOptions { fatalError("stub") }
}

// https://developer.apple.com/documentation/coreai/aimodelcache
public final class AIModelCache: Sendable {
    // https://developer.apple.com/documentation/coreai/aimodelcache/default
    public static var `default`: AIModelCache { fatalError("stub") }
    // https://developer.apple.com/documentation/coreai/aimodelcache/model(for:options:)
    public func model(for url: URL, options: SpecializationOptions) throws -> AIModel? { fatalError("stub") }
}

// https://developer.apple.com/documentation/coreai/aimodel
public final class AIModel: Sendable {
    // https://developer.apple.com/documentation/coreai/aimodel/specialize(contentsof:options:cache:cachepolicy:)
    public static func specialize(contentsOf url: URL, options: SpecializationOptions, cache: AIModelCache,
                                  cachePolicy: CachePolicy = .default) async throws -> AIModel { fatalError("stub") }
    // https://developer.apple.com/documentation/coreai/aimodel/cachepolicy
    public enum CachePolicy: Sendable { case `default` }
    // https://developer.apple.com/documentation/coreai/aimodel/loadfunction(named:)
    public func loadFunction(named name: String) throws -> InferenceFunction? { fatalError("stub") }
}

// https://developer.apple.com/documentation/coreai/ndarray
public struct NDArray: Sendable {
    // https://developer.apple.com/documentation/coreai/ndarray/init(scalars:shape:)
    public init<Scalar: Numeric>(scalars: [Scalar], shape: [Int]) { fatalError("stub") }
    // https://developer.apple.com/documentation/coreai/ndarray/shape
    public var shape: [Int] { fatalError("stub") }
    // https://developer.apple.com/documentation/coreai/ndarray/view(as:)
    public func view<Scalar>(as type: Scalar.Type) -> View<Scalar> { fatalError("stub") }

    // https://developer.apple.com/documentation/coreai/ndarray/view
    public struct View<Scalar> {
        public subscript(index: Int) -> Scalar { fatalError("stub") }  // unverified: see the header
    }
}

// https://developer.apple.com/documentation/coreai/inferencevalue
public enum InferenceValue: Sendable {
    case ndArray(NDArray)
    // https://developer.apple.com/documentation/coreai/inferencevalue/ndarray
    public var ndArray: NDArray? { fatalError("stub") }
}

// https://developer.apple.com/documentation/coreai/inferencefunction
public final class InferenceFunction: Sendable {
    // https://developer.apple.com/documentation/coreai/inferencefunction/outputs
    public struct Outputs {
        // https://developer.apple.com/documentation/coreai/inferencefunction/outputs/remove(_:)
        public mutating func remove(_ name: String) -> InferenceValue? { fatalError("stub") }
    }
    // https://developer.apple.com/documentation/coreai/inferencefunction/run(inputs:)
    public func run(inputs: [String: NDArray]) async throws -> Outputs { fatalError("stub") }
}
