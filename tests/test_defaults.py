"""One default per parameter: the workflow's schemas, the ``tl`` front ends, the estimators and the figures agree.

Each model parameter is defined once, in its estimator's ``__init__`` (or FANGS's function);
a ``tl`` front end takes the data-handling parameters (gene set, layer, folds of the
outer evaluation...) and forwards every model parameter untouched; a figure's settings
are keyword arguments of ``scontrast.pl.<method>``, configured in the block's ``plot``
entry. A schema key that matches none of these, or whose default differs from its
home's, fails here.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml

from scontrast import pl, tl
from scontrast.cpca import CPCA
from scontrast.fangs import fangs as fangs_function
from scontrast.latent_features import BinaryFactorEnsemble, LinearGaussianIBP
from scontrast.pcpca import PCPCA
from scontrast.preprocess import preprocess
from scontrast.quadro import QUADRO
from scontrast.sparda import SPARDA

SCHEMAS = Path(__file__).resolve().parents[1] / "workflow" / "schemas"

# method -> (model: estimator class or function, tl front end, pl figure or None)
METHODS = {
    "sparda": (SPARDA, tl.sparda, pl.sparda),
    "cpca": (CPCA, tl.cpca, pl.cpca),
    "pcpca": (PCPCA, tl.pcpca, pl.pcpca),
    "quadro": (QUADRO, tl.quadro, pl.quadro),
    "fangs": (fangs_function, tl.fangs, pl.fangs),
}
# latent_features has one estimator per ``method``, each with its own block of the schema
LATENT_MODELS = {"ensemble": BinaryFactorEnsemble, "ibp": LinearGaussianIBP}
# set by the workflow itself (config.seed, the rule's threads), never by a method's block
SET_BY_WORKFLOW = {"random_state", "n_jobs"}
# keys that only the workflow reads (not arguments of any function)
WORKFLOW_ONLY = {("fangs", "samples")}
# front-end arguments that only matter in a notebook (where in an AnnData results go): the
# workflow fixes them, so its schema leaves them out
NOTEBOOK_ONLY = {("latent_features", "key_added"), ("fangs", "samples_key"),
                 *((m, arg) for m in ("sparda", "cpca", "pcpca", "fangs") for arg in ("groupby", "key_added")),
                 ("quadro", "key_added"),
                 # the deprecated name of groupby
                 *((m, "key") for m in ("sparda", "cpca", "pcpca", "quadro", "fangs")),
                 # the donor design's block column: the workflow passes the dataset entry's `block`
                 ("sparda", "block"), ("fangs", "block")}
# data arguments and the AnnData-call plumbing of the front ends and figures
NOT_PARAMS = {"self", "adata", "samples", "copy", "ax"}

_EMPTY = inspect.Parameter.empty


def _norm(value):
    return [_norm(v) for v in value] if isinstance(value, (list, tuple)) else value


def _signature_defaults(func) -> dict:
    """{name: default} of the named parameters of ``func`` (a class: its ``__init__``)."""
    target = func.__init__ if inspect.isclass(func) else func
    out = {}
    for name, p in inspect.signature(target).parameters.items():
        if name in NOT_PARAMS or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        out[name] = p.default
    return out


def _schema(method: str) -> dict:
    return yaml.safe_load((SCHEMAS / f"{method}.schema.yaml").read_text())["properties"]


@pytest.mark.parametrize("method", sorted(METHODS))
def test_schema_defaults_equal_their_one_home(method):
    model, front, figure = METHODS[method]
    model_defaults = {k: v for k, v in _signature_defaults(model).items() if k not in SET_BY_WORKFLOW}
    front_defaults = {k: v for k, v in _signature_defaults(front).items() if k not in SET_BY_WORKFLOW}
    props = _schema(method)
    for key, spec in props.items():
        if key == "plot" or (method, key) in WORKFLOW_ONLY:
            continue
        home = model_defaults if key in model_defaults else front_defaults if key in front_defaults else None
        assert home is not None, f"{method}.schema.yaml: '{key}' is neither a {model.__name__} nor a tl.{method} parameter"
        assert "default" in spec, f"{method}.schema.yaml: '{key}' has no default"
        assert _norm(spec["default"]) == _norm(home[key]), (
            f"{method}.{key}: schema default {spec['default']!r} != {home[key]!r} in "
            f"{'the estimator' if home is model_defaults else 'tl.' + method}")
    missing = sorted(set(model_defaults) - set(props))
    assert not missing, f"{method}.schema.yaml lacks the model parameters {missing}"
    missing = sorted(k for k in set(front_defaults) - set(props) if (method, k) not in NOTEBOOK_ONLY)
    assert not missing, f"{method}.schema.yaml lacks the front-end parameters {missing}"


def _check_block(where: str, props: dict, defaults: dict, name: str) -> None:
    """Every key of a schema block has a default equal to its home's, and every parameter has a key."""
    for key, spec in props.items():
        assert key in defaults, f"{where}: '{key}' is not a {name} parameter"
        assert "default" in spec, f"{where}: '{key}' has no default"
        assert _norm(spec["default"]) == _norm(defaults[key]), (
            f"{where}.{key}: schema default {spec['default']!r} != {defaults[key]!r} in {name}")
    missing = sorted(set(defaults) - set(props))
    assert not missing, f"{where} lacks the parameters {missing} of {name}"


