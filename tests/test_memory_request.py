"""The memory a job asks SLURM for: from the matrices its rule reads, never the layers it does not."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import make_counts
from scontrast import io
from scontrast._workflow import MEMORY, input_sizes, memory_request_mb, memory_spec

MB = 2**20


def _h5ad(x_mb, layers_mb=None, other_mb=0.0):
    """input_sizes of an .h5ad: X, layers and the rest (obs, var, uns...) in MB."""
    layers = {k: v * MB for k, v in (layers_mb or {}).items()}
    return {"X": x_mb * MB, "layers": layers, "total": x_mb * MB + sum(layers.values()) + other_mb * MB, "whole": False}


def test_a_method_counts_x_and_the_layers_it_reads_of_its_base():
    base = _h5ad(3000, {"counts": 3000, "spliced": 1000}, other_mb=20)  # obs, var, uns: 20 MB
    delta = _h5ad(0, other_mb=5)
    assert memory_request_mb([base, delta], 3, layers=()) == 3 * 3000 + 20 + 5  # the layers: not read, not counted
    assert memory_request_mb([base, delta], 3, layers=["counts"]) == 3 * 6000 + 25
    assert memory_request_mb([base, delta], 3, layers=["spliced", "absent"]) == 3 * 4000 + 25
    assert memory_request_mb([base, delta], 3, layers="all") == 3 * 7000 + 25
    assert memory_request_mb([base, delta], 2, x=False) == 2 * 4000 + 25  # a figure: the layers, not X
    assert memory_request_mb([base, delta], 1, x=False, layers=()) == 2000  # the annotations: the floor
    assert memory_request_mb([base, delta], 1, x=False, layers=(), floor=10) == 25


def test_the_other_inputs_are_read_whole():
    base = _h5ad(1000, {"counts": 1000})
    other = _h5ad(100, {"a": 50}, other_mb=7)  # a delta with a matrix of its own
    samples = {"X": 0, "layers": {}, "total": 300 * MB, "whole": True}
    assert memory_request_mb([base, other, samples], 2, layers=()) == 2 * (1000 + 150 + 300) + 7


def test_retries_double_the_request_and_the_floor():
    base = _h5ad(1000)
    assert [memory_request_mb([base], 3, attempt=a) for a in (1, 2, 3)] == [3000, 6000, 12000]
    assert [memory_request_mb([_h5ad(10)], 3, attempt=a) for a in (1, 2)] == [2000, 4000]


def test_input_sizes_of_each_kind_of_file(tmp_path):
    a = make_counts(n_cells=300, n_genes=200)
    a.layers["counts"] = a.X.copy()
    io.write_h5ad(a, tmp_path / "a.h5ad")
    sizes = input_sizes(tmp_path / "a.h5ad")
    assert sizes == {**io.hdf5_sizes(tmp_path / "a.h5ad"), "whole": False}
    assert sizes["layers"]["counts"] == sizes["X"]
    # a samples file: its members once read (compressed zeros: far more than on disk)
    np.savez_compressed(tmp_path / "s.npz", Z=np.zeros((20000, 400), dtype=np.uint8))
    s = input_sizes(tmp_path / "s.npz")
    assert s["whole"] and s["total"] >= 20000 * 400 > 50 * (tmp_path / "s.npz").stat().st_size
    # not an .h5ad, or one that cannot be inspected: its size on disk, read whole
    (tmp_path / "b.h5ad").write_bytes(b"not hdf5" * 1000)
    assert input_sizes(tmp_path / "b.h5ad") == {"X": 0, "layers": {}, "total": 8000, "whole": True}
    with pytest.raises(FileNotFoundError):  # snakemake: not known yet
        input_sizes(tmp_path / "missing.h5ad")


def test_every_rule_has_a_spec_and_the_factors_keep_the_margin():
    """Every rule of the workflow that asks for memory has an entry; no factor under 1."""
    import re

    from conftest import REPO

    rules = set()
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        rules |= set(re.findall(r'mem_mb=mem_mb\("(\w+)"\)', smk.read_text()))
    assert {"preprocess", "sparda", "fangs", "collect", "summary", "fangs_figure"} <= rules
    for rule in rules:
        spec = memory_spec(rule)
        assert spec.per_input_mb >= 1
        assert spec.layers in ("all", "config") or (isinstance(spec.layers, tuple)
                                                    and all(isinstance(k, str) for k in spec.layers))
    assert memory_spec("quadro_figure") == MEMORY["figure"]
    # pseudobulk reads the counts layer, not X: its request follows the layer alone
    mb = 2**20
    base = {"X": 900 * mb, "layers": {"counts": 1000 * mb, "other": 5000 * mb}, "total": 6910 * mb, "whole": False}
    spec = memory_spec("pseudobulk")
    assert not spec.x and spec.layers == ("counts",)
    assert memory_request_mb([base], spec.per_input_mb, x=spec.x, layers=spec.layers) == int(
        spec.per_input_mb * 1000 + 10)
    with pytest.raises(KeyError):
        memory_spec("unknown")
