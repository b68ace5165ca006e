"""One bound per count-like parameter: the workflow's schemas state the library's bounds, and both refuse above them.

``scontrast.bounds.MAXIMUM`` holds the largest value of every integer parameter of every
method (model, front end and figure); the method's schema must state it as ``maximum``
(``maxItems`` for a list), every integer key of a method's schema must have one, and the
library refuses a value above it with one line naming the parameter.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import yaml

from scontrast import ScontrastError, tl
from scontrast.bounds import MAXIMUM, check_count
from scontrast.cpca import CPCA
from scontrast.fangs import fangs
from scontrast.latent_features import BinaryFactorEnsemble, LinearGaussianIBP
from scontrast.pcpca import PCPCA
from scontrast.quadro import QUADRO
from scontrast.sparda import SPARDA

SCHEMAS = Path(__file__).resolve().parents[1] / "workflow" / "schemas"


def _properties(method: str) -> dict:
    """The schema's properties by key, a figure's setting as ``plot.<name>``."""
    props = yaml.safe_load((SCHEMAS / f"{method}.schema.yaml").read_text())["properties"]
    out = {}
    for key, spec in props.items():
        out[key] = spec
        for sub, subspec in spec.get("properties", {}).items() if spec.get("type") == "object" else ():
            out[f"{key}.{sub}"] = subspec
    return out


def _types(spec: dict) -> list:
    t = spec.get("type")
    return t if isinstance(t, list) else [t]


@pytest.mark.parametrize("method", sorted(MAXIMUM))
def test_schema_maxima_equal_the_library_bounds(method):
    props = _properties(method)
    for key, bound in MAXIMUM[method].items():
        assert key in props, f"{method}.schema.yaml has no '{key}', bounded in scontrast.bounds"
        spec = props[key]
        stated = spec.get("maxItems") if "array" in _types(spec) else spec.get("maximum")
        assert stated == bound, f"{method}.{key}: schema maximum {stated!r} != {bound} in scontrast.bounds"
    unbounded = sorted(k for k, spec in props.items() if "integer" in _types(spec) and k not in MAXIMUM[method])
    assert not unbounded, f"{method}.schema.yaml: integer keys without a bound in scontrast.bounds: {unbounded}"


def test_every_method_schema_is_bounded():
    """A method schema with integer keys that scontrast.bounds does not know fails here."""
    others = {"config", "preprocess", "preprocess_block"}
    for path in sorted(SCHEMAS.glob("*.schema.yaml")):
        method = path.name.split(".")[0]
        if method in others:
            continue
        ints = [k for k, spec in _properties(method).items() if "integer" in _types(spec)]
        assert not ints or method in MAXIMUM, f"{method}: integer keys {ints} and no bounds"


def _block(key: str, value) -> dict:
    """A method's config block setting ``key`` (``<sub>.<name>`` inside its sub-block: plot, ensemble, ibp)."""
    if "." in key:
        sub, name = key.split(".", 1)
        return {sub: {name: value}}
    return {key: value}


@pytest.mark.parametrize("method, key", [(m, k) for m in sorted(MAXIMUM) for k in MAXIMUM[m]])
def test_config_refuses_above_the_bound(method, key):
    """Through the schema the workflow validates a config block with: the bound passes, one above fails, named."""
    from jsonschema import Draft202012Validator

    schema = yaml.safe_load((SCHEMAS / f"{method}.schema.yaml").read_text())
    validator = Draft202012Validator(schema)
    bound = MAXIMUM[method][key]
    array = "array" in _types(_properties(method)[key])
    at, above = ([1.0] * bound, [1.0] * (bound + 1)) if array else (bound, bound + 1)
    assert not list(validator.iter_errors(_block(key, at)))
    errors = list(validator.iter_errors(_block(key, above)))
    assert len(errors) == 1
    assert ".".join(map(str, errors[0].absolute_path)) == key
    assert errors[0].validator == ("maxItems" if array else "maximum")


def test_check_count_message():
    with pytest.raises(ScontrastError, match=r"^n_permutations=1000000000 is above its maximum 100000$"):
        check_count(10**9, "n_permutations", 0, "sparda")
    assert check_count(100_000, "n_permutations", 0, "sparda") == 100_000
    assert check_count(None, "n_permutations", 0, "sparda", allow_none=True) is None
    with pytest.raises(ScontrastError, match=r"^n_permutations: expected an integer >= 0"):
        check_count(-1, "n_permutations", 0, "sparda")


