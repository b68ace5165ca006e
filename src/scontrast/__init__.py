"""scontrast: what differs between a target and a background population of cells.

Estimators (numpy in, numpy out) live in ``scontrast.sparda``, ``.cpca``,
``.pcpca``, ``.quadro``, ``.latent_features`` and ``.fangs``; their scanpy-style
AnnData front ends in ``scontrast.tl``; figures in ``scontrast.pl``; file
handling in ``scontrast.io``; preprocessing in ``scontrast.preprocess``; what
every layer shares (target key, errors, versions, input checks, RNG and BLAS
threads) in ``scontrast.core``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("scontrast")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

from . import core  # noqa: E402
from .core import TARGET_KEY, ScontrastConvergenceWarning, ScontrastError, ScontrastWarning  # noqa: E402
from .preprocess import preprocess  # noqa: E402  (the function; scanpy itself loads when it runs)

# io (anndata), tl and pl (each method) load on first use: a workflow job pays only for what it calls
__getattr__, __dir__ = core.lazy_attributes(__name__, {"io": ".io", "pl": ".pl", "tl": ".tl", "summary": ".summary"})

__all__ = ["core", "io", "pl", "tl", "preprocess", "ScontrastError", "ScontrastWarning", "ScontrastConvergenceWarning",
           "TARGET_KEY", "__version__"]
