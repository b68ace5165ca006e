"""The gene screen: each gene's own Rayleigh quotient, co-expression changes, and the selector using both.

QUADRO keeps ``n_features`` genes per fit, chosen on that fit's training samples only
(:class:`RayleighScreen`): the genes whose own distribution changes most
(:func:`marginal_rayleigh`) and those of the gene pairs whose correlation changes most
(:func:`coexpression_change`), which Omega's off-diagonal can use.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.stats import norm
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ..core import ScontrastError, check_int, check_option, check_real
from ._utils import _column_blocks, _not_tiny, _take, _two_classes


def marginal_rayleigh(X1, X2, gamma: float | None = None, pi: float | None = None) -> np.ndarray:
    """QUADRO's Rayleigh quotient of each gene alone: the screening statistic.

    For one column the best quadratic ``Q(x) = w x^2 - 2 b x`` has Rayleigh quotient
    ``pi (1-pi) a' H^-1 a`` with ``a = (v2 + m2^2 - v1 - m1^2, -2 (m2 - m1))`` and
    ``H = sum_k pi_k [[(2 + 3 g) v_k^2 + 4 v_k m_k^2, -4 v_k m_k], [-4 v_k m_k, 4 v_k]]``
    (means ``m_k``, variances ``v_k``, kurtosis parameter ``g``), so it grows with
    a mean shift (LDA's ``Delta^2 / v`` when the variances agree) and with a
    variance change alike, discounted for heavy tails through ``g``. It is what
    QUADRO maximises restricted to one gene (the analogue of sure independence
    screening for the lasso); a gene that matters only through its co-expression
    with others is invisible to it, as to every marginal statistic.

    Parameters
    ----------
    X1 : (n1, d) array of class 1, X2 : (n2, d) array of class 2 (sample moments); dense
        or sparse (a sparse one is made dense a block of columns at a time, same result).
    gamma : None = each gene's pooled marginal kurtosis / 3 - 1 (at least -2/3, the
        one-dimensional elliptical bound); else this value for every gene.
    pi : weight of class 1; None = its share of the samples.

    Returns
    -------
    (d,) array >= 0 (0 for a gene constant in both classes).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import marginal_rayleigh
    >>> rng = np.random.default_rng(0)
    >>> X1, X2 = rng.normal(size=(100, 3)), rng.normal(size=(100, 3))
    >>> X2[:, 1] *= 3.0                                     # gene 1 spreads more in class 2
    >>> int(np.argmax(marginal_rayleigh(X1, X2)))
    1
    """
    X1, X2 = _two_classes(X1, X2, keep_sparse=True)
    n1, n2 = X1.shape[0], X2.shape[0]
    pi = n1 / (n1 + n2) if pi is None else float(pi)
    w = np.array([pi, 1.0 - pi])
    m, m2, m4 = [], [], []
    for X in (X1, X2):
        mean, c2, c4 = _central_moments(X)
        m.append(mean)
        m2.append(c2)
        m4.append(c4)
    m = np.stack(m)
    v = np.stack([m2[0] * n1 / (n1 - 1), m2[1] * n2 / (n2 - 1)])
    center = w @ m
    pooled = w @ v
    ok = _not_tiny(pooled)
    sc = np.sqrt(np.where(ok, pooled, 1.0))
    m = (m - center) / sc
    v = v / sc**2
    if gamma is None:
        k4 = np.zeros(X1.shape[1])
        for n, c2, c4 in ((n1, m2[0], m4[0]), (n2, m2[1], m4[1])):
            c2 = c2 / sc**2  # the kurtosis c4 / c2^2 is scale free; the test of c2 > 0 is on the scaled value
            c4 = c4 / sc**4
            k4 += n * np.where(c2 > 0, c4 / np.where(c2 > 0, c2, 1.0) ** 2, 3.0)
        g = np.maximum(k4 / (n1 + n2) / 3.0 - 1.0, -2.0 / 3.0)
    else:
        g = np.full(X1.shape[1], float(gamma))
    h11 = np.einsum("k,kj->j", w, (2.0 + 3.0 * g) * v**2 + 4.0 * v * m**2)
    h12 = np.einsum("k,kj->j", w, -4.0 * v * m)
    h22 = np.einsum("k,kj->j", w, 4.0 * v)
    ridge = 1e-9 * (h11 + h22)
    h11, h22 = h11 + ridge, h22 + ridge
    a1 = v[1] + m[1] ** 2 - v[0] - m[0] ** 2
    a2 = -2.0 * (m[1] - m[0])
    det = h11 * h22 - h12**2
    quad = (h22 * a1**2 - 2.0 * h12 * a1 * a2 + h11 * a2**2) / np.where(det > 0, det, 1.0)
    return np.where(ok & (det > 0), pi * (1.0 - pi) * np.maximum(quad, 0.0), 0.0)


def _dense_central_moments(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each column's mean, second and fourth central moments (n, d) -> 3 x (d,), in one centred copy."""
    mean = X.mean(axis=0)
    C = X - mean
    np.multiply(C, C, out=C)
    m2 = C.mean(axis=0)
    np.multiply(C, C, out=C)
    return mean, m2, C.mean(axis=0)


