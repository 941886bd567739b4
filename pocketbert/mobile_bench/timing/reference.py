"""The models the student is compared with, exported the same way as the student and cached.

- BERT-base: without hub access it is built from its config (12 layers, hidden 768, 12 heads, FFN 3072,
  the uncased vocabulary) with seeded random weights: latency does not depend on weight values.
- A DistilBERT-shaped student of BERT-base (6 of its 12 layers), built the same way: the architecture check
  that a half-depth student runs in about half the time.
- The run's own teacher, when it is not BERT-base.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import torch

from pocketbert.core.run.cache_dir import building, cache_root
from pocketbert.export.programs.onnx_export import ONNX_OPSET, export_onnx, quantize_int8
from pocketbert.core.run.atomic_folder import atomic_folder
from pocketbert.core.run.run_files import EXECUTORCH_FP32, EXECUTORCH_INT8, MODEL_CONFIG, ONNX_FP32, ONNX_INT8

BERT_BASE_CONFIG = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)
HALF_DEPTH_LAYERS = 6  # DistilBERT: every other layer of BERT-base
PYTORCH_DIR = "pytorch"
PTE_MAX_SEQUENCE = 512  # BERT-base's ExecuTorch programs take any length its positions allow
DESCRIBE_FILE = "describe.txt"
INT8_FORM = "dynamic int8, per channel, every weight product"  # part of the cache key: a change rebuilds
PROGRAMS_SUFFIX = "-executorch"  # an ONNX entry's name with it: the entry of its ExecuTorch programs
# The largest reference bench times in a sitting: BERT-large's 335 million parameters, with room for its heads.
MAX_REFERENCE_PARAMETERS = 400_000_000


def checked_reference(source: str | None, task, student_vocab_size: int) -> str | None:
    """The --reference checkpoint checked before any work, and what it is for the cache key (a local folder by its
    files' sha256, so a folder changed in place is exported again): it exists, is a BERT-family encoder that reads
    every token id the student's vocabulary gives, and is a size a bench can finish."""
    from pocketbert.core.students.architectures import BERT_FAMILY_MODEL_TYPES
    from pocketbert.core.errors import ModelError
    from pocketbert.core.files import read_json_object
    from pocketbert.core.run.manifest import sha256_of
    from pocketbert.core.students.models import resolve_model_source

    if source is None:
        return None
    local = Path(source).expanduser()
    if source.startswith((".", "/", "~")) and not local.exists():
        raise ModelError(f"--reference {source} does not exist: name a save_pretrained folder or a hub name")
    resolved = resolve_model_source(source)
    if not Path(resolved).is_dir():
        return resolved  # a hub name: checked when it is loaded
    config = read_json_object(Path(resolved) / MODEL_CONFIG, ModelError, "re-save the reference model",
                              "reference config.json")
    where = f"--reference {source}"
    if config.get("model_type") not in BERT_FAMILY_MODEL_TYPES:
        raise ModelError(f"{where} is a {config.get('model_type') or 'model of unknown type'} checkpoint; the "
                         f"reference is a BERT-family encoder ({', '.join(BERT_FAMILY_MODEL_TYPES)})")
    numbers = {k: config.get(k) for k in ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size")}
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in numbers.values()):
        raise ModelError(f"{where}: config.json must give {', '.join(numbers)} as positive whole numbers")
    if numbers["vocab_size"] < student_vocab_size:
        raise ModelError(f"{where} reads {numbers['vocab_size']} token ids and the student's vocabulary has "
                         f"{student_vocab_size}: name a reference with the student's vocabulary")
    hidden, layers = numbers["hidden_size"], numbers["num_hidden_layers"]
    parameters = numbers["vocab_size"] * hidden + layers * (4 * hidden * hidden + 2 * hidden * numbers["intermediate_size"])
    if parameters > MAX_REFERENCE_PARAMETERS:
        raise ModelError(f"{where} has about {parameters / 1e6:.0f} million parameters; a reference is at most "
                         f"{MAX_REFERENCE_PARAMETERS / 1e6:.0f} million (BERT-large's size): name a smaller one")
    return f"{resolved} sha256 {sha256_of(Path(resolved))}"


def _from_config(task, layers: int):
    from transformers import BertConfig

    torch.manual_seed(0)
    config = BertConfig(**{**BERT_BASE_CONFIG, "num_hidden_layers": layers}, **task.model_kwargs())
    config._attn_implementation = "eager"
    return task.auto_model_class().from_config(config).eval()


def _cache_key(*parts) -> str:
    import importlib.metadata

    import onnxruntime
    import transformers

    try:
        executorch = importlib.metadata.version("executorch")
    except importlib.metadata.PackageNotFoundError:
        executorch = None
    key = json.dumps([*parts, ONNX_OPSET, torch.__version__, transformers.__version__, onnxruntime.__version__,
                      executorch, INT8_FORM], sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _entry(kind: str, key: str) -> Path:
    return cache_root() / "reference" / f"{kind}-{key}"


def _filled(folder: Path, wanted: list[str], fill) -> Path:
    """`folder` holding the files `wanted` names, filled once by fill(a temporary folder renamed into place): a
    process that finds another filling it waits for it, then finds it whole."""
    if not all((folder / name).is_file() for name in wanted):
        with building(folder):
            if not all((folder / name).is_file() for name in wanted):  # another process may have built it meanwhile
                with atomic_folder(folder) as tmp:
                    fill(tmp)
    return folder


def _cached_export(folder: Path, build, with_int8: bool, with_pytorch: bool) -> tuple[Path, str]:
    """The cache folder `folder` holding model.onnx (and model.int8.onnx, a Hugging Face folder), built once."""
    wanted = [ONNX_FP32, DESCRIBE_FILE, *([ONNX_INT8] if with_int8 else []),
              *([f"{PYTORCH_DIR}/{MODEL_CONFIG}"] if with_pytorch else [])]
    _filled(folder, wanted, lambda tmp: _build_into(tmp, build, with_int8, with_pytorch))
    return folder, (folder / DESCRIBE_FILE).read_text()


def _build_into(tmp: Path, build, with_int8: bool, with_pytorch: bool) -> None:
    model, task, describe = build()
    export_onnx(model, task, tmp / ONNX_FP32)
    if with_int8:  # all products in int8, as the student's export chooses under its latency budget
        quantize_int8(tmp / ONNX_FP32, tmp / ONNX_INT8, keep_fp32=[])
    if with_pytorch:
        model.save_pretrained(tmp / PYTORCH_DIR)
    (tmp / DESCRIBE_FILE).write_text(describe)


def programs_folder(onnx_folder: Path) -> Path:
    """The entry of a reference's ExecuTorch programs, beside its ONNX entry: an entry and a lock of their own, so a
    bench that times no ExecuTorch program waits only for the ONNX models another bench is building, not for the
    programs' minutes of export, and an entry built without them is never built again to add them."""
    return onnx_folder.with_name(onnx_folder.name + PROGRAMS_SUFFIX)


def _cached_programs(onnx_folder: Path, build) -> Path:
    """programs_folder(onnx_folder) holding the ExecuTorch programs in fp32 and int8 of the model build() gives (the
    one exported into onnx_folder), built once."""
    from pocketbert.core.students.architectures import BERT_FAMILY
    from pocketbert.export.programs.executorch_export import export_pte

    def fill(tmp: Path) -> None:
        model, task, _ = build()
        for name, int8 in ((EXECUTORCH_FP32, False), (EXECUTORCH_INT8, True)):
            export_pte(model, task, BERT_FAMILY, tmp / name,
                       min(PTE_MAX_SEQUENCE, model.config.max_position_embeddings), int8)

    return _filled(programs_folder(onnx_folder), [EXECUTORCH_FP32, EXECUTORCH_INT8], fill)


def _bert_base_entry(task, source: str | None, identity: str | None) -> tuple[Path, Callable[[], tuple]]:
    """BERT-base's cache folder and the function that builds the model: real weights when `source` names a
    checkpoint, else from its config (seeded: the same weights each time). identity: what `source` is
    (checked_reference), keyed in place of its name."""
    from pocketbert.core.students.models import load_for_task

    def build():
        if source:
            return load_for_task(source, task), task, f"{source} (pretrained weights)"
        return _from_config(task, BERT_BASE_CONFIG["num_hidden_layers"]), task, \
            "bert-base architecture from its config (random weights)"

    key = _cache_key(task.name, len(task.label_names), identity or source, BERT_BASE_CONFIG)
    return _entry("bert-base", key), build


def bert_base(task, source: str | None = None, identity: str | None = None) -> tuple[Path, str]:
    """BERT-base with the task's head, in ONNX (fp32, int8) and as a Hugging Face folder (_bert_base_entry)."""
    folder, build = _bert_base_entry(task, source, identity)
    return _cached_export(folder, build, with_int8=True, with_pytorch=True)


def bert_base_folder(task, source: str | None = None, identity: str | None = None) -> Path:
    """Where bert_base() keeps its entry, built or not."""
    return _bert_base_entry(task, source, identity)[0]


def bert_base_programs(task, source: str | None = None, identity: str | None = None) -> Path:
    """The folder of BERT-base's ExecuTorch programs (model.pte, model.int8.pte), of the model bert_base() exports
    to ONNX."""
    folder, build = _bert_base_entry(task, source, identity)
    return _cached_programs(folder, build)


def half_depth_student(task) -> tuple[Path, str]:
    """BERT-base's architecture with 6 layers: the DistilBERT student shape, for the architecture check."""
    def build():
        return _from_config(task, HALF_DEPTH_LAYERS), task, \
            f"{HALF_DEPTH_LAYERS}-layer student of BERT-base from its config (random weights)"

    return _cached_export(_entry("half-depth", _cache_key(task.name, len(task.label_names), HALF_DEPTH_LAYERS,
                                                          BERT_BASE_CONFIG)), build, with_int8=False,
                          with_pytorch=False)


def teacher(task, teacher_dir: Path, teacher_sha256: str) -> tuple[Path, str]:
    """The run's teacher exported like the student, keyed by its weights' digest."""
    from pocketbert.core.students.models import load_for_task

    def build():
        return load_for_task(str(teacher_dir), task), task, f"the run's teacher ({teacher_dir})"

    return _cached_export(_entry("teacher", _cache_key(task.name, len(task.label_names), teacher_sha256)), build,
                          with_int8=True, with_pytorch=False)
