import Foundation

/// A word piece: its id and its code-point span in the input text.
public struct Token: Equatable, Sendable {
    public let id: Int
    public let start: Int
    public let end: Int

    public init(id: Int, start: Int, end: Int) {
        self.id = id
        self.start = start
        self.end = end
    }
}

/// What a BERT model reads: ids, token types, attention mask (no padding).
public struct Encoding: Sendable {
    public let ids: [Int]
    public let typeIds: [Int]
    public let attentionMask: [Int]

    public init(ids: [Int], typeIds: [Int], attentionMask: [Int]) {
        self.ids = ids
        self.typeIds = typeIds
        self.attentionMask = attentionMask
    }
}

/// BERT WordPiece as tokenizer.json gives it, read from tokenizer.tables. Each step transcribes
/// pocketbert/export/app/tokenizer_reference.py under the same name.
public final class BertTokenizer: Sendable {
    public let maxLength: Int
    public let clsId: Int
    public let sepId: Int
    public let padId: Int
    public let unkId: Int
    private let tables: Tables
    private static let other = UInt8(ascii: "o"), punctuation = UInt8(ascii: "p")

    /// Reads tokenizer.tables.
    public convenience init(contentsOf url: URL) throws {
        try self.init(tablesBytes: [UInt8](try Data(contentsOf: url)))
    }

    /// The tables from the bytes of a tokenizer.tables file.
    public init(tablesBytes: [UInt8]) throws {
        tables = try Tables(bytes: tablesBytes)
        maxLength = tables.maxLength
        clsId = tables.clsId
        sepId = tables.sepId
        padId = tables.padId
        unkId = tables.unkId
    }

    /// The added tokens `text` holds ([SEP], [MASK] ... typed in it) and the word pieces of the text between them;
    /// no [CLS] or [SEP] around.
    public func tokenize(_ text: String) -> [Token] {
        let scalars = text.unicodeScalars.map(\.value)
        var tokens: [Token] = []
        for part in splitAdded(scalars) {
            if let id = part.id {
                tokens.append(Token(id: id, start: part.start, end: part.end))
                continue
            }
            splitWords(scalars[part.start..<part.end]) { word, sources in wordPieces(word, sources, into: &tokens) }
        }
        return tokens
    }

    /// [CLS] + the first maxLength - 2 pieces + [SEP] (nil: the tables' max_length).
    public func encode(_ text: String, maxLength: Int? = nil) -> Encoding {
        let limit = maxLength ?? self.maxLength
        let ids = [clsId] + tokenize(text).prefix(max(limit - 2, 0)).map(\.id) + [sepId]
        return Encoding(ids: ids, typeIds: Array(repeating: 0, count: ids.count),
                        attentionMask: Array(repeating: 1, count: ids.count))
    }

    /// [CLS] first [SEP] second [SEP], type ids 0 then 1: the first text cut to maxLength - 3 pieces, the second
    /// to what room is left.
    public func encodePair(_ first: String, _ second: String, maxLength: Int? = nil) -> Encoding {
        let limit = maxLength ?? self.maxLength
        let a = tokenize(first).prefix(max(limit - 3, 0)).map(\.id)
        let b = tokenize(second).prefix(max(limit - 3 - a.count, 0)).map(\.id)
        let ids = [clsId] + a + [sepId] + b + [sepId]
        return Encoding(ids: ids, typeIds: Array(repeating: 0, count: a.count + 2) + Array(repeating: 1, count: b.count + 1),
                        attentionMask: Array(repeating: 1, count: ids.count))
    }

    /// Step 1: the code points `code` becomes, passed to `emit` one by one.
    @inline(__always)
    func mapped(_ code: UInt32, _ emit: (UInt32) -> Void) {
        let value = Int(code)
        let entry = tables.mapEntries[Int(tables.mapIndex[value >> Tables.pageBits]) << Tables.pageBits
                                      | (value & Tables.pageMask)]
        if entry == 0 {
            emit(code)
        } else if entry > Tables.removed && entry < -0x110000 {
            for out in tables.expansions[Int(entry - Tables.firstExpansion)] { emit(out) }
        } else if entry != Tables.removed {
            emit(UInt32(Int32(value) + entry))
        }
    }

    /// How `code` takes part in the canonical ordering: Tables.starter, Tables.removedFirst, or where its units begin
    /// in tables.orderUnits.
    @inline(__always)
    func orderEntry(_ code: UInt32) -> Int32 {
        let value = Int(code)
        return tables.orderEntries[Int(tables.orderIndex[value >> Tables.pageBits]) << Tables.pageBits
                                   | (value & Tables.pageMask)]
    }

    /// A unit of the canonical ordering: its rank (0: a starter), where the mapped code points it gives begin and how
    /// many, whether it takes the next place (a code point's first unit), and where it stood before the ordering.
    struct Unit {
        var rank: Int32
        var takes: Bool
        var start: Int
        var count: Int
        var index: Int
    }

