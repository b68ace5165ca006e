"""The samples file between the latent-feature sampler and FANGS (scontrast.feature_samples)."""

import numpy as np
import pytest

from scontrast.core import ScontrastError
from scontrast.feature_samples import load_samples, pack_samples, save_samples, unpack_samples


def test_samples_file_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    samples = [(rng.random((7, k)) < 0.5).astype(np.uint8) for k in (2, 0, 3, 1)]
    names = np.array([f"cell{i}" for i in range(7)])
    path = tmp_path / "s.npz"
    save_samples(path, samples, cell_names=names, log_joint=np.arange(5.0), K=np.array([2, 0, 3, 1, 1]))
    fs = load_samples(path)
    assert all(np.array_equal(s, t) for s, t in zip(samples, fs.samples))
    np.testing.assert_array_equal(fs.cell_names, names)
    np.testing.assert_array_equal(fs.log_joint, np.arange(5.0))
    np.testing.assert_array_equal(fs.extra["K"], [2, 0, 3, 1, 1])
    np.testing.assert_array_equal(fs.n_features, [2, 0, 3, 1])
    with np.load(path, allow_pickle=False) as raw:  # the documented layout
        assert raw["Z"].shape == (7, 6) and raw["Z"].dtype == np.uint8
        assert str(raw["format"]) == "scontrast.feature_samples" and int(raw["version"]) == 1
    Z, k = pack_samples(samples)
    assert all(np.array_equal(s, t) for s, t in zip(samples, unpack_samples(Z, k)))
    # a hand-written file with only the required keys
    np.savez(tmp_path / "min.npz", Z=Z, n_features=k)
    assert load_samples(tmp_path / "min.npz").cell_names is None


def test_bad_samples_files_raise(tmp_path):
    Z = np.ones((4, 3), np.uint8)
    np.savez(tmp_path / "a.npz", Z=Z)
    with pytest.raises(ScontrastError, match=r"a\.npz': lacks \['n_features'\]"):
        load_samples(tmp_path / "a.npz")
    np.savez(tmp_path / "b.npz", Z=Z, n_features=np.array([1, 1]))
    with pytest.raises(ScontrastError, match="n_features: sums to 2 but Z has 3"):
        load_samples(tmp_path / "b.npz")
    np.savez(tmp_path / "c.npz", Z=Z * 2, n_features=np.array([3]))
    with pytest.raises(ScontrastError, match=r"samples\[0\]: is not binary"):
        load_samples(tmp_path / "c.npz")
    (tmp_path / "d.npz").write_text("not a zip")
    with pytest.raises(ScontrastError, match="not a readable"):
        load_samples(tmp_path / "d.npz")
    with pytest.raises(ScontrastError, match="does not exist"):
        load_samples(tmp_path / "missing.npz")
    with pytest.raises(ScontrastError, match=r"^cell_names: has shape \(1,\)"):
        save_samples(tmp_path / "e.npz", [Z], cell_names=["a"])
    with pytest.raises(ScontrastError, match=r"^Z: this trace name is a reserved key"):
        save_samples(tmp_path / "f.npz", [Z], Z=np.zeros(2))
