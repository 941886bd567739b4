"""The README of an app folder (`export ios`, `export android`): what each file is, and code that tokenizes,
predicts and decodes, in Swift (Core ML + swift-transformers) or Kotlin (ONNX Runtime Android)."""

from __future__ import annotations

SWIFT_SENTIMENT = '''```swift
import CoreML
import Tokenizers  // swift-transformers: https://github.com/huggingface/swift-transformers

/// Loads once; `classify` is safe to call from a background task.
final class SentimentClassifier {{
    private let model: {model_class}
    private let tokenizer: Tokenizer
    private let labels: [String]
    private let maxLength = {max_length}

    init(folder: URL) async throws {{
        model = try {model_class}(configuration: MLModelConfiguration())
        tokenizer = try await AutoTokenizer.from(modelFolder: folder)
        let data = try Data(contentsOf: folder.appendingPathComponent("labels.json"))
        labels = try JSONDecoder().decode([String].self, from: data)
    }}

    /// The label and its probability. {length_note}
    func classify(_ text: String) throws -> (label: String, probability: Float) {{
        let encoded = tokenizer.encode(text: text)  // [CLS] ... [SEP]
        // Too long: cut the end of the text, never the closing [SEP] the model was trained with.
        let ids = encoded.count <= maxLength ? encoded : Array(encoded.prefix(maxLength - 1)) + [encoded.last!]
        let length = {array_length}
        let shape = [1, length] as [NSNumber]
        let inputIds = try MLMultiArray(shape: shape, dataType: .int32)
        let mask = try MLMultiArray(shape: shape, dataType: .int32)
        for i in 0..<length {{
            inputIds[i] = NSNumber(value: i < ids.count ? ids[i] : 0)
            mask[i] = i < ids.count ? 1 : 0
        }}
{decode}
    }}
}}
```'''

SWIFT_DECODE_LOGITS = '''        let logits = try model.prediction(input_ids: inputIds, attention_mask: mask).logits
        let scores = (0..<labels.count).map {{ logits[$0].floatValue }}
        let top = scores.max()!
        let exps = scores.map {{ exp($0 - top) }}
        let best = scores.firstIndex(of: top)!
        return (labels[best], exps[best] / exps.reduce(0, +))'''

SWIFT_DECODE_CLASSIFIER = '''        let out = try model.prediction(input_ids: inputIds, attention_mask: mask)
        return (out.label, Float(out.label_probs[out.label] ?? 0))  // Core ML's classifier outputs'''

SWIFT_QA = '''```swift
import CoreML
import Tokenizers  // swift-transformers: https://github.com/huggingface/swift-transformers

final class QuestionAnswerer {{
    private let model: {model_class}
    private let tokenizer: Tokenizer
    private let maxLength = {max_length}
    private let maxAnswerTokens = 30

    init(folder: URL) async throws {{
        model = try {model_class}(configuration: MLModelConfiguration())
        tokenizer = try await AutoTokenizer.from(modelFolder: folder)
    }}

    /// The best answer span in `context`, or nil when the model prefers no answer.
    func answer(question: String, context: String) throws -> String? {{
        let cls = tokenizer.convertTokenToId("[CLS]")!, sep = tokenizer.convertTokenToId("[SEP]")!
        let q = tokenizer.encode(text: question, addSpecialTokens: false)
        let room = maxLength - q.count - 3
        let c = Array(tokenizer.encode(text: context, addSpecialTokens: false).prefix(max(room, 0)))
        let ids = [cls] + q + [sep] + c + [sep]
        let contextStart = q.count + 2
        let shape = [1, ids.count] as [NSNumber]
        let inputIds = try MLMultiArray(shape: shape, dataType: .int32)
        let mask = try MLMultiArray(shape: shape, dataType: .int32)
        let types = try MLMultiArray(shape: shape, dataType: .int32)
        for (i, id) in ids.enumerated() {{
            inputIds[i] = NSNumber(value: id)
            mask[i] = 1
            types[i] = i >= contextStart ? 1 : 0
        }}
        let out = try model.prediction(input_ids: inputIds, attention_mask: mask, token_type_ids: types)
        var best: (score: Float, start: Int, end: Int)? = nil
        for s in contextStart..<(ids.count - 1) {{
            for e in s..<min(s + maxAnswerTokens, ids.count - 1) {{
                let score = out.start_logits[s].floatValue + out.end_logits[e].floatValue
                if best == nil || score > best!.score {{ best = (score, s, e) }}
            }}
        }}
        let noAnswer = out.start_logits[0].floatValue + out.end_logits[0].floatValue
        guard let span = best, span.score > noAnswer else {{ return nil }}
        return tokenizer.decode(tokens: Array(ids[span.start...span.end]))
    }}
}}
```'''

