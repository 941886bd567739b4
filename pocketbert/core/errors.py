"""One exception family. Every message is a single line that tells the user what to do next."""


class PocketbertError(Exception):
    """An error the user can fix; the CLI prints it as one line and exits non-zero."""

    exit_code = 2


class DataError(PocketbertError):
    """A dataset is missing, malformed, or holds labels outside the label set."""


class ModelError(PocketbertError):
    """A checkpoint is missing, unreadable, or does not fit the task."""


class RunDirError(PocketbertError):
    """A run directory lacks what a stage needs, or would be overwritten."""


class ConfigError(PocketbertError):
    """An unknown task, preset, dataset name or option value."""


class ExportError(PocketbertError):
    """An export failed, or an exported model no longer gives the student's answers."""


class MissingDependencyError(PocketbertError):
    """An optional heavy dependency is not installed."""


def require(module: str, extra: str):
    """Import an optional dependency, or fail with the pip command that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{module} is not installed: run `pip install 'pocketbert[{extra}]'` (or `make install`)"
        ) from exc
