"""What `make gpu-check`'s set-up runs inside the environment it made: a probe that everything imports and of the
device and versions (printed as one JSON line), and, for the dry run, the tiny base model.

    python scripts/gpu_check_setup.py [--tiny-base OUT_DIR]

The tiny base is a BERT of 2 layers, hidden 32, built from a config and saved like a hub checkpoint with the
packaged teacher's WordPiece tokenizer, as tests/conftest.py builds its own.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

TINY_CONFIG = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                   max_position_embeddings=128)


def make_tiny_base(folder: Path) -> Path:
    import torch
    from transformers import BertConfig, BertModel

    from pocketbert.core.students.models import PACKAGED_TEACHER, load_tokenizer, resolve_model_source

    tokenizer = load_tokenizer(resolve_model_source(PACKAGED_TEACHER))
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, **TINY_CONFIG)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def probe() -> dict:
    """The versions the parts will run with, and the GPU they will see."""
    import platform
    from importlib.metadata import version

    import torch

    import pocketbert.cli  # noqa: F401  (the CLI and its recipe layer import here, or the parts would fail later)
    from pocketbert.core.config import recipe  # noqa: F401

    gpu = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = {"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
               "multiprocessors": props.multi_processor_count, "cuda": torch.version.cuda,
               "bf16": torch.cuda.is_bf16_supported()}
    return {"python": platform.python_version(), "torch": torch.__version__, "cpu_cores": os.cpu_count(),
            "gpu": gpu, "versions": {name: version(name) for name in
                                     ("transformers", "tokenizers", "huggingface_hub", "safetensors", "numpy",
                                      "pydantic")}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny-base", type=Path, default=None)
    args = parser.parse_args()
    if args.tiny_base:
        make_tiny_base(args.tiny_base)
    print(json.dumps(probe()))
