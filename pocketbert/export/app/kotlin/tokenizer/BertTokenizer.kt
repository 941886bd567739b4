// pocketbert's BERT tokenizer for apps: tokenizer.json's BertNormalizer, BertPreTokenizer, WordPiece and [CLS]/[SEP]
// template, read from the tokenizer.tables file the export writes (its format: pocketbert/export/app/
// tokenizer_tables.py). The tables were probed from the `tokenizers` library code point by code point, so this code
// holds no Unicode data of its own and the host's Unicode version cannot change the ids. JVM/Android stdlib only.
package ai.pocketbert.tokenizer

import java.io.File
import java.io.Reader

/** A word piece: its vocabulary id and the code points [start, end) of the input text it came from. */
data class Token(val id: Int, val start: Int, val end: Int)

/** A span [start, end) of the input's code points: an added token's id, or null for the text between added tokens. */
internal class TextPart(val id: Int?, val start: Int, val end: Int)

/** Step 1's output: the normalized code points points[0, size), each with sources[k], the index of the input code
 *  point whose place it holds. */
internal class Normalized(val points: IntArray, val sources: IntArray, val size: Int)

/** What a model reads: ids, token types and attention mask, as the LongArrays ONNX Runtime's tensors take. */
class Encoding(val ids: LongArray, val typeIds: LongArray, val attentionMask: LongArray)

class BertTokenizer(tables: Reader) {
    companion object {
        private const val MAGIC_NAME = "pocketbert-tokenizer-tables"
        private const val HEADER = "$MAGIC_NAME 3"
        private const val LAST_SCALAR = 0x10FFFF
        private const val CRLF = "tokenizer.tables has CRLF line ends (a copy or checkout converted them): copy the exported file byte for byte (git: mark *.tables binary)"
        private const val PAGE = 256
        private const val PAGES = 4352  // 0x110000 code points / 256
        // Map entries that are not a delta: deltas lie within +-0x10FFFF, so these values cannot be one.
        private const val REMOVED = -0x200000
        private const val EXPANSION = -0x300000  // EXPANSION - k: the k-th code point sequence
        private const val OTHER: Byte = 0
        private const val WHITESPACE: Byte = 1
        private const val PUNCTUATION: Byte = 2
        // Order entries that are not an offset into orderUnits.
        private const val STARTER = -1  // one unit of rank 0 giving all the code point's mapped code points
        private const val REMOVED_FIRST = -2  // removed before the ordering: no unit, no place
        private const val MAX_RANK = 255
        private const val MAX_COUNT = 255

        fun fromFile(path: File): BertTokenizer = path.bufferedReader(Charsets.UTF_8).use { BertTokenizer(it) }
    }

    val maxLength: Int
    val clsId: Int
    val sepId: Int
    val padId: Int
    val unkId: Int
    private val prefix: String
    private val maxWordChars: Int
    private val added: HashMap<String, Int>  // an added token's exact content -> its id
    private val addedLengths: IntArray  // the contents' lengths in code points, longest first
    private val addedStarts: HashSet<Int>  // the contents' first code points: nowhere else can one begin
    private val vocab: HashMap<String, Int>
    private val longestToken: Int  // in code points, the prefix not counted: no longer candidate can match
    private val mapIndex: IntArray  // page of the code space -> first entry of its map page in mapEntries
    private val mapEntries: IntArray
    private val expansions: List<IntArray>
    private val classIndex: IntArray
    private val classEntries: ByteArray
    private val orderIndex: IntArray
    private val orderEntries: IntArray  // STARTER, REMOVED_FIRST or k: orderUnits[k] units follow it, each rank shl 8 or count
    private val orderUnits: IntArray

