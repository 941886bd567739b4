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
    private let maxLength = {max_length}{lengths_decl}

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
    private let maxLength = {max_length}{lengths_decl}
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
        let length = {array_length}
        let shape = [1, length] as [NSNumber]
        let inputIds = try MLMultiArray(shape: shape, dataType: .int32)
        let mask = try MLMultiArray(shape: shape, dataType: .int32)
        let types = try MLMultiArray(shape: shape, dataType: .int32)
        for i in 0..<length {{
            inputIds[i] = NSNumber(value: i < ids.count ? ids[i] : 0)
            mask[i] = i < ids.count ? 1 : 0
            types[i] = i >= contextStart && i < ids.count ? 1 : 0
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

KOTLIN_SESSION = '''    private val env = OrtEnvironment.getEnvironment()
    // The tokenizer runs inside the model (onnxruntime-extensions' custom ops): register them before loading.
    private val session: OrtSession = env.createSession(
        context.assets.open("{model_file}").readBytes(),
        OrtSession.SessionOptions().apply {{
            registerCustomOpLibrary(OrtxPackage.getLibraryPath())
{provider}
        }})'''

KOTLIN_IMPORTS = '''import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import ai.onnxruntime.extensions.OrtxPackage
import android.content.Context

// build.gradle:
//   implementation("com.microsoft.onnxruntime:onnxruntime-android:<version>")
//   implementation("com.microsoft.onnxruntime:onnxruntime-extensions-android:<version>")'''

KOTLIN_SENTIMENT = '''```kotlin
{imports}
import kotlin.math.exp

class SentimentClassifier(context: Context) {{
{session}
    private val labels = listOf({labels_kotlin})

    /** The label and its probability. The model tokenizes the text itself, and cuts an input longer than
     *  {max_length} tokens at its end, keeping [SEP]. */
    fun classify(text: String): Pair<String, Float> {{
        // The model reads a string up to its first NUL; tokenizer.json drops NULs, so dropping them changes nothing.
        OnnxTensor.createTensor(env, arrayOf(text.replace("\u0000", "")), longArrayOf(1)).use {{ input ->
            session.run(mapOf("text" to input)).use {{ result ->
                val logits = (result[0].value as Array<FloatArray>)[0]
                val top = logits.max()
                val exps = logits.map {{ exp((it - top).toDouble()).toFloat() }}
                val best = logits.indexOfFirst {{ it == top }}
                return labels[best] to exps[best] / exps.sum()
            }}
        }}
    }}
}}
```'''

KOTLIN_QA = '''```kotlin
{imports}

class QuestionAnswerer(context: Context) {{
{session}
    private val maxAnswerTokens = 30

    /** The best answer, cut out of `text` as written (less any NULs), or null when the model prefers no answer.
     *  The model reads one window of {max_length} tokens; for a longer context, call it on overlapping parts. */
    fun answer(question: String, text: String): String? {{
        // The model reads a string up to its first NUL; tokenizer.json drops NULs, so dropping them changes nothing.
        val context = text.replace("\u0000", "")
        val inputs = mapOf("question" to OnnxTensor.createTensor(env, arrayOf(question.replace("\u0000", "")),
                                                                 longArrayOf(1)),
                           "context" to OnnxTensor.createTensor(env, arrayOf(context), longArrayOf(1)))
        session.run(inputs).use {{ result ->
            inputs.values.forEach {{ it.close() }}
            val start = (result.get("start_logits").get().value as Array<FloatArray>)[0]
            val end = (result.get("end_logits").get().value as Array<FloatArray>)[0]
            val types = (result.get("token_type_ids").get().value as Array<LongArray>)[0]
            // Each token's [first, past-the-end) code point in its own text (the context, for type 1).
            val offsets = (result.get("offset_mapping").get().value as Array<Array<LongArray>>)[0]
            fun inContext(k: Int) = types[k] == 1L && k < types.size - 1  // not the closing [SEP]
            var best: Triple<Float, Int, Int>? = null
            for (s in start.indices) {{
                if (!inContext(s)) continue
                for (e in s until minOf(s + maxAnswerTokens, end.size)) {{
                    if (!inContext(e)) continue
                    val score = start[s] + end[e]
                    if (best == null || score > best.first) best = Triple(score, s, e)
                }}
            }}
            val span = best ?: return null
            if (span.first <= start[0] + end[0]) return null
            // Code points to String (UTF-16) indices: an emoji is one code point and two chars.
            val from = context.offsetByCodePoints(0, offsets[span.second][0].toInt())
            val to = context.offsetByCodePoints(0, offsets[span.third][1].toInt())
            return context.substring(from, to)
        }}
    }}
}}
```'''


SWIFT_EXECUTORCH_SENTIMENT = '''```swift
import ExecuTorch   // https://github.com/pytorch/executorch (Swift package, products executorch and backend_xnnpack)
import Tokenizers  // swift-transformers

/// The same classifier on ExecuTorch's runtime (XNNPACK on the CPU) instead of Core ML.
final class SentimentClassifierExecuTorch {{
    private let module: Module
    private let tokenizer: Tokenizer
    private let labels: [String]
    private let maxLength = {max_length}

    init(folder: URL) async throws {{
        module = Module(filePath: folder.appendingPathComponent("{pte}").path)
        tokenizer = try await AutoTokenizer.from(modelFolder: folder)
        let data = try Data(contentsOf: folder.appendingPathComponent("labels.json"))
        labels = try JSONDecoder().decode([String].self, from: data)
    }}

    func classify(_ text: String) throws -> (label: String, probability: Float) {{
        let encoded = tokenizer.encode(text: text)  // [CLS] ... [SEP]
        let ids = encoded.count <= maxLength ? encoded : Array(encoded.prefix(maxLength - 1)) + [encoded.last!]
        let shape = [1, ids.count]  // the program takes 2...maxLength tokens as they come: no padding
        let inputIds = Tensor<Int64>(ids.map {{ Int64($0) }}, shape: shape)
        let mask = Tensor<Int64>(Array(repeating: 1, count: ids.count), shape: shape)
        let logits: Tensor<Float> = try module.forward([inputIds, mask])[0].tensor()!
        let scores = logits.scalars()
        let top = scores.max()!
        let exps = scores.map {{ exp($0 - top) }}
        let best = scores.firstIndex(of: top)!
        return (labels[best], exps[best] / exps.reduce(0, +))
    }}
}}
```'''

KOTLIN_EXECUTORCH_SENTIMENT = '''```kotlin
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer
import android.content.Context
import java.io.File
import kotlin.math.exp
import org.pytorch.executorch.EValue
import org.pytorch.executorch.Module
import org.pytorch.executorch.Tensor

// build.gradle:
//   implementation("org.pytorch:executorch-android:<version>")
//   implementation("ai.djl.huggingface:tokenizers:<version>")  // tokenizer.json through Hugging Face's tokenizers
class SentimentClassifierExecuTorch(context: Context) {{
    // Both libraries read files: copy them out of the APK's assets once.
    private fun file(context: Context, name: String) = File(context.filesDir, name).also {{ target ->
        if (!target.exists()) context.assets.open(name).use {{ input -> target.outputStream().use {{ input.copyTo(it) }} }}
    }}
    private val module = Module.load(file(context, "{pte}").absolutePath)
    // DJL applies its own length limit: set it to the program's, with truncation that keeps [SEP].
    private val tokenizer = HuggingFaceTokenizer.builder().optTokenizerPath(file(context, "tokenizer.json").toPath())
        .optMaxLength({max_length}).optTruncation(true).build()
    private val labels = listOf({labels_kotlin})

    /** An input longer than {max_length} tokens is cut at its end, [SEP] kept. */
    fun classify(text: String): Pair<String, Float> {{
        val ids = tokenizer.encode(text).ids
        val shape = longArrayOf(1, ids.size.toLong())
        val mask = LongArray(ids.size) {{ 1L }}
        val logits = module.forward(EValue.from(Tensor.fromBlob(ids, shape)),
                                    EValue.from(Tensor.fromBlob(mask, shape)))[0].toTensor().dataAsFloatArray
        val top = logits.max()
        val exps = logits.map {{ exp((it - top).toDouble()).toFloat() }}
        val best = logits.indexOfFirst {{ it == top }}
        return labels[best] to exps[best] / exps.sum()
    }}
}}
```'''

# ExecuTorch app code, by task: the tasks that have it.
SWIFT_EXECUTORCH = {"sentiment": SWIFT_EXECUTORCH_SENTIMENT}
KOTLIN_EXECUTORCH = {"sentiment": KOTLIN_EXECUTORCH_SENTIMENT}


def executorch_section(code_by_task: dict, instead_of: str, task: str, pte: str, max_length: int,
                       labels: list[str]) -> list[str]:
    """The README lines of the ExecuTorch alternative (not compiled here): code_by_task is SWIFT_EXECUTORCH or
    KOTLIN_EXECUTORCH."""
    code = code_by_task[task].format(pte=pte, max_length=max_length,
                                     labels_kotlin=", ".join(f'"{label}"' for label in labels))
    return ["", f"## ExecuTorch instead of {instead_of} (not compiled here)", "",
            f"`{pte}` is the student as an ExecuTorch program (XNNPACK delegate, int8 Linear layers), gated at export "
            "on ExecuTorch's own runtime. It takes token ids, so the app tokenizes with tokenizer.json:", "", code]


def _shape_code(max_length: int, variant: str, lengths: tuple[int, ...]) -> dict[str, str]:
    """How the Swift sizes its input arrays: each input at its own length, max_length, or an enumerated length."""
    if variant == "fixed":
        return {"array_length": "maxLength", "lengths_decl": "",
                "length_note": "The fixed-shape model takes exactly maxLength tokens: the rest is padding, masked."}
    if lengths:
        return {"array_length": "lengths.first {{ $0 >= ids.count }}!",
                "lengths_decl": "\n    private let lengths = [" + ", ".join(map(str, lengths)) + "]  // the model's "
                                "enumerated lengths",
                "length_note": "Padded (masked) to the smallest of the model's enumerated lengths that fits."}
    return {"array_length": "ids.count", "lengths_decl": "",
            "length_note": "Core ML takes each sentence at its own length: no padding."}


def _swift_sentiment(model_class: str, max_length: int, variant: str, lengths: tuple[int, ...]) -> str:
    decode = SWIFT_DECODE_CLASSIFIER if variant == "classifier" else SWIFT_DECODE_LOGITS
    return SWIFT_SENTIMENT.format(model_class=model_class, max_length=max_length,
                                  decode=decode.replace("{{", "{").replace("}}", "}"),
                                  **{k: v.replace("{{", "{").replace("}}", "}")
                                     for k, v in _shape_code(max_length, variant, lengths).items()})


def _swift_qa(model_class: str, max_length: int, variant: str, lengths: tuple[int, ...]) -> str:
    shape = _shape_code(max_length, variant, lengths)
    return SWIFT_QA.format(model_class=model_class, max_length=max_length,
                           array_length=shape["array_length"].replace("{{", "{").replace("}}", "}"),
                           lengths_decl=shape["lengths_decl"])


# The app code of each task, one entry per task: task name -> Swift (class, max length, variant) and Kotlin.
SWIFT_CODE = {"sentiment": _swift_sentiment, "qa": _swift_qa}
KOTLIN_CODE = {"sentiment": KOTLIN_SENTIMENT, "qa": KOTLIN_QA}


def shape_tradeoffs(max_length: int, lengths: tuple[int, ...], variant: str) -> list[str]:
    """The three input shapes a Core ML program can take, what each costs and which iOS each needs."""
    enumerated = ", ".join(map(str, lengths)) if lengths else "a few lengths"
    rows = [("flexible (`fp16`, `int8`, `6bit`, `4bit`; `int4-block` needs iOS 18)", "iOS 16",
             f"each input at its own length, 1 to {max_length}: no padding", "CPU and GPU; the Neural Engine only at "
             "the default shape (coremltools #2370), so in practice not"),
            ("enumerated (`enumerated`)", "iOS 18 (two enumerated inputs)",
             f"the smallest of {enumerated} that fits: a little padding", "Neural Engine, CPU and GPU; Core ML "
             "prepares each length"),
            ("fixed (`fixed`)", "iOS 16", f"always {max_length}: short inputs pay for the padding",
             "Neural Engine, CPU and GPU")]
    lines = ["| shape | minimum | each input runs at | compute units |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return ["", f"This folder holds the `{variant}` program. The shapes a Core ML program can take:", ""] + lines


def ios_readme(task: str, files: dict[str, str], model_class: str, variant: str, weights: str, max_length: int,
               metrics: dict, n_examples: int, resources: str, lengths: tuple[int, ...] = (),
               proven: list[str] = (), needs_device: list[str] = (), alternative: list[str] = ()) -> str:
    code = SWIFT_CODE[task](model_class, max_length, variant, lengths)
    shape_step = {
        "fixed": f"The model takes exactly {max_length} tokens (pad with 0, mask 0): one fixed shape, which the "
                 "Neural Engine runs; short inputs pay for the padding.",
        "enumerated": f"The model takes {', '.join(map(str, lengths))} tokens: the code pads (mask 0) to the "
                      "smallest that fits, so the Neural Engine can run it. It needs iOS 18.",
    }.get(variant, f"The model accepts 1 to {max_length} tokens and runs each input at its own length (CPU and GPU; "
                   "for the Neural Engine export the `enumerated` or `fixed` variant).")
    return _readme("iOS", files, code, weights, metrics, n_examples, [
        f"Drag `{model_class}.mlpackage` into the Xcode project with the app target ticked: Xcode compiles it "
        f"and generates the `{model_class}` class the code uses. (Inside a folder reference it would only be "
        "copied, and the class would not exist.)",
        f"Drag the `{resources}` folder in as a folder reference (blue), target ticked: it is copied as it is, "
        f"and `Bundle.main.url(forResource: \"{resources}\", withExtension: nil)!` is the `folder` the code "
        "takes.",
        "Add the swift-transformers package (product `Tokenizers`); it reads tokenizer.json, "
        "tokenizer_config.json and config.json from the folder.",
        shape_step,
    ], shape_tradeoffs(max_length, lengths, variant), proven, needs_device, alternative)


def kotlin_provider(choice: str, threads: int = 2) -> str:
    """The SessionOptions line that puts the model on the execution provider the export's verdict chose."""
    return {
        "NNAPI": "            addNnapi()  // ONNX Runtime's verdict: NNAPI takes this graph",
        "XNNPACK": f'            addXnnpack(mapOf("intra_op_num_threads" to "{threads}"))  // the verdict: XNNPACK '
                   "runs its weight products\n            setIntraOpNumThreads(1)",
        "CPU": "            // CPU execution provider: ONNX Runtime's verdict is that neither NNAPI nor XNNPACK would "
               "take\n            // enough of this graph to pay (see the README's table); MLAS runs its int8 kernels.",
    }[choice]


def android_readme(task: str, files: dict[str, str], labels: list[str], max_length: int, model_file: str,
                   provider: str, verdicts: list[str], metrics: dict, n_examples: int, proven: list[str] = (),
                   needs_device: list[str] = (), alternative: list[str] = ()) -> str:
    session = KOTLIN_SESSION.format(model_file=model_file, provider=kotlin_provider(provider))
    code = KOTLIN_CODE[task].format(imports=KOTLIN_IMPORTS, session=session, max_length=max_length,
                                    labels_kotlin=", ".join(f'"{label}"' for label in labels))
    return _readme("Android", files, code, "int8", metrics, n_examples, [
        f"Copy the files into `app/src/main/assets/`; `{model_file}` loads with the full ONNX Runtime Android "
        "package and the onnxruntime-extensions Android package (the tokenizer is inside the model), or with a "
        "reduced ONNX Runtime build made from the operator list beside it (ONNX Runtime's build script, "
        "`--include_ops_by_config`).",
        f"The model takes the text itself and tokenizes it as tokenizer.json does, up to {max_length} tokens.",
    ], ["", "Execution providers, as ONNX Runtime's own checks judge the int8 graphs (nodes each provider would "
            "take, with the input shapes fixed):", ""] + verdicts, proven, needs_device, alternative)


def _readme(platform: str, files: dict[str, str], code: str, variant: str, metrics: dict, n_examples: int,
            steps: list[str], notes: list[str] = (), proven: list[str] = (), needs_device: list[str] = (),
            alternative: list[str] = ()) -> str:
    lines = [f"# pocketbert model for {platform}", "",
             f"Exported by pocketbert; {variant} weights. On {n_examples} examples of the eval set the model scored "
             + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
             + " on its own runtime.", "", "| file | what it is |", "|---|---|"]
    lines += [f"| `{name}` | {what} |" for name, what in files.items()]
    lines += ["", "## Set-up", ""] + [f"{i}. {s}" for i, s in enumerate(steps, 1)] + list(notes)
    if proven or needs_device:
        lines += ["", "## Proven by pocketbert, and what needs a device", ""]
        lines += [f"- Proven at export: {p}" for p in proven]
        lines += [f"- Needs a device (not done here): {n}" for n in needs_device]
    lines += ["", "## Code", "", code] + list(alternative) + [""]
    return "\n".join(lines)
