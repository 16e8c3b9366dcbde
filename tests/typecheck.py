"""Static typing checks, run by pyright in CI (`.ci/run`), never executed.

``assert_type`` fails the type check if a factory loses the wrapped function's
types; each ``pyright: ignore[...]`` marks a call that must be a type error,
and ``reportUnnecessaryTypeIgnoreComment`` fails the check if it stops being one.
"""

# pyright: strict, reportUnnecessaryTypeIgnoreComment=true

from typing import assert_type

import jax
from jax.sharding import Mesh, PartitionSpec

from tinax.jit import (
    BatchedJit,
    BoundedJit,
    Difference,
    Explanation,
    TraceHistory,
    batched_jit,
    bounded_jit,
)
from tinax.parallel import ShardMapped, shard_mapped


def step(x: jax.Array, n: int) -> tuple[jax.Array, int]:
    return x, n


def bounded_keeps_parameter_and_return_types(x: jax.Array) -> None:
    wrapped = bounded_jit(step, max_traces=1)
    assert_type(wrapped(x, 3), tuple[jax.Array, int])
    assert_type(BoundedJit(step, max_traces=1)(x, 3), tuple[jax.Array, int])


def bounded_rejects_wrong_argument_types(x: jax.Array) -> None:
    wrapped = bounded_jit(step, max_traces=1)
    wrapped(x, "three")  # pyright: ignore[reportArgumentType]
    wrapped(x)  # pyright: ignore[reportCallIssue]


def batched_keeps_return_type(x: jax.Array) -> None:
    wrapped = batched_jit(step, max_traces=1)
    assert_type(wrapped, BatchedJit[tuple[jax.Array, int]])
    assert_type(wrapped(x, 3), tuple[jax.Array, int])


def factories_reject_wrong_option_types(x: jax.Array) -> None:
    bounded_jit(step, max_traces="1")  # pyright: ignore[reportArgumentType]
    batched_jit(step, max_traces=1, axis_size="4")  # pyright: ignore[reportArgumentType]


def diagnostics_are_typed(x: jax.Array) -> None:
    wrapped = bounded_jit(step, max_traces=1)
    explanation = wrapped.explain(x, 3)
    assert_type(explanation, Explanation)
    assert_type(explanation.retraces, bool)
    assert_type(explanation.differences, tuple[Difference, ...])
    assert_type(wrapped.traced_signatures, TraceHistory)


def stages_are_typed_as_jax_jit_s(x: jax.Array) -> None:
    # jax.jit(step).lower(...) is jax.stages.Lowered and .trace(...) jax.stages.Traced
    bounded = bounded_jit(step, max_traces=1)
    assert_type(bounded.lower(x, 3), jax.stages.Lowered)
    assert_type(bounded.trace(x, 3), jax.stages.Traced)
    batched = batched_jit(step, max_traces=1)
    assert_type(batched.lower(x, 3), jax.stages.Lowered)
    assert_type(batched.trace(x, 3), jax.stages.Traced)


def shard_mapped_keeps_parameter_and_return_types(x: jax.Array, mesh: Mesh) -> None:
    spec = PartitionSpec("x")
    wrapped = shard_mapped(step, mesh=mesh, in_specs=(spec, None), out_specs=(spec, None))
    assert_type(wrapped(x, 3), tuple[jax.Array, int])
    assert_type(
        ShardMapped(step, mesh=mesh, in_specs=spec, out_specs=spec)(x, 3), tuple[jax.Array, int]
    )
    wrapped(x, "three")  # pyright: ignore[reportArgumentType]


def static_nonarrays_keeps_types(x: jax.Array) -> None:
    wrapped = bounded_jit(step, max_traces=1, static_nonarrays=True)
    assert_type(wrapped(x, 3), tuple[jax.Array, int])
    decorate = bounded_jit(max_traces=1, static_nonarrays=True)
    assert_type(decorate(step)(x, 3), tuple[jax.Array, int])
    assert_type(batched_jit(step, max_traces=1, static_nonarrays=True)(x, 3), tuple[jax.Array, int])
    assert_type(BoundedJit(step, max_traces=1, static_nonarrays=True).static_nonarrays, bool)
    bounded_jit(step, max_traces=1, static_nonarrays="yes")  # pyright: ignore[reportArgumentType]
