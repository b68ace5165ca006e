"""Figures of each method: ``pl.<method>(adata, ...) -> matplotlib Figure``.

Functions only build figures (never ``plt.show()``); the rule scripts save them.
"""

from ._fangs import fangs
from ._pcpca import pcpca
from ._preprocess import preprocess

__all__ = ["fangs", "pcpca", "preprocess"]
