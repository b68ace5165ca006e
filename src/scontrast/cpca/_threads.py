"""How many threads a cPCA fit uses, and how it uses them.

The thread count follows ``n_jobs`` (scikit-learn's reading: None = the BLAS's current setting,
e.g. ``threadpoolctl.threadpool_limits(8)`` or the workflow rule's threads; -1 = every core; a
positive number = that many). The 'covariance' and 'gram' solvers then run:

- one thread: one task, a single-threaded BLAS;
- two threads: pairs of single-threaded tasks side by side (the eigendecomposition of the
  background alongside the target's covariance or Gram blocks, the large products in halves, the
  alpha grid in two halves). On two cores this is faster than threading inside each BLAS call:
  the tridiagonal reduction of an eigendecomposition synchronises its threads once per column,
  while independent tasks need no synchronisation at all (docs/cpca.md);
- three or more: the reductions (covariances or Gram blocks, the background's tridiagonal form,
  C_X in its basis, the loadings) as one task on a BLAS of that many threads: most of a fit's
  flops, in large products that scale with the BLAS's threads (two tasks cannot share more than
  two cores: a threaded BLAS runs the matrix products of concurrent callers one after the other,
  OpenBLAS serialising its level-3 calls). The alpha grid's Davidson iteration, whose products
  are small, runs in two single-threaded tasks.

The 'full' and 'implicit' solvers always run one task with the BLAS at the fit's thread count.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from joblib import effective_n_jobs

from ..core import ScontrastError, _controller, check_int

# When a list: every _side_by_side call appends the CPU seconds of its two tasks (for the
# benchmark's load-independent critical path; None, the default, records nothing).
_CPU_RECORD = None


def _blas_limit() -> int:
    """The BLAS's current thread setting (the smallest over the loaded BLAS libraries; 1 without one)."""
    libs = [lib for lib in _controller().lib_controllers if lib.user_api == "blas"]
    return max(min((lib.num_threads for lib in libs), default=1), 1)


def _resolve_threads(n_jobs) -> int:
    """``n_jobs`` (None, or a nonzero integer as in scikit-learn) -> the fit's thread count (>= 1)."""
    if n_jobs is None:
        return _blas_limit()
    if check_int(n_jobs, "n_jobs") == 0:
        raise ScontrastError("n_jobs: expected a nonzero integer or None, got 0")
    return max(int(effective_n_jobs(int(n_jobs))), 1)


def _two_tasks(threads: int) -> bool:
    """Whether the dense solvers run pairs of single-threaded tasks (exactly two threads)."""
    return threads == 2


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
