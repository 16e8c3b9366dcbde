"""precompile_buckets when combinations fail (untied sizes, a mesh axis that does not
divide a bucket), and the messages around buckets: an already compiled bucket, compile
times summed over threads, the shapes in a miss."""

import logging
import pickle

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tinax._src.jit import bucket_compiles
from tinax.jit import TraceBudgetError, bounded_jit, budgets


def _add(a, b):
    return a + b


def test_untied_sizes_name_each_failed_combination_and_compile_the_rest():
    step = bounded_jit(_add, max_traces=4, buckets={"a": {0: (2, 4)}, "b": {0: (2, 4)}})
    with pytest.raises(ValueError) as caught:
        step.precompile_buckets(jnp.zeros(2), jnp.zeros(2))
    text = str(caught.value)
    assert "precompile_buckets compiled 2 of 4 combinations" in text
    assert "  a axis 0: 2, b axis 0: 4: TypeError: add got incompatible shapes" in text
    assert "  a axis 0: 4, b axis 0: 2: TypeError:" in text
    assert "a axis 0: 2, b axis 0: 2:" not in text  # the ones that compiled are not named
    assert isinstance(caught.value.__cause__, TypeError)  # JAX's own error, chained
    assert (
        "size = tinax.jit.Dim(\"size\", (2, 4)); buckets={'a': {0: size}, 'b': {0: size}}" in text
    )
    assert step.traces_used == 2
    # the two that can occur were compiled: calls inside them trace no more
    step(jnp.zeros(4), jnp.zeros(4))
    step(jnp.zeros(2), jnp.zeros(2))
    assert step.traces_used == 2
    assert pickle.loads(pickle.dumps(caught.value)).args == caught.value.args


def test_the_suggested_dim_compiles_every_combination():
    import tinax

    size = tinax.jit.Dim("size", (2, 4))
    step = bounded_jit(_add, max_traces=2, buckets={"a": {0: size}, "b": {0: size}})
    assert step.precompile_buckets(jnp.zeros(2), jnp.zeros(2)) == 2


