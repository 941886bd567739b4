import XCTest
import PocketBertTokenizer

/// A small tokenizer.tables written here: lower-casing A-Z, removing NUL, "é" -> "e", spaces around U+4E00,
/// whitespace and punctuation classes, a vocabulary of a few pieces, and added tokens: [CLS], [SEP] and three that
/// overlap (xy, xyz, yzw). Every code point is a starter of the canonical ordering, but with `marks`: U+0308 a mark
/// of rank 9 kept, U+0300 one of rank 1 stripped, and NUL removed before the ordering.
final class BertTokenizerTests: XCTestCase {
    static let vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", ",", "world", "un", "##believ", "##able",
                             "e", "\u{4E00}", "!", "\u{E9}"]

    static let added = ["2 5B,43,4C,53,5D", "3 5B,53,45,50,5D", "14 78,79", "15 78,79,7A", "16 79,7A,77"]

    static let keptMark = "\u{308}", strippedMark = "\u{300}"

    static func tables(maxWordChars: Int = 12, magic: String = "pocketbert-tokenizer-tables 3",
                       marks: Bool = false) -> [UInt8] {
        var identity = Array(repeating: "0", count: 256)
        var first = identity
        for code in 0x41...0x5A { first[code] = "32" }  // A-Z -> a-z
        first[0] = "-"
        first[0xE9] = String(0x65 - 0xE9)  // é -> e (accents stripped)
        var cjk = identity
        cjk[0] = "=20,4E00,20"
        identity[0] = "0"
        var classes = Array(repeating: UInt8(ascii: "o"), count: 256)
        for code in [0x20, 0x09, 0x0A] { classes[code] = UInt8(ascii: "w") }
        for code in [0x21, 0x2C, 0x2E] { classes[code] = UInt8(ascii: "p") }
        let otherClasses = String(repeating: "o", count: 256)
        var mapPages = [first, cjk, identity].map { $0.joined(separator: " ") }
        var mapIndex = Array(repeating: "2", count: 4352)
        mapIndex[0] = "0"
        mapIndex[0x4E] = "1"
        if marks {
            var stripped = identity
            stripped[0x00] = "-"  // U+0300
            mapPages.append(stripped.joined(separator: " "))
            mapIndex[0x03] = "3"
        }
        let starters = Array(repeating: ".", count: 256)
        var orderIndex = Array(repeating: "0", count: 4352)
        var orderPages = [starters.joined(separator: " ")]
        if marks {
            var combining = starters
            combining[0x08] = "9:1"
            combining[0x00] = "1:0"
            var firstOrder = starters
            firstOrder[0x00] = "-"  // NUL, which the map removes
            orderPages += [combining.joined(separator: " "), firstOrder.joined(separator: " ")]
            orderIndex[0x03] = "1"
            orderIndex[0x00] = "2"
        }
        var classIndex = Array(repeating: "1", count: 4352)
        classIndex[0] = "0"
        let lines = [magic, "unk 1", "cls 2", "sep 3", "pad 0", "prefix ##", "max_word_chars \(maxWordChars)",
                     "max_length 8", "added \(added.count)"] + added + ["vocab \(vocabulary.count)"] + vocabulary
            + ["map_pages \(mapPages.count)"] + mapPages
            + ["map_index " + mapIndex.joined(separator: " "), "class_pages 2", String(decoding: classes, as: UTF8.self),
               otherClasses, "class_index " + classIndex.joined(separator: " "), "order_pages \(orderPages.count)"]
            + orderPages + ["order_index " + orderIndex.joined(separator: " ")]
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    func testWordsPiecesAndOffsets() throws {
        let tokenizer = try BertTokenizer(tablesBytes: Self.tables())
        XCTAssertEqual(tokenizer.tokenize("Hello,\tWORLD!"),
                       [Token(id: 4, start: 0, end: 5), Token(id: 5, start: 5, end: 6),
                        Token(id: 6, start: 7, end: 12), Token(id: 12, start: 12, end: 13)])
        XCTAssertEqual(tokenizer.tokenize("unbelievable").map(\.id), [7, 8, 9])
        // a position no piece matches makes the whole word one unk, spanning it
        XCTAssertEqual(tokenizer.tokenize("unbelievablx"), [Token(id: 1, start: 0, end: 12)])
        // removed code points keep the offsets of the input; an expansion splits the word around U+4E00
        XCTAssertEqual(tokenizer.tokenize("he\u{0}llo\u{4E00}e"),
                       [Token(id: 4, start: 0, end: 6), Token(id: 11, start: 6, end: 7), Token(id: 10, start: 7, end: 8)])
        // é becomes e: the precomposed é in the vocabulary is never looked up, and its decomposed form is no match
        XCTAssertEqual(tokenizer.tokenize("\u{E9} e\u{301}").map(\.id), [10, 1])
    }

    func testLongWordsAndFraming() throws {
        let tokenizer = try BertTokenizer(tablesBytes: Self.tables(maxWordChars: 4))
        XCTAssertEqual(tokenizer.tokenize("hello un"), [Token(id: 1, start: 0, end: 5), Token(id: 7, start: 6, end: 8)])
        let encoding = tokenizer.encode("un un un un un un un")
        XCTAssertEqual(encoding.ids, [2, 7, 7, 7, 7, 7, 7, 3])
        XCTAssertEqual(encoding.typeIds, Array(repeating: 0, count: 8))
        XCTAssertEqual(tokenizer.encode("", maxLength: 4).ids, [2, 3])
        let pair = tokenizer.encodePair("un", "un un un un un un", maxLength: 6)
        XCTAssertEqual(pair.ids, [2, 7, 3, 7, 7, 3])
        XCTAssertEqual(pair.typeIds, [0, 0, 0, 1, 1, 1])
    }

    func testAddedTokensAreSplitFromTheRawTextFirst() throws {
        let tokenizer = try BertTokenizer(tablesBytes: Self.tables())
        XCTAssertEqual(tokenizer.tokenize("hello[SEP]world"),
                       [Token(id: 4, start: 0, end: 5), Token(id: 3, start: 5, end: 10), Token(id: 6, start: 10, end: 15)])
        // the raw text is matched: lower-cased, it is a word like any other (unknown here)
        XCTAssertEqual(tokenizer.tokenize("[sep]"), [Token(id: 1, start: 0, end: 5)])
        // the leftmost match wins, then the longest there; the search goes on after it
        XCTAssertEqual(tokenizer.tokenize("axyzw"),
                       [Token(id: 1, start: 0, end: 1), Token(id: 15, start: 1, end: 4), Token(id: 1, start: 4, end: 5)])
        XCTAssertEqual(tokenizer.tokenize("xyxy yzwxyz").map(\.id), [14, 14, 16, 15])
        XCTAssertEqual(tokenizer.tokenize("[[SEP]]"),
                       [Token(id: 1, start: 0, end: 1), Token(id: 3, start: 1, end: 6), Token(id: 1, start: 6, end: 7)])
        // offsets count code points, an astral one included
        XCTAssertEqual(tokenizer.tokenize("\u{1F600}[CLS][SEP]"),
                       [Token(id: 1, start: 0, end: 1), Token(id: 2, start: 1, end: 6), Token(id: 3, start: 6, end: 11)])
        XCTAssertEqual(tokenizer.encode("hello [SEP]").ids, [2, 4, 3, 3])
    }

    /// Marks in canonical order, offsets as tokenizers aligns them: a stripped mark of a lower rank that sorts
    /// before a kept one takes its place, and the kept mark the place after it.
    func testCanonicalOrderingMovesMarksAndTheirOffsets() throws {
        let tokenizer = try BertTokenizer(tablesBytes: Self.tables(marks: true))
        let (kept, stripped) = (Self.keptMark, Self.strippedMark)
        // a K M: M sorts before K, so K holds M's place (2), and the word ends after it
        XCTAssertEqual(tokenizer.tokenize("a" + kept + stripped), [Token(id: 1, start: 0, end: 3)])
        // in order already, nothing moves
        XCTAssertEqual(tokenizer.tokenize("a" + stripped + kept), [Token(id: 1, start: 0, end: 3)])
        XCTAssertEqual(tokenizer.tokenize("a" + kept), [Token(id: 1, start: 0, end: 2)])
        XCTAssertEqual(tokenizer.tokenize("e" + stripped), [Token(id: 10, start: 0, end: 1)])
        XCTAssertEqual(tokenizer.tokenize("e" + kept + stripped + " e"),
                       [Token(id: 1, start: 0, end: 3), Token(id: 10, start: 4, end: 5)])
        // NUL is removed before the ordering: the marks on either side of it meet and sort together
        XCTAssertEqual(tokenizer.tokenize("a" + kept + "\u{0}" + stripped), [Token(id: 1, start: 0, end: 4)])
        // a starter between them keeps them apart: K keeps its own place
        XCTAssertEqual(tokenizer.tokenize("a" + kept + "!" + stripped),
                       [Token(id: 1, start: 0, end: 2), Token(id: 12, start: 2, end: 3)])
        // with no starter before them, the first unit read takes the first place
        XCTAssertEqual(tokenizer.tokenize(stripped + kept + "!"),
                       [Token(id: 1, start: 1, end: 2), Token(id: 12, start: 2, end: 3)])
        XCTAssertEqual(tokenizer.tokenize(kept + stripped + "!"),
                       [Token(id: 1, start: 1, end: 2), Token(id: 12, start: 2, end: 3)])
        XCTAssertEqual(tokenizer.tokenize(stripped + stripped), [])
    }

    func testSubstringByCodePoints() {
        XCTAssertEqual(substring("a👍🏽 café", codePoints: 1..<3), "👍🏽")
        XCTAssertEqual(substring("a👍🏽 café", codePoints: 4..<8), "café")
        XCTAssertEqual(substring("abc", codePoints: 2..<9), "c")
    }

    func testRefusesOtherFiles() {
        XCTAssertThrowsError(try BertTokenizer(tablesBytes: Array("vocab 1\n".utf8)))
        XCTAssertThrowsError(try BertTokenizer(tablesBytes: Array(Self.tables().dropLast(200))))
        // a file of the first format, which holds no added tokens: the tokenizer would read [SEP] as text
        XCTAssertThrowsError(try BertTokenizer(tablesBytes: Self.tables(magic: "pocketbert-tokenizer-tables 1")))
        // the format before the canonical ordering's table
        XCTAssertThrowsError(try BertTokenizer(tablesBytes: Self.tables(magic: "pocketbert-tokenizer-tables 2")))
    }

    /// A damaged file is an error the app catches, with a message a developer can act on: never a trap.
    func testDamagedTablesThrowErrorsThatSayWhatToDo() {
        func message(_ bytes: [UInt8]) -> String? {
            do {
                _ = try BertTokenizer(tablesBytes: bytes)
                return nil
            } catch {
                return (error as? LocalizedError)?.errorDescription
            }
        }
        func replacing(_ old: String, _ new: String, marks: Bool = false) -> [UInt8] {
            Array(String(decoding: Self.tables(marks: marks), as: UTF8.self).replacingOccurrences(of: old, with: new).utf8)
        }
        XCTAssertEqual(message(replacing("\n", "\r\n"))?.contains("CRLF"), true)
        XCTAssertEqual(message(Self.tables(magic: "pocketbert-tokenizer-tables 4"))?.contains("format 4"), true)
        XCTAssertEqual(message(Self.tables(magic: "pocketbert-tokenizer-tables 2"))?.contains("reads 3"), true)
        XCTAssertEqual(message(replacing("vocab \(Self.vocabulary.count)", "vocab -5"))?.contains("vocab"), true)
        XCTAssertEqual(message(replacing("vocab \(Self.vocabulary.count)", "vocab 999999999"))?.contains("count"), true)
        XCTAssertEqual(message(replacing("added \(Self.added.count)", "added -1"))?.contains("added"), true)
        XCTAssertEqual(message(replacing("map_pages 3", "map_pages 4000000000"))?.contains("map_pages"), true)
        XCTAssertEqual(message(replacing("max_length 8", "max_length -1"))?.contains("max_length"), true)
        XCTAssertEqual(message(replacing(" 32 32 32", " 32 -100 32"))?.contains("code space"), true)
        XCTAssertEqual(message(replacing("order_pages 1", "order_pages -2"))?.contains("order_pages"), true)
        XCTAssertEqual(message(replacing(" . . .", " . 3: ."))?.contains("order entry"), true)
        XCTAssertEqual(message(replacing(" . . .", " . 256:0 ."))?.contains("order entry"), true)
        XCTAssertEqual(message(replacing(" . . .", " . . . ."))?.contains("256 order entries"), true)
        XCTAssertEqual(message(replacing("order_index 0 0", "order_index 1 0"))?.contains("order_index"), true)
        XCTAssertEqual(message(replacing("9:1", "9:1,0:2", marks: true)),
                       "tokenizer.tables orders code point 776 in units of 3 code points and maps it to 1: export it again")
        XCTAssertEqual(message(replacing("1:0", "-", marks: true)), nil)  // removed first: gives nothing, as mapped
        XCTAssertEqual(message(replacing("1:0", "1:1", marks: true))?.contains("code point 768 in units of 1"), true)
    }
}
