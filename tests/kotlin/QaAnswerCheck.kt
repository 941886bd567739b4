// Runs the generated QA post-processing routine (QaAnswer.kt) on a golden file the export wrote, in the plain
// form export/app/qa_postprocess.plain_golden gives it (Kotlin's standard library reads no JSON).
// Prints one line per question: <window starts, comma-separated> <window> <start> <end> (-1 -1 -1: no answer).
import java.io.File

fun main(args: Array<String>) {
    val lines = File(args[0]).readLines().iterator()
    fun ints() = lines.next().trim().split(" ").filter { it.isNotEmpty() }.map { it.toInt() }
    fun floats() = lines.next().trim().split(" ").filter { it.isNotEmpty() }.map { it.toFloat() }.toFloatArray()
    val (questions, maxLength, stride, nBest, maxAnswerLength) = ints()
    repeat(questions) {
        val (questionTokens, contextTokens, windows) = ints()
        val starts = mutableListOf<FloatArray>()
        val ends = mutableListOf<FloatArray>()
        val index = mutableListOf<IntArray>()
        repeat(windows) {
            starts.add(floats()); ends.add(floats()); index.add(ints().toIntArray())
        }
        val windowList = windowStarts(contextTokens, questionTokens, maxLength, stride)
        val span = qaAnswer(starts, ends, index, nBest, maxAnswerLength)
        println("${windowList.joinToString(",")} " + (if (span == null) "-1 -1 -1" else "${span.window} ${span.start} ${span.end}"))
    }
}