# ------------------------------------------------------------------ each estimator refuses above the bound
_X = np.random.default_rng(0).normal(size=(30, 4))
_Y = np.random.default_rng(1).normal(size=(30, 4)) + 1.0
_LABELS = np.r_[np.zeros(30), np.ones(30)]

# (method, fit(parameter, value)): the estimator fitted with one parameter at bound + 1
_FITS = {
    "sparda": lambda k, v: SPARDA(**{k: v}).fit(_X, _Y),
    "cpca": lambda k, v: CPCA(**{k: v}).fit(_X, _Y),
    "pcpca": lambda k, v: PCPCA(**{k: v}).fit(_X, _Y),
    "quadro": lambda k, v: QUADRO(**{k: v}).fit(np.r_[_X, _Y], _LABELS),
    "latent_features.ibp": lambda k, v: LinearGaussianIBP(**{k: v}).fit(_X),
    "latent_features.ensemble": lambda k, v: BinaryFactorEnsemble(**{k: v}).fit(_X),
    "fangs": lambda k, v: fangs([np.ones((5, 1), np.uint8)], **{k: v}),
}
# latent_features's estimators take the keys of their own block (ibp.<name>, ensemble.<name>)
_MODEL_KEYS = [(m, k) for m in _FITS if m in MAXIMUM for k in MAXIMUM[m]
               if "." not in k and k not in {"n_genes", "outer_cv", "n_dims", "n_top_genes", "lambda_grid"}]
_MODEL_KEYS += [(f"latent_features.{sub}", name) for sub, name in
                (k.split(".", 1) for k in MAXIMUM["latent_features"] if "." in k)]


@pytest.mark.parametrize("method, key", _MODEL_KEYS)
def test_estimator_refuses_above_the_bound(method, key):
    bound = MAXIMUM[method.split(".")[0]][key if method in MAXIMUM else f"{method.split('.', 1)[1]}.{key}"]
    with pytest.raises(ScontrastError, match=rf"^{key}={bound + 1} is above its maximum {bound}$"):
        _FITS[method](key, bound + 1)


def test_quadro_lambda_grid_length_refused():
    with pytest.raises(ScontrastError, match=r"^lambda_grid: 51 values is above its maximum of 50 values$"):
        QUADRO(lambda_grid=list(np.geomspace(3, 1e-3, 51))).fit(np.r_[_X, _Y], _LABELS)


@pytest.fixture(scope="module")
def adata():
    import anndata as ad

    rng = np.random.default_rng(0)
    a = ad.AnnData(rng.normal(size=(40, 6)))
    a.obs["scontrast_target"] = np.arange(40) < 20
    a.var["highly_variable"] = True
    a.obsm["X_emb"] = rng.normal(size=(40, 3))
    return a


@pytest.mark.parametrize("call, message", [
    (lambda a: tl.quadro(a, n_genes=20_001), r"^n_genes=20001 is above its maximum 20000$"),
    (lambda a: tl.quadro(a, outer_cv=21), r"^outer_cv=21 is above its maximum 20$"),
    (lambda a: tl.latent_features(a, n_genes=2_001), r"^n_genes=2001 is above its maximum 2000$"),
    (lambda a: tl.latent_features(a, use_rep="X_emb", n_dims=1_001), r"^n_dims=1001 is above its maximum 1000$"),
])
def test_front_ends_refuse_above_the_bound(adata, call, message):
    with pytest.raises(ScontrastError, match=message):
        call(adata.copy())


def test_figures_refuse_above_the_bound():
    import anndata as ad

    from scontrast import pl

    a = ad.AnnData(np.zeros((4, 2)))
    a.obs["quadro_score"] = [0.1, 0.2, -0.1, -0.2]
    a.obs["scontrast_target"] = [True, True, False, False]
    with pytest.raises(ScontrastError, match=r"^bins=1001 is above its maximum 1000$"):
        pl.quadro(a, bins=1001)


