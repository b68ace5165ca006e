"""Support of a feature per chain (_support.py): a known answer and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scontrast.core import ScontrastError
from scontrast.fangs._support import feature_support

from ._helpers import rand_fa


def jaccard(a, b):
    union = int((a | b).sum())
    return int((a & b).sum()) / union if union else 0.0


def support_brute_force(samples, E, groups):
    """Per sample, every one-to-one alignment of E's columns to the sample's (zero columns
    padding the shorter side) with the largest total overlap; None when that optimum is not
    unique in the Jaccard indices it gives (ties broken differently would change the score)."""
    k = E.shape[1]
    scores = []
    for S in samples:
        w = max(k, S.shape[1])
        Sp = np.pad(S, ((0, 0), (0, w - S.shape[1])))
        best, values = -1, set()
        for perm in itertools.permutations(range(w), k):
            total = sum(int((E[:, j] & Sp[:, perm[j]]).sum()) for j in range(k))
            jac = tuple(jaccard(E[:, j].astype(bool), Sp[:, perm[j]].astype(bool)) if perm[j] < S.shape[1] else 0.0
                        for j in range(k))
            if total > best:
                best, values = total, {jac}
            elif total == best:
                values.add(jac)
        if len(values) != 1:
            return None
        scores.append(values.pop())
    scores = np.array(scores)
    return np.stack([scores[np.asarray(groups) == g].mean(axis=0) for g in np.unique(groups)], axis=1)


def test_feature_support_known_answer():
    """Chain 0 holds both features exactly; chain 1 holds the first and, in place of the second, a
    feature sharing 2 of its 5 cells (plus 4 others), or nothing."""
    n = 30
    E = np.zeros((n, 2), dtype=np.uint8)
    E[:10, 0] = 1
    E[10:15, 1] = 1
    other = np.zeros((n, 1), dtype=np.uint8)
    other[[10, 11, 20, 21, 22, 23], 0] = 1
    chain0 = [E.copy(), E[:, ::-1].copy()]  # column order does not matter
    chain1 = [np.hstack([E[:, :1], other]), E[:, :1].copy()]
    support, labels = feature_support(chain0 + chain1, E, [7, 7, 3, 3])
    assert list(labels) == [3, 7]
    np.testing.assert_allclose(support, [[1.0, 1.0], [0.5 * 2 / 9, 1.0]])
    one, lab = feature_support(chain0 + chain1, E)  # one group: the mean over all samples
    assert list(lab) == [0]
    np.testing.assert_allclose(one[:, 0], [1.0, (1 + 1 + 2 / 9 + 0) / 4])
    empty, _ = feature_support([np.zeros((n, 0), np.uint8)] * 2, E)
    np.testing.assert_array_equal(empty, np.zeros((2, 1)))
    assert feature_support(chain0, E[:, :0])[0].shape == (0, 1)
    with pytest.raises(ScontrastError, match=r"^groups: has shape \(3,\) but there are 4 samples"):
        feature_support(chain0 + chain1, E, [0, 0, 1])
    with pytest.raises(ScontrastError, match=r"^estimate: has 29 rows"):
        feature_support(chain0, E[:-1])


@pytest.mark.parametrize("seed", range(4))
def test_feature_support_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, checked = 9, 0
    for _ in range(40):
        E = rand_fa(rng, n, int(rng.integers(1, 4)), 0.4)
        samples = [rand_fa(rng, n, int(rng.integers(0, 4)), 0.4) for _ in range(4)]
        groups = [0, 1, 0, 1]
        brute = support_brute_force(samples, E, groups)
        if brute is None:
            continue
        np.testing.assert_allclose(feature_support(samples, E, groups)[0], brute, atol=1e-12)
        checked += 1
    assert checked >= 5
