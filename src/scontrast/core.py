"""What every layer of scontrast shares: names, errors, versions, input checks, RNG and BLAS threads.

The estimators (``scontrast.sparda``, ``.cpca``, ``.pcpca``, ``.quadro``,
``.latent_features``, ``.fangs``), the AnnData front ends (``scontrast.tl``),
the figures (``scontrast.pl``) and the workflow's scripts import from here; this
module imports nothing of scontrast but ``_runs`` (which imports nothing), so it never takes
part in an import cycle.

The estimator contract (scikit-learn's): hyper-parameters are stored untouched in
``__init__``; ``fit`` validates them and the data with the checks below, then sets
attributes ending in ``_``; a method needing a fit calls
:func:`sklearn.utils.validation.check_is_fitted` (``NotFittedError`` before fit);
randomness comes from ``random_state`` through :func:`check_random_state` (None, an
int or a ``numpy.random.Generator``). Every check raises :class:`ScontrastError`
(a ``ValueError``) with one line ``"<name>: <problem>"``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import numbers
import os
import sys
import tempfile
import threading
import time
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import scipy.sparse as sp

from ._runs import RUN_TOKEN_ENV, check_current_run

__all__ = [
    "TARGET_KEY",
    "ScontrastError",
    "CannotRun",
    "ScontrastWarning",
    "package_versions",
    "check_random_state",
    "spawn_seed",
    "blas_threads",
    "one_blas_thread",
    "silenced_warnings",
    "result_warnings",
    "TARGET_COLOUR",
    "BACKGROUND_COLOUR",
    "NEUTRAL_COLOUR",
    "check_matrix",
    "check_pair",
    "check_int",
    "check_real",
    "check_option",
    "dense",
    "lazy_attributes",
    "progress",
    "temporary_beside",
    "move_into_place",
]

#: Boolean ``obs`` column of the target/background split (True = target), set by preprocessing.
TARGET_KEY = "scontrast_target"

#: The group colours of every figure (target red, background blue) and of cells of neither group;
#: here, not in ``pl``, because preprocessing colours the groups' categories in ``uns`` too.
TARGET_COLOUR = "#d62728"
BACKGROUND_COLOUR = "#1f77b4"
NEUTRAL_COLOUR = "#7f7f7f"

_VERSIONED = ("scontrast", "numpy", "scipy", "scikit-learn", "anndata", "scanpy", "pot", "numba")


class ScontrastError(ValueError):
    """A problem with the user's input or configuration; its message is one line.

    Examples
    --------
    >>> import numpy as np, anndata as ad
    >>> import scontrast as sct
    >>> try:
    ...     sct.tl.target_mask(ad.AnnData(np.zeros((4, 2))))
    ... except sct.ScontrastError as err:                      # a ValueError with a one-line message
    ...     print(err)
    obs['scontrast_target'] is missing: run scontrast.preprocess first or pass the group column
    """


class CannotRun(ScontrastError):
    """The data passed a method's input checks but the method has nothing it can fit on them.

    E.g. a background identical to the target. Not an input problem to fix: the workflow
    records it in the method's delta (``io.failure_delta``), the dataset keeps the other
    methods' results and ``collect`` lists it in ``uns['scontrast']['failed']`` and the summary.
    """


class ScontrastWarning(UserWarning):
    """Something a user must know about a result, in one line.

    A choice at the edge of its grid, a p-value at its permutation floor, a sampler that did
    not converge, QC that did nothing. Estimators raise it with ``warnings.warn``; the ``tl``
    front ends collect it (with the other warnings of the fit) into ``uns[<method>]['warnings']``
    and the log, and the workflow's summary and report show it.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> adata = ad.AnnData(rng.normal(size=(30, 6)), var=pd.DataFrame(index=[f"g{i}" for i in range(6)]))
    >>> adata.obs["scontrast_target"] = np.arange(30) < 2          # two target cells: one direction of variance
    >>> sct.tl.cpca(adata, genes="all", alpha=1.0)
    >>> print(adata.uns["cpca"]["warnings"][0][:78])                # the front end keeps what was warned
    cpca: the target group has 2 cells, so at most 1 direction(s) carry target var
    """


class ScontrastConvergenceWarning(ScontrastWarning):
    """An iterative solver stopped at its iteration cap before its tolerance: the result is its
    last iterate (filter this class to treat non-convergence apart from other findings).

    Examples
    --------
    >>> import warnings
    >>> import scontrast as sct
    >>> issubclass(sct.ScontrastConvergenceWarning, sct.ScontrastWarning)
    True
    >>> import numpy as np
    >>> from scontrast.pcpca import PCPCA
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(40, 5)), rng.normal(size=(40, 5))
    >>> X[0, 0] = np.nan                                       # missing values: fitted by L-BFGS
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", sct.ScontrastConvergenceWarning)   # treat non-convergence as an error
    ...     try:
    ...         PCPCA(n_components=1, max_iter=1).fit(X, Y)
    ...     except sct.ScontrastConvergenceWarning as w:
    ...         print(str(w)[:41])
    PCPCA: L-BFGS stopped without converging:
    """


def package_versions() -> dict[str, str]:
    """Versions of the packages whose numbers a result depends on."""
    out = {}
    for name in _VERSIONED:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


# --------------------------------------------------------------------------- randomness


def check_random_state(random_state) -> np.random.Generator:
    """The one ``random_state`` normaliser: None, an int >= 0 or a Generator -> a Generator.

    A Generator is returned as it is (its state advances, as scikit-learn does with a
    ``RandomState``); a legacy ``RandomState`` seeds a new Generator from one draw.
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(int(random_state.randint(0, 2**31 - 1)))
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool) and random_state >= 0:
        return np.random.default_rng(int(random_state))
    raise ScontrastError(
        f"random_state: expected None, an integer >= 0 or a numpy Generator, got {random_state!r}"
    )