# ------------------------------------------------------------------ memory that grows with the data
def test_fangs_n_init_times_cells_refused_before_allocating(monkeypatch):
    import scontrast.bounds as bounds

    monkeypatch.setattr(bounds, "MEMORY_BUDGET", 1000)  # bytes: 100 baselines x 5 cells x 3 features is 1500
    samples = [np.eye(5, 3, dtype=np.uint8)] * 3
    with pytest.raises(ScontrastError, match=r"^n_init=100: the baselines' candidates \(100 x 5 cells x up to 3 "
                                             r"features\) would take .* GB, above the .* GB a method may hold; lower n_init$"):
        fangs(samples, n_init=100)
    fangs(samples, n_init=50)  # 750 bytes: runs


def test_latent_features_samples_times_cells_refused(monkeypatch):
    import scontrast.bounds as bounds

    monkeypatch.setattr(bounds, "MEMORY_BUDGET", 10**6)
    X = np.random.default_rng(0).normal(size=(200, 3))
    with pytest.raises(ScontrastError, match=r"^max_features=1000: the chains' samples and state .* lower max_features$"):
        LinearGaussianIBP(max_features=1000, n_iter=20, burn_in=10, thin=1).fit(X)


def test_quadro_candidates_times_cells_refused(monkeypatch, adata):
    import scontrast.bounds as bounds

    monkeypatch.setattr(bounds, "MEMORY_BUDGET", 1000)  # 40 cells x 6 genes x 8 bytes = 1920
    with pytest.raises(ScontrastError, match=r"^n_genes=None: the candidate genes as a dense matrix \(40 cells x 6 "
                                             r"genes\) would take .* lower n_genes$"):
        tl.quadro(adata.copy(), n_genes=None)


# ------------------------------------------------------------------ long loops say how far they are
@pytest.mark.filterwarnings("ignore::scontrast.core.ScontrastWarning")  # 20 sweeps: R-hat is not the point
def test_long_loops_log_progress(caplog, monkeypatch):
    """A SLURM log shows movement: the sampler's sweeps, FANGS's baselines and SPARDA's permutations."""
    from scontrast import core

    monkeypatch.setattr(core, "PROGRESS_AFTER", 0.0)  # these loops are short: log them as if long
    with caplog.at_level(logging.INFO, logger="scontrast"):
        LinearGaussianIBP(n_iter=20, burn_in=10, n_chains=1, random_state=0).fit(_X)
        fangs([np.eye(5, 3, dtype=np.uint8)] * 4, n_init=10, n_iter=20, random_state=0)
        SPARDA(k=2, test="split", n_permutations=999, random_state=0).fit(_X, _Y)
    text = caplog.text
    assert "latent_features: sweeps of chain 1: 20/20" in text
    assert "fangs: baselines: 10/10" in text
    assert "fangs: sweetenings:" in text
    assert "sparda: split-test permutations in batches of 256: 4/4" in text


def test_progress_logs_at_least_every_30_seconds(monkeypatch, caplog):
    """A loop whose tenth takes hours still logs: a line after every step that ends 30 s after the last line."""
    from scontrast import core

    clock = iter(range(0, 10**6, 40))  # each step ends 40 s after the previous one
    monkeypatch.setattr(core.time, "perf_counter", lambda: float(next(clock)))
    with caplog.at_level(logging.INFO, logger="scontrast"):
        list(core.progress(range(1000), desc="a slow loop"))
    monkeypatch.undo()
    assert caplog.text.count("a slow loop:") == 1000


def test_sparda_permute_batch_refused_before_allocating(monkeypatch):
    """The 'permute' test holds 128 labellings' moments at once: max_genes x cells is checked first."""
    import scontrast.bounds as bounds

    monkeypatch.setattr(bounds, "MEMORY_BUDGET", 10**5)  # 8 x 128 x (30 x 4 + 48 + 360) bytes = 540 kB
    with pytest.raises(ScontrastError, match=r"^max_genes=100: test 'permute''s batch of 128 labellings .* "
                                             r"lower max_genes$"):
        SPARDA(k=2, test="permute", n_permutations=99, random_state=0).fit(_X, _Y)
    model = SPARDA(k=2, test="split", n_permutations=99, random_state=0).fit(_X, _Y)  # sorts only: runs
    assert model.test_["bound"] and model.pvalue_ == pytest.approx(0.01)  # the groups differ: true
