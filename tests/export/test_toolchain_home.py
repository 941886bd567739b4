"""The compilers the export runs (SwiftPM, kotlinc on the JVM) keep their state in pocketbert's cache, never in the
user's home."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from pocketbert.export.app import app_programs


@pytest.fixture
def homes(tmp_path, monkeypatch):
    monkeypatch.setenv("POCKETBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path / "home", tmp_path / "cache" / app_programs.CACHE_FOLDER / app_programs.TOOLCHAIN_HOME


def test_a_build_that_writes_into_its_home_writes_into_the_cache(homes):
    user_home, toolchain_home = homes
    writes_home = "import os, pathlib; pathlib.Path(os.path.expanduser('~/.swiftpm/configuration')).mkdir(parents=True)"
    app_programs._run_build([sys.executable, "-c", writes_home], None, "a toolchain")
    assert list(user_home.iterdir()) == []
    assert (toolchain_home / ".swiftpm" / "configuration").is_dir()


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on this machine (Debian: apt-get install kotlin)")
def test_the_jvm_reads_its_user_home_from_the_cache(homes):
    _, toolchain_home = homes
    shown = subprocess.run(["java", "-XshowSettings:properties", "-version"], capture_output=True, text=True,
                           env=app_programs.toolchain_environment())
    assert f"user.home = {toolchain_home}" in shown.stderr


def _final_flags(java_opts: str) -> dict[str, str]:
    """The JVM's settings under `java_opts`, as kotlinc's launcher script passes its JAVA_OPTS to java."""
    shown = subprocess.run(["java", *java_opts.split(), "-XX:+PrintFlagsFinal", "-version"], capture_output=True,
                           text=True, check=True)
    return {fields[1]: fields[3] for fields in (line.split() for line in shown.stdout.splitlines())
            if len(fields) >= 4 and fields[2] == "="}


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on this machine (Debian: apt-get install kotlin)")
def test_kotlinc_runs_on_c1_with_the_serial_collector_unless_the_user_says_otherwise(homes, monkeypatch):
    monkeypatch.delenv("JAVA_OPTS", raising=False)
    flags = _final_flags(app_programs.kotlinc_environment()["JAVA_OPTS"])
    assert (flags["TieredStopAtLevel"], flags["UseSerialGC"], flags["MaxHeapSize"]) == ("1", "true", str(256 << 20))
    monkeypatch.setenv("JAVA_OPTS", "-XX:TieredStopAtLevel=4 -Xmx512M")
    flags = _final_flags(app_programs.kotlinc_environment()["JAVA_OPTS"])
    assert (flags["TieredStopAtLevel"], flags["UseSerialGC"], flags["MaxHeapSize"]) == ("4", "true", str(512 << 20))