KOTLIN_WORDPIECE = '''```kotlin
import java.text.Normalizer

/** BERT's uncased WordPiece, as tokenizer.json describes it: lower case, accents stripped, split on
 *  whitespace and punctuation, then greedy longest-match sub-words marked with "##". */
class WordPiece(vocabLines: List<String>, private val lowerCase: Boolean = {lower_case}) {{
    private val vocab = vocabLines.withIndex().associate {{ it.value to it.index }}
    val cls = vocab.getValue("[CLS]"); val sep = vocab.getValue("[SEP]"); private val unk = vocab.getValue("[UNK]")

    fun encode(text: String, addSpecialTokens: Boolean = true): List<Int> {{
        var t = if (lowerCase) text.lowercase() else text
        if (lowerCase) t = Normalizer.normalize(t, Normalizer.Form.NFD).replace(Regex("\\\\p{{Mn}}"), "")
        val words = Regex("[\\\\p{{L}}\\\\p{{N}}]+|[^\\\\s\\\\p{{L}}\\\\p{{N}}]").findAll(t).map {{ it.value }}
        val ids = words.flatMap {{ piece(it) }}.toList()
        return if (addSpecialTokens) listOf(cls) + ids + listOf(sep) else ids
    }}

    private fun piece(word: String): List<Int> {{
        val out = mutableListOf<Int>()
        var start = 0
        while (start < word.length) {{
            var end = word.length
            var id: Int? = null
            while (start < end) {{
                val sub = (if (start > 0) "##" else "") + word.substring(start, end)
                id = vocab[sub]
                if (id != null) break
                end--
            }}
            if (id == null) return listOf(unk)
            out += id
            start = end
        }}
        return out
    }}
}}
```'''

KOTLIN_SENTIMENT = '''```kotlin
import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import android.content.Context
import java.nio.LongBuffer
import kotlin.math.exp

// build.gradle: implementation("com.microsoft.onnxruntime:onnxruntime-android:<version>")
class SentimentClassifier(context: Context) {{
    private val env = OrtEnvironment.getEnvironment()
    private val session: OrtSession =
        env.createSession(context.assets.open("model.ort").readBytes(), OrtSession.SessionOptions())
    private val tokenizer = WordPiece(context.assets.open("vocab.txt").bufferedReader().readLines())
    private val labels = listOf({labels_kotlin})
    private val maxLength = {max_length}

    /** The label and its probability. Each sentence runs at its own length: no padding. */
    fun classify(text: String): Pair<String, Float> {{
        val encoded = tokenizer.encode(text)  // [CLS] ... [SEP]
        // Too long: cut the end of the text, never the closing [SEP] the model was trained with.
        val kept = if (encoded.size <= maxLength) encoded else encoded.take(maxLength - 1) + encoded.last()
        val ids = kept.map {{ it.toLong() }}.toLongArray()
        val shape = longArrayOf(1, ids.size.toLong())
        OnnxTensor.createTensor(env, LongBuffer.wrap(ids), shape).use {{ inputIds ->
            OnnxTensor.createTensor(env, LongBuffer.wrap(LongArray(ids.size) {{ 1L }}), shape).use {{ mask ->
                session.run(mapOf("input_ids" to inputIds, "attention_mask" to mask)).use {{ result ->
                    val logits = (result[0].value as Array<FloatArray>)[0]
                    val top = logits.max()
                    val exps = logits.map {{ exp((it - top).toDouble()).toFloat() }}
                    val best = logits.indexOfFirst {{ it == top }}
                    return labels[best] to exps[best] / exps.sum()
                }}
            }}
        }}
    }}
}}
```'''

KOTLIN_QA = '''```kotlin
import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import android.content.Context
import java.nio.LongBuffer

// build.gradle: implementation("com.microsoft.onnxruntime:onnxruntime-android:<version>")
class QuestionAnswerer(context: Context) {{
    private val env = OrtEnvironment.getEnvironment()
    private val session: OrtSession =
        env.createSession(context.assets.open("model.ort").readBytes(), OrtSession.SessionOptions())
    private val vocab = context.assets.open("vocab.txt").bufferedReader().readLines()
    private val tokenizer = WordPiece(vocab)
    private val maxLength = {max_length}
    private val maxAnswerTokens = 30

    /** The best answer span's word pieces joined back into text, or null for no answer. */
    fun answer(question: String, context: String): String? {{
        val q = tokenizer.encode(question, addSpecialTokens = false)
        val c = tokenizer.encode(context, addSpecialTokens = false).take(maxOf(maxLength - q.size - 3, 0))
        val ids = listOf(tokenizer.cls) + q + listOf(tokenizer.sep) + c + listOf(tokenizer.sep)
        val contextStart = q.size + 2
        val shape = longArrayOf(1, ids.size.toLong())
        fun tensor(values: List<Long>) = OnnxTensor.createTensor(env, LongBuffer.wrap(values.toLongArray()), shape)
        val inputs = mapOf(
            "input_ids" to tensor(ids.map {{ it.toLong() }}),
            "attention_mask" to tensor(List(ids.size) {{ 1L }}),
            "token_type_ids" to tensor(List(ids.size) {{ if (it >= contextStart) 1L else 0L }}),
        )
        session.run(inputs).use {{ result ->
            inputs.values.forEach {{ it.close() }}
            val start = (result[0].value as Array<FloatArray>)[0]
            val end = (result[1].value as Array<FloatArray>)[0]
            var best: Triple<Float, Int, Int>? = null
            for (s in contextStart until ids.size - 1)
                for (e in s until minOf(s + maxAnswerTokens, ids.size - 1)) {{
                    val score = start[s] + end[e]
                    if (best == null || score > best.first) best = Triple(score, s, e)
                }}
            val span = best ?: return null
            if (span.first <= start[0] + end[0]) return null
            return ids.subList(span.second, span.third + 1).joinToString(" ") {{ vocab[it] }}.replace(" ##", "")
        }}
    }}
}}
```'''