    init {
        val text = tables.readText()
        // A CR anywhere is a copy that converted the line ends (the format is \n-ended, and no entry holds a CR).
        if (text.indexOf('\r') >= 0) throw IllegalArgumentException(CRLF)
        val lines = text.split('\n')
        var lineNumber = 0
        fun line(): String {
            // the text after the last \n is no line of the file
            if (lineNumber >= lines.size - 1) throw IllegalArgumentException("tokenizer.tables ends early: copy it again from the export")
            return lines[lineNumber++]
        }
        fun unexpected(wanted: String) = IllegalArgumentException("tokenizer.tables line $lineNumber is not $wanted: export it again")
        fun field(key: String): String {
            val text = line()
            if (!text.startsWith("$key ")) throw unexpected(key)
            return text.substring(key.length + 1)
        }
        fun intField(key: String, atLeast: Int = Int.MIN_VALUE): Int {
            val value = field(key).toIntOrNull() ?: throw unexpected(key)
            if (value < atLeast) throw unexpected(key)
            return value
        }
        /** A count of lines that follow: never negative, never more than the file holds (no loop or array of it). */
        fun count(key: String): Int {
            val value = intField(key, 0)
            if (value > lines.size - 1 - lineNumber) throw unexpected("a count of $key lines the file holds")
            return value
        }
        /** Code points written in hex, each a Unicode scalar value; null when one is not. */
        fun scalars(text: String): IntArray? {
            val codes = text.split(',').map { it.toIntOrNull(16) }
            if (codes.isEmpty() || codes.any { it == null || it > LAST_SCALAR || it in 0xD800..0xDFFF || it < 0 }) return null
            return codes.map { it!! }.toIntArray()
        }
        fun pageIndex(key: String, pages: Int): IntArray {
            val numbers = field(key).split(' ')
            if (numbers.size != PAGES) throw unexpected("$key of $PAGES pages")
            return IntArray(PAGES) { k ->
                val page = numbers[k].toIntOrNull() ?: throw unexpected(key)
                if (page < 0 || page >= pages) throw unexpected("$key within its $pages pages")
                page * PAGE
            }
        }

        val first = line()
        if (first != HEADER) {
            if (first.startsWith("$MAGIC_NAME ")) {
                throw IllegalArgumentException("tokenizer.tables is format ${first.substring(MAGIC_NAME.length + 1)}, this tokenizer reads 3: take the tables and the tokenizer from one pocketbert export")
            }
            throw IllegalArgumentException("not a tokenizer.tables file: export it again with pocketbert")
        }
        unkId = intField("unk")
        clsId = intField("cls")
        sepId = intField("sep")
        padId = intField("pad")
        prefix = field("prefix")
        maxWordChars = intField("max_word_chars", 1)
        maxLength = intField("max_length", 2)
        val addedCount = count("added")
        added = HashMap(addedCount * 2)
        for (k in 0 until addedCount) {
            val text = line()
            val space = text.indexOf(' ')
            val codes = if (space > 0) scalars(text.substring(space + 1)) else null
            val id = if (space > 0) text.substring(0, space).toIntOrNull() else null
            if (id == null || codes == null) throw unexpected("added token")
            added[String(codes, 0, codes.size)] = id
        }
        addedLengths = added.keys.map { it.codePointCount(0, it.length) }.distinct().sortedDescending().toIntArray()
        addedStarts = added.keys.mapTo(HashSet()) { it.codePointAt(0) }
        val size = count("vocab")
        vocab = HashMap(size * 2)
        var longest = 0
        for (id in 0 until size) {
            val token = line()
            vocab[token] = id
            longest = maxOf(longest, token.codePointCount(0, token.length))
        }
        longestToken = longest

        val mapPages = count("map_pages")
        mapEntries = IntArray(mapPages * PAGE)
        val sequences = ArrayList<IntArray>()
        for (page in 0 until mapPages) {
            val entries = line().split(' ')
            if (entries.size != PAGE) throw unexpected("a page of $PAGE map entries")
            for (k in 0 until PAGE) {
                val entry = entries[k]
                mapEntries[page * PAGE + k] = when {
                    entry == "-" -> REMOVED
                    entry.startsWith("=") -> {
                        sequences.add(scalars(entry.substring(1)) ?: throw unexpected("map entry"))
                        EXPANSION - (sequences.size - 1)
                    }
                    else -> entry.toIntOrNull()?.takeIf { it in -LAST_SCALAR..LAST_SCALAR } ?: throw unexpected("map entry")
                }
            }
        }
        expansions = sequences
        mapIndex = pageIndex("map_index", mapPages)

        val classPages = count("class_pages")
        classEntries = ByteArray(classPages * PAGE)
        for (page in 0 until classPages) {
            val entries = line()
            if (entries.length != PAGE) throw unexpected("a page of $PAGE classes")
            for (k in 0 until PAGE) {
                classEntries[page * PAGE + k] = when (entries[k]) {
                    'o' -> OTHER
                    'w' -> WHITESPACE
                    'p' -> PUNCTUATION
                    else -> throw unexpected("a page of classes (o, w, p)")
                }
            }
        }
        classIndex = pageIndex("class_index", classPages)

        val orderPages = count("order_pages")
        orderEntries = IntArray(orderPages * PAGE)
        var units = IntArray(64)
        var unitsSize = 0
        val unitsAt = HashMap<String, Int>()  // an entry's text -> its units' offset: each distinct entry stored once
        for (page in 0 until orderPages) {
            val entries = line().split(' ')
            if (entries.size != PAGE) throw unexpected("a page of $PAGE order entries")
            for (k in 0 until PAGE) {
                val entry = entries[k]
                orderEntries[page * PAGE + k] = when (entry) {
                    "." -> STARTER
                    "-" -> REMOVED_FIRST
                    else -> unitsAt.getOrPut(entry) {
                        val parts = entry.split(',')
                        if (unitsSize + parts.size + 1 > units.size) units = units.copyOf(maxOf(units.size * 2, unitsSize + parts.size + 1))
                        val at = unitsSize
                        units[unitsSize++] = parts.size
                        for (part in parts) {
                            val colon = part.indexOf(':')
                            val rank = if (colon >= 0) part.substring(0, colon).toIntOrNull() else null
                            val count = if (colon >= 0) part.substring(colon + 1).toIntOrNull() else null
                            if (rank == null || count == null || rank !in 0..MAX_RANK || count !in 0..MAX_COUNT) throw unexpected("order entry")
                            units[unitsSize++] = (rank shl 8) or count
                        }
                        at
                    }
                }
            }
        }
        orderUnits = units.copyOf(unitsSize)
        orderIndex = pageIndex("order_index", orderPages)

        for (code in 0..LAST_SCALAR) {
            // Every code point a shift maps stays in the code space: tokenize() then never indexes a page past it.
            // (Removals and expansions lie below -LAST_SCALAR; a shift, checked above, does not.)
            val entry = mapEntries[mapIndex[code shr 8] + (code and 0xFF)]
            if (entry != 0 && entry >= -LAST_SCALAR && (code + entry) !in 0..LAST_SCALAR) {
                throw IllegalArgumentException("tokenizer.tables does not hold a map into the code space (code point $code): export it again")
            }
            // A code point's units give exactly the code points its map gives: normalized() then never reads past them.
            val order = orderEntries[orderIndex[code shr 8] + (code and 0xFF)]
            if (order != STARTER) {
                var given = 0
                if (order != REMOVED_FIRST) {
                    for (k in 1..orderUnits[order]) given += orderUnits[order + k] and 0xFF
                }
                val mapped = mappedCount(entry)
                if (given != mapped) {
                    throw IllegalArgumentException("tokenizer.tables orders code point $code in units of $given code points and maps it to $mapped: export it again")
                }
            }
        }
    }

