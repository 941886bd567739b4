"""The GPU kit: what `make gpu-check` needs on a machine that reaches no registry, small enough to travel with the
working tree (the device tool carries 64 MiB in all, /work/.library/device/README.md).

    python scripts/gpu_kit.py build --out .gpu-kit [--data-dir DATA]     here, where PyPI answers
    python scripts/gpu_kit.py unpack --kit .gpu-kit --into DIR           there (gpu_check.py does it itself)

The kit holds
- site.tar.xz: the unpacked wheels of the Python packages pocketbert needs that the GPU machine's image lacks or
  holds at another version than pyproject.toml pins (KIT_PACKAGES); the image's torch, tokenizers,
  huggingface_hub, safetensors and numpy are used as they are (transformers 5.23.0 accepts them);
- model/: all-MiniLM-L6-v2's config and tokenizer files, and its weights rounded to fp16 (the fp32 file alone is
  87 MiB), stored as two byte planes: the high bytes (sign, exponent, top mantissa bits) compress by a third, the
  low bytes not at all. Unpacked, they are widened back to fp32 exactly;
- data.tar.xz: the SST-2, IMDb and SQuAD files the parts read, unchanged (IMDb's gzip re-made on unpacking);
- kit.json: what is inside, with sizes and versions.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "kit.json"
SITE_ARCHIVE = "site.tar.xz"
DATA_ARCHIVE = "data.tar.xz"
MODEL_DIR = "model"
WEIGHT_INDEX = "weights.json"
HIGH_BYTES = "weights.hi.xz"
LOW_BYTES = "weights.lo"  # noise to a compressor: stored as it is
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
DATA_FILES = ("sst2/train.tsv", "sst2/dev.tsv", "imdb/train.jsonl.gz", "squad/train-v1.1.json",
              "squad/dev-v1.1.json")
GZIPPED = ".gz"  # such a file travels decompressed (xz packs the text tighter than gzip) and is gzipped again
# The image's python3 is 3.12 (/work/.library/device/KINDS.md, "pip list, as a session saw it"); its package list
# has no pydantic, and transformers 5.17.0 against the 5.23.0 pyproject.toml pins.
DEVICE_PYTHON = "3.12"
DEVICE_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
# click too: a few kB, and the CLI is what every part runs.
KIT_PACKAGES = ("transformers", "pydantic", "pydantic-core", "annotated-types", "typing-inspection",
                "typing-extensions", "click")
DEVICE_CALL_LIMIT_MIB = 64  # a device call's working tree and carried paths together


# ------------------------------------------------------------------------------------------------ weights

def pack_weights(weights_file: Path, into: Path) -> dict:
    """The weights as fp16 in two byte planes, and an index of names and shapes in file order."""
    import numpy as np
    from safetensors.numpy import load_file

    tensors = load_file(str(weights_file))
    halves = [np.ascontiguousarray(t, dtype=np.float32).astype(np.float16).reshape(-1) for t in tensors.values()]
    planes = np.concatenate(halves).view(np.uint8).reshape(-1, 2)  # little-endian: [low byte, high byte]
    (into / HIGH_BYTES).write_bytes(lzma.compress(planes[:, 1].tobytes(), preset=9 | lzma.PRESET_EXTREME))
    (into / LOW_BYTES).write_bytes(planes[:, 0].tobytes())
    index = [{"name": name, "shape": list(t.shape)} for name, t in tensors.items()]
    (into / WEIGHT_INDEX).write_text(json.dumps(index) + "\n")
    widened = np.concatenate(halves).astype(np.float32)
    original = np.concatenate([np.asarray(t, dtype=np.float32).reshape(-1) for t in tensors.values()])
    return {"tensors": len(index), "parameters": int(original.size),
            "max_abs_change_from_fp16": float(np.max(np.abs(widened - original)))}


def unpack_weights(kit_model: Path, weights_file: Path) -> None:
    """The fp16 planes widened (exactly) to an fp32 safetensors file."""
    import numpy as np
    from safetensors.numpy import save_file

    high = np.frombuffer(lzma.decompress((kit_model / HIGH_BYTES).read_bytes()), dtype=np.uint8)
    low = np.frombuffer((kit_model / LOW_BYTES).read_bytes(), dtype=np.uint8)
    flat = np.stack([low, high], axis=1).reshape(-1).view(np.float16).astype(np.float32)
    tensors, offset = {}, 0
    for entry in json.loads((kit_model / WEIGHT_INDEX).read_text()):
        size = int(np.prod(entry["shape"], dtype=np.int64))
        tensors[entry["name"]] = flat[offset:offset + size].reshape(entry["shape"])
        offset += size
    if offset != flat.size:
        raise ValueError(f"{kit_model}: the index covers {offset} values of {flat.size}: rebuild the kit")
    save_file(tensors, str(weights_file))


# ------------------------------------------------------------------------------------------------ archives

def xz_tar(archive: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(archive, "w:xz", preset=9) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def data_members(data_dir: Path) -> dict[str, bytes]:
    members = {}
    for name in DATA_FILES:
        path = Path(data_dir) / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: pass --data-dir, the folder holding sst2/, imdb/, squad/")
        members[name.removesuffix(GZIPPED)] = gzip.decompress(path.read_bytes()) if name.endswith(GZIPPED) \
            else path.read_bytes()
    return members


def wheel_members(wheels: list[Path]) -> dict[str, bytes]:
    """Every file of every wheel, as `pip install --target` would place it (pure unpacking: no scripts needed)."""
    members = {}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    members[info.filename] = zf.read(info)
    return members


def download_wheels(specs: list[str], into: Path) -> list[Path]:
    """The device's wheels of `specs`, through pip (no dependencies: KIT_PACKAGES names each one)."""
    platforms = [arg for p in DEVICE_PLATFORMS for arg in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", DEVICE_PYTHON, "--implementation", "cp", *platforms, "-d", str(into), *specs],
                   check=True)
    return sorted(into.glob("*.whl"))


