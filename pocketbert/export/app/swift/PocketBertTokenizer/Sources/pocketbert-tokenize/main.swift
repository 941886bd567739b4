// pocketbert-tokenize --tables PATH [--json-lines] [--max-length N] [--offsets | --pairs]
// Reads standard input line by line (with --json-lines each line is a JSON string literal) and writes one JSON line
// per input line: [ids...] of encode() (no truncation without --max-length), or with --offsets
// {"ids":[...],"offsets":[[s,e],...]} of tokenize(); with --pairs the lines come two by two (first, second) and
// each pair gives {"ids":[...],"type_ids":[...]} of encodePair(). The checks in
// pocketbert/export/app/app_tokenizer_check.py drive it.
import Foundation
import PocketBertTokenizer

func fail(_ message: String) -> Never {
    FileHandle.standardError.write((message + "\n").data(using: .utf8)!)
    exit(2)
}

let usage = "pocketbert-tokenize --tables PATH [--json-lines] [--max-length N] [--offsets | --pairs]"
var tablesPath: String?, jsonLines = false, offsets = false, pairs = false, maxLength = Int.max
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--tables": tablesPath = arguments.next()
    case "--json-lines": jsonLines = true
    case "--offsets": offsets = true
    case "--pairs": pairs = true
    case "--max-length":
        guard let value = arguments.next().flatMap(Int.init), value >= 2 else { fail("--max-length takes a number >= 2") }
        maxLength = value
    default: fail("unknown argument \(argument): \(usage)")
    }
}
guard let tablesPath else { fail(usage) }
if offsets && pairs { fail("--offsets and --pairs are two outputs: give one") }
let tokenizer: BertTokenizer
do {
    tokenizer = try BertTokenizer(contentsOf: URL(fileURLWithPath: tablesPath))
} catch {
    fail("\(error)")
}

/// The text of a JSON string literal (escapes, surrogate pairs and raw UTF-8 alike), or why the line is not one:
/// the same verdicts as the Kotlin driver's readJsonString (TokenizeMain.kt).
func jsonString(_ line: Substring.UTF8View) -> Result<String, DriverError> {
    var bytes = Array(line)
    func refuse(_ why: String) -> Result<String, DriverError> {
        .failure(DriverError("\(why) in a JSON string: \(String(decoding: bytes.prefix(40), as: UTF8.self))"))
    }
    let blank: Set<UInt8> = [0x20, 0x09, 0x0D]
    while let last = bytes.last, blank.contains(last) { bytes.removeLast() }
    while let first = bytes.first, blank.contains(first) { bytes.removeFirst() }
    guard bytes.count >= 2, bytes.first == 0x22, bytes.last == 0x22 else {
        return .failure(DriverError("not a JSON string: \(String(decoding: bytes.prefix(40), as: UTF8.self))"))
    }
    let last = bytes.count - 1
    var out: [UInt8] = [], i = 1
    out.reserveCapacity(bytes.count)
    func hex4(_ at: Int) -> UInt32? {
        guard at + 4 <= last else { return nil }
        return UInt32(String(decoding: bytes[at..<at + 4], as: UTF8.self), radix: 16)
    }
    while i < last {
        let byte = bytes[i]
        i += 1
        if byte == 0x22 { return refuse("an unescaped quote") }
        guard byte == 0x5C else { out.append(byte); continue }
        guard i < last else { return refuse("a backslash at the end") }
        let escape = bytes[i]
        i += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "u"):
            guard var code = hex4(i) else { return refuse("a short \\u escape") }
            i += 4
            if (0xD800..<0xDC00).contains(code) {
                guard i + 1 < last, bytes[i] == 0x5C, bytes[i + 1] == UInt8(ascii: "u"), let low = hex4(i + 2),
                      (0xDC00..<0xE000).contains(low) else { return refuse("a lone surrogate") }
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                i += 6
            }
            guard let scalar = Unicode.Scalar(code) else { return refuse("a lone surrogate") }
            out.append(contentsOf: Array(String(Character(scalar)).utf8))
        default: return refuse("an unknown escape \\\(String(UnicodeScalar(escape)))")
        }
    }
    return .success(String(decoding: out, as: UTF8.self))
}

struct DriverError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

var output: [UInt8] = []
output.reserveCapacity(1 << 20)
func write(_ text: String) { output.append(contentsOf: text.utf8) }
func flush() {
    FileHandle.standardOutput.write(Data(output))
    output.removeAll(keepingCapacity: true)
}

/// The next input line's text, nil at the end of the input.
func readText() -> String? {
    guard let line = readLine(strippingNewline: true) else { return nil }
    guard jsonLines else { return line }
    switch jsonString(line[...].utf8) {
    case let .success(parsed): return parsed
    case let .failure(error): fail(error.description)
    }
}

/// `items` as a JSON array, each written by `item` (numbers and arrays of numbers: no escaping needed).
func array<T>(_ items: [T], _ item: (T) -> String) -> String {
    "[" + items.map(item).joined(separator: ",") + "]"
}

while let text = readText() {
    if pairs {
        guard let second = readText() else { fail("--pairs: the last first text has no second") }
        let encoding = tokenizer.encodePair(text, second, maxLength: maxLength)
        write("{\"ids\":" + array(encoding.ids) { String($0) })
        write(",\"type_ids\":" + array(encoding.typeIds) { String($0) } + "}\n")
    } else if offsets {
        let tokens = tokenizer.tokenize(text)
        write("{\"ids\":" + array(tokens) { String($0.id) })
        write(",\"offsets\":" + array(tokens) { "[\($0.start),\($0.end)]" } + "}\n")
    } else {
        write(array(tokenizer.encode(text, maxLength: maxLength).ids) { String($0) } + "\n")
    }
    if output.count > 1 << 20 { flush() }
}
flush()