    /**
     * The added tokens `text` holds ([SEP], [MASK] ... typed in it) and the word pieces of the text between them; no
     * [CLS] or [SEP] around. Offsets count code points.
     */
    fun tokenize(text: String): List<Token> {
        val lone = text.indices.firstOrNull { k ->
            val c = text[k]
            (c.isHighSurrogate() && (k + 1 >= text.length || !text[k + 1].isLowSurrogate())) ||
                (c.isLowSurrogate() && (k == 0 || !text[k - 1].isHighSurrogate()))
        }
        // A Swift String cannot hold one, and tokenizer.json refuses one: the same verdict here.
        if (lone != null) throw IllegalArgumentException("the text holds a lone surrogate at UTF-16 index $lone: give Unicode text")
        val scalars = IntArray(text.codePointCount(0, text.length))
        var i = 0
        for (k in scalars.indices) {
            scalars[k] = text.codePointAt(i)
            i += Character.charCount(scalars[k])
        }
        val tokens = ArrayList<Token>()
        for (part in splitAdded(scalars)) {
            if (part.id != null) tokens.add(Token(part.id, part.start, part.end))
            else splitWords(scalars, part.start, part.end, tokens)
        }
        return tokens
    }

    /**
     * Step 0, on the raw text: a part with its id for each added token's exact content it holds ("[SEP]", not
     * "[sep]"), a part with none for the text between. At the first place where a content begins, the longest one
     * that begins there; the search goes on after it, so matches never overlap.
     */
    internal fun splitAdded(text: IntArray): List<TextPart> {
        val parts = ArrayList<TextPart>()
        var between = 0
        var at = 0
        while (at < text.size) {
            var length = 0
            if (text[at] in addedStarts) {
                length = addedLengths.firstOrNull { at + it <= text.size && added.containsKey(String(text, at, it)) } ?: 0
            }
            if (length == 0) {
                at++
                continue
            }
            if (between < at) parts.add(TextPart(null, between, at))
            parts.add(TextPart(added.getValue(String(text, at, length)), at, at + length))
            at += length
            between = at
        }
        if (between < text.size) parts.add(TextPart(null, between, text.size))
        return parts
    }

