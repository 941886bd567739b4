// Runs the generated QA routine (QaAnswer.kt) with pocketbert's Kotlin tokenizer on a golden file the export wrote,
// in the plain form export/app/qa_postprocess.plain_golden gives it (Kotlin's standard library reads no JSON):
// each question and context is tokenized and cut into windows here, the golden logits are scored over them, and
// the answer is cut out of the context by code points. Arguments: the plain golden file, tokenizer.tables.
// Prints one line per question: <window starts, comma-separated> <window> <start> <end> <answer as a JSON string>
// (-1 -1 -1 "": no answer). Exits 1 naming the question whose windows differ from the golden file's.
import ai.pocketbert.tokenizer.BertTokenizer
import ai.pocketbert.tokenizer.readJsonString
import ai.pocketbert.tokenizer.writeJsonString
import java.io.File
import kotlin.system.exitProcess

fun main(args: Array<String>) {
    val lines = File(args[0]).readLines().iterator()
    val tokenizer = BertTokenizer.fromFile(File(args[1]))
    fun ints() = lines.next().trim().split(" ").filter { it.isNotEmpty() }.map { it.toInt() }
    fun floats() = lines.next().trim().split(" ").filter { it.isNotEmpty() }.map { it.toFloat() }.toFloatArray()
    val (questions, maxLength, stride, nBest, maxAnswerLength) = ints()
    repeat(questions) {
        val (questionTokens, contextTokens, windows) = ints()
        val question = readJsonString(lines.next())
        val context = readJsonString(lines.next())
        val starts = mutableListOf<FloatArray>()
        val ends = mutableListOf<FloatArray>()
        val index = mutableListOf<IntArray>()
        repeat(windows) {
            starts.add(floats()); ends.add(floats()); index.add(ints().toIntArray())
        }
        val cut = qaWindows(tokenizer, question, context, maxLength, stride)
        if (cut.contextTokens.size != contextTokens || cut.contextIndex.size != windows ||
            cut.contextIndex.indices.any { !cut.contextIndex[it].contentEquals(index[it]) }) {
            System.err.println("the windows of '$question' differ from the golden file's (context tokens " +
                "${cut.contextTokens.size}, not $contextTokens; windows ${cut.contextIndex.size}, not $windows)")
            exitProcess(1)
        }
        val windowList = windowStarts(contextTokens, questionTokens, maxLength, stride)
        val span = qaAnswer(starts, ends, cut.contextIndex, nBest, maxAnswerLength)
        val answer = writeJsonString(qaAnswerText(context, cut, span) ?: "")
        println("${windowList.joinToString(",")} " +
                (if (span == null) "-1 -1 -1" else "${span.window} ${span.start} ${span.end}") + " $answer")
    }
}
