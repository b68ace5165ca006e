"""Parameter checks shared by the FANGS functions (``scontrast.core`` checks, same messages)."""

from __future__ import annotations

from joblib import effective_n_jobs

from ..core import ScontrastError, check_int, check_real


def _check_a(a) -> float:
    """The FARO cost ``a``, in the open interval (0, 2)."""
    return check_real(a, "a", 0.0, 2.0, strict_min=True, strict_max=True)


def _check_n_jobs(n_jobs) -> int:
    """joblib's ``n_jobs`` (a nonzero integer or None) -> the number of threads."""
    if n_jobs is not None and check_int(n_jobs, "n_jobs") == 0:
        raise ScontrastError("n_jobs: expected a nonzero integer or None, got 0")
    return effective_n_jobs(n_jobs)
