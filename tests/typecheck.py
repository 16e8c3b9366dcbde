"""Static typing checks, run by pyright in CI (`.ci/run`), never executed.

``assert_type`` fails the type check if a factory loses the wrapped function's
types; each ``pyright: ignore[...]`` marks a call that must be a type error,
and ``reportUnnecessaryTypeIgnoreComment`` fails the check if it stops being one.
The code is written as a user writes it: functions, methods and staticmethods,
decorated with and without options, called, lowered and inspected.
"""

# pyright: strict, reportUnnecessaryTypeIgnoreComment=true

import dataclasses
from collections.abc import Sequence
from functools import partial
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


def batched_keeps_parameter_and_return_types(x: jax.Array) -> None:
    # As jax.vmap's types do: the batched call takes the function's parameters.
    wrapped = batched_jit(step, in_axes=(0, None), max_traces=1)
    assert_type(wrapped(x, 3), tuple[jax.Array, int])
    assert_type(BatchedJit(step, max_traces=1)(x, 3), tuple[jax.Array, int])


def batched_rejects_wrong_argument_types(x: jax.Array) -> None:
    wrapped = batched_jit(step, in_axes=(0, None), max_traces=1)
    wrapped(x, "three")  # pyright: ignore[reportArgumentType]
    wrapped(x)  # pyright: ignore[reportCallIssue]
    wrapped(x, 3, 4)  # pyright: ignore[reportCallIssue]


# --- decorators, with options and through functools.partial ---------------------------------


@bounded_jit(max_traces=1)
def double(x: jax.Array) -> jax.Array:
    return x * 2


@bounded_jit(max_traces=2, static_argnames="n")
def power(x: jax.Array, n: int) -> jax.Array:
    return x**n


@partial(bounded_jit, max_traces=1, static_argnums=1)
def scale(x: jax.Array, factor: float) -> jax.Array:
    return x * factor


@batched_jit(in_axes=(0, None), max_traces=1)
def shift(v: jax.Array, by: float) -> jax.Array:
    return v + by


@partial(batched_jit, max_traces=1)
def squared_norm(v: jax.Array) -> jax.Array:
    return v @ v


def decorated_functions_keep_their_types(x: jax.Array) -> None:
    assert_type(double(x), jax.Array)
    assert_type(power(x, n=3), jax.Array)
    assert_type(scale(x, 0.5), jax.Array)
    assert_type(shift(x, 1.0), jax.Array)
    assert_type(squared_norm(x), jax.Array)
    # The objects, not plain callables.
    assert_type(double.traces_used, int)
    assert_type(squared_norm.lower(x), jax.stages.Lowered)


def decorated_functions_reject_wrong_arguments(x: jax.Array) -> None:
    double("x")  # pyright: ignore[reportArgumentType]
    power(x, n="3")  # pyright: ignore[reportArgumentType]
    power(x, m=3)  # pyright: ignore[reportCallIssue]
    scale(x)  # pyright: ignore[reportCallIssue]
    shift(x, "1")  # pyright: ignore[reportArgumentType]
    squared_norm()  # pyright: ignore[reportCallIssue]


def factories_need_max_traces() -> None:
    # No bare @bounded_jit: max_traces is required, with a function or without.
    bounded_jit(step)  # pyright: ignore[reportCallIssue]
    batched_jit()  # pyright: ignore[reportCallIssue]


# --- methods and staticmethods ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Scaler:
    """A hashable model: ``self`` is static (static_argnums=0), as with jax.jit."""

    factor: float

    @bounded_jit(max_traces=1, static_argnums=0)
    def apply(self, x: jax.Array) -> jax.Array:
        return x * self.factor

    @partial(bounded_jit, max_traces=2, static_argnums=0, static_argnames="n")
    def power(self, x: jax.Array, n: int) -> jax.Array:
        return (x * self.factor) ** n

    @batched_jit(max_traces=1, static_argnums=0)
    def rows(self, v: jax.Array) -> jax.Array:
        return v @ v * self.factor

    @staticmethod
    @bounded_jit(max_traces=1)
    def double(x: jax.Array) -> jax.Array:
        return x * 2

    @staticmethod
    @batched_jit(max_traces=1)
    def squared_norms(v: jax.Array) -> jax.Array:
        return v @ v


def methods_bind_self(x: jax.Array) -> None:
    scaler = Scaler(2.0)
    assert_type(scaler.apply(x), jax.Array)
    assert_type(scaler.power(x, n=2), jax.Array)
    assert_type(scaler.rows(x), jax.Array)
    # Through the class, the object itself: self is passed explicitly.
    assert_type(Scaler.apply(scaler, x), jax.Array)
    assert_type(Scaler.apply.traces_used, int)
    assert_type(Scaler.apply.lower(scaler, x), jax.stages.Lowered)
    assert_type(Scaler.rows.traces_used, int)


def methods_reject_wrong_arguments(x: jax.Array) -> None:
    scaler = Scaler(2.0)
    scaler.apply("x")  # pyright: ignore[reportArgumentType]
    scaler.apply()  # pyright: ignore[reportCallIssue]
    scaler.apply(scaler, x)  # pyright: ignore[reportCallIssue]
    scaler.power(x, n="2")  # pyright: ignore[reportArgumentType]
    scaler.rows(x, x)  # pyright: ignore[reportCallIssue]


def staticmethods_bind_nothing(x: jax.Array) -> None:
    scaler = Scaler(2.0)
    assert_type(Scaler.double(x), jax.Array)
    assert_type(scaler.double(x), jax.Array)
    assert_type(Scaler.squared_norms(x), jax.Array)
    assert_type(scaler.squared_norms(x), jax.Array)
    scaler.double("x")  # pyright: ignore[reportArgumentType]
    Scaler.squared_norms(x, x)  # pyright: ignore[reportCallIssue]


# --- what the object shows -------------------------------------------------------------------


def introspection_is_typed(x: jax.Array) -> None:
    bounded = bounded_jit(step, max_traces=1)
    batched = batched_jit(step, in_axes=(0, None), max_traces=1)
    for wrapped in (bounded, batched):
        assert_type(wrapped.traces_used, int)
        assert_type(wrapped.compiles_used, int)
        assert_type(wrapped.cache_loads, int)
        assert_type(wrapped.max_traces, int)
        assert_type(wrapped.mesh, Mesh | None)
        assert_type(wrapped.__name__, str)
        assert_type(wrapped.__qualname__, str)
        assert_type(wrapped.__module__, str)
        assert_type(wrapped.__doc__, str | None)
        # __wrapped__ and function are the function itself, with its types.
        assert_type(wrapped.__wrapped__(x, 3), tuple[jax.Array, int])
        assert_type(wrapped.function(x, 3), tuple[jax.Array, int])
        wrapped.__wrapped__(x, "three")  # pyright: ignore[reportArgumentType]
        assert_type(wrapped.precompile(x, 3), jax.stages.Compiled)
        assert_type(wrapped.lower(x, 3).as_text(), str)
    assert_type(bounded.static_argnames, Sequence[str])
    assert_type(batched.axis_size, int | None)
    assert_type(type(bounded).__name__, str)


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
