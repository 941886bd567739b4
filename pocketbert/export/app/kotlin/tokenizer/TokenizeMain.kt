// pocketbert-tokenize: BertTokenizer on standard input, one JSON line out per line in, for pocketbert's checks
// against tokenizer.json (pocketbert/export/app/app_tokenizer_check.py drives it).
//   --tables PATH      the tokenizer.tables file
//   --json-lines       each input line is a JSON string literal (so a text can hold \n, \r, NUL, any code point)
//   --max-length N     encode() cuts to N tokens (absent: no cut)
//   --offsets          print {"ids":[...],"offsets":[[s,e],...]} of tokenize() instead of encode()'s [ids...]
//   --pairs            lines come two by two (first, second): print {"ids":[...],"type_ids":[...]} of encodePair()
package ai.pocketbert.tokenizer

import java.io.BufferedReader
import java.io.BufferedWriter
import java.io.File
import java.io.InputStreamReader
import java.io.OutputStreamWriter
import kotlin.system.exitProcess

private const val USAGE = "usage: pocketbert-tokenize --tables PATH [--json-lines] [--max-length N] [--offsets | --pairs]"

fun main(args: Array<String>) {
    try {
        run(args)
    } catch (e: Throwable) {  // every failure one line and exit 2, as the Swift driver's: never a stack trace
        fail(e.message ?: e.toString())
    }
}

private fun run(args: Array<String>) {
    var tables: String? = null
    var jsonLines = false
    var maxLength = Int.MAX_VALUE
    var offsets = false
    var pairs = false
    var k = 0
    while (k < args.size) {
        when (args[k]) {
            "--tables" -> tables = args.getOrNull(++k)
            "--json-lines" -> jsonLines = true
            "--max-length" -> maxLength = args.getOrNull(++k)?.toIntOrNull()?.takeIf { it >= 2 }
                ?: fail("--max-length takes a number >= 2")
            "--offsets" -> offsets = true
            "--pairs" -> pairs = true
            else -> fail("unknown argument '${args[k]}': $USAGE")
        }
        k++
    }
    if (offsets && pairs) fail("--offsets and --pairs are two outputs: give one")
    val tokenizer = BertTokenizer.fromFile(File(tables ?: fail(USAGE)))
    val input = BufferedReader(InputStreamReader(System.`in`, Charsets.UTF_8), 1 shl 16)
    val out = BufferedWriter(OutputStreamWriter(System.out, Charsets.UTF_8), 1 shl 16)
    val line = StringBuilder()
    while (true) {
        val raw = input.readLine() ?: break
        val text = if (jsonLines) readJsonString(raw) else raw
        line.setLength(0)
        if (pairs) {
            val rawSecond = input.readLine() ?: fail("--pairs: the last first text has no second")
            val encoding = tokenizer.encodePair(text, if (jsonLines) readJsonString(rawSecond) else rawSecond, maxLength)
            line.append("{\"ids\":").appendArray(encoding.ids.asList()) { append(it) }
            line.append(",\"type_ids\":").appendArray(encoding.typeIds.asList()) { append(it) }.append('}')
        } else if (offsets) {
            val tokens = tokenizer.tokenize(text)
            line.append("{\"ids\":").appendArray(tokens) { append(it.id) }
            line.append(",\"offsets\":").appendArray(tokens) {
                append('[').append(it.start).append(',').append(it.end).append(']')
            }
            line.append('}')
        } else {
            line.appendArray(tokenizer.encode(text, maxLength).ids.asList()) { append(it) }
        }
        out.append(line).append('\n')
        if (!input.ready()) out.flush()  // a caller that waits for each answer gets it; a stream is written in blocks
    }
    out.flush()
}

/** `items` as a JSON array, each written by `item` (numbers and arrays of numbers: no escaping needed). */
private inline fun <T> StringBuilder.appendArray(items: List<T>, item: StringBuilder.(T) -> Unit): StringBuilder {
    append('[')
    items.forEachIndexed { i, value -> if (i > 0) append(','); item(value) }
    return append(']')
}

private fun fail(message: String): Nothing {
    System.err.println(message)
    exitProcess(2)
}

/** The string a JSON string literal (the whole of `literal`, quotes included) holds: the same verdicts as the Swift
 *  driver's jsonString (main.swift), a lone surrogate refused as a Swift String cannot hold one. */
fun readJsonString(literal: String): String {
    val s = literal.trim { it == ' ' || it == '\t' || it == '\r' }
    fun refuse(why: String): Nothing = throw IllegalArgumentException("$why in a JSON string: ${s.take(40)}")
    if (s.length < 2 || s[0] != '"' || s[s.length - 1] != '"') throw IllegalArgumentException("not a JSON string: ${s.take(40)}")
    val out = StringBuilder(s.length)
    var i = 1
    val last = s.length - 1
    fun hex4(at: Int): Int? = if (at + 4 <= last) s.substring(at, at + 4).toIntOrNull(16) else null
    while (i < last) {
        val c = s[i++]
        if (c == '"') refuse("an unescaped quote")
        if (c != '\\') {
            if (c.isSurrogate() && !(c.isHighSurrogate() && i < last && s[i].isLowSurrogate()) &&
                !(c.isLowSurrogate() && s[i - 2].isHighSurrogate())) refuse("a lone surrogate")
            out.append(c)
            continue
        }
        if (i >= last) refuse("a backslash at the end")
        when (val e = s[i++]) {
            '"', '\\', '/' -> out.append(e)
            'b' -> out.append('\b')
            'f' -> out.append('\u000C')
            'n' -> out.append('\n')
            'r' -> out.append('\r')
            't' -> out.append('\t')
            'u' -> {
                val code = hex4(i) ?: refuse("a short \\u escape")
                i += 4
                if (code in 0xD800..0xDBFF) {  // a surrogate pair's two escapes
                    val low = if (i + 1 < last && s[i] == '\\' && s[i + 1] == 'u') hex4(i + 2) else null
                    if (low == null || low !in 0xDC00..0xDFFF) refuse("a lone surrogate")
                    out.append(code.toChar()).append(low.toChar())
                    i += 6
                } else {
                    if (code in 0xDC00..0xDFFF) refuse("a lone surrogate")
                    out.append(code.toChar())
                }
            }
            else -> refuse("an unknown escape \\$e")
        }
    }
    return out.toString()
}

/** `text` as a JSON string literal: ASCII only, every other UTF-16 unit as a \u escape. */
fun writeJsonString(text: String): String {
    val out = StringBuilder(text.length + 2)
    out.append('"')
    for (c in text) {
        when {
            c == '"' -> out.append("\\\"")
            c == '\\' -> out.append("\\\\")
            c < ' ' || c > '~' -> out.append("\\u").append(String.format("%04x", c.toInt()))
            else -> out.append(c)
        }
    }
    return out.append('"').toString()
}