def _ffi_for_two(x):
    if x.shape[0] == 2:  # traces, then fails to compile: no handler for this target
        return jax.ffi.ffi_call("tinax_no_such_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    return x * 2


def test_a_combination_that_traces_then_fails_to_compile_gives_its_slot_back():
    step = bounded_jit(_ffi_for_two, max_traces=2, buckets={"x": {0: (2, 8)}})
    with pytest.raises(ValueError, match=r"  x axis 0: 2: JaxRuntimeError: .*tinax_no_such_target"):
        step.precompile_buckets(jnp.zeros((8, 3)))
    assert len(step.traced_signatures) == 2  # the trace happened, and is shown
    assert step.traces_used == 1  # but holds no place in the budget
    step(jnp.zeros((8, 3), jnp.int32))  # a new in-bucket signature: room for it
    assert step.traces_used == 2


@pytest.mark.parametrize("axis_type", ["Auto", "Explicit"])
def test_a_bucket_smaller_than_its_mesh_axis_is_named_and_not_traced(axis_type):
    mesh = jax.make_mesh((8,), ("x",), axis_types=(getattr(jax.sharding.AxisType, axis_type),))
    step = bounded_jit(lambda x: x * 2, max_traces=3, buckets={"x": {0: (2, 8, 16)}}, mesh=mesh)
    x = jax.device_put(jnp.zeros((8, 3)), NamedSharding(mesh, P("x")))
    with pytest.raises(ValueError) as caught:
        step.precompile_buckets(x)
    text = str(caught.value)
    assert (
        "  x axis 0: 2: x is f32[2,3], its axis 0 sharded over mesh axis 'x' (8 devices): "
        "2 is no multiple of 8" in text
    )
    assert "static_nonarrays" not in text
    assert "compiled 2 of 3 combinations" in text
    assert caught.value.__cause__ is not None
    assert step.traces_used == 2  # the failed one never traced
    # a later in-bucket call (replicated, so size 2 fits) is not refused
    step(jax.device_put(jnp.zeros((2, 3)), NamedSharding(mesh, P())))
    assert step.traces_used == 3


def test_every_combination_failing_alike_raises_that_error():
    step = bounded_jit(lambda x: x["a"], max_traces=2, buckets={"x['b']": {0: (2, 4)}})
    with pytest.raises(ValueError, match=r"buckets names \"x\['b'\]\", under which this call"):
        step.precompile_buckets({"a": jnp.zeros(2)})


def test_budget_errors_stay_budget_errors():
    step = bounded_jit(lambda x: x, max_traces=2, buckets={"x": {0: (2, 4)}})
    step(jnp.zeros(2, jnp.int32))
    step(jnp.zeros(4, jnp.int32))  # the budget spent on int32
    with pytest.raises(TraceBudgetError):
        step.precompile_buckets(jnp.zeros(2))


def test_an_already_compiled_bucket_is_logged_as_such(caplog):
    step = bounded_jit(lambda x: x * 2, max_traces=2, buckets={"x": {0: (2, 4)}})
    step(jnp.zeros(2))
    with caplog.at_level(logging.INFO, logger="tinax"):
        step.precompile_buckets(jnp.zeros(2))
    messages = [record.getMessage() for record in caplog.records]
    assert any("was already compiled (x axis 0: 2)" in m for m in messages), messages
    assert any(" compiled in " in m and "(x axis 0: 4)" in m for m in messages), messages
    assert not any(" compiled in " in m and "(x axis 0: 2)" in m for m in messages), messages


def test_budgets_says_compile_times_are_summed_over_threads(monkeypatch):
    monkeypatch.setattr(bucket_compiles.os, "cpu_count", lambda: 4)

    def threaded_double(x):
        return x * 2

    def alone_double(x):
        return x * 2

    alone = bounded_jit(alone_double, max_traces=2, buckets={"x": {0: (2, 4)}})
    alone(jnp.zeros(2))
    alone_table = str(budgets())
    step = bounded_jit(threaded_double, max_traces=2, buckets={"x": {0: (2, 4)}})
    step.precompile_buckets(jnp.zeros(2))
    table = str(budgets())
    assert "compile time*" in table
    assert "* compile time, here and in buckets: the compiles' own times added up" in table
    if "threaded_double" not in alone_table:  # no object compiled in threads yet
        assert "compile time*" not in alone_table or "own times added up" in alone_table


def test_a_miss_shows_each_array_full_shape():
    step = bounded_jit(
        lambda batch: batch["tokens"].sum(),
        max_traces=3,
        buckets={"batch['tokens']": {0: (16, 32, 64)}},
    )
    with pytest.raises(TraceBudgetError) as caught:
        step({"tokens": jnp.zeros((4, 37), jnp.int32)})
    assert (
        "batch['tokens'], axis 0: 4 is no bucket of (16, 32, 64): pad it to 16 "
        "(batch['tokens']: i32[4,37])" in str(caught.value)
    )


@settings(max_examples=20, deadline=None)
@given(devices=st.sampled_from([2, 4, 8]), size=st.integers(1, 33))
def test_indivisible_names_the_size_and_the_mesh_axis(devices, size):
    mesh = jax.make_mesh((devices,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    leaf = jax.ShapeDtypeStruct((size, 3), jnp.float32, sharding=NamedSharding(mesh, P("x")))
    found = bucket_compiles.indivisible(None, (leaf,), {})
    if size % devices == 0:
        assert found is None
    else:
        assert found is not None
        assert found[0] == (
            f"args[0] is f32[{size},3], its axis 0 sharded over mesh axis 'x' ({devices} "
            f"devices): {size} is no multiple of {devices}"
        )


def _double(x):
    return x * 2


@pytest.mark.parametrize(
    ("sizes", "shown"),
    [
        ((4,), "(4,)"),
        ((4, 8), "(4, 8)"),
        (tuple(range(4, 30, 2)), "(4, 6, 8, 10, 12, 14, ..., 24, 26, 28)"),  # elided past 12
    ],
)
def test_the_buckets_of_a_miss_are_written_as_python_writes_the_tuple(sizes, shown):
    # One size is (4,), not (4): the text is the buckets= value the user wrote.
    step = bounded_jit(_double, max_traces=len(sizes), buckets={"x": {0: sizes}})
    step(jnp.ones(sizes[0]))
    with pytest.raises(TraceBudgetError) as caught:
        step(jnp.ones(3))
    assert f"  x, axis 0: 3 is no bucket of {shown}: pad it to 4 (x: f32[3])" in str(caught.value)
