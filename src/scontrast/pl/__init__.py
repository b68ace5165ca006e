"""Figures of each method: ``pl.<method>(adata, ...) -> matplotlib Figure``.

Functions only build figures (never ``plt.show()``); the rule scripts save them.
"""

from ..core import lazy_attributes

# each figure (and matplotlib) loads when first used
_WHERE = {name: f"._{name}" for name in ("cpca", "fangs", "pcpca", "preprocess", "pseudobulk", "quadro", "sparda")}
__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
__all__ = sorted(_WHERE)
