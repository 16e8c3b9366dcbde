"""Property tests of a budgeted training step with hypothesis: the guide's examples.

Run the tests:   python -m pytest examples/property_tests.py
Run the script:  python examples/property_tests.py   (prints what no_new_traces reports)
docs/property-tests.md shows this file's code and the script's output (a test keeps the
two equal).
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tinax.jit import TraceBudgetError, bounded_jit
from tinax.testing import arguments, no_new_compiles, no_new_traces


def loss_fn(params, batch):
    hidden = jnp.tanh(batch["x"] @ params["w1"] + params["b1"])
    return jnp.mean((hidden @ params["w2"] + params["b2"] - batch["y"]) ** 2)


def train_step(params, batch, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss


step = bounded_jit(train_step, max_traces=1)

PARAMS = {
    "w1": jax.ShapeDtypeStruct((8, 32), jnp.float32),
    "b1": jax.ShapeDtypeStruct((32,), jnp.float32),
    "w2": jax.ShapeDtypeStruct((32, 1), jnp.float32),
    "b2": jax.ShapeDtypeStruct((1,), jnp.float32),
}
BATCH = {
    "x": jax.ShapeDtypeStruct((64, 8), jnp.float32),
    "y": jax.ShapeDtypeStruct((64, 1), jnp.float32),
}
LR = 0.1  # a Python float: weakly typed, so drawn as a Python float too


@pytest.fixture(scope="module", autouse=True)
def compiled_step():
    step.precompile(PARAMS, BATCH, LR)  # trace 1 of 1, compiled before the first example


@given(arguments(step))
def test_loss_and_new_params_are_finite(call):
    args, kwargs = call
    params, loss = step(*args, **kwargs)
    assert np.isfinite(loss)
    assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(params))


@given(arguments(step, overrides={"lr": st.just(0.0)}))
def test_zero_learning_rate_leaves_params_unchanged(call):
    (params, batch, lr), _ = call
    new_params, _ = step(params, batch, lr)
    for old, new in zip(jax.tree.leaves(params), jax.tree.leaves(new_params), strict=True):
        np.testing.assert_array_equal(new, old)


@given(
    arguments(
        step,
        overrides={
            "lr": st.floats(0.0, 0.01),
            "batch['y']": hnp.arrays(np.float32, (64, 1), elements=st.floats(-1, 1, width=32)),
        },
    )
)
def test_drawn_leaves_keep_to_their_strategies(call):
    (params, batch, lr), _ = call
    assert 0.0 <= lr <= 0.01
    assert np.all(np.abs(batch["y"]) <= 1)
    step(params, batch, lr)


def zeros(structs):
    return jax.tree.map(lambda struct: np.zeros(struct.shape, struct.dtype), structs)


@pytest.mark.parametrize("lr", [0.0, 0.1, 1.0])
def test_a_fresh_step_per_case(lr):
    fresh = bounded_jit(train_step, max_traces=1)  # a new object per case: its own budget
    _, loss = fresh(zeros(PARAMS), zeros(BATCH), lr)
    assert np.isfinite(loss)
    assert fresh.traces_used == 1


@settings(max_examples=5, deadline=None)  # each example compiles its own step
@given(arguments(((PARAMS, BATCH, LR), {})))
def test_a_fresh_step_per_example(call):
    (params, batch, lr), _ = call
    fresh = bounded_jit(train_step, max_traces=1)  # a new object per example
    fresh(params, batch, lr)
    assert fresh.traces_used == 1


def masked_loss(params, batch):
    hidden = jnp.tanh(batch["x"] @ params["w1"] + params["b1"])
    errors = ((hidden @ params["w2"] + params["b2"] - batch["y"]) ** 2)[:, 0]
    return (errors * batch["mask"]).sum() / batch["mask"].sum()


BUCKETS = (16, 32, 64)
evaluate = bounded_jit(masked_loss, max_traces=len(BUCKETS))


def to_bucket(x, y):
    """Pads the rows up to the smallest bucket that holds them; the mask marks real rows."""
    size = next(bucket for bucket in BUCKETS if bucket >= len(x))
    rows = ((0, size - len(x)), (0, 0))
    return {"x": np.pad(x, rows), "y": np.pad(y, rows), "mask": np.arange(size) < len(x)}


@pytest.fixture(scope="module", autouse=True)
def compiled_buckets():
    for size in BUCKETS:  # traces 1, 2 and 3 of 3
        evaluate.precompile(PARAMS, to_bucket(np.zeros((size, 8)), np.zeros((size, 1))))


@st.composite
def batches(draw):
    rows = draw(st.integers(1, BUCKETS[-1]))
    values = hnp.from_dtype(np.dtype(np.float32), min_value=-1, max_value=1)
    x = draw(hnp.arrays(np.float32, (rows, 8), elements=values))
    y = draw(hnp.arrays(np.float32, (rows, 1), elements=values))
    return x, y


@given(arguments(((PARAMS,), {})), batches())
def test_every_batch_size_runs_in_one_of_the_bucket_compiles(call, batch):
    (params,), _ = call
    loss = evaluate(params, to_bucket(*batch))
    assert np.isfinite(loss)


@no_new_compiles()  # each run of the test is a scope: nothing may trace or compile in it
def test_the_precompiled_step_compiles_nothing_more():
    params, batch = zeros(PARAMS), zeros(BATCH)
    for lr in (0.0, 0.1, 1.0):
        step(params, batch, lr)
        evaluate(params, to_bucket(batch["x"][:20], batch["y"][:20]))


def section(title):
    print(f"\n=== {title}")


def features(params, x):
    return jnp.tanh(x @ params["w1"] + params["b1"])


if __name__ == "__main__":
    params = {name: jnp.zeros(struct.shape) for name, struct in PARAMS.items()}
    section("no_new_traces: a partial batch traced again")
    embed = bounded_jit(features, max_traces=8)  # room for shapes not known yet
    embed(params, jnp.ones((64, 8)))
    try:
        with no_new_traces(embed):
            embed(params, jnp.ones((64, 8)))  # cached: fine
            embed(params, jnp.ones((50, 8)))  # the last, partial batch: a new trace
    except AssertionError as error:
        print(f"AssertionError: {error}")

    section("no_new_compiles: a budgeted object refuses, budget left or not")
    tail = jnp.ones((40, 8))
    try:
        with no_new_compiles():
            embed(params, tail)  # a new shape: refused before tracing
    except TraceBudgetError as error:
        print(f"TraceBudgetError: {error}")

    section("no_new_compiles: any other compile, listed when the block ends")
    normalize = jax.jit(lambda x: x / jnp.linalg.norm(x, axis=-1, keepdims=True))
    try:
        with no_new_compiles():
            normalize(tail)  # a plain jax.jit, first call
            tail.sum()  # an eager operation on a new shape
    except AssertionError as error:
        print(f"AssertionError: {error}")

    section("overrides: a path of no leaf, and a draw that does not fit its leaf")
    step.precompile(PARAMS, BATCH, LR)
    for overrides in ({"batch['target']": st.just(0.0)}, {"batch['y']": st.just(np.ones(64))}):
        try:
            find(arguments(step, overrides=overrides), lambda call: True)
        except ValueError as error:
            print(f"ValueError: {error}")
