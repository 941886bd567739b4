// STUB for compiling pocketbert's generated app code on Linux only; never shipped, never run. The `Tokenizers`
// product of Hugging Face's swift-transformers package, with only what the templates call, as its documentation
// shows them (https://swiftpackageindex.com/huggingface/swift-transformers/documentation/tokenizers); bodies trap.
// Only app code that still imports Tokenizers compiles against it (the project's own PocketBertTokenizer needs none).
@_exported import Foundation

// https://swiftpackageindex.com/huggingface/swift-transformers/documentation/tokenizers/tokenizer
public protocol Tokenizer {
    func encode(text: String) -> [Int]
    func encode(text: String, addSpecialTokens: Bool) -> [Int]
    func decode(tokens: [Int]) -> String
    func convertTokenToId(_ token: String) -> Int?
}

// https://swiftpackageindex.com/huggingface/swift-transformers/documentation/tokenizers/autotokenizer
public struct AutoTokenizer {
    // https://swiftpackageindex.com/huggingface/swift-transformers/documentation/tokenizers/autotokenizer/from(modelfolder:hubapi:)
    public static func from(modelFolder: URL) async throws -> Tokenizer { fatalError("stub") }
}
