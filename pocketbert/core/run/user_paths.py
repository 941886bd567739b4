"""Paths a user gives, resolved and checked in one place, before any work.

- `--run`: a bare name lives under runs/, anything with a separator is a path; an empty one is refused (it
  would silently become ./runs).
- `--out` of every command (output_folder, the one check): a new or empty folder, or, with `--overwrite`, an
  earlier output of the same command, which says so in its OUTPUT_MARKER file and holds only the files it
  wrote; never a link, a file, a run, a stage folder, a path in a stage or below a run's top level, an input of
  the command, or a folder that holds any of them.
- Paths recorded in a manifest or recipe are absolute, or relative to the run, so a run can be read from any
  folder; paths read back from a run never lead outside it unless the user named them.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from pocketbert.core.errors import ConfigError, DataError, RunDirError
from pocketbert.core.run.run_files import DEFAULT_RUNS_ROOT, MANIFEST

# {"made_by": "<command>"} in an output folder: what --overwrite may replace. Hidden, so that an app's build
# (Android assets, an Xcode folder reference) leaves it out.
OUTPUT_MARKER = ".pocketbert_output.json"
MADE_BY = "made_by"
WRITTEN = "files"  # in the marker of an output that records them: {path in the folder: sha256} of what it wrote
SHOWN_FOREIGN = 5  # foreign files named in a refusal; the rest are counted


def run_dir(run: str) -> Path:
    """The run directory a --run value names: a bare name under runs/, anything with a path separator a path."""
    if not run or not run.strip():
        raise ConfigError("--run is empty: give a run name (a folder under runs/) or the path of a run directory")
    return Path(run) if (os.sep in run or run.startswith(".")) else DEFAULT_RUNS_ROOT / run


def _relation(target: Path, other: Path) -> str | None:
    """How `target` stands to `other`, both resolved: the same folder, holding it, or inside it."""
    if target == other:
        return "is"
    if target in other.parents:
        return "holds"
    if other in target.parents:
        return "lies inside"
    return None


def _marker(folder: Path) -> dict:
    """An earlier output's marker, or {} when it carries no readable one."""
    marker = folder / OUTPUT_MARKER
    if marker.is_symlink() or not marker.is_file():
        return {}
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def _made_by(folder: Path) -> str | None:
    """The command an earlier output says made it, or None when it carries no readable marker."""
    made_by = _marker(folder).get(MADE_BY)
    return made_by if isinstance(made_by, str) else None


def _files_in(folder: Path) -> list[Path]:
    """Every file and link under `folder` (links not followed), the marker aside."""
    found = []
    for root, dirs, files in os.walk(folder):
        found += [Path(root) / name for name in (*files, *(d for d in dirs if os.path.islink(Path(root) / d)))]
    return sorted(p for p in found if p != folder / OUTPUT_MARKER)


def _written_by_us(folder: Path) -> dict[str, str]:
    from pocketbert.core.run.manifest import sha256_of

    return {p.relative_to(folder).as_posix(): sha256_of(p) for p in _files_in(folder)}


def _foreign_files(folder: Path, made_by: str) -> None:
    """Refuse to replace an output that holds files its command did not write (added, or changed since): they
    would be deleted with it."""
    from pocketbert.core.run.manifest import sha256_of

    recorded = _marker(folder).get(WRITTEN)
    if not isinstance(recorded, dict):
        raise RunDirError(f"{folder} was written by an older pocketbert, which did not record its files, so "
                          f"--overwrite cannot tell them from files added since: empty it yourself, or choose "
                          "another --out")
    foreign = []
    for path in _files_in(folder):
        name = path.relative_to(folder).as_posix()
        if name not in recorded:
            foreign.append(name)
        elif path.is_symlink() or sha256_of(path) != recorded[name]:
            foreign.append(f"{name} (changed since)")
    if foreign:
        more = f" and {len(foreign) - SHOWN_FOREIGN} more" if len(foreign) > SHOWN_FOREIGN else ""
        raise RunDirError(f"{folder} holds files `pocketbert {made_by}` did not write, which --overwrite would "
                          f"delete: {', '.join(foreign[:SHOWN_FOREIGN])}{more}; move them out of it, or choose "
                          "another --out")


