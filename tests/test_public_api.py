"""The public surface: what tinax.jit exports, and where it says it lives."""

import importlib
import inspect
import types

import pytest

import tinax
import tinax.jit


def test_jit_module_exports_the_page_names():
    for name in ("BoundedJit", "BatchedJit", "bounded_jit", "batched_jit", "TraceBudgetError"):
        assert name in tinax.jit.__all__
        assert getattr(tinax.jit, name).__module__ == "tinax.jit"


def test_jit_module_exports_the_bucket_helpers_with_the_contract_signatures():
    for name in ("bucket_sizes", "pad_to_bucket"):
        assert name in tinax.jit.__all__
        assert getattr(tinax.jit, name).__module__ == "tinax.jit"
    sizes = inspect.signature(tinax.jit.bucket_sizes).parameters
    assert [(p.name, p.kind.name, p.default) for p in sizes.values()] == [
        ("floor", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("ceiling", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("gap", "KEYWORD_ONLY", None),
    ]
    pad = inspect.signature(tinax.jit.pad_to_bucket).parameters
    assert [(p.name, p.kind.name, p.default) for p in pad.values()] == [
        ("x", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("sizes", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("axis", "KEYWORD_ONLY", 0),
        ("fill", "KEYWORD_ONLY", 0),
    ]


def test_jit_module_exports_the_batch_helpers_with_the_contract_signatures():
    for name in ("Dim", "Buckets", "bucket_for", "pad_ragged"):
        assert name in tinax.jit.__all__
        assert getattr(tinax.jit, name).__module__ == "tinax.jit"

    def described(function):
        return [
            (p.name, p.kind.name, p.default)
            for p in inspect.signature(function).parameters.values()
        ]

    empty = inspect.Parameter.empty
    assert described(tinax.jit.Dim) == [
        ("name", "POSITIONAL_OR_KEYWORD", empty),
        ("sizes", "POSITIONAL_OR_KEYWORD", empty),
    ]
    assert described(tinax.jit.Buckets) == [
        ("axes", "POSITIONAL_OR_KEYWORD", empty),
        ("where", "KEYWORD_ONLY", None),
    ]
    assert described(tinax.jit.bucket_for) == [
        ("n", "POSITIONAL_OR_KEYWORD", empty),
        ("sizes", "POSITIONAL_OR_KEYWORD", empty),
    ]
    assert described(tinax.jit.pad_ragged) == [
        ("rows", "POSITIONAL_OR_KEYWORD", empty),
        ("sizes", "POSITIONAL_OR_KEYWORD", empty),
        ("batch_sizes", "KEYWORD_ONLY", None),
        ("fill", "KEYWORD_ONLY", 0),
    ]


def test_factories_take_function_positionally_and_options_by_keyword():
    for factory in (tinax.jit.bounded_jit, tinax.jit.batched_jit):
        parameters = list(inspect.signature(factory).parameters.values())
        assert parameters[0].name == "function"
        assert parameters[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[1:])


def test_classes_take_exactly_the_factory_arguments():
    for cls, factory in (
        (tinax.jit.BoundedJit, tinax.jit.bounded_jit),
        (tinax.jit.BatchedJit, tinax.jit.batched_jit),
    ):
        ours = list(inspect.signature(cls).parameters.values())
        theirs = list(inspect.signature(factory).parameters.values())
        assert [(p.name, p.kind, p.default) for p in ours[1:]] == [
            (p.name, p.kind, p.default) for p in theirs[1:]
        ]
        # `function`: required by the class; the factory's default builds a decorator.
        assert (ours[0].name, ours[0].default) == ("function", inspect.Parameter.empty)
        assert repr(theirs[0].default) == "DECORATE"


def test_package_reports_a_version():
    assert isinstance(tinax.__version__, str) and tinax.__version__.count(".") == 2


def test_warm_start_lives_at_the_top_of_the_package():
    for name in ("warm_start", "save_signatures"):
        assert name in tinax.__all__
        assert getattr(tinax, name).__module__ == "tinax"
    parameters = inspect.signature(tinax.warm_start).parameters
    assert list(parameters) == ["path", "workers"]
    assert parameters["workers"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["workers"].default is None


@pytest.mark.parametrize("name", ["tinax", "tinax.jit", "tinax.parallel", "tinax.testing"])
def test_public_modules_show_only_their_names(name):
    # What dir() and autocomplete offer: the names of __all__ (and submodules), nothing
    # a module imported for itself (typing.TYPE_CHECKING).
    module = importlib.import_module(name)
    shown = {entry for entry in dir(module) if not entry.startswith("_")}
    submodules = {entry for entry in shown if isinstance(getattr(module, entry), types.ModuleType)}
    assert shown - submodules == set(module.__all__) - submodules - {"__version__"}
    assert "TYPE_CHECKING" not in vars(module)