def _central_moments(X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_dense_central_moments` of a dense or CSR (n, d) matrix; a sparse one in dense column blocks.

    The blocks give bitwise the moments of the whole matrix made dense (see ``_column_blocks``)
    while only one block (about 128 MB) is dense at a time.
    """
    if not sp.issparse(X):
        return _dense_central_moments(X)
    Xc = sp.csc_matrix(X)
    out = np.empty((3, X.shape[1]))
    for cols in _column_blocks(*X.shape):
        block = Xc[:, cols[0]: cols[-1] + 1].toarray(order="C")
        out[:, cols] = np.stack(_dense_central_moments(block))
    return out[0], out[1], out[2]


def coexpression_change(X1, X2) -> np.ndarray:
    """Standardised change of every pairwise correlation between the classes; (d, d) array.

    ``|r2_ij - r1_ij| / sqrt(v1_ij + v2_ij)`` with Pearson correlations ``r_k`` and
    ``v_k = (mean(z_i^2 z_j^2) - r_k^2) / n_k`` the sampling variance of the mean
    cross-product of the standardised genes ``z`` in class k (about |N(0, 1)| when the
    correlations are equal and the genes uncorrelated; ``(1 + r^2) / n`` for Gaussian
    genes). The variance is estimated from the data, so two genes expressed in the same
    one or two cells (a correlation near 1 by coincidence, which Fisher's z would call a
    perfect co-expression) get a large variance and a small score. 0 on the diagonal and
    for a gene constant in a class.

    Parameters
    ----------
    X1 : (n1, d) array of class 1, X2 : (n2, d) array of class 2 (n1, n2 >= 4).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import coexpression_change
    >>> rng = np.random.default_rng(0)
    >>> X1, X2 = rng.normal(size=(200, 3)), rng.normal(size=(200, 3))
    >>> X2[:, 1] = X2[:, 0] + 0.1 * X2[:, 1]                # genes 0 and 1 co-vary in class 2 only
    >>> C = np.abs(np.triu(coexpression_change(X1, X2), 1))
    >>> [int(i) for i in np.unravel_index(np.argmax(C), C.shape)]
    [0, 1]
    """
    r, v = [], []
    for X in (X1, X2):
        n = X.shape[0]
        C = X - X.mean(axis=0)
        sd = np.sqrt((C * C).mean(axis=0))
        ok = _not_tiny(sd)
        C = C / np.where(ok, sd, 1.0)
        C[:, ~ok] = 0.0
        R = C.T @ C / n
        C *= C
        Q = C.T @ C / n  # mean of z_i^2 z_j^2
        r.append(R)
        v.append(np.maximum(Q - R * R, 0.0) / n)
    den = np.sqrt(v[0] + v[1])
    out = np.where(den > 0, np.abs(r[1] - r[0]) / np.where(den > 0, den, 1.0), 0.0)
    np.fill_diagonal(out, 0.0)
    return out


class RayleighScreen(SelectorMixin, BaseEstimator):
    """Keep the ``k`` features whose distribution or co-expression changes most (a scikit-learn selector).

    Features are ranked by their own change (mean and spread): :func:`marginal_rayleigh`
    scaled as a test statistic (``RQ / (pi (1-pi) (1/n1 + 1/n2))``, Student's t^2 for a
    pure mean shift) and referred to chi^2 with 2 degrees of freedom. Up to
    ``max(2, k // 5, k - m)`` of the ``k`` places (``m`` = the marginally significant
    features, Bonferroni over all at 5 %: when few genes change on their own, co-expression
    gets the room) go first to the genes of the pairs whose correlation changes most
    (:func:`coexpression_change` among the ``n_pair_genes`` marginally strongest features,
    significant after Bonferroni over all their pairs at 5 %), so that genes differing only
    in co-expression (what Omega's off-diagonal captures) are kept too; places no such pair
    takes go back to the marginal ranking.
    Fitted on training samples only (QUADRO fits one per training fold), so the choice
    never sees held-out labels.

    Parameters
    ----------
    k : int >= 1 or None; None = every feature.
    gamma : kurtosis parameter of :func:`marginal_rayleigh` (None = per gene).
    class_weight : ``'balanced'`` (both classes weigh 1/2) or None (their shares).
    n_pair_genes : int >= 0, the features (marginally strongest first) whose pairwise
        correlation changes are scored; 0 = marginal changes only.

    Attributes
    ----------
    scores_ : (d,) ``-log10`` of each feature's marginal p-value (larger = kept first);
    marginal_ : (d,) :func:`marginal_rayleigh`; pairs_ : list of ``(i, j, z)``, the
    co-expression pairs kept; support_ : (d,) bool, the kept ones (ties broken by
    column order).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import RayleighScreen
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(200, 10)), np.repeat([0, 1], 100)
    >>> X[y == 1, 3] += 1.5                                   # feature 3 shifts in class 1
    >>> X[y == 1, 7] *= 3.0                                   # feature 7 spreads in class 1
    >>> screen = RayleighScreen(k=2).fit(X, y)
    >>> np.flatnonzero(screen.support_).tolist()
    [3, 7]
    """

    def __init__(self, k=50, gamma=None, class_weight="balanced", n_pair_genes=500):
        self.k = k
        self.gamma = gamma
        self.class_weight = class_weight
        self.n_pair_genes = n_pair_genes

    def _check_params(self) -> None:
        """Refuse a bad hyper-parameter with one line ``"<name>: <problem>"`` (``ScontrastError``)."""
        check_int(self.k, "k", 1, allow_none=True)
        check_int(self.n_pair_genes, "n_pair_genes", 0)
        check_option(self.class_weight, "class_weight", ["balanced", None])
        check_real(self.gamma, "gamma", -2.0 / 3.0, allow_none=True)

    def fit(self, X, y, pi=None):
        """Rank the columns of X (n, d; dense or CSR) for the binary labels y (n,); returns self.

        ``pi`` (weight of the first class) overrides ``class_weight``.
        """
        self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float64, accept_sparse="csr")
        classes = np.unique(y)
        if classes.size != 2:
            raise ScontrastError(f"y: expected two classes, got {classes.size}")
        two = y == classes[1]
        n1, n2 = int((~two).sum()), int(two.sum())
        if pi is None:
            pi = 0.5 if self.class_weight == "balanced" else n1 / (n1 + n2)
        self.marginal_ = marginal_rayleigh(X[~two], X[two], gamma=self.gamma, pi=pi)
        stat = self.marginal_ / (pi * (1.0 - pi) * (1.0 / n1 + 1.0 / n2))
        self.scores_ = 0.5 * stat / math.log(10.0)  # -log10 of chi^2_2's survival function exp(-stat / 2)
        d = X.shape[1]
        keep = d if self.k is None else min(int(self.k), d)
        order = np.argsort(-self.scores_, kind="stable")
        self.support_ = np.zeros(d, dtype=bool)
        self.pairs_ = []
        m = min(int(self.n_pair_genes), d)
        # a fifth of the places, or every place the marginally significant genes (Bonferroni 5 %) leave free
        n_marginal = int(np.sum(self.scores_ > -math.log10(0.05 / d)))
        slots = max(2, keep // 5, keep - n_marginal) if keep < d else 0
        if slots and m >= 2 and min(n1, n2) >= 4:
            top = order[:m]
            chosen, self.pairs_ = _coexpression_pairs(_take(X, ~two, top), _take(X, two, top), top, slots)
            self.support_[chosen] = True
        rest = [g for g in order if not self.support_[g]][: keep - int(self.support_.sum())]
        self.support_[rest] = True
        return self

    def _get_support_mask(self):
        check_is_fitted(self)
        return self.support_


def _coexpression_pairs(X1, X2, top: np.ndarray, slots: int) -> tuple[list, list]:
    """The genes of the significant co-expression changes among the columns ``top``, at most ``slots`` of them.

    ``X1``, ``X2`` hold the ``top`` columns of the two classes. Pairs are taken by
    decreasing change while their new genes fit in; returns the genes (indices of the
    full matrix, in the order taken) and the pairs ``(i, j, z)`` kept.
    """
    m = top.size
    z = coexpression_change(X1, X2)
    iu, ju = np.triu_indices(m, 1)
    zz = z[iu, ju]
    # pairs whose correlation change survives Bonferroni over all m (m - 1) / 2 pairs at 5 %
    # (two-sided normal test: |z| beyond the 1 - 0.025 / n_pairs quantile)
    sig = np.flatnonzero(zz > norm.isf(0.025 / iu.size))
    chosen, pairs = [], []
    for p in sig[np.argsort(-zz[sig], kind="stable")]:
        new = [g for g in (top[iu[p]], top[ju[p]]) if g not in chosen]
        if len(chosen) + len(new) > slots:
            break
        chosen += new
        pairs.append((int(top[iu[p]]), int(top[ju[p]]), float(zz[p])))
    return chosen, pairs
