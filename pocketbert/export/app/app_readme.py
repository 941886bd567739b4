"""The README of an app folder (`export ios`, `export android`): what each file is, and code that tokenizes,
predicts and decodes, in Swift (Core ML + the PocketBertTokenizer package) or Kotlin (ONNX Runtime Android)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pocketbert.core.run.run_files import SWIFT_TOKENIZER_PACKAGE, TOKENIZER_JSON, TOKENIZER_TABLES

# The app code, one folder per task (templates/<task>/ios.swift.txt, android.kt.txt, ...), shipped as package data.
# A template is the code as an app holds it; `{name}` marks what the export fills in (README text, not Python).
TEMPLATES = Path(__file__).resolve().parent / "templates"
PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class FolderFacts:
    """What every app folder's README tells, whatever its platform: the task, the files, the shipped model's gate
    figures, what the export proved and what needs a device, other runtimes' sections, and the task's code values
    (QA: the stride, n_best and the longest answer)."""

    task: str
    files: dict[str, str]
    max_length: int
    metrics: dict
    n_examples: int
    proven: list[str] = ()
    needs_device: list[str] = ()
    alternative: list[str] = ()
    values: dict | None = None


def template(name: str, task: str | None = None) -> str:
    """A template's text (its file ends with one newline, which is not part of the code)."""
    path = TEMPLATES / task / name if task else TEMPLATES / name
    return path.read_text(encoding="utf-8").removesuffix("\n")


def fill(text: str, **values) -> str:
    """The template with each `{name}` given a value replaced; other braces are the code's own."""
    return PLACEHOLDER.sub(lambda m: str(values[m[1]]) if m[1] in values else m[0], text)


def _by_task(name: str) -> dict[str, str]:
    """Template `name` of every task that has one: task -> text."""
    return {folder.name: template(name, folder.name)
            for folder in sorted(TEMPLATES.iterdir()) if (folder / name).is_file()}


# ExecuTorch app code, by task: the tasks that have it.
SWIFT_EXECUTORCH = _by_task("ios_executorch.swift.txt")
KOTLIN_EXECUTORCH = _by_task("android_executorch.kt.txt")


def executorch_section(code_by_task: dict, instead_of: str, task: str, pte: str, max_length: int,
                       labels: list[str], values: dict | None = None, note: str = "") -> list[str]:
    """The README lines of the ExecuTorch alternative (type-checked against stubs, not run): code_by_task is SWIFT_EXECUTORCH or
    KOTLIN_EXECUTORCH; values fill the task's own placeholders, note follows the introduction."""
    code = fill(code_by_task[task], pte=pte, max_length=max_length,
                labels_kotlin=", ".join(f'"{label}"' for label in labels), **(values or {}))
    tokenizes = (f"{SWIFT_TOKENIZER_PACKAGE} from {TOKENIZER_TABLES}" if code_by_task is SWIFT_EXECUTORCH else
                 TOKENIZER_JSON)
    return ["", f"## ExecuTorch instead of {instead_of} (type-checked here, not run)", "",
            f"`{pte}` is the student as an ExecuTorch program (XNNPACK delegate, int8 Linear layers), gated at export "
            f"on ExecuTorch's own runtime. It takes token ids, so the app tokenizes with {tokenizes}{note}:", "",
            code]


def _one_model(model_class: str) -> dict[str, str]:
    return {"model_decl": f"    private let model: {model_class}",
            "model_init": f"        model = try {model_class}(configuration: MLModelConfiguration())",
            "model_for": "model"}


def _function_per_length(model_class: str, lengths: tuple[int, ...]) -> dict[str, str]:
    """A multifunction package: one model object per function main_len<n>, chosen by the padded length (the Core
    AI Swift's scheme). The lengths are written out in init: Swift reads no stored property before all are set."""
    return {"model_decl": f"    private let models: [Int: {model_class}]  // one per function, main_len<n>",
            "model_init": "\n".join([
                f"        var loaded: [Int: {model_class}] = [:]",
                "        for n in [" + ", ".join(map(str, lengths)) + "] {",
                "            let configuration = MLModelConfiguration()",
                "            configuration.functionName = \"main_len\\(n)\"  // iOS 18: the function of that length",
                f"            loaded[n] = try {model_class}(configuration: configuration)",
                "        }",
                "        models = loaded"]),
            "model_for": "models[length]!"}


