"""The ``pl`` figures name the groups' column as the ``tl`` front ends do: ``groupby``; ``key=`` is its
deprecated alias (``FutureWarning``, the same figure)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from test_tl_names import METHODS, _adata  # noqa: E402

from scontrast import pl  # noqa: E402
from scontrast.core import TARGET_KEY, ScontrastError  # noqa: E402

# method -> keywords of its figure given the groups' column (cPCA and PCPCA colour the cells by it)
COLOUR = {"cpca": lambda col: {"color": col}, "pcpca": lambda col: {"color": col}}


def _drawn(fig) -> list:
    """What a figure draws, its text aside: points and their colours, bars, lines, images, per Axes."""
    out = []
    for ax in fig.axes:
        for c in ax.collections:
            out += [np.asarray(c.get_offsets(), float), np.asarray(c.get_facecolors(), float)]
        for p in ax.patches:
            out.append(np.asarray(p.get_path().transformed(p.get_patch_transform()).vertices, float))
        out += [np.asarray(line.get_xydata(), float) for line in ax.lines]
        out += [np.asarray(im.get_array(), float) for im in ax.get_images()]
    return out


def _figure(method: str, a, **kw):
    fig = getattr(pl, method)(a, **kw)
    drawn = _drawn(fig)
    plt.close(fig)
    return drawn


def _fitted(method: str, column: str):
    """``_adata(column)`` after ``tl.<method>`` with ``groupby=column``; a default-named column holding the
    groups the other way round, so that a figure reading it instead of ``column`` draws otherwise."""
    call, _ = METHODS[method]
    a = _adata(column)
    call(a, **({} if column == TARGET_KEY else {"groupby": column}), random_state=0)
    if column != TARGET_KEY:
        a.obs[TARGET_KEY] = ~a.obs[column].to_numpy(bool)
    return a


@pytest.mark.parametrize("method", sorted(METHODS))
def test_pl_groupby_names_the_groups_and_key_is_its_deprecated_alias(method):
    colour = COLOUR.get(method, lambda col: {})
    expected = _figure(method, _fitted(method, TARGET_KEY), **colour(TARGET_KEY))
    assert len(expected) > 0

    def same(drawn):
        assert len(drawn) == len(expected)
        for x, y in zip(drawn, expected, strict=True):
            np.testing.assert_array_equal(x, y)

    # read from the named column, not from a default-named one holding the groups the other way round (QUADRO's
    # figure reads the column tl.quadro recorded as its groupby when that is a boolean split: here the same)
    same(_figure(method, _fitted(method, "is_case"), groupby="is_case", **colour("is_case")))
    with pytest.warns(FutureWarning, match=rf"pl\.{method}: 'key' is deprecated .* use 'groupby'"):
        aliased = _figure(method, _fitted(method, "is_case"), key="is_case", **colour("is_case"))
    same(aliased)
    with pytest.raises(ScontrastError, match="'key' is the deprecated name of 'groupby'"), pytest.warns(FutureWarning):
        getattr(pl, method)(_fitted(method, "is_case"), key="is_case", groupby="other")