    /**
     * Step 1 on text[start, end): its normalized code points, each with the index of the input code point whose place
     * it holds. Each code point's units (its decomposition's parts, each giving some of its mapped code points) are put
     * in canonical order: every run of units of nonzero rank sorted by rank, stably. Then the units are read in order:
     * a code point's first unit takes the next input code point's place, its other units the place of the one taken
     * last (tokenizers' alignments, so offsets are tokenizer.json's where marks move).
     */
    /** How many code points a map entry gives: a shift one, a removal none, an expansion its own. */
    private fun mappedCount(entry: Int): Int =
        if (entry > REMOVED) 1 else if (entry == REMOVED) 0 else expansions[EXPANSION - entry].size

    internal fun normalized(text: IntArray, start: Int, end: Int): Normalized {
        // How many places, units and mapped code points, so that every array below is allocated once, to size.
        var placeCount = 0
        var unitCount = 0
        var codeCount = 0
        for (source in start until end) {
            val c = text[source]
            val order = orderEntries[orderIndex[c ushr 8] + (c and 0xFF)]
            if (order == REMOVED_FIRST) continue
            placeCount++
            unitCount += if (order == STARTER) 1 else orderUnits[order]
            val entry = mapEntries[mapIndex[c ushr 8] + (c and 0xFF)]
            codeCount += mappedCount(entry)
        }
        // units[u]: rank shl 32 or u (sorting these sorts by rank, stably); unit u gives
        // codes[unitFrom[u], unitFrom[u] + unitCodes[u]) and takes the next place where unitTakes[u].
        val places = IntArray(placeCount)
        val units = LongArray(unitCount)
        val unitFrom = IntArray(unitCount)
        val unitCodes = IntArray(unitCount)
        val unitTakes = BooleanArray(unitCount)
        val codes = IntArray(codeCount)
        var p = 0
        var u = 0
        var n = 0
        for (source in start until end) {
            val c = text[source]
            val order = orderEntries[orderIndex[c ushr 8] + (c and 0xFF)]
            if (order == REMOVED_FIRST) continue
            places[p++] = source
            val from = n
            val entry = mapEntries[mapIndex[c ushr 8] + (c and 0xFF)]
            if (entry > REMOVED) {
                codes[n++] = c + entry
            } else if (entry != REMOVED) {
                for (mapped in expansions[EXPANSION - entry]) codes[n++] = mapped
            }
            if (order == STARTER) {
                units[u] = u.toLong()
                unitFrom[u] = from
                unitCodes[u] = n - from
                unitTakes[u] = true
                u++
                continue
            }
            var at = from
            for (k in 1..orderUnits[order]) {
                val unit = orderUnits[order + k]
                val count = unit and 0xFF
                units[u] = ((unit ushr 8).toLong() shl 32) or u.toLong()
                unitFrom[u] = at
                unitCodes[u] = count
                unitTakes[u] = k == 1
                u++
                at += count
            }
        }
        var run = 0
        while (run < unitCount) {
            if (units[run] ushr 32 == 0L) {
                run++
                continue
            }
            var after = run
            while (after < unitCount && units[after] ushr 32 != 0L) after++
            if (after - run > 1) java.util.Arrays.sort(units, run, after)  // the keys differ: a stable sort by rank
            run = after
        }
        val points = IntArray(codeCount)
        val sources = IntArray(codeCount)
        var out = 0
        var taken = 0
        for (k in 0 until unitCount) {
            val unit = units[k].toInt()  // its index: the low 32 bits
            if (unitTakes[unit]) taken++
            val place = places[maxOf(taken - 1, 0)]
            for (j in unitFrom[unit] until unitFrom[unit] + unitCodes[unit]) {
                points[out] = codes[j]
                sources[out] = place
                out++
            }
        }
        return Normalized(points, sources, out)
    }