def _shape_code(max_length: int, variant: str, lengths: tuple[int, ...], model_class: str = "",
                functions: bool = False) -> dict[str, str]:
    """How the Swift sizes its input arrays (each input at its own length, max_length, or one of the program's
    lengths) and which model object it runs (one, or a multifunction package's function of that length)."""
    if variant == "fixed":
        return {"array_length": "maxLength", "lengths_decl": "", **_one_model(model_class),
                "length_note": "The fixed-shape model takes exactly maxLength tokens: the rest is padding, masked."}
    if lengths and functions:
        return {"array_length": "lengths.first { $0 >= ids.count }!",
                "lengths_decl": "\n    private let lengths = [" + ", ".join(map(str, lengths)) + "]  // the "
                                "program's functions, main_len<n>",
                **_function_per_length(model_class, lengths),
                "length_note": "Padded (masked) to the smallest of the program's lengths that fits, and run by "
                               "that length's function."}
    if lengths:
        return {"array_length": "lengths.first { $0 >= ids.count }!",
                "lengths_decl": "\n    private let lengths = [" + ", ".join(map(str, lengths)) + "]  // the model's "
                                "enumerated lengths", **_one_model(model_class),
                "length_note": "Padded (masked) to the smallest of the model's enumerated lengths that fits."}
    return {"array_length": "ids.count", "lengths_decl": "", **_one_model(model_class),
            "length_note": "Core ML takes each sentence at its own length: no padding."}


def swift_code(task: str, model_class: str, max_length: int, variant: str, lengths: tuple[int, ...],
               values: dict | None = None, functions: bool = False) -> str:
    """The task's Swift (templates/<task>/ios.swift.txt); a classifier program decodes with Core ML's own label
    outputs where the task has that decoding (ios_decode_classifier.swift.txt), else from the logits."""
    decode = "ios_decode_classifier.swift.txt" if variant == "classifier" else "ios_decode_logits.swift.txt"
    shape = _shape_code(max_length, variant, lengths, model_class, functions)
    extra = {"decode": fill(template(decode, task), model_for=shape["model_for"])} \
        if (TEMPLATES / task / decode).is_file() else {}
    return fill(template("ios.swift.txt", task), model_class=model_class, max_length=max_length, **extra,
                **shape, **(values or {}))


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
             "Neural Engine, CPU and GPU"),
            ("one function per length, Neural Engine layout (`ane`, `ane-int8`, `ane-6bit`, `ane-4bit`)", "iOS 18",
             f"the smallest of {enumerated} that fits, each a fixed-shape function: a little padding",
             "Neural Engine first (Apple's transformer layout), CPU and GPU")]
    lines = ["| shape | minimum | each input runs at | compute units |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return ["", f"This folder holds the `{variant}` program. The shapes a Core ML program can take:", ""] + lines + [
        "", "Which to pick: on iOS 18 or later (every such iPhone and iPad has a Neural Engine) the `ane` program, "
        "built for the Neural Engine and free of enumerated shapes (apple/coremltools#2730); for iOS 16 and 17, "
        "`fixed` on the Neural Engine or the flexible `fp16` on CPU and GPU; `enumerated` only if asked for."]


def _resources_steps(resources: str) -> list[str]:
    """The set-up steps of an iOS folder's resources, Core ML or Core AI alike: the folder the code reads the
    tokenizer from, and the package that reads it."""
    return [f"Drag the `{resources}` folder in as a folder reference (blue), target ticked: it is copied as it is, "
            f"and `Bundle.main.url(forResource: \"{resources}\", withExtension: nil)!` is the `folder` the code "
            "takes.",
            f"Add the `{SWIFT_TOKENIZER_PACKAGE}` folder as a local Swift package (File > Add Package Dependencies > "
            f"Add Local..., product `{SWIFT_TOKENIZER_PACKAGE}`, no dependencies): its `BertTokenizer` reads "
            f"`{TOKENIZER_TABLES}` from the folder and gives tokenizer.json's ids and each token's code-point span."]