def test_latent_features_schema_has_one_block_per_method_with_its_estimators_defaults():
    props = _schema("latent_features")
    assert set(props["method"]["enum"]) == set(LATENT_MODELS)
    for method, model in LATENT_MODELS.items():
        defaults = {k: v for k, v in _signature_defaults(model).items() if k not in SET_BY_WORKFLOW}
        _check_block(f"latent_features.schema.yaml {method}", props[method]["properties"], defaults, model.__name__)
    front = {k: v for k, v in _signature_defaults(tl.latent_features).items()
             if k not in SET_BY_WORKFLOW and ("latent_features", k) not in NOTEBOOK_ONLY}
    outer = {k: v for k, v in props.items() if k not in LATENT_MODELS}
    _check_block("latent_features.schema.yaml", outer, front, "tl.latent_features")


def test_latent_features_config_passes_only_the_chosen_methods_block():
    cfg = {"method": "ibp", "n_genes": 20, "ensemble": {"n_members": 5}, "ibp": {"n_iter": 30}}
    assert tl.latent_features_params(cfg) == {"method": "ibp", "n_genes": 20, "n_iter": 30}
    assert tl.latent_features_params({**cfg, "method": "ensemble"}) == {"method": "ensemble", "n_genes": 20,
                                                                       "n_members": 5}


@pytest.mark.parametrize("method", sorted(METHODS) + ["latent_features"])
def test_front_ends_do_not_repeat_model_parameters(method):
    """A model parameter is forwarded by ``**params``, never re-declared (its default would live twice)."""
    if method == "latent_features":
        for model in LATENT_MODELS.values():
            twice = (set(_signature_defaults(model)) & set(_signature_defaults(tl.latent_features))) - SET_BY_WORKFLOW
            assert not twice, f"tl.latent_features re-declares {sorted(twice)} of {model.__name__}"
        return
    model, front, _ = METHODS[method]
    twice = (set(_signature_defaults(model)) & set(_signature_defaults(front))) - SET_BY_WORKFLOW
    assert not twice, f"tl.{method} re-declares {sorted(twice)} of {model.__name__}"
    kinds = [p.kind for p in inspect.signature(front).parameters.values()]
    assert inspect.Parameter.VAR_KEYWORD in kinds, f"tl.{method} does not forward model parameters (**params)"


@pytest.mark.parametrize("method", sorted(m for m in METHODS if METHODS[m][2] is not None))
def test_figure_settings_are_the_figure_functions(method):
    _, _, figure = METHODS[method]
    plot = _schema(method).get("plot")
    assert plot is not None, f"{method}.schema.yaml has no plot block"
    defaults = _signature_defaults(figure)
    for key, spec in plot.get("properties", {}).items():
        assert key in defaults, f"{method}.plot.{key} is not a keyword of pl.{method}"
        assert _norm(spec.get("default")) == _norm(defaults[key]), f"{method}.plot.{key}: default differs from pl.{method}"


def test_preprocess_schema_defaults_equal_the_function():
    defaults = _signature_defaults(preprocess)
    for key, spec in _schema("preprocess").items():
        assert key in defaults, f"preprocess.schema.yaml: '{key}' is not a parameter of scontrast.preprocess"
        assert _norm(spec["default"]) == _norm(defaults[key]), f"preprocess.{key}: schema {spec['default']!r} != {defaults[key]!r}"