def _stage_inside(folder: Path) -> Path | None:
    """A stage's manifest.json anywhere under `folder` (links not followed): a run or stage folder is in it."""
    for root, dirs, files in os.walk(folder):
        if (MANIFEST in files and _is_stage(Path(root))) or (OUTPUT_MARKER in files and Path(root) != folder):
            return Path(root)
    return None


def refuse_inputs(target: Path, made_by: str, inputs: Iterable[Path], option: str = "--out") -> None:
    """Refuse an output folder that is, holds or lies inside a folder the command reads."""
    where = Path(target).resolve()  # R/../R, and a link to R, are R
    for given in inputs:
        relation = _relation(where, Path(given).resolve())
        if relation:
            raise RunDirError(f"{option} {target} {relation} {given}, which `pocketbert {made_by}` reads: "
                              f"choose another {option}")


def _is_stage(folder: Path) -> bool:
    """Whether `folder` is a stage's folder (teacher/, student/, export/ ...): its manifest.json names a stage, or
    cannot be read (a damaged stage is still never written over). Another tool's manifest.json makes no stage, so
    an app's or a website's folder holding one takes outputs as any folder does."""
    from pocketbert.core.run.stage_records import recorded_stage

    manifest = folder / MANIFEST
    if not manifest.is_file():
        return False
    try:
        return recorded_stage(manifest) is not None
    except (OSError, ValueError):  # unreadable, not UTF-8 (a ValueError), or not JSON
        return True


def _is_run(folder: Path) -> bool:
    """Whether `folder` is a run: a folder with a stage folder in it."""
    try:
        return folder.is_dir() and any(_is_stage(child) for child in folder.iterdir() if child.is_dir())
    except OSError:
        return False


def _refuse_run_places(target: Path, option: str, own_run: bool = False) -> None:
    """Refuse a target that is a run (unless `own_run`: the command's own earlier run) or a stage folder, or lies
    in a stage folder, or deeper in a run than its top level (where commands put their default outputs:
    <run>/ios, <run>/device_kit)."""
    where = target.resolve()
    if (_is_run(where) and not own_run) or _is_stage(where):
        raise RunDirError(f"{option} {target} is {'a run' if _is_run(where) else 'a stage folder'}, which no "
                          f"output may replace: choose another {option}")
    for above in where.parents:
        if _is_stage(above):
            raise RunDirError(f"{option} {target} lies inside the stage folder {above}, which no output may change: "
                              f"choose another {option}")
        if _is_run(above) and above != where.parent:
            raise RunDirError(f"{option} {target} lies inside the run {above}, below its top level: choose another "
                              f"{option}")


