"""scontrast: what differs between a target and a background population of cells.

Estimators (numpy in, numpy out) live in ``scontrast.sparda``, ``.cpca``,
``.pcpca``, ``.quadro``, ``.latent_features`` and ``.fangs``; their scanpy-style
AnnData front ends in ``scontrast.tl``; figures in ``scontrast.pl``; file
handling in ``scontrast.io``; preprocessing in ``scontrast.preprocess``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("scontrast")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

from . import io, pl, tl  # noqa: E402
from .preprocess import preprocess  # noqa: E402

__all__ = ["io", "pl", "tl", "preprocess", "__version__"]
