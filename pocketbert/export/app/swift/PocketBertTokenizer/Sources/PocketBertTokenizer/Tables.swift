import Foundation

/// tokenizer.tables read into arrays: the format is in pocketbert/export/app/tokenizer_tables.py.
struct Tables {
    static let magic = "pocketbert-tokenizer-tables 2"
    static let pageBits = 8
    static let pageMask = 0xFF
    // A map entry is a shift (the code point plus it), or below `removed` an index into `expansions`.
    static let removed = Int32.min
    static let firstExpansion = Int32.min + 1

    var unkId = 0, clsId = 0, sepId = 0, padId = 0
    var prefix: [UInt32] = Array("##".unicodeScalars.map(\.value))
    var maxWordChars = 100
    var maxLength = 512
    var added: [[UInt32]: Int] = [:]  // an added token's exact content, as code points -> its id
    var addedLengths: [Int] = []  // the contents' lengths in code points, longest first
    var addedStarts: Set<UInt32> = []  // the contents' first code points: nowhere else can one begin
    // Keyed by code points: Swift's String compares canonically equivalent texts equal (a precomposed é and e +
    // U+0301, a Hangul syllable and its jamo), which tokenizer.json's vocabulary does not.
    var vocab: [[UInt32]: Int] = [:]
    var mapEntries: [Int32] = []  // map_pages, 256 entries a page
    var expansions: [[UInt32]] = []
    var mapIndex: [Int32] = []
    var classes: [UInt8] = []  // class_pages, one letter a code point
    var classIndex: [Int32] = []

    init(bytes: [UInt8]) throws {
        var lines: [ArraySlice<UInt8>] = []
        var start = 0
        for (i, byte) in bytes.enumerated() where byte == 0x0A {
            lines.append(bytes[start..<i])
            start = i + 1
        }
        var at = 0
        func line() throws -> String {
            guard at < lines.count else { throw TablesError.truncated }
            at += 1
            return String(decoding: lines[at - 1], as: UTF8.self)
        }
        func field(_ name: String) throws -> String {
            let text = try line()
            guard text.hasPrefix(name + " ") else { throw TablesError.unexpected(line: at, wanted: name) }
            return String(text.dropFirst(name.count + 1))
        }
        func number(_ name: String) throws -> Int {
            guard let value = Int(try field(name)) else { throw TablesError.unexpected(line: at, wanted: name) }
            return value
        }
        func numbers(_ name: String) throws -> [Int32] {
            try field(name).split(separator: " ").map {
                guard let value = Int32($0) else { throw TablesError.unexpected(line: at, wanted: name) }
                return value
            }
        }
        guard try line() == Tables.magic else { throw TablesError.notTables }
        unkId = try number("unk"); clsId = try number("cls"); sepId = try number("sep"); padId = try number("pad")
        prefix = try field("prefix").unicodeScalars.map(\.value)
        maxWordChars = try number("max_word_chars")
        maxLength = try number("max_length")
        let addedCount = try number("added")
        for _ in 0..<addedCount {
            let parts = try line().split(separator: " ", maxSplits: 1)
            let codes = parts.count == 2 ? parts[1].split(separator: ",").compactMap { UInt32($0, radix: 16) } : []
            guard parts.count == 2, let id = Int(parts[0]), !codes.isEmpty,
                  codes.count == parts[1].split(separator: ",").count
            else { throw TablesError.unexpected(line: at, wanted: "added token") }
            added[codes] = id
        }
        addedLengths = Set(added.keys.map(\.count)).sorted(by: >)
        addedStarts = Set(added.keys.map { $0[0] })
        let vocabCount = try number("vocab")
        vocab.reserveCapacity(vocabCount)
        for id in 0..<vocabCount { vocab[try line().unicodeScalars.map(\.value)] = id }
        let mapPages = try number("map_pages")
        mapEntries.reserveCapacity(mapPages * 256)
        for _ in 0..<mapPages {
            for entry in try line().split(separator: " ") {
                if entry == "-" {
                    mapEntries.append(Tables.removed)
                } else if entry.hasPrefix("=") {
                    let codes = entry.dropFirst().split(separator: ",").compactMap { UInt32($0, radix: 16) }
                    mapEntries.append(Tables.firstExpansion + Int32(expansions.count))
                    expansions.append(codes)
                } else if let shift = Int32(entry) {
                    mapEntries.append(shift)
                } else {
                    throw TablesError.unexpected(line: at, wanted: "map entry")
                }
            }
        }
        mapIndex = try numbers("map_index")
        let classPages = try number("class_pages")
        for _ in 0..<classPages { classes.append(contentsOf: Array(try line().utf8)) }
        classIndex = try numbers("class_index")
        let pages = 0x110000 >> Tables.pageBits
        guard mapEntries.count == mapPages * 256, classes.count == classPages * 256, mapIndex.count == pages,
              classIndex.count == pages, mapIndex.allSatisfy({ $0 >= 0 && Int($0) < mapPages }),
              classIndex.allSatisfy({ $0 >= 0 && Int($0) < classPages })
        else { throw TablesError.unexpected(line: at, wanted: "pages") }
    }
}

public enum TablesError: Error, CustomStringConvertible {
    case notTables, truncated, unexpected(line: Int, wanted: String)

    public var description: String {
        switch self {
        case .notTables: return "not a tokenizer.tables file: export it again with pocketbert"
        case .truncated: return "tokenizer.tables ends early: copy it again from the export"
        case let .unexpected(line, wanted): return "tokenizer.tables line \(line) is not \(wanted): export it again"
        }
    }
}
