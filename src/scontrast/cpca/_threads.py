"""Two single-threaded tasks side by side instead of one multi-threaded BLAS call.

When the BLAS may use two or more threads (the default on a multi-core machine), the
'covariance' and 'gram' solvers run pairs of single-threaded tasks side by side instead of
threading inside each BLAS call: the eigendecomposition of the background alongside the
target's covariance (or Gram blocks), the large products in halves, and the alpha grid in
two halves. Threading inside an eigendecomposition gains little on two cores and collapses
when the machine is shared; independent tasks do not. Under
``threadpoolctl.threadpool_limits(1)`` everything runs in one thread.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from ..core import _controller

# When a list: every _side_by_side call appends the CPU seconds of its two tasks (for the
# benchmark's load-independent critical path; None, the default, records nothing).
_CPU_RECORD = None


def _two_tasks() -> bool:
    """Whether the BLAS may use two or more threads right now (the caller's setting is respected).

    Where it may, the dense solver runs two single-threaded tasks side by side instead of
    threading inside each BLAS call: the tridiagonal reduction of an eigendecomposition
    synchronises its threads once per column, which gains little on two cores and collapses
    when the machine is busy, while independent tasks need no synchronisation at all.
    """
    libs = [lib for lib in _controller().lib_controllers if lib.user_api == "blas"]
    return bool(libs) and min(lib.num_threads for lib in libs) >= 2


def _side_by_side(first, second):
    """``(first(), second())`` with ``first`` on a worker thread.

    Meant for use under ``core.blas_threads(1)``; the callables must spend their time in
    calls that release the GIL (numpy's matmul and linalg, scipy's dtrmm).
    """
    record = _CPU_RECORD
    if record is not None:
        first, second = _cpu_timed(first), _cpu_timed(second)
    with ThreadPoolExecutor(max_workers=1) as pool:
        job = pool.submit(first)
        out2 = second()
        out1 = job.result()
    if record is not None:
        record.append((out1[1], out2[1]))
        return out1[0], out2[0]
    return out1, out2


def _cpu_timed(task):
    """``task`` returning ``(result, CPU seconds of its thread)``."""
    def timed():
        start = time.thread_time()
        out = task()
        return out, time.thread_time() - start
    return timed