def ios_readme(facts: FolderFacts, model_class: str, variant: str, weights: str, resources: str,
               lengths: tuple[int, ...] = (), extra_steps: list[str] = (), placement: list[str] = (),
               functions: bool = False) -> str:
    """functions: the program is a multifunction package, one fixed-length function per length."""
    max_length = facts.max_length
    code = swift_code(facts.task, model_class, max_length, variant, lengths, facts.values, functions)
    shape_step = {
        "fixed": f"The model takes exactly {max_length} tokens (pad with 0, mask 0): one fixed shape, which the "
                 "Neural Engine runs; short inputs pay for the padding.",
        "enumerated": f"The model takes {', '.join(map(str, lengths))} tokens: the code pads (mask 0) to the "
                      "smallest that fits, so the Neural Engine can run it. It needs iOS 18. Enumerated shapes "
                      "convert and save, then may fail at prediction on the device with an E5RT \"unknown "
                      "strides\" error (apple/coremltools#2730): prefer the `ane` program, one function per length.",
    }.get(variant, f"The program has one fixed-length function per length, `main_len<n>` for n in "
                   f"{', '.join(map(str, lengths))}: the code pads (mask 0) to the smallest that fits and loads that "
                   "function (`MLModelConfiguration.functionName`, iOS 18). Its layout is the Neural Engine's "
                   "(channels-first, 1x1 convolutions, attention per head)." if functions else f"The model accepts 1 to {max_length} tokens and runs each input at its own length (CPU and GPU; "
                   "for the Neural Engine export the `enumerated` or `fixed` variant).")
    return _readme("iOS", facts, code, weights, [
        f"Drag `{model_class}.mlpackage` into the Xcode project with the app target ticked: Xcode compiles it "
        f"and generates the `{model_class}` class the code uses. (Inside a folder reference it would only be "
        "copied, and the class would not exist.)",
        *_resources_steps(resources), shape_step, *extra_steps,
    ], shape_tradeoffs(max_length, lengths, variant) + list(placement))


# `export android --text-in`: why the default folder ships the ids-in model instead.
TEXT_IN_WARNING = ("onnxruntime-extensions' Android package (0.13.0, its only release) is not 16 KB-page aligned: Google "
                   "Play refuses updates of apps that target Android 15+ with unaligned native libraries (since "
                   "2025-11-01).")


def kotlin_provider(choice: str, threads: int = 2) -> str:
    """The SessionOptions line that puts the model on the execution provider the export's verdict chose."""
    return {
        "NNAPI": "            addNnapi()  // ONNX Runtime's verdict: NNAPI takes this graph",
        "XNNPACK": f'            addXnnpack(mapOf("intra_op_num_threads" to "{threads}"))  // the verdict: XNNPACK '
                   "runs its weight products\n            setIntraOpNumThreads(1)",
        "CPU": "            // CPU execution provider: ONNX Runtime's verdict is that neither NNAPI nor XNNPACK would "
               "take\n            // enough of this graph to pay (see the README's table); MLAS runs its int8 kernels.",
    }[choice]


def kotlin_code(task: str, labels: list[str], max_length: int, model_file: str, provider: str,
                values: dict | None = None, text_in: bool = False, ort_version: str = "", tables: str = "") -> str:
    """The task's Kotlin for ONNX Runtime Android: by default the ids-in model with BertTokenizer.kt reading
    `tables` (templates/<task>/android_ids.kt.txt); text_in: the model with the tokenizer inside
    (onnxruntime-extensions, templates/<task>/android.kt.txt)."""
    if text_in:
        imports, session = template("android_imports.kt.txt"), template("android_session.kt.txt")
    else:
        imports = fill(template("android_ids_imports.kt.txt"), ort_version=ort_version, tables=tables)
        session = template("android_ids_session.kt.txt")
    session = fill(session, model_file=model_file, provider=kotlin_provider(provider), tables=tables)
    return fill(template("android.kt.txt" if text_in else "android_ids.kt.txt", task), imports=imports,
                session=session, max_length=max_length, labels_kotlin=", ".join(f'"{label}"' for label in labels),
                **(values or {}))


