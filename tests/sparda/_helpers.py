"""Data shared by the SPARDA tests: planted differences."""

import numpy as np


def _planted(n, m, d, genes, kind, rng, effect=1.0, rho=0.85):
    X = rng.normal(size=(n, d))
    Y = rng.normal(size=(m, d))
    g = np.asarray(genes)
    if kind == "mean":
        Y[:, g] += effect
    elif kind == "cor":
        C = np.full((g.size, g.size), rho)
        np.fill_diagonal(C, 1.0)
        Y[:, g] = rng.multivariate_normal(np.zeros(g.size), C, size=m)
    elif kind == "var":
        Y[:, g] *= effect
    return X, Y
