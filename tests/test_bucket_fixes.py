"""The padding fix for a call outside the buckets, pasted as written, runs for every kind
of container an array can sit in (dict, list, tuple, NamedTuple, frozen and plain
dataclasses, equinox Modules, nested), and the call it fixes compiles nothing new."""

import dataclasses
import typing

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinax
from tinax.jit import TraceBudgetError, bounded_jit

SIZES = (16, 32, 64)


class Pair(typing.NamedTuple):
    tokens: typing.Any
    mask: typing.Any


@dataclasses.dataclass(frozen=True)
class Frozen:
    tokens: typing.Any
    mask: typing.Any


@dataclasses.dataclass
class Plain:
    tokens: typing.Any
    mask: typing.Any


jax.tree_util.register_dataclass(Frozen, data_fields=["tokens", "mask"], meta_fields=[])
jax.tree_util.register_dataclass(Plain, data_fields=["tokens", "mask"], meta_fields=[])


class Batch(eqx.Module):
    tokens: typing.Any
    mask: typing.Any


def ones(length):
    return jnp.ones((2, length))


MAKERS = {
    "dict": lambda t, m: {"tokens": t, "mask": m},
    "list": lambda t, m: [t, m],
    "tuple": lambda t, m: (t, m),
    "NamedTuple": Pair,
    "frozen dataclass": Frozen,
    "plain dataclass": Plain,
    "equinox Module": Batch,
    "NamedTuple in a dict": lambda t, m: {"inner": Pair(t, m)},
    "tuple in a Module": lambda t, m: Batch((t, m), None),
    "frozen in a frozen dataclass": lambda t, m: Frozen(Frozen(t, m), None),
    "dict in a NamedTuple": lambda t, m: Pair({"tokens": t, "mask": m}, None),
    "Module in a tuple in a NamedTuple": lambda t, m: Pair((None, Batch(t, m)), None),
}


def total(batch):
    leaves = [leaf for leaf in jax.tree.leaves(batch) if getattr(leaf, "ndim", 0) == 2]
    return sum(leaf.sum(-1) for leaf in leaves)


def step_for():
    return bounded_jit(total, max_traces=3, buckets={"batch": {1: SIZES}})


def code_of(line):
    """The code a padding fix line writes: ``pad before the call: <code> (length: ...)``."""
    assert " before the call: " in line, line
    return line.split(" before the call: ", 1)[1].rsplit(" (length: ", 1)[0]


def pasted(lines, batch):
    """``batch`` after each fix line's code runs, pasted as written, with the names a user
    of tinax, dataclasses and equinox has bound."""
    namespace = {"tinax": tinax, "dataclasses": dataclasses, "eqx": eqx, "batch": batch}
    for line in lines:
        exec(code_of(line), namespace)
    return namespace["batch"]


def refusal_fixes(step, batch):
    with pytest.raises(TraceBudgetError) as info:
        step(batch)
    text = str(info.value).splitlines()
    fixes = text[text.index("How to fix:") + 1 :]
    return [line.strip() for line in fixes if " before the call: " in line]


@pytest.mark.parametrize("kind", list(MAKERS))
def test_the_refusals_fix_pasted_runs_and_compiles_nothing_new(kind):
    make = MAKERS[kind]
    step = step_for()
    step(make(ones(32), ones(32)))
    assert step.traces_used == 1
    batch = make(ones(20), ones(20))
    reference = jax.jit(total)(batch)
    lines = refusal_fixes(step, batch)
    assert len(lines) in (2, 4), lines  # a long put-back on a line of its own
    assert all(len(line) <= 198 and " ... " not in line for line in lines)  # nothing elided
    fixed = pasted(lines, batch)
    assert type(fixed) is type(batch)
    np.testing.assert_array_equal(step(fixed), reference)  # padded with zeros: the same sums
    assert step.traces_used == 1  # the fixed call is the bucket traced already


@pytest.mark.parametrize("kind", list(MAKERS))
def test_explains_fix_pasted_runs_and_compiles_nothing_new(kind):
    make = MAKERS[kind]
    step = step_for()
    step(make(ones(32), ones(32)))
    batch = make(ones(20), ones(20))
    found = step.explain(batch)
    fixed = pasted(found.shape_fix, batch)
    step(fixed)
    assert step.traces_used == 1


