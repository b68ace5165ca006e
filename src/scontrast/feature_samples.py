"""The samples file between a feature-allocation sampler and FANGS.

The latent-feature sampler (:mod:`scontrast.latent_features`) writes its posterior samples
here and the FANGS summary (:mod:`scontrast.fangs`, :func:`scontrast.tl.fangs`) reads them; both
import this module, neither imports the other for the format.

Samples file (``save_samples`` / ``load_samples``): a numpy ``.npz``
(compressed, no pickled objects) holding

=================  ======================  =========================================
key                dtype, shape            meaning
=================  ======================  =========================================
``format``         str                     ``"scontrast.feature_samples"``
``version``        int                     1
``Z``              uint8 (N, sum K_b)      the B samples side by side
``n_features``     int64 (B,)              K_b: sample b is ``Z[:, off[b]:off[b+1]]``,
                                           ``off = [0, cumsum(n_features)]``
``cell_names``     str (N,), optional      the cells (rows), matched to ``obs_names``
``log_joint``      float64 (T,), optional  log p(X, [Z], hyperparameters) per sweep
``chains``         int (B,), optional      the chain of each sample: ``tl.fangs`` then
                                           reports each feature's support per chain
other keys         numeric arrays          traces (``K``, ``alpha``, ``sigma_x``,
                                           ``sigma_a``, ``sweeps``), free-form
=================  ======================  =========================================

Only ``Z`` and ``n_features`` are required, so samples from any other
feature-allocation sampler can be written in this format and summarised by
the ``fangs`` rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .core import ScontrastError, move_into_place, temporary_beside

__all__ = [
    "FeatureSamples",
    "check_samples",
    "save_samples",
    "load_samples",
    "pack_samples",
    "unpack_samples",
]

FORMAT = "scontrast.feature_samples"
VERSION = 1


def _as_binary(x, name: str, n_rows: int | None = None) -> np.ndarray:
    """Validate one binary matrix and return it as uint8 (N x K)."""
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ScontrastError(f"{name}: expected a 2-d N x K binary matrix, got {arr.ndim} dimension(s)")
    if n_rows is not None and arr.shape[0] != n_rows:
        raise ScontrastError(f"{name}: has {arr.shape[0]} rows but the samples have {n_rows} (rows are items)")
    if arr.dtype == bool:
        return arr.astype(np.uint8)
    if not (np.issubdtype(arr.dtype, np.number)):
        raise ScontrastError(f"{name}: expected numeric or boolean values, got dtype {arr.dtype}")
    ok = (arr == 0) | (arr == 1)
    if not ok.all():
        bad = arr[~ok].flat[0]
        raise ScontrastError(f"{name}: is not binary: it holds {int((~ok).sum())} entries other than 0/1 (e.g. {bad!r})")
    return arr.astype(np.uint8)


def check_samples(samples) -> list[np.ndarray]:
    """Validate posterior samples of a feature allocation.

    Parameters
    ----------
    samples : sequence of array-like, each (N, K_b), or array (B, N, K)
        Binary matrices with the same number of rows N; K_b may vary
        (including 0).

    Returns
    -------
    list of uint8 ndarray (N, K_b)

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import check_samples
    >>> [Z.shape for Z in check_samples([np.eye(3, dtype=np.uint8), np.ones((3, 1), np.uint8)])]
    [(3, 3), (3, 1)]
    >>> check_samples([np.array([[2]])])
    Traceback (most recent call last):
    ...
    scontrast.core.ScontrastError: samples[0]: is not binary: it holds 1 entries other than 0/1 ...
    """
    if isinstance(samples, np.ndarray):
        if samples.ndim != 3:
            raise ScontrastError(f"samples: expected a 3-d (B, N, K) array or a list of matrices, got {samples.ndim} dimension(s)")
        samples = list(samples)
    if isinstance(samples, (str, bytes)) or not hasattr(samples, "__len__"):
        raise ScontrastError("samples: expected a list of binary N x K_b matrices")
    if len(samples) == 0:
        raise ScontrastError("samples: is empty, at least one posterior sample is needed")
    first = _as_binary(samples[0], "samples[0]")
    n = first.shape[0]
    if n == 0:
        raise ScontrastError("samples[0]: has no rows, a feature allocation needs at least one item")
    out = [first]
    for b in range(1, len(samples)):
        out.append(_as_binary(samples[b], f"samples[{b}]", n_rows=n))
    return out


def pack_samples(samples) -> tuple[np.ndarray, np.ndarray]:
    """Samples side by side: ``(Z (N, sum K_b) uint8, n_features (B,) int64)``.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.latent_features import pack_samples
    >>> Z, n_features = pack_samples([np.eye(3, dtype=np.uint8), np.ones((3, 1), np.uint8)])
    >>> Z.shape, n_features.tolist()                          # 3 + 1 columns side by side
    ((3, 4), [3, 1])
    """
    S = check_samples(samples)
    k = np.array([s.shape[1] for s in S], dtype=np.int64)
    Z = np.concatenate(S, axis=1) if k.sum() else np.zeros((S[0].shape[0], 0), dtype=np.uint8)
    return np.ascontiguousarray(Z, dtype=np.uint8), k


def unpack_samples(Z, n_features) -> list[np.ndarray]:
    """Inverse of ``pack_samples``: the list of (N, K_b) matrices.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.latent_features import pack_samples, unpack_samples
    >>> samples = [np.eye(3, dtype=np.uint8), np.ones((3, 1), np.uint8)]
    >>> back = unpack_samples(*pack_samples(samples))
    >>> all(np.array_equal(a, b) for a, b in zip(back, samples))
    True
    """
    Z = np.asarray(Z)
    k = np.asarray(n_features)
    if Z.ndim != 2:
        raise ScontrastError(f"Z: expected a 2-d (N, sum K_b) matrix of packed samples, got {Z.ndim} dimension(s)")
    if k.ndim != 1 or k.size == 0 or not np.issubdtype(k.dtype, np.integer) or (k < 0).any():
        raise ScontrastError("n_features: expected a non-empty 1-d array of non-negative integers")
    if int(k.sum()) != Z.shape[1]:
        raise ScontrastError(f"n_features: sums to {int(k.sum())} but Z has {Z.shape[1]} columns")
    off = np.concatenate([[0], np.cumsum(k)])
    return [Z[:, off[b]:off[b + 1]] for b in range(k.size)]


@dataclass
class FeatureSamples:
    """Posterior samples of a feature allocation read from a samples file.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from scontrast.latent_features import load_samples, save_samples
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "samples.npz")
    ...     save_samples(path, [np.eye(3, dtype=np.uint8)], cell_names=["a", "b", "c"])
    ...     read = load_samples(path)
    >>> type(read).__name__, read.n_features.tolist(), read.cell_names.tolist()
    ('FeatureSamples', [3], ['a', 'b', 'c'])
    """

    samples: list
    cell_names: np.ndarray | None = None
    log_joint: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    @property
    def n_features(self) -> np.ndarray:
        return np.array([s.shape[1] for s in self.samples], dtype=np.int64)


def save_samples(path, samples, *, cell_names=None, log_joint=None, **traces) -> None:
    """Write samples (and optional cell names, log-joint and traces) to a ``.npz``.

    Written to a temporary file then renamed, so a killed job leaves no
    truncated file. See the module docstring for the format.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from scontrast.latent_features import load_samples, save_samples
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "samples.npz")
    ...     save_samples(path, [np.eye(3, dtype=np.uint8), np.ones((3, 1), np.uint8)])
    ...     [Z.shape for Z in load_samples(path).samples]
    [(3, 3), (3, 1)]
    """
    Z, k = pack_samples(samples)
    out = {"format": np.array(FORMAT), "version": np.array(VERSION), "Z": Z, "n_features": k}
    if cell_names is not None:
        names = np.asarray(cell_names).astype(str)
        if names.shape != (Z.shape[0],):
            raise ScontrastError(f"cell_names: has shape {names.shape} but the samples have {Z.shape[0]} rows")
        out["cell_names"] = names
    if log_joint is not None:
        out["log_joint"] = np.asarray(log_joint, dtype=np.float64)
    for key, value in traces.items():
        if key in out:
            raise ScontrastError(f"{key}: this trace name is a reserved key of the samples file")
        arr = np.asarray(value)
        if not np.issubdtype(arr.dtype, np.number):
            raise ScontrastError(f"{key}: a trace must be numeric, got dtype {arr.dtype}")
        out[key] = arr
    path = Path(path)
    tmp = temporary_beside(path)
    try:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **out)
        move_into_place(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_npz_size(path: Path) -> None:
    """Refuse a .npz whose members decompress beyond the .h5ad inputs' bound, before any is read.

    The members' sizes come from the zip directory (nothing is decompressed); the bound is
    :data:`scontrast.io.MAX_COMPRESSION_RATIO` times the file's size, above
    :data:`scontrast.io.BOMB_FLOOR_BYTES`, as for an ``.h5ad``. A file that is not a zip file is
    left to ``np.load``'s own message.
    """
    import zipfile

    from .io import BOMB_FLOOR_BYTES, MAX_COMPRESSION_RATIO, _human

    try:
        with zipfile.ZipFile(path) as zf:
            members = [(info.filename, info.file_size) for info in zf.infolist()]
    except (zipfile.BadZipFile, OSError):
        return
    total, on_disk = sum(size for _, size in members), path.stat().st_size
    if total > BOMB_FLOOR_BYTES and total > MAX_COMPRESSION_RATIO * max(on_disk, 1):
        largest = max(members, key=lambda m: m[1])[0]
        raise ScontrastError(
            f"samples file '{path}': its arrays take {_human(total)} once read but the file is {_human(on_disk)} "
            f"(more than {MAX_COMPRESSION_RATIO}x; largest: {largest}); refused as a possible decompression bomb"
        )


def load_samples(path) -> FeatureSamples:
    """Read a samples file written by ``save_samples`` (or by hand in that format).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from scontrast.latent_features import load_samples, save_samples
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "samples.npz")
    ...     save_samples(path, [np.ones((4, 1), np.uint8), np.zeros((4, 2), np.uint8)], log_joint=[-10.0, -9.5])
    ...     read = load_samples(path)
    >>> [Z.shape for Z in read.samples], read.log_joint.tolist()
    ([(4, 1), (4, 2)], [-10.0, -9.5])
    """
    path = Path(path)
    if not path.is_file():
        raise ScontrastError(f"samples file '{path}': does not exist")
    _check_npz_size(path)
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:  # numpy raises several types for non-npz files
        raise ScontrastError(f"samples file '{path}': is not a readable .npz file ({exc})") from None
    with data:
        keys = set(data.files)
        missing = {"Z", "n_features"} - keys
        if missing:
            raise ScontrastError(f"samples file '{path}': lacks {sorted(missing)} (see scontrast.feature_samples)")
        if "format" in keys and str(data["format"]) != FORMAT:
            raise ScontrastError(f"samples file '{path}': has format '{data['format']}', expected '{FORMAT}'")
        try:
            samples = check_samples(unpack_samples(data["Z"], data["n_features"]))
        except ValueError as exc:
            raise ScontrastError(f"samples file '{path}': {exc}") from None
        names = data["cell_names"].astype(str) if "cell_names" in keys else None
        if names is not None and names.shape != (samples[0].shape[0],):
            raise ScontrastError(f"samples file '{path}': cell_names has shape {names.shape}, "
                             f"expected ({samples[0].shape[0]},)")
        log_joint = data["log_joint"] if "log_joint" in keys else None
        extra = {k: data[k] for k in keys - {"Z", "n_features", "cell_names", "log_joint", "format", "version"}}
    return FeatureSamples(samples=samples, cell_names=names, log_joint=log_joint, extra=extra)