    /// Step 1 on a part between added tokens: its normalized code points, each passed to `emit` with the index of the
    /// input code point whose place it holds. Each code point's units (its decomposition's parts, each giving some of
    /// its mapped code points) are put in canonical order: every run of units of nonzero rank sorted by rank, stably.
    /// Then the units are read in order: a code point's first unit takes the next input code point's place, its other
    /// units the place of the one taken last (tokenizers' alignments, so offsets are tokenizer.json's where marks
    /// move).
    func normalized(_ text: ArraySlice<UInt32>, _ emit: (UInt32, Int) -> Void) {
        var codes: [UInt32] = [], units: [Unit] = [], places: [Int] = []
        codes.reserveCapacity(text.count)
        units.reserveCapacity(text.count)
        places.reserveCapacity(text.count)
        for (source, scalar) in zip(text.indices, text) {
            let entry = orderEntry(scalar)
            if entry == Tables.removedFirst { continue }
            places.append(source)
            let first = codes.count
            mapped(scalar) { codes.append($0) }
            if entry == Tables.starter {
                units.append(Unit(rank: 0, takes: true, start: first, count: codes.count - first, index: units.count))
                continue
            }
            // The tables' check saw to it that the units give exactly the code points the map gave.
            let begin = Int(entry)
            var at = first
            for k in 0..<Int(tables.orderUnits[begin]) {
                let unit = tables.orderUnits[begin + 1 + k]
                let count = Int(unit & 0xFF)
                units.append(Unit(rank: unit >> 8, takes: k == 0, start: at, count: count, index: units.count))
                at += count
            }
        }
        var run = 0
        while run < units.count {
            if units[run].rank == 0 {
                run += 1
                continue
            }
            var after = run + 1, inOrder = true
            while after < units.count && units[after].rank != 0 {
                inOrder = inOrder && units[after - 1].rank <= units[after].rank
                after += 1
            }
            // Stable: ties keep their order (sort alone is not guaranteed stable).
            if !inOrder { units[run..<after].sort { ($0.rank, $0.index) < ($1.rank, $1.index) } }
            run = after
        }
        var taken = 0
        for unit in units {
            if unit.takes { taken += 1 }
            let place = places[max(taken - 1, 0)]
            for k in unit.start..<unit.start + unit.count { emit(codes[k], place) }
        }
    }

    @inline(__always)
    func codeClass(_ code: UInt32) -> UInt8 {
        let value = Int(code)
        return tables.classes[Int(tables.classIndex[value >> Tables.pageBits]) << Tables.pageBits
                              | (value & Tables.pageMask)]
    }

    /// Step 0, on the raw text: (id, start, end) for each added token's exact content it holds ("[SEP]", not
    /// "[sep]"), (nil, start, end) for the text between. At the first place where a content begins, the longest one
    /// that begins there; the search goes on after it, so matches never overlap.
    func splitAdded(_ text: [UInt32]) -> [(id: Int?, start: Int, end: Int)] {
        var parts: [(id: Int?, start: Int, end: Int)] = [], between = 0, at = 0
        while at < text.count {
            var length = 0
            if tables.addedStarts.contains(text[at]) {
                length = tables.addedLengths.first { at + $0 <= text.count && tables.added[Array(text[at..<at + $0])] != nil }
                    ?? 0
            }
            if length == 0 {
                at += 1
                continue
            }
            if between < at { parts.append((nil, between, at)) }
            parts.append((tables.added[Array(text[at..<at + length])], at, at + length))
            at += length
            between = at
        }
        if between < text.count { parts.append((nil, between, text.count)) }
        return parts
    }

    /// Steps 1 and 2 on a part between added tokens: each word's code points and the index of the input code point
    /// each came from.
    func splitWords(_ text: ArraySlice<UInt32>, _ word: ([UInt32], [Int]) -> Void) {
        var codes: [UInt32] = [], sources: [Int] = []
        normalized(text) { code, source in
            let kind = codeClass(code)
            if kind == BertTokenizer.other {
                codes.append(code)
                sources.append(source)
                return
            }
            if !codes.isEmpty {
                word(codes, sources)
                codes.removeAll(keepingCapacity: true)
                sources.removeAll(keepingCapacity: true)
            }
            if kind == BertTokenizer.punctuation { word([code], [source]) }
        }
        if !codes.isEmpty { word(codes, sources) }
    }

    /// Steps 3 and 4: greedy longest match from the left; a word too long, or with a position no piece matches,
    /// is one unk spanning the whole word.
    func wordPieces(_ word: [UInt32], _ sources: [Int], into tokens: inout [Token]) {
        let whole = Token(id: unkId, start: sources[0], end: sources[sources.count - 1] + 1)
        if word.count > tables.maxWordChars {
            tokens.append(whole)
            return
        }
        let first = tokens.count
        var start = 0
        while start < word.count {
            var end = word.count
            var found: Int?
            while end > start {
                found = tables.vocab[start > 0 ? tables.prefix + word[start..<end] : Array(word[start..<end])]
                if found != nil { break }
                end -= 1
            }
            guard let id = found else {
                tokens.removeSubrange(first...)
                tokens.append(whole)
                return
            }
            tokens.append(Token(id: id, start: sources[start], end: sources[end - 1] + 1))
            start = end
        }
    }
}

/// The text between two code-point offsets (a QA answer's span in its context).
public func substring(_ text: String, codePoints: Range<Int>) -> String {
    let scalars = text.unicodeScalars
    let lower = scalars.index(scalars.startIndex, offsetBy: max(codePoints.lowerBound, 0), limitedBy: scalars.endIndex)
        ?? scalars.endIndex
    let upper = scalars.index(lower, offsetBy: max(codePoints.count, 0), limitedBy: scalars.endIndex) ?? scalars.endIndex
    return String(scalars[lower..<upper])
}
