"""Figures of each method: ``pl.<method>(adata, ...) -> matplotlib Figure``.

Functions only build figures (never ``plt.show()``); the rule scripts save them.
"""

from ._cpca import cpca
from ._fangs import fangs
from ._pcpca import pcpca
from ._preprocess import preprocess
from ._quadro import quadro
from ._sparda import sparda

__all__ = ["cpca", "fangs", "pcpca", "preprocess", "quadro", "sparda"]
