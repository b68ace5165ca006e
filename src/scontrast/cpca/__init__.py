"""Contrastive PCA (Abid et al. 2018) with automatic alpha, and kernel cPCA.

For target cells X (n x d) and background cells Y (m x d), each centred on its own mean, the
contrastive components at contrast strength ``alpha`` are the top eigenvectors of
``C_X - alpha * C_Y``. The files:

``_estimator.py``
    :class:`CPCA`: parameter checks, the solver choice, the fitted attributes.
``_kernel.py``
    :class:`KernelCPCA`: cPCA in the coordinates of a centred kernel.
``_alpha.py``
    the alpha grid, the alpha setting, subspace affinities and the automatic choice of alpha
    (spectral clustering of the grid, merging of alike alphas).
``_solve.py``
    the four solvers ('full', 'covariance', 'gram', 'implicit') for a whole alpha grid.
``_eigen.py``
    the batched block Davidson iteration and the coarse-to-fine grid solve.
``_basis.py``
    the basis it iterates in (C_Y's torn tridiagonal form) and the dense reductions that build it.
``_moments.py``
    centring, scaling, covariances, Gram blocks and covariance products of the two groups.
``_threads.py``
    the fit's thread count (``n_jobs``) and how the solvers use it.
``_simulate.py``
    simulated target and background data with a known contrast (tests and benchmarks).
"""

from ._alpha import alpha_grid, select_alphas, subspace_affinity
from ._estimator import CPCA
from ._kernel import KernelCPCA

__all__ = [
    "CPCA",
    "KernelCPCA",
    "alpha_grid",
    "subspace_affinity",
    "select_alphas",
]