def _swift_sentiment(model_class: str, max_length: int, variant: str) -> str:
    fixed = variant == "fixed"
    decode = SWIFT_DECODE_CLASSIFIER if variant == "classifier" else SWIFT_DECODE_LOGITS
    return SWIFT_SENTIMENT.format(
        model_class=model_class, max_length=max_length, array_length="maxLength" if fixed else "ids.count",
        decode=decode.replace("{{", "{").replace("}}", "}"),
        length_note="The fixed-shape model takes exactly maxLength tokens: the rest is padding, masked."
        if fixed else "Core ML takes each sentence at its own length: no padding.")


def _swift_qa(model_class: str, max_length: int, variant: str) -> str:
    return SWIFT_QA.format(model_class=model_class, max_length=max_length)


# The app code of each task, one entry per task: task name -> Swift (class, max length, variant) and Kotlin.
SWIFT_CODE = {"sentiment": _swift_sentiment, "qa": _swift_qa}
KOTLIN_CODE = {"sentiment": KOTLIN_SENTIMENT, "qa": KOTLIN_QA}


def ios_readme(task: str, files: dict[str, str], model_class: str, variant: str, max_length: int,
               metrics: dict, n_examples: int, resources: str) -> str:
    fixed = variant == "fixed"
    code = SWIFT_CODE[task](model_class, max_length, variant)
    return _readme("iOS", files, code, variant, metrics, n_examples, [
        f"Drag `{model_class}.mlpackage` into the Xcode project with the app target ticked: Xcode compiles it "
        f"and generates the `{model_class}` class the code uses. (Inside a folder reference it would only be "
        "copied, and the class would not exist.)",
        f"Drag the `{resources}` folder in as a folder reference (blue), target ticked: it is copied as it is, "
        f"and `Bundle.main.url(forResource: \"{resources}\", withExtension: nil)!` is the `folder` the code "
        "takes.",
        "Add the swift-transformers package (product `Tokenizers`); it reads tokenizer.json, "
        "tokenizer_config.json and config.json from the folder.",
        f"The model takes exactly {max_length} tokens (pad with 0, mask 0): one fixed shape, which the Neural "
        "Engine needs; short inputs pay for the padding." if fixed else
        f"The model accepts 1 to {max_length} tokens and runs each input at its own length (CPU and GPU; the "
        "Neural Engine wants the `fixed` variant).",
    ])


def android_readme(task: str, files: dict[str, str], labels: list[str], max_length: int, lower_case: bool,
                   metrics: dict, n_examples: int) -> str:
    code = KOTLIN_CODE[task].format(
        max_length=max_length, labels_kotlin=", ".join(f'"{label}"' for label in labels))
    tokenizer = KOTLIN_WORDPIECE.format(lower_case=str(lower_case).lower())
    return _readme("Android", files, code + "\n\nThe tokenizer it uses:\n\n" + tokenizer, "int8", metrics, n_examples, [
        "Copy the files into `app/src/main/assets/`; `model.ort` loads with the full ONNX Runtime Android "
        "package, or with a reduced build made from `model.required_operators.config` (ONNX Runtime's "
        "build script, `--include_ops_by_config`).",
        "The model accepts 1 to %d tokens and runs each input at its own length." % max_length,
    ])


def _readme(platform: str, files: dict[str, str], code: str, variant: str, metrics: dict, n_examples: int,
            steps: list[str]) -> str:
    lines = [f"# pocketbert model for {platform}", "",
             f"Exported by pocketbert; {variant} weights. On {n_examples} examples of the eval set the model scored "
             + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
             + " on its own runtime.", "", "| file | what it is |", "|---|---|"]
    lines += [f"| `{name}` | {what} |" for name, what in files.items()]
    lines += ["", "## Set-up", ""] + [f"{i}. {s}" for i, s in enumerate(steps, 1)] + ["", "## Code", "", code, ""]
    return "\n".join(lines)
