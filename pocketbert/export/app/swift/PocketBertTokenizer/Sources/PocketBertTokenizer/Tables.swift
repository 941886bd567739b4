import Foundation

/// tokenizer.tables read into arrays: the format is in pocketbert/export/app/tokenizer_tables.py.
struct Tables {
    static let magicName = "pocketbert-tokenizer-tables"
    static let version = "3"
    static let magic = magicName + " " + version
    static let lastScalar = 0x10FFFF
    static let classLetters: Set<UInt8> = [UInt8(ascii: "o"), UInt8(ascii: "w"), UInt8(ascii: "p")]
    static let pageBits = 8
    static let pageMask = 0xFF
    // A map entry is a shift (the code point plus it), or below `removed` an index into `expansions`.
    static let removed = Int32.min
    static let firstExpansion = Int32.min + 1
    // An order entry is STARTER, REMOVED_FIRST, or where its units begin in `orderUnits`.
    static let starter: Int32 = -1
    static let removedFirst: Int32 = -2
    static let largestUnitField = 255  // a unit's rank and its count

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
    var orderEntries: [Int32] = []  // order_pages, 256 entries a page
    // For each entry of units: their number, then each unit as rank << 8 | count.
    var orderUnits: [Int32] = []
    var orderIndex: [Int32] = []

