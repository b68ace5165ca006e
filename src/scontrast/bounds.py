"""The largest value of every count-like parameter, in one place.

Each method's estimator (or front end, or figure) refuses a value above its bound in
``_check_params`` with one line naming it (``n_permutations=1000000000 is above its maximum
100000``); the workflow's schema of the method states the same bound as ``maximum``
(``maxItems`` for a list), which ``tests/test_bounds.py`` checks key by key, as
``tests/test_defaults.py`` does for the defaults. A key ``plot.<name>`` is a keyword of the
method's figure (its block's ``plot`` entry).

The bounds are sized so that one job at the bound, with every other parameter at its
default, fits a machine of 24 GB and a day (the reason is given next to each; times are
single-core, measured or extrapolated from the demo data and ``benchmarks/``). Where the
memory a parameter costs also grows with the data (cells, genes), the product is checked
against :data:`MEMORY_BUDGET` before anything is allocated (:func:`check_memory`).
"""

from __future__ import annotations

from .core import ScontrastError, check_int

#: Bytes one structure of a method may take: a third of 24 GB, leaving room for the data,
#: its copies and a second job on the same machine.
MEMORY_BUDGET = 8 * 2**30

MAXIMUM: dict[str, dict[str, int]] = {
    "sparda": {
        # a p-value resolved to 1e-5; 'split' sorts 400 batches of 256 x cells (minutes), 'permute'
        # and 'replicate' take ~5 min per 100,000 labellings at their size; 'refit' is a whole fit
        # each (its progress lines give the time left)
        "n_permutations": 100_000,
        # RELAX eigendecomposes a max_genes x max_genes matrix per step (~45 s at 5000 on one core):
        # 12 lambdas x 3 folds x 20 steps at the defaults ~ 9 h; each such matrix 200 MB
        "max_genes": 5_000,
        "k": 5_000,  # genes of a direction: at most the screened genes (max_genes)
        "n_directions": 50,  # each a whole fit on the deflated data
        "cv_folds": 20,  # each fold a lambda path of fits
        "n_lambdas": 100,  # each a RELAX + tightening per fold
        # cells per group of the lambda folds: each fold's path of fits sorts them per step
        "cv_max_cells": 10_000_000,
        # cells of the replicate test's relabellings: each re-optimises on about twice this many
        "test_max_cells": 10_000_000,
        # one exact transport problem between 2 x relax_max_cells cells per RELAX step, O(cells^3):
        # seconds at 2000, ~800 steps at the defaults ~ 1 h
        "relax_max_cells": 2_000,
        "relax_max_iter": 1_000,  # steps, each an eigendecomposition (above)
        "relax_patience": 1_000,
        "tighten_max_iter": 100_000,  # gradient steps, each a projection and a sort of all cells
        "plot.n_genes": 200,  # one tick label per gene: more cannot be read
    },
    "cpca": {
        "n_components": 1_000,  # genes x components loadings, one dense eigenproblem per alpha
        "n_alphas": 1_000,  # one eigenproblem each (seconds at 2000 genes)
        "n_alpha_clusters": 100,  # one panel each in the figure
        "max_iter": 100_000,  # iterations of the iterative eigensolver (large gene sets)
    },
    "pcpca": {
        "n_components": 1_000,
        "max_iter": 100_000,  # L-BFGS iterations (missing values)
    },
    "quadro": {
        # the candidates as a dense cells x n_genes matrix (50,000 x 20,000 = 8 GB, checked
        # against MEMORY_BUDGET with the cells), ranked once
        "n_genes": 20_000,
        "outer_cv": 20,  # each outer fold a nested fit
        # Omega is n_features x n_features and each solver step projects it (an eigendecomposition,
        # 0.1 s at 500): 36 grid points x 6 fits x 6 outer models at the defaults in hours
        "n_features": 500,
        "cv": 20,
        "patience": 100,  # grid points without improvement
        "max_iter": 100_000,  # solver steps per fit (5000 by default)
        "lambda_grid": 50,  # its length: 50 x 50 grid points when both lambdas are searched
        # cells each fit learns from (a stratified subsample above it): a fit costs about cells x
        # n_genes (the screen, the folds' scores), a cells x n_features block held dense per fold
        "max_cells": 10_000_000,
        "plot.bins": 1_000,
    },
    "latent_features": {
        "n_genes": 2_000,  # D: a sweep costs cells x K x D (seconds at 50,000 cells and 2000 genes)
        "n_dims": 1_000,
        # sweeps per chain: 8 ms each at 3,000 cells x 30 dims (docs/latent_features.md), ~0.2 s at
        # 50,000 cells x 50 genes: about 6 h at the bound
        "ibp.n_iter": 100_000,
        "ibp.burn_in": 100_000,  # below n_iter anyway
        "ibp.thin": 100_000,
        "ibp.n_chains": 64,  # one thread each; the kept samples of all are held (check_memory)
        "ibp.max_features": 1_000,  # K: K x K and K x D work arrays per chain, cells x K samples
        "ibp.max_new": 100,  # features a cell may open at once, each a likelihood evaluation
        "ibp.max_cells": 10_000_000,  # cells the chains run on (the rest extended per kept sample): held as cells x D
        "ibp.init_features": 1_000,  # at most max_features
        "ibp.block_moves": 1_000,  # moves per sweep, each a pass over the cells
        "ibp.death_moves": 1_000,
        # method 'ensemble': members per K, each a fit of cells x 2^K patterns per alternation
        "ensemble.max_features": 12,  # each cell's 2^K patterns are enumerated
        "ensemble.n_members": 1_000,
        "ensemble.starts": 100,
        "ensemble.max_iter": 10_000,
        "ensemble.min_cells": 10_000_000,
        "ensemble.max_cells": 10_000_000,
    },
    "fangs": {
        # each baseline aligns all B samples (~1 s at 2,000 cells and 1,000 samples, benchmarks/results/
        # bench_fangs.txt; ~25 s at 50,000 cells: 7 h at the bound) and its candidate, cells x K bytes,
        # is held until the best are chosen (n_init x cells x K checked by check_memory)
        "n_init": 1_000,
        "n_sweet": 100,  # candidates sweetened, each n_iter flips
        # flips per sweetening, ~1 ms each at 2,000 cells (bench_fangs.txt): 20 min at the bound
        "n_iter": 1_000_000,
        "n_top_genes": 1_000,
    },
    "pseudobulk": {
        "min_total_count": 1_000_000_000,  # a threshold on summed counts; beyond it no gene is kept
    },
}


def check_count(value, name: str, minimum: int, method: str, *, key: str | None = None,
                allow_none: bool = False) -> int | None:
    """``value`` as an int in ``[minimum, MAXIMUM[method][key or name]]`` (None when allowed).

    Below the minimum or not an integer: :func:`scontrast.core.check_int`'s message; above the
    bound: ``"<name>=<value> is above its maximum <bound>"``.
    """
    value = check_int(value, name, minimum, allow_none=allow_none)
    bound = MAXIMUM[method][key or name]
    if value is not None and value > bound:
        raise ScontrastError(f"{name}={value} is above its maximum {bound}")
    return value


def check_memory(nbytes: float, name: str, value, what: str) -> None:
    """Refuse, naming ``name``, a structure of ``nbytes`` above :data:`MEMORY_BUDGET` before it is allocated.

    ``what`` says what would be held and how its size comes about (the product of the
    parameter with the data's size), e.g. ``"16 baselines' candidates (16 x 50000 cells x 30)"``.
    """
    if nbytes > MEMORY_BUDGET:
        raise ScontrastError(
            f"{name}={value}: {what} would take {nbytes / 2**30:.1f} GB, above the "
            f"{MEMORY_BUDGET / 2**30:g} GB a method may hold; lower {name}")
