"""How often Python's cyclic garbage collector runs in a pocketbert process.

A pocketbert process's heap is mostly what its imports made: after torch and transformers about half a million
objects, which live as long as the process. Python's default thresholds (700, 10, 10) walk that whole heap again
and again while it grows and whenever a loop allocates, and the walks find next to nothing: reference counting
frees every object outside a cycle at once, whatever the thresholds. With the thresholds below, a `train distill`
process of the tiny preset spent about a fifth less CPU (most of it in its imports), and the tests' processes a
fifth less too (results/README.md, Fresh-clone checks of this version). Cyclic garbage still goes, a few thousand
allocations later than by default.
"""

from __future__ import annotations

import contextlib
import gc

# Allocations between first-generation passes, then first-generation passes between second-generation ones, and
# those between full walks of the heap (each full walk also waits, as by default, until the heap grew a quarter).
THRESHOLDS = (20_000, 20, 20)


def collect_less() -> None:
    """This process's collector runs at THRESHOLDS from now on (a process's entry point calls it first)."""
    gc.set_threshold(*THRESHOLDS)


@contextlib.contextmanager
def collecting_less():
    """THRESHOLDS inside the block, the thresholds it found after it (a command run inside another program)."""
    before = gc.get_threshold()
    collect_less()
    try:
        yield
    finally:
        gc.set_threshold(*before)