    init(bytes: [UInt8]) throws {
        // A CR anywhere is a copy that converted the line ends (the format is \n-ended, and no entry holds a CR).
        if bytes.contains(0x0D) { throw TablesError.crlf }
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
        func number(_ name: String, atLeast lowest: Int = Int.min) throws -> Int {
            guard let value = Int(try field(name)), value >= lowest else {
                throw TablesError.unexpected(line: at, wanted: name)
            }
            return value
        }
        /// A count of lines that follow: never negative, never more than the file holds (no loop or array of it).
        func count(_ name: String) throws -> Int {
            let value = try number(name, atLeast: 0)
            guard value <= lines.count - at else { throw TablesError.unexpected(line: at, wanted: "a count of \(name) lines the file holds") }
            return value
        }
        /// A page index: for each of the code space's pages, the page of the table it reads.
        func pageIndex(_ name: String, pages: Int) throws -> [Int32] {
            let numbers = try field(name).split(separator: " ", omittingEmptySubsequences: false)
            guard numbers.count == 0x110000 >> Tables.pageBits else {
                throw TablesError.unexpected(line: at, wanted: "\(name) of \(0x110000 >> Tables.pageBits) pages")
            }
            return try numbers.map {
                guard let value = Int32($0) else { throw TablesError.unexpected(line: at, wanted: name) }
                guard value >= 0 && Int(value) < pages else {
                    throw TablesError.unexpected(line: at, wanted: "\(name) within its \(pages) pages")
                }
                return value
            }
        }
        /// Code points written in hex, each a Unicode scalar value.
        func scalars(_ text: Substring) -> [UInt32]? {
            let parts = text.split(separator: ",", omittingEmptySubsequences: false)
            let codes = parts.compactMap { UInt32($0, radix: 16) }.filter { Unicode.Scalar($0) != nil }
            return codes.count == parts.count && !codes.isEmpty ? codes : nil
        }
        /// The pages of a paged table (each line 256 space-separated entries), each entry handed to `read` in order;
        /// the number of pages.
        func entryPages(_ name: String, of what: String, _ read: (Substring) throws -> Void) throws -> Int {
            let pages = try count(name)
            for _ in 0..<pages {
                let entries = try line().split(separator: " ", omittingEmptySubsequences: false)
                guard entries.count == 256 else { throw TablesError.unexpected(line: at, wanted: "a page of 256 \(what)") }
                for entry in entries { try read(entry) }
            }
            return pages
        }
        let first = try line()
        guard first == Tables.magic else {
            if first.hasPrefix(Tables.magicName + " ") {
                throw TablesError.otherVersion(String(first.dropFirst(Tables.magicName.count + 1)))
            }
            throw TablesError.notTables
        }
        unkId = try number("unk"); clsId = try number("cls"); sepId = try number("sep"); padId = try number("pad")
        prefix = try field("prefix").unicodeScalars.map(\.value)
        maxWordChars = try number("max_word_chars", atLeast: 1)
        maxLength = try number("max_length", atLeast: 2)
        let addedCount = try count("added")
        for _ in 0..<addedCount {
            let parts = try line().split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let id = Int(parts[0]), let codes = scalars(parts[1])
            else { throw TablesError.unexpected(line: at, wanted: "added token") }
            added[codes] = id
        }
        addedLengths = Set(added.keys.map(\.count)).sorted(by: >)
        addedStarts = Set(added.keys.map { $0[0] })
        let vocabCount = try count("vocab")
        vocab.reserveCapacity(vocabCount)
        for id in 0..<vocabCount { vocab[try line().unicodeScalars.map(\.value)] = id }
        let mapPages = try entryPages("map_pages", of: "map entries") { entry in
            if entry == "-" {
                mapEntries.append(Tables.removed)
            } else if entry.hasPrefix("=") {
                guard let codes = scalars(entry.dropFirst()) else { throw TablesError.unexpected(line: at, wanted: "map entry") }
                mapEntries.append(Tables.firstExpansion + Int32(expansions.count))
                expansions.append(codes)
            } else if let shift = Int32(entry), abs(Int(shift)) <= Tables.lastScalar {
                mapEntries.append(shift)
            } else {
                throw TablesError.unexpected(line: at, wanted: "map entry")
            }
        }
        mapIndex = try pageIndex("map_index", pages: mapPages)
        let classPages = try count("class_pages")
        for _ in 0..<classPages {
            let page = Array(try line().utf8)
            guard page.count == 256 else { throw TablesError.unexpected(line: at, wanted: "a page of 256 classes") }
            guard page.allSatisfy({ Tables.classLetters.contains($0) }) else {
                throw TablesError.unexpected(line: at, wanted: "a page of classes (o, w, p)")
            }
            classes.append(contentsOf: page)
        }
        classIndex = try pageIndex("class_index", pages: classPages)
        /// A unit's rank or count: a number in 0...255.
        func unitField(_ text: Substring) -> Int32? {
            guard let value = Int32(text), value >= 0 && value <= Tables.largestUnitField else { return nil }
            return value
        }
        let orderPages = try entryPages("order_pages", of: "order entries") { entry in
            if entry == "." {
                orderEntries.append(Tables.starter)
                return
            }
            if entry == "-" {
                orderEntries.append(Tables.removedFirst)
                return
            }
            let units = entry.split(separator: ",", omittingEmptySubsequences: false)
            guard let begin = Int32(exactly: orderUnits.count) else { throw TablesError.unexpected(line: at, wanted: "order entry") }
            orderEntries.append(begin)
            orderUnits.append(Int32(units.count))
            for unit in units {
                let parts = unit.split(separator: ":", omittingEmptySubsequences: false)
                guard parts.count == 2, let rank = unitField(parts[0]), let count = unitField(parts[1]) else {
                    throw TablesError.unexpected(line: at, wanted: "order entry")
                }
                orderUnits.append(rank << 8 | count)
            }
        }
        orderIndex = try pageIndex("order_index", pages: orderPages)
        let pages = 0x110000 >> Tables.pageBits
        guard mapEntries.count == mapPages * 256, classes.count == classPages * 256,
              orderEntries.count == orderPages * 256, mapIndex.count == pages, classIndex.count == pages,
              orderIndex.count == pages, mapIndex.allSatisfy({ $0 >= 0 && Int($0) < mapPages }),
              classIndex.allSatisfy({ $0 >= 0 && Int($0) < classPages }),
              orderIndex.allSatisfy({ $0 >= 0 && Int($0) < orderPages })
        else { throw TablesError.unexpected(line: at, wanted: "pages") }
        // Every code point a shift maps stays in the code space: tokenize() then never indexes a page past it.
        // (Removals and expansions lie below -lastScalar; a shift, checked above, does not.) And a code point's
        // order units give exactly the code points the map gives it: normalized() never reads past them.
        for code in 0...Tables.lastScalar {
            let entry = Int(mapEntries[Int(mapIndex[code >> Tables.pageBits]) << Tables.pageBits | (code & Tables.pageMask)])
            guard entry == 0 || entry < -Tables.lastScalar || (0...Tables.lastScalar).contains(code + entry) else {
                throw TablesError.unexpected(line: 0, wanted: "a map into the code space (code point \(code))")
            }
            let order = orderEntries[Int(orderIndex[code >> Tables.pageBits]) << Tables.pageBits | (code & Tables.pageMask)]
            if order == Tables.starter { continue }
            var units = 0
            if order != Tables.removedFirst {
                let first = Int(order)
                for unit in orderUnits[first + 1...first + Int(orderUnits[first])] { units += Int(unit & 0xFF) }
            }
            let mapped = entry == Int(Tables.removed) ? 0
                : entry < -Tables.lastScalar ? expansions[entry - Int(Tables.firstExpansion)].count : 1
            guard units == mapped else { throw TablesError.orderedOtherThanMapped(code: code, units: units, mapped: mapped) }
        }
    }
}

public enum TablesError: Error, CustomStringConvertible, LocalizedError, Sendable {
    case notTables, otherVersion(String), crlf, truncated, unexpected(line: Int, wanted: String)
    case orderedOtherThanMapped(code: Int, units: Int, mapped: Int)

    public var description: String {
        switch self {
        case .notTables: return "not a tokenizer.tables file: export it again with pocketbert"
        case let .otherVersion(version):
            return "tokenizer.tables is format \(version), this tokenizer reads \(Tables.version): take the tables and the tokenizer from one pocketbert export"
        case .crlf:
            return "tokenizer.tables has CRLF line ends (a copy or checkout converted them): copy the exported file byte for byte (git: mark *.tables binary)"
        case .truncated: return "tokenizer.tables ends early: copy it again from the export"
        case let .unexpected(line, wanted):
            return line > 0 ? "tokenizer.tables line \(line) is not \(wanted): export it again"
                            : "tokenizer.tables does not hold \(wanted): export it again"
        case let .orderedOtherThanMapped(code, units, mapped):
            return "tokenizer.tables orders code point \(code) in units of \(units) code points and maps it to \(mapped): export it again"
        }
    }

    public var errorDescription: String? { description }
}
