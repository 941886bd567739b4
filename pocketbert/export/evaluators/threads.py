"""One thread for numpy evaluators of saved programs (the MIL and Core AI gates).

numpy's BLAS (OpenBLAS) and torch (OpenMP) each keep a pool of threads that spin while they wait. An evaluator that
calls both, op after op, keeps the two pools waiting for each other; on this project's shared 2-core machine that
made the gates 15 to 30 times slower than one thread: the MIL evaluator 145-270 ms a sentence against 7.7 ms
(a batch of 16 SST-2 sentences), the Core AI evaluator 290-340 ms against 11 ms (200 sentences).
"""

from __future__ import annotations

import functools
from contextlib import contextmanager


@functools.cache
def _thread_pools():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextmanager
def one_thread():
    """BLAS, OpenMP and torch limited to one thread for the block, then given back what they had."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with _thread_pools().limit(limits=1):
            yield
    finally:
        torch.set_num_threads(threads)
