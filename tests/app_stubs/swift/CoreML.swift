// STUB for compiling pocketbert's generated app code on Linux only; never shipped, never run. Each declaration is
// the shape Apple documents, with only what the templates call; bodies trap.
@_exported import Foundation  // Apple's CoreML module re-exports Foundation: the templates use URL and Data with it

// https://developer.apple.com/documentation/coreml/mlcomputeunits
public enum MLComputeUnits: Int {
    case cpuOnly = 0, cpuAndGPU = 1, all = 2, cpuAndNeuralEngine = 3
}

// https://developer.apple.com/documentation/coreml/mlmodelconfiguration
open class MLModelConfiguration {
    public init() {}
    // https://developer.apple.com/documentation/coreml/mlmodelconfiguration/computeunits
    open var computeUnits: MLComputeUnits = .all
    // https://developer.apple.com/documentation/coreml/mlmodelconfiguration/functionname (iOS 18)
    open var functionName: String? = nil
}

// https://developer.apple.com/documentation/coreml/mlmultiarraydatatype
public enum MLMultiArrayDataType: Int {
    case double = 65600, float64 = 65601, float32 = 65568, float16 = 65552, float = 65569, int32 = 131104
}

// https://developer.apple.com/documentation/coreml/mlmultiarray
open class MLMultiArray {
    // https://developer.apple.com/documentation/coreml/mlmultiarray/init(shape:datatype:)
    public init(shape: [NSNumber], dataType: MLMultiArrayDataType) throws { fatalError("stub") }
    // https://developer.apple.com/documentation/coreml/mlmultiarray/subscript(_:)-8v4am (linear index)
    open subscript(index: Int) -> NSNumber {
        get { fatalError("stub") }
        set { fatalError("stub") }
    }
    // https://developer.apple.com/documentation/coreml/mlmultiarray/shape
    open var shape: [NSNumber] { fatalError("stub") }
    // https://developer.apple.com/documentation/coreml/mlmultiarray/count
    open var count: Int { fatalError("stub") }
}

// https://developer.apple.com/documentation/coreml/mlfeaturevalue
open class MLFeatureValue {
    // https://developer.apple.com/documentation/coreml/mlfeaturevalue/multiarrayvalue
    open var multiArrayValue: MLMultiArray? { fatalError("stub") }
    // https://developer.apple.com/documentation/coreml/mlfeaturevalue/init(multiarray:)
    public convenience init(multiArray value: MLMultiArray) { fatalError("stub") }
}

// https://developer.apple.com/documentation/coreml/mlfeatureprovider
public protocol MLFeatureProvider {
    // https://developer.apple.com/documentation/coreml/mlfeatureprovider/featurenames
    var featureNames: Set<String> { get }
    // https://developer.apple.com/documentation/coreml/mlfeatureprovider/featurevalue(for:)
    func featureValue(for featureName: String) -> MLFeatureValue?
}

// https://developer.apple.com/documentation/coreml/mlmodel
open class MLModel {
    // https://developer.apple.com/documentation/coreml/mlmodel/init(contentsof:configuration:)
    public init(contentsOf url: URL, configuration: MLModelConfiguration) throws { fatalError("stub") }
    // https://developer.apple.com/documentation/coreml/mlmodel/prediction(from:)
    open func prediction(from input: MLFeatureProvider) throws -> MLFeatureProvider { fatalError("stub") }
}
