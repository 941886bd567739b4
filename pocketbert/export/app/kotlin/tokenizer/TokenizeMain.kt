// pocketbert-tokenize: BertTokenizer on standard input, one JSON line out per line in, for pocketbert's checks
// against tokenizer.json (pocketbert/export/app/app_tokenizer_check.py drives it).
//   --tables PATH      the tokenizer.tables file
//   --json-lines       each input line is a JSON string literal (so a text can hold \n, \r, NUL, any code point)
//   --max-length N     encode() cuts to N tokens (absent: no cut)
//   --offsets          print {"ids":[...],"offsets":[[s,e],...]} of tokenize() instead of encode()'s [ids...]
package ai.pocketbert.tokenizer

import java.io.BufferedReader
import java.io.BufferedWriter
import java.io.File
import java.io.InputStreamReader
import java.io.OutputStreamWriter
import kotlin.system.exitProcess

private const val USAGE = "usage: pocketbert-tokenize --tables PATH [--json-lines] [--max-length N] [--offsets]"

fun main(args: Array<String>) {
    var tables: String? = null
    var jsonLines = false
    var maxLength = Int.MAX_VALUE
    var offsets = false
    var k = 0
    while (k < args.size) {
        when (args[k]) {
            "--tables" -> tables = args.getOrNull(++k)
            "--json-lines" -> jsonLines = true
            "--max-length" -> maxLength = args.getOrNull(++k)?.toIntOrNull() ?: fail(USAGE)
            "--offsets" -> offsets = true
            else -> fail("unknown argument '${args[k]}': $USAGE")
        }
        k++
    }
    val tokenizer = BertTokenizer.fromFile(File(tables ?: fail(USAGE)))
    val input = BufferedReader(InputStreamReader(System.`in`, Charsets.UTF_8), 1 shl 16)
    val out = BufferedWriter(OutputStreamWriter(System.out, Charsets.UTF_8), 1 shl 16)
    val line = StringBuilder()
    while (true) {
        val raw = input.readLine() ?: break
        val text = if (jsonLines) readJsonString(raw) else raw
        line.setLength(0)
        if (offsets) {
            val tokens = tokenizer.tokenize(text)
            line.append("{\"ids\":[")
            tokens.forEachIndexed { i, t -> if (i > 0) line.append(','); line.append(t.id) }
            line.append("],\"offsets\":[")
            tokens.forEachIndexed { i, t ->
                if (i > 0) line.append(',')
                line.append('[').append(t.start).append(',').append(t.end).append(']')
            }
            line.append("]}")
        } else {
            val ids = tokenizer.encode(text, maxLength).ids
            line.append('[')
            ids.forEachIndexed { i, id -> if (i > 0) line.append(','); line.append(id) }
            line.append(']')
        }
        out.append(line).append('\n')
        if (!input.ready()) out.flush()  // a caller that waits for each answer gets it; a stream is written in blocks
    }
    out.flush()
}

private fun fail(message: String): Nothing {
    System.err.println(message)
    exitProcess(2)
}

/** The string a JSON string literal (the whole of `literal`, quotes included) holds. */
fun readJsonString(literal: String): String {
    val s = literal.trim()
    if (s.length < 2 || s[0] != '"' || s[s.length - 1] != '"') throw IllegalArgumentException("not a JSON string: ${s.take(40)}")
    val out = StringBuilder(s.length)
    var i = 1
    val last = s.length - 1
    while (i < last) {
        val c = s[i++]
        if (c == '"') throw IllegalArgumentException("unescaped quote in a JSON string: ${s.take(40)}")
        if (c != '\\') {
            out.append(c)
            continue
        }
        if (i >= last) throw IllegalArgumentException("a JSON string ends in a backslash: ${s.take(40)}")
        when (val e = s[i++]) {
            '"', '\\', '/' -> out.append(e)
            'b' -> out.append('\b')
            'f' -> out.append('\u000C')
            'n' -> out.append('\n')
            'r' -> out.append('\r')
            't' -> out.append('\t')
            'u' -> {  // a UTF-16 unit: a surrogate pair's two escapes join in the UTF-16 string as they are
                if (i + 4 > last) throw IllegalArgumentException("a short \\u escape in a JSON string: ${s.take(40)}")
                out.append(s.substring(i, i + 4).toInt(16).toChar())
                i += 4
            }
            else -> throw IllegalArgumentException("unknown escape \\$e in a JSON string: ${s.take(40)}")
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
