"""Teacher outputs computed once per example, kept on disk in fp16, reused across epochs and runs.

An entry is keyed by the teacher's files, the exact token ids of the training features and the hidden
layers the loss needs, so a change to any of them makes a new entry. Entries are written into a temporary
folder and renamed into place when complete; a failed write (a full disk) leaves no entry. The whole cache
is bounded: old entries are evicted to make room, and an entry larger than the bound is not cached at all.

Shards are plain .npy arrays. A run reads an entry back whole, onto the GPU when it fits there (else into host
memory), and gathers each batch's rows by index on the device. The teacher runs in the training step's
precision (bf16 on a GPU), which is part of the key, so cached targets are the ones an uncached step would
compute.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pocketbert.core.run import storage
from pocketbert.core.run.cache_dir import cache_root
from pocketbert.core.errors import PocketbertError
from pocketbert.core.run.manifest import path_size
from pocketbert.core.run.atomic_folder import atomic_folder, owner_alive
from pocketbert.core.run.storage import StorageError
from pocketbert.train import checkpoint, distributed, precision

CACHE_SUBDIR = "teacher-outputs"
DEFAULT_LIMIT_MB = 4096
SHARD_BYTES = 64 * 1024 * 1024  # outputs are flushed to disk in files of about this size
META = "meta.json"
BYTES_PER_VALUE = 2  # fp16
INDEX_BYTES_PER_FEATURE = 4 * 8  # feature, logits start, hidden start, length: int64 each
FORMAT = 2  # memory-mapped .npy shards; entries of another format get other keys and age out


TEACHER_LOGITS = "teacher_logits"  # names of the cached outputs among a training batch's tensors
TEACHER_HIDDEN = "teacher_hidden_"


def teacher_targets(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    """(logits, hidden states or None) that TeacherOutputs.as_batch put into a training batch."""
    hidden = [batch[f"{TEACHER_HIDDEN}{k}"] for k in range(len(batch)) if f"{TEACHER_HIDDEN}{k}" in batch]
    return batch[TEACHER_LOGITS], hidden or None


class CacheError(PocketbertError):
    """The teacher-output cache could not be written."""


@dataclass
class TeacherOutputs:
    """Every feature's teacher outputs, concatenated: logits [features, classes] (or [tokens, 2] for per-token
    outputs) and hidden states [tokens, layers, hidden], with each feature's first row and row count.

    Held where the training step runs (on the GPU when they fit, else in host memory) and gathered into a padded
    batch there, by index arithmetic alone: no per-row Python loop, no host sync.
    """

    logits: torch.Tensor
    hidden: torch.Tensor | None
    logits_start: torch.Tensor  # [features] int64
    hidden_start: torch.Tensor
    lengths: torch.Tensor
    per_token: bool

    def batch(self, idx: list[int], length: int, device) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        from pocketbert.train.trainer import host_to_device

        device = torch.device(device)
        rows = host_to_device(torch.as_tensor(idx, dtype=torch.int64), self.logits.device)
        if self.per_token:
            logits = self._gather(self.logits, self.logits_start[rows], self.lengths[rows], length)
        else:
            logits = self.logits[self.logits_start[rows]]
        logits = self._to(logits, device)
        if self.hidden is None:
            return logits, None
        hidden = self._to(self._gather(self.hidden, self.hidden_start[rows], self.lengths[rows], length), device)
        return logits, list(hidden.unbind(dim=2))  # [batch, length, layers, hidden] -> one per layer

    def as_batch(self, idx: list[int], length: int, device) -> dict[str, torch.Tensor]:
        """The rows of `idx` as extra batch tensors (trainer.train's batch_extras); teacher_targets reads them."""
        logits, hidden = self.batch(idx, length, device)
        return {TEACHER_LOGITS: logits, **{f"{TEACHER_HIDDEN}{k}": h for k, h in enumerate(hidden or [])}}

    @staticmethod
    def _gather(flat: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, length: int) -> torch.Tensor:
        """[batch, length, ...] rows of `flat`, each feature's from its start, zero past its own length."""
        positions = torch.arange(length, device=flat.device)
        valid = positions[None, :] < lengths[:, None]
        index = (starts[:, None] + positions[None, :]).clamp_max(flat.shape[0] - 1)
        out = flat[index]
        return out * valid.view(*valid.shape, *([1] * (out.ndim - 2))).to(out.dtype)

    @staticmethod
    def _to(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        """fp16 over the bus, widened on the device."""
        if tensor.device.type != device.type:  # "cuda" and "cuda:0" are one device
            from pocketbert.train.trainer import host_to_device

            tensor = host_to_device(tensor, device)
        return tensor.float()

    def __len__(self) -> int:
        return len(self.lengths)

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Feature i's logits and hidden states as stored (fp16), for inspection and tests."""
        n, start = int(self.lengths[i]), int(self.logits_start[i])
        logits = self.logits[start:start + n] if self.per_token else self.logits[start]
        hidden = None if self.hidden is None else self.hidden[int(self.hidden_start[i]):int(self.hidden_start[i]) + n]
        return logits.cpu().numpy(), None if hidden is None else hidden.cpu().numpy()

    def to(self, device) -> "TeacherOutputs":
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return TeacherOutputs(move(self.logits), move(self.hidden), move(self.logits_start), move(self.hidden_start),
                              move(self.lengths), self.per_token)

    @staticmethod
    def of_logits(logits: np.ndarray) -> "TeacherOutputs":
        """One logits row per feature, computed elsewhere and held in memory (a target that is no teacher's: the
        full student's, for a fitted vocabulary's recovery)."""
        rows = torch.arange(len(logits), dtype=torch.int64)
        return TeacherOutputs(torch.from_numpy(np.ascontiguousarray(logits)), None, rows, torch.zeros_like(rows),
                              torch.ones_like(rows), per_token=False)

    @staticmethod
    def joined(parts: list["TeacherOutputs"]) -> "TeacherOutputs":
        """The parts' rows one after another, as for features listed in the same order."""
        logits_offset = hidden_offset = 0
        logits_starts, hidden_starts = [], []
        for p in parts:
            logits_starts.append(p.logits_start + logits_offset)
            hidden_starts.append(p.hidden_start + hidden_offset)
            logits_offset += p.logits.shape[0]
            hidden_offset += 0 if p.hidden is None else p.hidden.shape[0]
        hidden = None if any(p.hidden is None for p in parts) else torch.cat([p.hidden for p in parts])
        return TeacherOutputs(torch.cat([p.logits for p in parts]), hidden, torch.cat(logits_starts),
                              torch.cat(hidden_starts), torch.cat([p.lengths for p in parts]), parts[0].per_token)


def entry_key(teacher_sha: str, task_name: str, targets: list[int] | None, features: list, arithmetic: str) -> str:
    """The entry's name: the teacher, the task, the hidden layers, the token ids, and the precision the teacher
    ran in (bf16 targets are not fp32 targets: a CPU run and a GPU run never share an entry)."""
    from pocketbert.core.tasks.registry import features_digest

    digest = features_digest(features, with_targets=False)
    digest.update(json.dumps([teacher_sha, task_name, targets, FORMAT, arithmetic]).encode())
    return digest.hexdigest()[:24]


def estimate_bytes(features: list, n_logits_per_token: int | None, n_classes: int, n_targets: int, hidden: int) -> int:
    tokens = sum(len(f.input_ids) for f in features)
    logits = tokens * n_logits_per_token if n_logits_per_token else len(features) * n_classes
    return (logits + tokens * n_targets * hidden) * BYTES_PER_VALUE + len(features) * INDEX_BYTES_PER_FEATURE


def _write_shard(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Each array as <path>.<name>.npy, flushed to the disk."""
    if checkpoint.fault_asked("disk_full_in_cache", distributed.rank()):
        raise OSError(errno.ENOSPC, "No space left on device")
    for name, array in arrays.items():
        with open(f"{path}.{name}.npy", "wb") as handle:
            np.save(handle, array)
            handle.flush()
            os.fsync(handle.fileno())


def _evict_for(root: Path, needed: int, limit: int, keep: Path) -> None:
    """Remove least recently used entries until `needed` more bytes fit under `limit`."""
    entries = sorted((p for p in root.iterdir() if p.is_dir() and (p / META).is_file() and p != keep),
                     key=lambda p: (p / META).stat().st_mtime)
    total = sum(path_size(p) for p in entries)
    while entries and total + needed > limit:
        oldest = entries.pop(0)
        total -= path_size(oldest)
        shutil.rmtree(oldest, ignore_errors=True)


def _compute(teacher, task, features, pad_id, targets, device, batch_size, out_dir: Path,
             desc: str = "teacher outputs") -> None:
    """Run the teacher over `features`, writing shards to out_dir.

    A shard holds its rows' logits and hidden states concatenated along the first axis (a sentence's logits
    are one row, a per-token output one row per token), and an index: feature, logits start, hidden start,
    length.
    """
    from tqdm.auto import tqdm

    device = torch.device(device)
    order = sorted(range(len(features)), key=lambda i: len(features[i].input_ids))
    rows: dict[str, list] = {"logits": [], "hidden": [], "index": []}
    offsets = {"logits": 0, "hidden": 0}
    buffered = 0
    shard = 0

    def flush():
        nonlocal rows, offsets, buffered, shard
        if rows["index"]:
            arrays = {"index": np.asarray(rows["index"], dtype=np.int64), "logits": np.concatenate(rows["logits"])}
            if rows["hidden"]:
                arrays["hidden"] = np.concatenate(rows["hidden"])
            _write_shard(out_dir / f"shard-{shard:05d}", arrays)
            shard += 1
            rows, offsets, buffered = {"logits": [], "hidden": [], "index": []}, {"logits": 0, "hidden": 0}, 0

    with torch.no_grad(), precision.autocast(device):
        for start in tqdm(range(0, len(order), batch_size), desc=desc, unit="batch",
                          disable=not distributed.is_main()):
            idx = order[start:start + batch_size]
            batch = task.collate([features[i] for i in idx], pad_id)
            inputs = {k: torch.from_numpy(batch[k]).to(device) for k in task.input_names}
            out = teacher(**inputs, output_hidden_states=targets is not None)
            logits = task.logits(out).float().cpu().numpy().astype(np.float16)
            hidden = (torch.stack([out.hidden_states[k] for k in targets], dim=2).float().cpu().numpy()
                      .astype(np.float16) if targets is not None else None)
            lengths = batch["attention_mask"].sum(axis=1)
            for row, i in enumerate(idx):
                n = int(lengths[row])
                row_logits = logits[row:row + 1] if logits.ndim == 2 else logits[row, :n]
                rows["index"].append((i, offsets["logits"], offsets["hidden"], n))
                rows["logits"].append(row_logits)
                offsets["logits"] += len(row_logits)
                buffered += row_logits.nbytes
                if hidden is not None:
                    rows["hidden"].append(hidden[row, :n])
                    offsets["hidden"] += n
                    buffered += hidden[row, :n].nbytes
            if buffered >= SHARD_BYTES:
                flush()
    flush()


def _load(entry: Path, n_features: int, with_hidden: bool, per_token: bool, device) -> TeacherOutputs:
    """The entry's shards concatenated, on the training device when they fit there (else in host memory)."""
    logits_parts, hidden_parts = [], []
    logits_start = np.full(n_features, -1, dtype=np.int64)
    hidden_start = np.full(n_features, -1, dtype=np.int64)
    lengths = np.zeros(n_features, dtype=np.int64)
    logits_offset = hidden_offset = 0
    try:
        for index_file in sorted(entry.glob("shard-*.index.npy")):
            stem = str(index_file)[: -len(".index.npy")]
            index = np.load(index_file)
            logits_parts.append(np.load(f"{stem}.logits.npy", mmap_mode="c"))
            feature, lstart, hstart, n = index.T
            logits_start[feature] = lstart + logits_offset
            hidden_start[feature] = hstart + hidden_offset
            lengths[feature] = n
            logits_offset += len(logits_parts[-1])
            if with_hidden:
                hidden_parts.append(np.load(f"{stem}.hidden.npy", mmap_mode="c"))
                hidden_offset += len(hidden_parts[-1])
    except (OSError, ValueError, IndexError) as exc:
        raise CacheError(f"the teacher-output cache entry {entry} is unreadable ({exc}): delete it and run again") \
            from None
    if (logits_start < 0).any() or (with_hidden and (hidden_start < 0).any()) or not logits_parts:
        raise CacheError(f"the teacher-output cache entry {entry} is incomplete: delete it and run again")

    def joined(parts):
        return torch.from_numpy(parts[0]) if len(parts) == 1 else torch.cat([torch.from_numpy(p) for p in parts])

    outputs = TeacherOutputs(joined(logits_parts), joined(hidden_parts) if with_hidden else None,
                             torch.from_numpy(logits_start), torch.from_numpy(hidden_start), torch.from_numpy(lengths),
                             per_token)
    return outputs.to(device) if fits_on_device(entry, device) else outputs


DEVICE_SHARE = 0.5  # of the GPU's free memory the cached outputs may take; the rest is the training step's


def fits_on_device(entry: Path, device) -> bool:
    """Whether the entry fits on a GPU beside training (the CPU reads it from host memory where it is)."""
    device = torch.device(device)
    if device.type != "cuda":
        return False
    free, _ = torch.cuda.mem_get_info(device)
    return path_size(entry) <= DEVICE_SHARE * free


def teacher_outputs(teacher, task, features: list, pad_id: int, targets: list[int] | None, teacher_sha: str,
                    device, limit_mb: float = DEFAULT_LIMIT_MB, batch_size: int = 64,
                    root: Path | None = None, desc: str = "teacher outputs") -> tuple[TeacherOutputs | None, dict]:
    """Cached teacher outputs for `features` (computing them on a miss), and a report of the cache's use.

    Returns (None, report) when caching is off (limit 0) or the entry would not fit under the limit:
    the caller then runs the teacher at every step.
    """
    root = (root or cache_root()) / CACHE_SUBDIR
    limit = int(float(limit_mb) * 1024 * 1024)
    config = teacher.config
    n_classes = len(getattr(task, "label_names", []) or [])
    per_token = len(task.output_names) if task.per_token_outputs else None
    needed = estimate_bytes(features, per_token, n_classes, len(targets or []), config.hidden_size)
    key = entry_key(teacher_sha, task.name, targets, features, precision.precision_for(torch.device(device)))
    entry = root / key
    report = {"path": str(entry), "limit_bytes": limit, "entry_bytes_estimate": needed}
    if limit <= 0:
        return None, {**report, "used": False, "reason": "caching is off (teacher_cache_mb: 0)"}
    if needed > limit:
        return None, {**report, "used": False,
                      "reason": f"the outputs need {needed / 2**20:.0f} MB, over the cache's {limit / 2**20:.0f} MB limit"}
    if (entry / META).is_file():
        outputs = _load(entry, len(features), targets is not None, task.per_token_outputs, device)
        try:
            os.utime(entry / META)  # most recently used
        except OSError:  # a read-only cache still serves its entries; only their age for eviction goes unrecorded
            pass
        return outputs, {**report, "used": True, "hit": True, "entry_bytes": path_size(entry),
                         "total_bytes": path_size(root)}
    try:
        root.mkdir(parents=True, exist_ok=True)
        for stale in root.glob(".*.tmp-*"):  # left by a run that was killed while filling the cache
            if not owner_alive(stale):
                shutil.rmtree(stale, ignore_errors=True)
        _evict_for(root, needed, limit, keep=entry)
        with atomic_folder(entry) as tmp:
            _compute(teacher, task, features, pad_id, targets, device, batch_size, tmp, desc)
            (tmp / META).write_text(json.dumps({"features": len(features), "targets": targets, "format": FORMAT,
                                                "created": time.time()}))
    except (OSError, StorageError) as exc:
        fault = storage.fault_behind(exc)
        if fault is not None and fault.errno in (errno.ENOSPC, errno.EDQUOT):
            raise CacheError(
                f"the disk filled up while writing teacher outputs ({needed / 2**20:.0f} MB) to {root}: free space, "
                "point POCKETBERT_CACHE at another disk, or set distill.teacher_cache_mb=0 to skip the cache"
            ) from None
        # strerror is None for an OSError raised with a message only (numpy's short writes): say what we know.
        reason = (fault.strerror if fault is not None and fault.strerror else None) or str(exc) or type(exc).__name__
        raise CacheError(f"cannot write the teacher-output cache in {root} ({reason}): point POCKETBERT_CACHE at a "
                         "writable folder, or set distill.teacher_cache_mb=0 to skip the cache") from None
    outputs = _load(entry, len(features), targets is not None, task.per_token_outputs, device)
    return outputs, {**report, "used": True, "hit": False, "entry_bytes": path_size(entry),
                     "total_bytes": path_size(root)}


def teacher_outputs_once(teacher, task, features: list, pad_id: int, targets: list[int] | None, teacher_sha: str,
                         device, limit_mb: float = DEFAULT_LIMIT_MB, batch_size: int = 64,
                         root: Path | None = None, desc: str = "teacher outputs") -> tuple[TeacherOutputs | None, dict]:
    """teacher_outputs for every process of a torchrun: filled by process 0 where all processes share the
    cache folder, else by the first process of each machine; the others wait, then read it."""
    folder = (root or cache_root()) / CACHE_SUBDIR
    shared = distributed.folder_shared(folder)
    fills = distributed.is_main() if shared else distributed.local_rank() == 0
    with distributed.first(fills, "filling the teacher-output cache"):
        outputs, report = teacher_outputs(teacher, task, features, pad_id, targets, teacher_sha, device, limit_mb,
                                          batch_size, root, desc)
    if distributed.active():
        report["filled"] = "once for all processes" if shared else "once per machine (the cache is not shared)"
    return outputs, report


def labelled_and_unlabeled(teacher, task, labelled: list, unlabeled: list, pad_id: int, targets: list[int] | None,
                           teacher_sha: str, device, limit_mb: float, batch_size: int
                           ) -> tuple[TeacherOutputs | None, dict, dict | None]:
    """Teacher outputs for labelled features followed by unlabelled ones (transfer data, rewrites), each part its
    own cache entry: a run that adds transfer data reuses the labelled rows' outputs of a run without it.
    Returns (outputs, the labelled part's report, the unlabelled part's report or None); outputs is None when
    either part is not cached."""
    outputs, report = teacher_outputs_once(teacher, task, labelled, pad_id, targets, teacher_sha, device, limit_mb,
                                           batch_size)
    if not unlabeled:
        return outputs, report, None
    extra, extra_report = teacher_outputs_once(teacher, task, unlabeled, pad_id, targets, teacher_sha, device,
                                               limit_mb, batch_size, desc="teacher labels unlabelled rows")
    if outputs is None or extra is None:
        return None, report, extra_report
    return TeacherOutputs.joined([outputs, extra]), report, extra_report
