// Runs the generated QA routine (QaAnswer.swift) with pocketbert's Swift tokenizer on a golden file the export wrote,
// in the plain form export/app/qa_postprocess.plain_golden gives it (the Kotlin check reads the same file): each
// question and context is tokenized and cut into windows here, the golden logits are scored over them, and the
// answer is cut out of the context by code points. Arguments: the plain golden file, tokenizer.tables.
// Prints one line per question: <window starts, comma-separated> <window> <start> <end> <answer as a JSON string>
// (-1 -1 -1 "": no answer). Exits 1 naming the question whose windows differ from the golden file's.
import Foundation
import PocketBertTokenizer

func fail(_ message: String) -> Never {
    FileHandle.standardError.write((message + "\n").data(using: .utf8)!)
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else { fail("usage: QaAnswerCheck QA_GOLDEN_TXT TOKENIZER_TABLES") }
guard let text = try? String(contentsOfFile: arguments[1], encoding: .utf8) else { fail("cannot read \(arguments[1])") }
var lines = text.split(separator: "\n", omittingEmptySubsequences: false).makeIterator()
let tokenizer = try BertTokenizer(contentsOf: URL(fileURLWithPath: arguments[2]))

func line() -> Substring {
    guard let next = lines.next() else { fail("\(arguments[1]) ends early") }
    return next
}
func numbers<T>(_ parse: (Substring) -> T?) -> [T] {
    return line().split(separator: " ").map { word in
        guard let value = parse(word) else { fail("not a number: \(word)") }
        return value
    }
}
func ints() -> [Int] { numbers { Int($0) } }
func floats() -> [Float] { numbers { Float($0) } }  // Python's repr of a float32 value: read exactly
func jsonString() -> String {
    let literal = line()
    guard let value = try? JSONDecoder().decode(String.self, from: Data(literal.utf8)) else {
        fail("not a JSON string: \(literal)")
    }
    return value
}
func json(_ value: String) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .withoutEscapingSlashes
    return String(decoding: try! encoder.encode(value), as: UTF8.self)
}

let header = ints()
let (questions, maxLength, stride, nBest, maxAnswerLength) = (header[0], header[1], header[2], header[3], header[4])
for _ in 0..<questions {
    let counts = ints()
    let (questionTokens, contextTokens, windows) = (counts[0], counts[1], counts[2])
    let question = jsonString()
    let context = jsonString()
    var starts: [[Float]] = [], ends: [[Float]] = [], index: [[Int]] = []
    for _ in 0..<windows {
        starts.append(floats())
        ends.append(floats())
        index.append(ints())
    }
    let cut = qaWindows(tokenizer: tokenizer, question: question, context: context, maxLength: maxLength,
                        stride: stride)
    if cut.contextTokens.count != contextTokens || cut.contextIndex != index {
        fail("the windows of '\(question)' differ from the golden file's (context tokens \(cut.contextTokens.count), "
             + "not \(contextTokens); windows \(cut.contextIndex.count), not \(windows))")
    }
    let windowList = windowStarts(contextTokens: contextTokens, questionTokens: questionTokens, maxLength: maxLength,
                                  stride: stride)
    let span = qaAnswer(startLogits: starts, endLogits: ends, contextIndex: cut.contextIndex, nBest: nBest,
                        maxAnswerLength: maxAnswerLength)
    let place = span.map { "\($0.window) \($0.start) \($0.end)" } ?? "-1 -1 -1"
    print("\(windowList.map(String.init).joined(separator: ",")) \(place) "
          + json(qaAnswerText(context: context, windows: cut, span: span) ?? ""))
}
