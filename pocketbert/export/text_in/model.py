"""Text-in models for ONNX Runtime: the tokenizer inside the graph (onnxruntime-extensions), so an app passes
a string (QA: a question and a context) and gets logits (QA: start and end logits, with the token types and each
token's code-point offsets in its text, with which it cuts the answer out of the context), and ships no tokenizer
of its own.

The tokenizer graph (text_in/text_tokenizer.py) is built from the exported tokenizer.json and gives its ids; it runs
in front of an exported graph (fp32 or int8), whose inputs gain a batch axis of one. The model needs the
extensions' custom op library: `SessionOptions.register_custom_ops_library(onnxruntime_extensions.get_library_path())`
in Python, `registerCustomOpLibrary(OrtxPackage.getLibraryPath())` on Android.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pocketbert.core.tasks.registry import text_in_string
from pocketbert.core.errors import ExportError, require
from pocketbert.export.text_in.session import text_session
from pocketbert.export.text_in.text_tokenizer import CONTRIB, GOLDEN_OPSET, PREFIX, tokenizer_graph

EXTRA_TRAILING_DIMS = {"offset_mapping": [2]}
GOLDEN_KEYS = {"input_ids": "ids", "token_type_ids": "token_type_ids", "offset_mapping": "offsets"}


def build_text_in(tokenizer_json: Path, model_path: Path, target: Path, task, max_length: int) -> Path:
    """tokenizer graph -> (a batch axis of one) -> the exported graph, saved as one model; the task's extra
    outputs (QA: the token ids and types) are the model's own inputs, returned as they were fed."""
    onnx = require("onnx", "export")
    from onnx import TensorProto, helper

    model = onnx.load(str(model_path))
    graph = model.graph
    opsets = {o.domain or "": o.version for o in model.opset_import}
    tokenizer = tokenizer_graph(tokenizer_json, task.text_in_inputs, max_length, opsets[""], model.ir_version,
                                offsets="offset_mapping" in task.text_in_extra_outputs)
    model_inputs = [i.name for i in graph.input]
    made = {o.name for o in tokenizer.graph.output}
    missing = [name for name in model_inputs if PREFIX + name not in made]
    if missing:
        raise ExportError(f"the tokenizer graph gives no {', '.join(missing)} for {model_path.name}")
    axis = helper.make_tensor(PREFIX + "batch_axis", TensorProto.INT64, [1], [0])
    batched = model_inputs + [name for name in task.text_in_extra_outputs if name not in model_inputs]
    unsqueeze = [helper.make_node("Unsqueeze", [PREFIX + name, axis.name], [name], name=f"{PREFIX}batch_{name}")
                 for name in batched]
    extra = [helper.make_tensor_value_info(name, TensorProto.INT64, [1, "tokens"] + EXTRA_TRAILING_DIMS.get(name, []))
             for name in task.text_in_extra_outputs]
    merged_graph = helper.make_graph(
        list(tokenizer.graph.node) + unsqueeze + list(graph.node), f"{graph.name}_text_in",
        list(tokenizer.graph.input), list(graph.output) + extra,
        list(tokenizer.graph.initializer) + [axis] + list(graph.initializer), value_info=list(graph.value_info))
    opsets[CONTRIB] = 1
    merged = helper.make_model(merged_graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                               ir_version=model.ir_version, producer_name="pocketbert")
    onnx.save(merged, str(target))
    return target


def text_in_forward(path: Path, task):
    """Examples in, (the features the model's own tokenizer made, their logits) out: as an app runs it."""
    session = text_session(path)
    names = [o.name for o in session.get_outputs()]

    def run(examples: list) -> tuple[list, list[np.ndarray]]:
        features, logits = [], []
        for index, example in enumerate(examples):
            outputs = dict(zip(names, session.run(None, task.text_in_feeds(example))))
            feature, row = task.text_in_result(index, outputs)
            features.append(feature)
            logits.append(row)
        return features, logits

    run.runtime = "onnxruntime + extensions"
    return run


def golden_mismatches(tokenizer_json: Path, golden: dict, task, max_length: int) -> list[str]:
    """The golden probes on which the text-in models' tokenizer graph gives other ids (and, for pairs, token
    types and offsets) than the golden file: texts for a one-text task, pairs for a question-and-context task."""
    offsets = "offset_mapping" in task.text_in_extra_outputs
    graph = tokenizer_graph(tokenizer_json, task.text_in_inputs, max_length, GOLDEN_OPSET, 8, offsets)
    session = text_session(graph.SerializeToString())
    wrong = []
    if len(task.text_in_inputs) == 1:
        for row in golden["texts"]:
            ids, = session.run([PREFIX + "input_ids"], {task.text_in_inputs[0]: text_in_string(row["text"])})
            if ids.tolist() != row["ids"]:
                wrong.append(row["probe"])
    else:
        for row in golden.get("pairs", []):
            feeds = dict(zip(task.text_in_inputs, (text_in_string(row["question"]), text_in_string(row["context"]))))
            names = ["input_ids", "token_type_ids"] + (["offset_mapping"] if offsets else [])
            got = dict(zip(names, session.run([PREFIX + name for name in names], feeds)))
            if any(got[name].tolist() != row[GOLDEN_KEYS[name]] for name in names):
                wrong.append(row["probe"])
    return wrong