def test_a_mutable_path_is_assigned_as_written_and_an_immutable_one_is_rebuilt():
    step = step_for()
    step({"tokens": ones(32), "mask": ones(32)})
    assert code_of(step.explain({"tokens": ones(20), "mask": ones(32)}).shape_fix[1]) == (
        "batch['tokens'], length = tinax.jit.pad_to_bucket(batch['tokens'], (32,), axis=1)"
    )
    step = step_for()
    step(Pair(ones(32), ones(32)))
    assert code_of(step.explain(Pair(ones(20), ones(20))).shape_fix[0]) == (
        "padded, length = tinax.jit.pad_to_bucket(batch.tokens, (16, 32, 64), axis=1); "
        "batch = batch._replace(tokens=padded)"
    )
    step = step_for()
    step(Batch(ones(32), ones(32)))
    lines = step.explain(Batch(ones(20), ones(20))).shape_fix  # too long for one line each
    assert [code_of(line) for line in lines[2:]] == [
        "padded, length = tinax.jit.pad_to_bucket(batch.mask, (16, 32, 64), axis=1)",
        "batch = eqx.tree_at(lambda m: m.mask, batch, padded)",
    ]
    assert lines[3].startswith("and put it back before the call: ")
    step = step_for()
    step({"inner": (ones(32), ones(32))})
    lines = step.explain({"inner": (ones(20), ones(20))}).shape_fix
    assert [code_of(line) for line in lines[1::2]] == [  # each put back after its padding
        "batch['inner'] = (padded, *batch['inner'][1:])",
        "batch['inner'] = (*batch['inner'][:1], padded, *batch['inner'][2:])",
    ]


def test_arrays_under_one_key_that_differ_are_each_put_back():
    step = step_for()
    step(Frozen(ones(32), ones(32)))
    batch = Frozen(ones(20), ones(24))
    lines = refusal_fixes(step, batch)
    assert [line.split(" before the call: ")[0] for line in lines] == [
        "pad to 32, one bucket for the arrays under batch",
        "and put it back",
    ] * 2
    assert "(32,), axis=1)" in lines[0] and "(32,), axis=1)" in lines[2]
    step(pasted(lines, batch))
    assert step.traces_used == 1


CONTAINERS = {
    "dict": lambda child: {"x": child, "y": None},
    "list": lambda child: [None, child],
    "tuple": lambda child: (child, None),
    "NamedTuple": lambda child: Pair(None, child),
    "frozen dataclass": lambda child: Frozen(child, None),
    "plain dataclass": lambda child: Plain(None, child),
    "equinox Module": lambda child: Batch(child, None),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(sorted(CONTAINERS)), min_size=1, max_size=4))
def test_any_nesting_of_containers_is_put_back_as_it_was(kinds):
    """Whatever the containers on the path, the pasted fix leaves the argument's tree
    as it was with the padded array in place of the array (explain: nothing traces)."""
    step = bounded_jit(total, max_traces=3, buckets={"batch": {1: SIZES}})
    batch = ones(20)
    for kind in kinds:
        batch = CONTAINERS[kind](batch)
    lines = step.explain(batch).shape_fix
    assert len(lines) in (1, 2)  # a long put-back on a line of its own
    fixed = pasted(lines, batch)
    assert jax.tree.structure(fixed) == jax.tree.structure(batch)
    shapes = [leaf.shape for leaf in jax.tree.leaves(fixed) if getattr(leaf, "ndim", 0) == 2]
    assert shapes == [(2, 32)]


LENGTH = tinax.jit.Dim("length", SIZES)


def total_beside(batch, other):
    return total(batch) + other.sum(-1)


def tied_step():
    """``batch``'s arrays and ``other`` share one Dim on axis 1."""
    return bounded_jit(
        total_beside, max_traces=3, buckets={"batch": {1: LENGTH}, "other": {1: LENGTH}}
    )


@pytest.mark.parametrize("kind", list(MAKERS))
def test_the_fix_for_tied_axes_that_differ_pasted_runs_and_compiles_nothing_new(kind):
    """Each size a bucket, but the arrays under ``batch`` at 16 where ``other`` is at 32:
    the fix pads them to 32 as code, and puts each back into its container."""
    make = MAKERS[kind]
    step = tied_step()
    step(make(ones(32), ones(32)), ones(32))
    batch, other = make(ones(16), ones(16)), ones(32)
    with pytest.raises(TraceBudgetError) as info:
        step(batch, other)
    text = str(info.value)
    assert "Dim 'length': pad batch axis 1 to 32, its size that holds them all:" in text
    lines = [line.strip() for line in text.splitlines() if " before the call: " in line]
    assert lines and all("(32,)" in line for line in lines if "pad_to_bucket" in line)
    fixed = pasted(lines, batch)
    assert type(fixed) is type(batch)
    expected = jax.jit(total_beside)(make(ones(16), ones(16)), ones(16))  # zeros add nothing
    np.testing.assert_array_equal(step(fixed, other), expected + 16)
    assert step.traces_used == 1
    fresh = make(ones(16), ones(16))  # explain's fix, pasted as written, alike
    fix = step.explain(fresh, other).shape_fix
    assert fix[0] == "Dim 'length': pad batch axis 1 to 32, its size that holds them all:"
    code = [line for line in fix if " before the call: " in line]
    np.testing.assert_array_equal(step(pasted(code, fresh), other), expected + 16)
    assert step.traces_used == 1