def spawn_seed(rng: np.random.Generator) -> int:
    """An int seed drawn from ``rng``, for libraries that take one (scikit-learn's CV splitters, numba)."""
    return int(rng.integers(0, 2**31 - 1))


# --------------------------------------------------------------------------- BLAS threads

_CONTROLLER: list = []


def _controller():
    # Discovering the loaded BLAS costs ~1 ms: once per process (loky workers included).
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0]


def blas_threads(limit: int | None = 1):
    """Context manager limiting the BLAS to ``limit`` threads (None: leave it as it is).

    Small products gain nothing from a threaded BLAS, and its spinning threads fight the
    workers a method runs side by side (and other jobs) for the cores.
    """
    if limit is None:
        return contextlib.nullcontext()
    return _controller().limit(limits=int(limit), user_api="blas")


def one_blas_thread(func: Callable) -> Callable:
    """Decorator: run ``func`` with a single BLAS thread (joblib workers start unlimited)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with blas_threads(1):
            return func(*args, **kwargs)

    return wrapper


_FILTERS_LOCK = threading.Lock()


@contextlib.contextmanager
def silenced_warnings():
    """Context manager ignoring every warning inside the block, safe in worker threads.

    ``warnings.catch_warnings`` saves and restores the process-wide filter list; two threads
    interleaving their enter and exit restore each other's state and can leave ``'ignore'``
    installed for good, silencing every later warning of the process (a test in
    tests/latent_features/ caught it losing R-hat warnings).  The lock keeps each
    save-and-restore whole; use this, not ``catch_warnings``, wherever a method may run in a
    thread.  Only for third-party noise that says nothing about the result.
    """
    with _FILTERS_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# library noise about future API changes, not about the user's result: passed on untouched
_PASSED_ON = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ImportWarning)


@contextlib.contextmanager
def result_warnings(method: str) -> Iterator[list[str]]:
    """Collect what a method warns while it runs, for ``uns[method]['warnings']``.

    Every warning raised inside the block (the estimators' ``ScontrastWarning``, scikit-learn's
    ``ConvergenceWarning``, numerical ``RuntimeWarning``...) is logged once on the
    ``scontrast.<method>`` logger at WARNING (so it reaches the job's log and the terminal) and
    its one-line message is appended to the yielded list, in order, without repeats. Deprecation
    and future warnings of the libraries are passed on untouched.

    Examples
    --------
    >>> import warnings
    >>> import scontrast as sct
    >>> with sct.tl.result_warnings("my_method") as warned:
    ...     warnings.warn("alpha: the largest of the grid was chosen", sct.ScontrastWarning)
    >>> warned
    ['alpha: the largest of the grid was chosen']
    """
    collected: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield collected
    log = logging.getLogger(f"scontrast.{method}")
    for w in caught:
        if issubclass(w.category, _PASSED_ON):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            continue
        text = " ".join(str(w.message).split())
        if text not in collected:
            collected.append(text)
            # a message that already names its method is not prefixed twice
            log.warning("%s", text if text.startswith(f"{method}: ") else f"{method}: {text}")


# --------------------------------------------------------------------------- input checks


def check_matrix(A, name: str = "X", *, min_rows: int = 1, min_cols: int = 1, accept_sparse: bool = True,
                 allow_nan: bool = False):
    """A float64 2-d matrix of cells x genes: dense ndarray, or CSR when ``accept_sparse``.

    Refuses other dimensions, complex or non-numeric values, NaN or Inf (NaN allowed with
    ``allow_nan``: missing values), fewer than ``min_rows`` cells or ``min_cols`` genes.
    Sparse input stays sparse.

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix, shape (n, d)
    """
    if sp.issparse(A):
        if not accept_sparse:
            raise ScontrastError(f"{name}: sparse input is not supported here; pass a dense array")
        if np.iscomplexobj(A.data):
            raise ScontrastError(f"{name}: complex values are not supported")
        A = sp.csr_matrix(A, dtype=np.float64)
        values = A.data
    else:
        if np.iscomplexobj(A):
            raise ScontrastError(f"{name}: complex values are not supported")
        try:
            A = np.asarray(A, dtype=np.float64)
        except (TypeError, ValueError):
            raise ScontrastError(f"{name}: expected a numeric matrix (cells x genes)") from None
        values = A
    if A.ndim != 2:
        raise ScontrastError(f"{name}: expected a 2-d matrix (cells x genes), got shape {A.shape}")
    if values.size:
        bad = ~np.isfinite(values)
        if allow_nan:
            bad &= ~np.isnan(values)
        if bad.any():
            what = "infinite" if allow_nan else "NaN or infinite"
            raise ScontrastError(f"{name}: contains {int(bad.sum())} {what} values")
    if A.shape[0] < min_rows:
        raise ScontrastError(f"{name}: needs at least {min_rows} cells, got {A.shape[0]}")
    if A.shape[1] < min_cols:
        raise ScontrastError(f"{name}: needs at least {min_cols} genes, got {A.shape[1]}")
    return A


def check_pair(X, Y, names: tuple[str, str] = ("X", "Y"), **kwargs):
    """:func:`check_matrix` on both groups, and the same genes in both.

    Two pandas DataFrames are matched by column name (``Y``'s columns put in ``X``'s order;
    different gene sets are refused), never by position alone.

    Returns
    -------
    X : shape (n, d); Y : shape (m, d)
    """
    if hasattr(X, "columns") and hasattr(Y, "columns"):
        cx, cy = list(X.columns), list(Y.columns)
        if cx != cy:
            if set(cx) != set(cy) or len(set(cx)) != len(cx):
                extra = sorted(map(str, set(cy) - set(cx)))[:3] or sorted(map(str, set(cx) - set(cy)))[:3]
                raise ScontrastError(f"{names[1]}: its genes (columns) are not {names[0]}'s, e.g. {extra}")
            Y = Y[cx]
    X = check_matrix(X, names[0], **kwargs)
    Y = check_matrix(Y, names[1], **kwargs)
    if X.shape[1] != Y.shape[1]:
        raise ScontrastError(f"{names[1]}: has {Y.shape[1]} genes, {names[0]} has {X.shape[1]}")
    return X, Y


def check_int(value, name: str, minimum: int | None = None, maximum: int | None = None, *,
              allow_none: bool = False) -> int | None:
    """An integer (not a bool) in ``[minimum, maximum]``, or None when allowed."""
    if value is None and allow_none:
        return None
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if ok and minimum is not None and value < minimum:
        ok = False
    if ok and maximum is not None and value > maximum:
        ok = False
    if not ok:
        raise ScontrastError(f"{name}: expected {_range('an integer', minimum, maximum, allow_none)}, got {value!r}")
    return int(value)


def check_real(value, name: str, minimum: float | None = None, maximum: float | None = None, *,
               strict_min: bool = False, strict_max: bool = False, allow_none: bool = False) -> float | None:
    """A finite real number (not a bool) within the bounds, or None when allowed."""
    if value is None and allow_none:
        return None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    if ok and minimum is not None and (value <= minimum if strict_min else value < minimum):
        ok = False
    if ok and maximum is not None and (value >= maximum if strict_max else value > maximum):
        ok = False
    if not ok:
        lo = None if minimum is None else (">" if strict_min else ">=", minimum)
        hi = None if maximum is None else ("<" if strict_max else "<=", maximum)
        bounds = " and ".join(f"{op} {v}" for op, v in (b for b in (lo, hi) if b))
        what = "a finite number" + (f" {bounds}" if bounds else "") + (" or None" if allow_none else "")
        raise ScontrastError(f"{name}: expected {what}, got {value!r}")
    return float(value)


def check_bool(value, name: str) -> bool:
    """True or False (numpy's bool too; not 0/1)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ScontrastError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def check_option(value, name: str, options: Iterable[Any]):
    """``value`` if it is one of ``options``."""
    options = list(options)
    if not any(value is o or (type(value) is type(o) and value == o) for o in options):
        raise ScontrastError(f"{name}: expected one of {options}, got {value!r}")
    return value


def _range(what: str, minimum, maximum, allow_none: bool) -> str:
    if minimum is not None and maximum is not None:
        what += f" in [{minimum}, {maximum}]"
    elif minimum is not None:
        what += f" >= {minimum}"
    elif maximum is not None:
        what += f" <= {maximum}"
    return what + (" or None" if allow_none else "")


def dense(A) -> np.ndarray:
    """``A`` as a dense float64 ndarray (sparse input is converted; use only on small blocks)."""
    return A.toarray() if sp.issparse(A) else np.asarray(A, dtype=np.float64)


def lazy_attributes(package: str, where: dict[str, str]):
    """``(__getattr__, __dir__)`` for a package whose attributes load their module on first use.

    ``where`` maps an attribute name to the submodule (relative to ``package``) defining it.
    A rule that needs one method then imports that method's dependencies only (the
    workflow's per-job start-up), while ``package.attribute`` works as if imported eagerly.
    """

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(where[name], package)
        value = module if where[name].rsplit(".", 1)[-1] == name else getattr(module, name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__():
        return sorted(set(where) | set(vars(importlib.import_module(package))))

    return __getattr__, __dir__


def _in_notebook() -> bool:
    return "ipykernel" in sys.modules


#: A log record with this attribute set reaches a workflow run's terminal at INFO (the progress of a long
#: step); every other INFO line goes to the job's log only, warnings and errors to both.
TERMINAL = "scontrast_terminal"

#: Seconds a loop runs before :func:`progress` logs, and the least time between two of its lines: a
#: step of a few seconds needs no progress, and a burst of lines with one timestamp says nothing.
PROGRESS_AFTER = 5.0

#: Seconds a loop runs before its progress lines reach a workflow run's terminal too (:data:`TERMINAL`): the
#: job's log has every line; the terminal, which shows every job of a run, only the steps a user waits for.
TERMINAL_AFTER = 30.0


def progress(iterable, *, total: int | None = None, desc: str, logger: str = "scontrast", every: float = 0.1,
             seconds: float = 30.0, after: float | None = None):
    """Yield from ``iterable`` while reporting progress: the steps of a long method are never silent.

    Logs ``"<desc>: i/N (x.x/s, about T s left)"`` at INFO on ``logger`` once the loop has run
    ``after`` seconds (default :data:`PROGRESS_AFTER`): each time another ``every`` of the
    ``total`` steps is done, at most one line every ``after`` seconds, the last step always, and
    after a step that ends ``seconds`` or more after the last line (a long loop's tenth can take
    hours: its log, a SLURM job's, still moves). A loop shorter than ``after`` logs nothing; a line
    reaches a workflow run's terminal once the loop has run :data:`TERMINAL_AFTER` seconds. In
    a Jupyter notebook it also shows a tqdm bar. ``total`` defaults to ``len(iterable)``.
    """
    if total is None:
        total = len(iterable)
    after = PROGRESS_AFTER if after is None else after
    log = logging.getLogger(logger)
    bar = None
    if _in_notebook():
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=desc, leave=False)
    start = last = time.perf_counter()
    step = max(1, int(round(every * total))) if total else 1
    done = 0
    try:
        for item in iterable:
            yield item
            done += 1
            if bar is not None:
                bar.update(1)
            now = time.perf_counter()
            if now - start < after:
                continue
            marked = done % step == 0 and now - last >= after
            if marked or done == total or now - last >= seconds:
                last = now
                elapsed = now - start
                rate = done / elapsed if elapsed > 0 else float("inf")
                left = (total - done) / rate if total and rate > 0 else 0.0
                log.info("%s: %d/%d (%.3g/s, about %.0f s left)", desc, done, total, rate, left,
                         extra={TERMINAL: elapsed >= TERMINAL_AFTER})
    finally:
        if bar is not None:
            bar.close()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def temporary_beside(path: str | os.PathLike, suffix: str = ".tmp") -> str:
    """A new empty file next to ``path`` (``.<name>.<random><suffix>``), to write and then rename onto it.

    Its mode is that of any file the user creates there: ``mkstemp`` alone makes it 0600 whatever
    the umask, and results must be readable by whoever the user's umask lets read their files.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())
    return tmp


def move_into_place(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Rename the finished temporary file ``tmp`` onto ``path``.

    In a job of a workflow run (its token in the environment) the rename happens only while that
    run is the directory's: :func:`scontrast._runs.check_current_run` raises
    :class:`scontrast._runs.StaleJob` otherwise, and ``tmp`` is left to the caller. Any other
    write (a notebook's) is a plain rename.
    """
    if os.environ.get(RUN_TOKEN_ENV):
        check_current_run()
    os.replace(tmp, path)
