"""The ONNX Runtime versions the app folders' code runs on, and the `.ort` files gated on each of them.

An `.ort` file is not forward compatible (microsoft/onnxruntime#20670): the file the export writes with its own ONNX
Runtime must be read by the runtime an app ships, which can be older (CocoaPods' newest onnxruntime-objc pod is
1.30.0 while the export writes with 1.31). Each app runtime's Python wheel, the same core and `.ort` reader as that
version's mobile packages, is installed into a folder of its own beside the environment (`make install` does it;
else the export installs it into the cache where PyPI answers). A worker process with that folder first on its path
loads the file and runs the gate's batches, so the gate holds the app runtime's outputs to the student as it holds
the export's own runtime's.
"""

from __future__ import annotations

import pickle
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pocketbert.core.errors import ExportError
from pocketbert.core.process.launch_env import session_threads

WORKER = Path(__file__).with_name("app_runtime_worker.py")
FOLDER = "app-runtimes"
INSTALL_TIMEOUT_S = 300


@dataclass(frozen=True)
class AppRuntime:
    """One ONNX Runtime package an app folder's code is written for."""

    platform: str  # where an app ships it
    package: str   # the package an app adds, as its build file names it
    version: str


# The app folders' ONNX Runtime: the newest published of each package (iOS pod and Android package pages,
# November 2026: onnxruntime-objc 1.30.0, com.microsoft.onnxruntime:onnxruntime-android 1.31.1).
APP_RUNTIMES = (
    AppRuntime("iOS", "onnxruntime-objc (CocoaPods)", "1.30.0"),
    AppRuntime("Android", "com.microsoft.onnxruntime:onnxruntime-android", "1.31.1"),
)
OLDEST_SUPPORTED = min((r.version for r in APP_RUNTIMES), key=lambda v: tuple(map(int, v.split("."))))


class RuntimeUnavailable(Exception):
    """An app runtime that could not be installed or started here (no registry, say)."""


def runtime_folder(version: str) -> Path:
    """Where ONNX Runtime `version` is installed for the gate: beside the environment when `make install` put it
    there, else in pocketbert's cache."""
    beside = Path(sys.prefix) / FOLDER / f"onnxruntime-{version}"
    if beside.is_dir():
        return beside
    from pocketbert.core.run.cache_dir import cache_root

    return cache_root() / FOLDER / f"onnxruntime-{version}"


def install(version: str, folder: Path) -> Path:
    """ONNX Runtime `version` installed into `folder` (whole or absent: installed beside it, then renamed)."""
    if (folder / "onnxruntime").is_dir():
        return folder
    staging = folder.with_name(folder.name + ".partial")
    folder.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "--no-deps", "--target", str(staging), f"onnxruntime=={version}"],
                          capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeUnavailable(f"pip could not install onnxruntime=={version}: {last[0]}")
    staging.rename(folder)
    return folder


class WorkerSession:
    """An `.ort` (or .onnx) file loaded by ONNX Runtime `version` in a process of its own: run(feeds) -> outputs,
    as InferenceSession.run(None, feeds) gives them."""

    def __init__(self, model: Path, version: str):
        folder = install(version, runtime_folder(version))
        self.process = subprocess.Popen([sys.executable, "-I", str(WORKER), str(folder), str(model),
                                         str(session_threads())],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        hello = self._receive()
        if isinstance(hello, Exception) or hello.get("version") != version:
            self.close()
            found = hello if isinstance(hello, Exception) else f"it runs onnxruntime {hello.get('version')}"
            raise ExportError(f"ONNX Runtime {version} could not load {model.name}: {found}")
        self.input_names = hello["inputs"]
        self.threads = hello["threads"]  # the session's intra-op threads, as that version reports them

    def run(self, feeds: dict) -> list:
        payload = pickle.dumps(feeds)
        self.process.stdin.write(struct.pack("<Q", len(payload)) + payload)
        self.process.stdin.flush()
        outputs = self._receive()
        if isinstance(outputs, Exception):
            raise ExportError(f"ONNX Runtime's worker failed: {outputs}")
        return outputs

    def _receive(self):
        header = self.process.stdout.read(8)
        if len(header) < 8:
            error = self.process.stderr.read().decode(errors="replace").strip().splitlines()
            return RuntimeError(error[-1] if error else f"the worker exited {self.process.wait()}")
        (size,) = struct.unpack("<Q", header)
        return pickle.loads(self.process.stdout.read(size))  # our own worker's reply, never outside data

    def close(self) -> None:
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def install_all() -> list[Path]:
    """Every app runtime other than this environment's own, installed beside the environment (make install)."""
    import onnxruntime

    folders = []
    for runtime in APP_RUNTIMES:
        if runtime.version != onnxruntime.__version__:
            folders.append(install(runtime.version, Path(sys.prefix) / FOLDER / f"onnxruntime-{runtime.version}"))
    return folders


if __name__ == "__main__":
    for installed in install_all():
        print(f"app runtime: {installed}")
