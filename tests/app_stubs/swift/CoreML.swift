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

// https://developer.apple.com/documentation/coreml/mldictionaryfeatureprovider
open class MLDictionaryFeatureProvider: MLFeatureProvider {
    // https://developer.apple.com/documentation/coreml/mldictionaryfeatureprovider/init(dictionary:)
    public init(dictionary: [String: Any]) throws { fatalError("stub") }
    public var featureNames: Set<String> { fatalError("stub") }
    public func featureValue(for featureName: String) -> MLFeatureValue? { fatalError("stub") }
}

// https://developer.apple.com/documentation/coreml/mlcomputedevice (the bench kit reads it)
public enum MLComputeDevice {
    case cpu(MLCPUComputeDevice)
    case gpu(MLGPUComputeDevice)
    case neuralEngine(MLNeuralEngineComputeDevice)
}
// https://developer.apple.com/documentation/coreml/mlcpucomputedevice
public final class MLCPUComputeDevice {}
// https://developer.apple.com/documentation/coreml/mlgpucomputedevice
public final class MLGPUComputeDevice {}
// https://developer.apple.com/documentation/coreml/mlneuralenginecomputedevice
public final class MLNeuralEngineComputeDevice {}

// https://developer.apple.com/documentation/coreml/mlmodelstructure (the bench kit walks it)
public enum MLModelStructure {
    case neuralNetwork(Any)
    case program(Program)
    case pipeline(Any)
    case unsupported

    // https://developer.apple.com/documentation/coreml/mlmodelstructure/program
    public struct Program {
        // https://developer.apple.com/documentation/coreml/mlmodelstructure-swift.enum/program/functions (keyed by name:
        // "main", or each function of a multifunction package)
        public var functions: [String: Function] { fatalError("stub") }

        // https://developer.apple.com/documentation/coreml/mlmodelstructure/program/function
        public struct Function {
            // https://developer.apple.com/documentation/coreml/mlmodelstructure/program/function/block
            public var block: Block { fatalError("stub") }
        }

        // https://developer.apple.com/documentation/coreml/mlmodelstructure/program/block
        public struct Block {
            // https://developer.apple.com/documentation/coreml/mlmodelstructure/program/block/operations
            public var operations: [Operation] { fatalError("stub") }
        }

        // https://developer.apple.com/documentation/coreml/mlmodelstructure/program/operation
        public struct Operation {
            // https://developer.apple.com/documentation/coreml/mlmodelstructure/program/operation/operatorname
            public var operatorName: String { fatalError("stub") }
        }
    }
}

// https://developer.apple.com/documentation/coreml/mlcomputeplan-1w21n (macOS 14.4, iOS 17.4; the bench kit)
public struct MLComputePlan {
    // https://developer.apple.com/documentation/coreml/mlcomputeplan-1w21n/load(contentsof:configuration:)
    public static func load(contentsOf url: URL, configuration: MLModelConfiguration) async throws -> MLComputePlan {
        fatalError("stub")
    }
    // https://developer.apple.com/documentation/coreml/mlcomputeplan-1w21n/modelstructure
    public var modelStructure: MLModelStructure { fatalError("stub") }

    // https://developer.apple.com/documentation/coreml/mlcomputeplan-1w21n/deviceusage
    public struct DeviceUsage {
        public let preferred: MLComputeDevice
        public let supported: [MLComputeDevice]
    }
    // https://developer.apple.com/documentation/coreml/mlcomputeplan-1w21n/deviceusage(for:)-7cdlm
    public func deviceUsage(for operation: MLModelStructure.Program.Operation) -> DeviceUsage? { fatalError("stub") }

    // https://developer.apple.com/documentation/coreml/mlcomputeplan-1w21n/cost
    public struct Cost {
        public let weight: Double
    }
    // https://developer.apple.com/documentation/coreml/mlcomputeplan-1w21n/estimatedcost(of:)
    public func estimatedCost(of operation: MLModelStructure.Program.Operation) -> Cost? { fatalError("stub") }
}

// https://developer.apple.com/documentation/coreml/mlmodel
open class MLModel {
    // https://developer.apple.com/documentation/coreml/mlmodel/compilemodel(at:)-6442s
    open class func compileModel(at modelURL: URL) async throws -> URL { fatalError("stub") }
    // https://developer.apple.com/documentation/coreml/mlmodel/init(contentsof:configuration:)
    public init(contentsOf url: URL, configuration: MLModelConfiguration) throws { fatalError("stub") }
    // https://developer.apple.com/documentation/coreml/mlmodel/prediction(from:)
    open func prediction(from input: MLFeatureProvider) throws -> MLFeatureProvider { fatalError("stub") }
}