def output_folder(target: Path, made_by: str, overwrite: bool, inputs: Iterable[Path] = (),
                  own_files: bool = False, continues: bool = False, makes_run: bool = False,
                  option: str = "--out") -> Path:
    """`target` checked as the folder `pocketbert <made_by>` may write: absent, empty, or, with --overwrite, an
    earlier output of the same command (its OUTPUT_MARKER says so); never a link, a file, a run, a stage folder,
    a path inside a stage or below a run's top level, a folder holding a run, nor an input of the command.
    own_files: the command records what it wrote (written_output), and --overwrite replaces nothing else.
    continues: the command adds to its own earlier output (a ladder's folder) rather than replacing it.
    makes_run: the output is a run (`train prune --out-run`), whose stages decide themselves what they replace."""
    target = Path(target)
    refuse_inputs(target, made_by, inputs, option)
    if target.is_symlink():
        raise RunDirError(f"{option} {target} is a link: give the folder it leads to, or another {option}")
    _refuse_run_places(target, option, own_run=makes_run and target.is_dir() and _made_by(target) == made_by)
    if not target.exists():
        return target
    if not target.is_dir():
        raise RunDirError(f"{option} {target} is a file, not a folder: choose another {option}")
    if not any(target.iterdir()):
        return target
    if not (overwrite or continues or makes_run):
        raise RunDirError(f"{target} already exists: pass --overwrite to replace it, or choose another {option}")
    if _made_by(target) != made_by:
        raise RunDirError(f"{option} replaces only an earlier output of `pocketbert {made_by}`, and {target} is not "
                          f"one (no {OUTPUT_MARKER} saying so): choose another {option}, or empty it yourself")
    if continues or makes_run:
        return target
    nested = _stage_inside(target)
    if nested is not None:
        raise RunDirError(f"{target} holds {nested}, which is not part of an output of `pocketbert {made_by}`: "
                          f"choose another {option}")
    if own_files:
        _foreign_files(target, made_by)
    return target


def mark_output(folder: Path, made_by: str, **facts) -> Path:
    """Write the marker that lets a later --overwrite recognise `folder` as this command's output."""
    path = Path(folder) / OUTPUT_MARKER
    path.write_text(json.dumps({MADE_BY: made_by, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                **{k: str(v) for k, v in facts.items()}}, indent=2) + "\n")
    return path


@contextmanager
def written_output(target: Path, made_by: str, **facts) -> Iterator[Path]:
    """A staged folder that replaces `target` when the block ends without error (atomic_folder.atomic_folder), marked as
    `made_by`'s output with every file written in it recorded: a later --overwrite (own_files) then knows which
    files are the command's own."""
    from pocketbert.core.run.atomic_folder import atomic_folder

    with atomic_folder(target) as tmp:
        mark_output(tmp, made_by, **facts)
        yield tmp
        path = Path(tmp) / OUTPUT_MARKER
        path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), WRITTEN: _written_by_us(tmp)},
                                   indent=2) + "\n")


def record_path(run: Path, path: Path) -> str:
    """A path as a manifest records it: relative to the run when inside it (the run can move), else absolute."""
    absolute = Path(path).resolve()
    try:
        return str(absolute.relative_to(Path(run).resolve()))
    except ValueError:
        return str(absolute)


def recorded_path(run: Path, value: str) -> Path:
    """A path a manifest recorded, as record_path wrote it: relative values are relative to the run."""
    path = Path(value)
    return path if path.is_absolute() else Path(run) / path


def inside_run(run: Path, path: Path) -> bool:
    """Whether `path` (links resolved) lies in the run: what a run's own files may lead to unasked."""
    run, path = Path(run).resolve(), Path(path).resolve()
    return path == run or run in path.parents


def dataset_for_recipe(dataset: str | None) -> str | None:
    """The recipe's dataset as it is recorded: a named dataset as it is, a local file as an absolute path, so a
    later stage finds it from any folder."""
    from pocketbert.core.tasks.data import NAMED_DATASETS

    if not dataset or dataset in NAMED_DATASETS or not Path(dataset).exists():
        return dataset  # unknown names are refused, with the choices, where the data is read
    return str(Path(dataset).resolve())


def recorded_dataset(run: Path, dataset: str) -> str:
    """The dataset a run's recipe names, resolved on read: a named one as it is, a recorded absolute path as it
    is; a relative one (written by an older version, relative to where it was trained) from here, or the run."""
    from pocketbert.core.tasks.data import NAMED_DATASETS

    if dataset in NAMED_DATASETS or Path(dataset).is_absolute():
        return dataset
    for candidate in (Path(dataset), Path(run) / dataset):
        if candidate.exists():
            return str(candidate.resolve())
    raise DataError(f"the run's dataset '{dataset}' was recorded relative to the folder it was trained in, and is "
                    "not found from here: run this command from that folder")