    /** Steps 1 to 4 on text[from, to), a part between added tokens: its word pieces into `tokens`. */
    private fun splitWords(text: IntArray, from: Int, to: Int, tokens: MutableList<Token>) {
        val normal = normalized(text, from, to)
        val points = normal.points
        val sources = normal.sources
        val n = normal.size
        var wordStart = 0
        for (k in 0 until n) {
            val c = points[k]
            val kind = classEntries[classIndex[c ushr 8] + (c and 0xFF)]
            if (kind == OTHER) continue
            if (wordStart < k) pieces(points, sources, wordStart, k, tokens)
            if (kind == PUNCTUATION) pieces(points, sources, k, k + 1, tokens)
            wordStart = k + 1
        }
        if (wordStart < n) pieces(points, sources, wordStart, n, tokens)
    }

    /** WordPiece on the word points[from, to): greedy longest match from the left, else one unknown token. */
    private fun pieces(points: IntArray, sources: IntArray, from: Int, to: Int, tokens: MutableList<Token>) {
        val wordStart = sources[from]
        val wordEnd = sources[to - 1] + 1
        if (to - from > maxWordChars) {
            tokens.add(Token(unkId, wordStart, wordEnd))
            return
        }
        val word = String(points, from, to - from)
        val charAt = IntArray(to - from + 1)  // code point k of the word starts at char charAt[k]
        for (k in 0 until to - from) charAt[k + 1] = charAt[k] + Character.charCount(points[from + k])
        val found = ArrayList<Token>()
        var start = 0
        val length = to - from
        while (start < length) {
            var end = minOf(length, start + longestToken)
            var id = -1
            while (end > start) {
                val piece = word.substring(charAt[start], charAt[end])
                val match = vocab[if (start > 0) prefix + piece else piece]
                if (match != null) {
                    id = match
                    break
                }
                end--
            }
            if (id < 0) {
                tokens.add(Token(unkId, wordStart, wordEnd))
                return
            }
            found.add(Token(id, sources[from + start], sources[from + end - 1] + 1))
            start = end
        }
        tokens.addAll(found)
    }

    /** [CLS] + the first maxLength - 2 pieces of `text` + [SEP]; token types 0, attention 1. */
    fun encode(text: String, maxLength: Int = this.maxLength): Encoding {
        val tokens = tokenize(text)
        val kept = minOf(tokens.size, maxOf(0, maxLength - 2))
        val ids = LongArray(kept + 2)
        ids[0] = clsId.toLong()
        for (k in 0 until kept) ids[k + 1] = tokens[k].id.toLong()
        ids[kept + 1] = sepId.toLong()
        return Encoding(ids, LongArray(ids.size), LongArray(ids.size) { 1L })
    }

    /** [CLS] first [SEP] second [SEP], token types 0 then 1: the first text cut to maxLength - 3 pieces, the second
     *  to what room is left, so the ids never outgrow maxLength (the model's positions). */
    fun encodePair(first: String, second: String, maxLength: Int = this.maxLength): Encoding {
        val whole = tokenize(first)
        val a = whole.subList(0, minOf(whole.size, maxOf(0, maxLength - 3)))
        val b = tokenize(second)
        val keptB = minOf(b.size, maxOf(0, maxLength - 3 - a.size))
        val ids = LongArray(a.size + keptB + 3)
        val types = LongArray(ids.size)
        ids[0] = clsId.toLong()
        for (k in a.indices) ids[k + 1] = a[k].id.toLong()
        ids[a.size + 1] = sepId.toLong()
        for (k in 0 until keptB) {
            ids[a.size + 2 + k] = b[k].id.toLong()
            types[a.size + 2 + k] = 1L
        }
        ids[ids.size - 1] = sepId.toLong()
        types[ids.size - 1] = 1L
        return Encoding(ids, types, LongArray(ids.size) { 1L })
    }
}

/** The code points [start, end) of `text` (Token offsets count code points; Kotlin strings index UTF-16 units). */
fun substringByCodePoints(text: String, start: Int, end: Int): String {
    val from = text.offsetByCodePoints(0, start)
    return text.substring(from, text.offsetByCodePoints(from, end - start))
}