def pinned_specs() -> list[str]:
    """KIT_PACKAGES at pyproject.toml's pins, else at the versions installed here (pydantic's own dependencies)."""
    import re
    from importlib.metadata import version

    pins = dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', (REPO_ROOT / "pyproject.toml").read_text()))
    canonical = {name.lower().replace("_", "-"): v for name, v in pins.items()}
    return [f"{name}=={canonical.get(name) or version(name)}" for name in KIT_PACKAGES]


# ------------------------------------------------------------------------------------------------ the kit

def build(out: Path, model_dir: Path, data_dir: Path, wheels: list[Path]) -> dict:
    """Writes the kit into `out` (which must not exist yet) and returns its manifest."""
    out = Path(out)
    out.mkdir(parents=True)
    (out / MODEL_DIR).mkdir()
    for name in MODEL_FILES:
        if (Path(model_dir) / name).is_file():
            shutil.copy2(Path(model_dir) / name, out / MODEL_DIR / name)
    weights = pack_weights(Path(model_dir) / "model.safetensors", out / MODEL_DIR)
    xz_tar(out / DATA_ARCHIVE, data_members(data_dir))
    if wheels:
        xz_tar(out / SITE_ARCHIVE, wheel_members(wheels))
    files = {str(p.relative_to(out)): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}
    manifest = {"what": "the GPU kit of make gpu-check (scripts/gpu_kit.py)", "model_source": str(model_dir),
                "data_source": str(data_dir), "weights": {**weights, "stored_as": "fp16 byte planes",
                                                          "unpacked_as": "fp32 (widened exactly)"},
                "wheels": [w.name for w in wheels], "files_bytes": files,
                "total_mib": round(sum(files.values()) / 2**20, 2)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _extract(tar: tarfile.TarFile, into: Path) -> None:
    """The archive's regular files and folders under `into`. Python 3.11.4 and later refuse anything else with
    the "data" filter; earlier 3.11s (Debian's 3.11.2) have no filter, so the same rule is applied here."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(into, filter="data")
        return
    root = Path(into).resolve()
    for member in tar.getmembers():
        target = (root / member.name).resolve()
        if not (member.isfile() or member.isdir()) or (target != root and root not in target.parents):
            raise ValueError(f"the kit's archive holds {member.name!r}, which is not a plain file inside it")
    tar.extractall(into)


def unpack(kit: Path, into: Path) -> dict[str, Path]:
    """The kit's site-packages folder (or None), model folder and data folder, unpacked under `into`."""
    kit, into = Path(kit), Path(into)
    site = None
    if (kit / SITE_ARCHIVE).is_file():
        site = into / "site"
        with tarfile.open(kit / SITE_ARCHIVE, "r:xz") as tar:
            _extract(tar, site)
    model = into / "model"
    model.mkdir(parents=True)
    for name in MODEL_FILES:
        if (kit / MODEL_DIR / name).is_file():
            shutil.copy2(kit / MODEL_DIR / name, model / name)
    unpack_weights(kit / MODEL_DIR, model / "model.safetensors")
    data = into / "data"
    with tarfile.open(kit / DATA_ARCHIVE, "r:xz") as tar:
        _extract(tar, data)
    for name in DATA_FILES:
        if name.endswith(GZIPPED):
            plain = data / name.removesuffix(GZIPPED)
            (data / name).write_bytes(gzip.compress(plain.read_bytes(), compresslevel=1))
            plain.unlink()
    return {"site": site, "model": model, "data": data}


def tracked_tree_mib() -> float:
    """What a device call sends of this checkout besides the carried kit: the tracked files."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    return sum(os.path.getsize(REPO_ROOT / name) for name in listed.decode().split("\0")
               if name and (REPO_ROOT / name).is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("build", help="write the kit (needs PyPI for the wheels)")
    make.add_argument("--out", type=Path, default=REPO_ROOT / ".gpu-kit")
    make.add_argument("--data-dir", type=Path, required=True)
    make.add_argument("--model", default="minilm", help="the teacher's base model: minilm or a folder")
    take = sub.add_parser("unpack", help="unpack a kit")
    take.add_argument("--kit", type=Path, required=True)
    take.add_argument("--into", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "unpack":
        print(json.dumps({k: str(v) for k, v in unpack(args.kit, args.into).items()}))
        return
    if args.out.exists():
        parser.error(f"{args.out} exists: remove it first to rebuild the kit")
    sys.path.insert(0, str(REPO_ROOT))
    from pocketbert.core.students.models import resolve_model_source

    with tempfile.TemporaryDirectory(prefix="pocketbert-gpu-kit-") as scratch:
        wheels = download_wheels(pinned_specs(), Path(scratch))
        manifest = build(args.out, Path(resolve_model_source(args.model)), args.data_dir, wheels)
    tree = tracked_tree_mib()
    total = manifest["total_mib"] + tree
    print(f"kit: {manifest['total_mib']:.1f} MiB in {args.out}; with the tracked files ({tree:.1f} MiB) "
          f"{total:.1f} MiB of the {DEVICE_CALL_LIMIT_MIB} MiB a device call carries")
    if total > DEVICE_CALL_LIMIT_MIB:
        sys.exit(f"the kit and the tracked files exceed {DEVICE_CALL_LIMIT_MIB} MiB: a device call would refuse them")


if __name__ == "__main__":
    main()