def android_readme(facts: FolderFacts, labels: list[str], model_file: str, provider: str, verdicts: list[str],
                   input_step: str = "", text_in: bool = False, ort_version: str = "", tables: str = "") -> str:
    """text_in: the folder ships the model with the tokenizer inside; else the ids-in model and BertTokenizer.kt
    with its `tables`. ort_version: the onnxruntime the export proved the model on."""
    max_length = facts.max_length
    code = kotlin_code(facts.task, labels, max_length, model_file, provider, facts.values, text_in, ort_version,
                       tables)
    if text_in:
        load = (f"`{model_file}` loads with the full ONNX Runtime Android package and the onnxruntime-extensions "
                "Android package (the tokenizer is inside the model), or with a reduced ONNX Runtime build made "
                "from the operator list beside it (ONNX Runtime's build script, `--include_ops_by_config`). "
                f"{TEXT_IN_WARNING}")
    else:
        load = (f"`{model_file}` loads with ONNX Runtime's own Android package, "
                f"`com.microsoft.onnxruntime:onnxruntime-android:{ort_version}` (the version the export proved it "
                "on: an `.ort` file is not guaranteed to load in an older runtime), or with a reduced ONNX Runtime "
                "build made from the operator list beside it (ONNX Runtime's build script, "
                f"`--include_ops_by_config`). Add `BertTokenizer.kt` to the app's sources; `{tables}` is what it "
                "reads.")
    return _readme("Android", facts, code, "int8", [
        f"Copy the model and data files into `app/src/main/assets/`. {load}",
        input_step or f"The model takes the text itself and tokenizes it as tokenizer.json does, up to {max_length} "
                      "tokens.",
    ], ["", "Execution providers, as ONNX Runtime's own checks judge the int8 graphs (nodes each provider would "
            "take, with the input shapes fixed):", ""] + verdicts)


def _readme(platform: str, facts: FolderFacts, code: str, variant: str, steps: list[str],
            notes: list[str] = ()) -> str:
    lines = [f"# pocketbert model for {platform}", "",
             f"Exported by pocketbert; {variant} weights. On {facts.n_examples} examples of the eval set the model "
             "scored " + ", ".join(f"{k} {v:.4f}" for k, v in facts.metrics.items() if isinstance(v, float))
             + " on its own runtime.", "", "| file | what it is |", "|---|---|"]
    lines += [f"| `{name}` | {what} |" for name, what in facts.files.items()]
    lines += ["", "## Set-up", ""] + [f"{i}. {s}" for i, s in enumerate(steps, 1)] + list(notes)
    if facts.proven or facts.needs_device:
        lines += ["", "## Proven by pocketbert, and what needs a device", ""]
        lines += [f"- Proven at export: {p}" for p in facts.proven]
        lines += [f"- Needs a device (not done here): {n}" for n in facts.needs_device]
    lines += ["", "## Code", "", code] + list(facts.alternative) + [""]
    return "\n".join(lines)


def swift_coreai_code(task: str, asset_stem: str, max_length: int, lengths: tuple[int, ...],
                      values: dict | None = None) -> str:
    """The task's Core AI Swift (templates/<task>/ios_coreai.swift.txt), with the header that says which calls are
    from Apple's documentation and which are unverified, and the shared loading code."""
    return fill(template("ios_coreai.swift.txt", task), header=template("ios_coreai_header.swift.txt"),
                load=fill(template("ios_coreai_load.swift.txt"), asset_stem=asset_stem),
                lengths=", ".join(map(str, lengths)), max_length=max_length, **(values or {}))


def ios_coreai_readme(facts: FolderFacts, asset_stem: str, weights: str, resources: str, lengths: tuple[int, ...],
                      extra_steps: list[str] = (), placement: list[str] = ()) -> str:
    code = swift_coreai_code(facts.task, asset_stem, facts.max_length, lengths, facts.values)
    return _readme("iOS 27 (Core AI)", facts, code, weights, [
        f"Add `{asset_stem}.aimodel` to the Xcode 27 project, app target ticked.",
        "Compile it ahead of time with Apple's `coreai-build` command-line tool (Xcode 27; Apple's article "
        "\"Compiling Core AI models ahead of time\"): it turns the `.aimodel` into `.aimodelc` assets, one per device "
        "architecture, which the app bundles, so the device only generates the executable code at first load. "
        "Without it the app specializes the `.aimodel` itself the first time (slower, once: Core AI caches the "
        "result). The tool's flags and the Xcode build step that runs it are in that article; pocketbert did not "
        "run them (no Apple SDK here). The code takes either form.",
        *_resources_steps(resources),
        f"The program has one function per length, `main_len<n>` for n in {', '.join(map(str, lengths))}: the "
        "code pads (mask 0) to the smallest that fits, a static shape each, which the Neural Engine runs. It "
        "needs iOS 27 / macOS 27; for earlier systems take the Core ML folder (`export ios` without `--target`).",
        *extra_steps,
    ], list(placement))
