"""Scopes that assert what a block may not do: `no_new_traces` (none of the given objects
traces) and `no_new_compiles` (nothing compiles at all). They need no hypothesis."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any

from tinax._src.budget import compile_guard
from tinax._src.core import validation
from tinax._src.diagnosis import compare, report
from tinax._src.diagnosis.record import TracedSignature
from tinax._src.jit.batched import BatchedJit
from tinax._src.jit.bounded import BoundedJit
from tinax._src.jit.methods import BudgetedMixin, shape_fix

# --- no new traces -----------------------------------------------------------------------


def _new_traces_text(
    owner: BudgetedMixin, before: tuple[TracedSignature, ...], used: int
) -> str | None:
    history = tuple(owner.traced_signatures)
    new = history[len(before) :]
    if not new:
        return None
    name = report.function_name(owner.function)
    location = report.function_location(owner.function)
    where = f"{name} ({location})" if location else name
    count = f"{len(new)} time{'s' if len(new) > 1 else ''}"
    lines = [
        f"{where} traced {count} inside no_new_traces: traces_used {used} -> "
        f"{owner.traces_used} (max_traces={owner.max_traces})."
    ]
    for signature in new:
        earlier = [old for old in history if old.number < signature.number]
        best, found = compare.closest(earlier, signature)
        fix = shape_fix(owner, best, signature)
        lines.append(f"New trace #{signature.number}:")
        lines.extend(
            f"  {line}"
            for line in report.explanation_lines(best, found, signature, earlier, shape_fix=fix)
        )
    return "\n".join(lines)


@contextlib.contextmanager
def _watch(objects: tuple[BudgetedMixin, ...]) -> Generator[None]:
    before = [(owner, tuple(owner.traced_signatures), owner.traces_used) for owner in objects]
    yield
    found = [_new_traces_text(owner, history, used) for owner, history, used in before]
    failures = [text for text in found if text is not None]
    if failures:
        raise AssertionError("\n\n".join(failures))


def no_new_traces(
    *objects: BoundedJit[..., Any] | BatchedJit[..., Any],
) -> contextlib.AbstractContextManager[None]:
    """Asserts that none of ``objects`` traces inside the ``with`` block.

    Inside a property test, this turns a draw that would compile again into a
    failure that hypothesis shrinks, with the budget error's diagnosis: which
    object traced, and what differed from its closest earlier trace. Blocks
    nest, and one block can watch several objects.

    Args:
        *objects: The `BoundedJit` and `BatchedJit` objects to watch.

    Returns:
        A context manager. When the block exits normally and an object traced
        inside it, it raises ``AssertionError`` with one paragraph per object
        that traced. An exception raised inside the block passes through
        unchanged.

    Raises:
        TypeError: An object is not a `BoundedJit` or `BatchedJit`.
        ValueError: No object is given.

    Examples:
        >>> import jax.numpy as jnp
        >>> from tinax.jit import bounded_jit
        >>> from tinax.testing import no_new_traces
        >>> double = bounded_jit(lambda x: 2 * x, max_traces=2)
        >>> _ = double(jnp.ones(3))
        >>> with no_new_traces(double):
        ...     _ = double(jnp.zeros(3))  # cached: passes
    """
    if not objects:
        raise ValueError(
            "no_new_traces: objects must be at least one BoundedJit or BatchedJit; got none."
        )
    for index, owner in enumerate(objects):
        if not isinstance(owner, BudgetedMixin):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                validation.message(
                    "no_new_traces", f"objects[{index}]", "a BoundedJit or BatchedJit", owner
                )
            )
    unique = tuple({id(owner): owner for owner in objects}.values())
    return _watch(unique)


# --- no new compiles -----------------------------------------------------------------------


def no_new_compiles() -> compile_guard.NoNewCompiles:
    """A scope in which nothing is traced or compiled: a context manager and a decorator.

    A test that a step runs from its compiled executable (after a warm-up, or a
    fixture that precompiles it) wants to know that nothing at all compiles
    inside: no budgeted object, whatever budget it has left, and no plain
    `jax.jit` or eager `jax.numpy` operation met with a new shape. Inside the
    scope:

    - a `BoundedJit` or `BatchedJit` that would trace (a call, ``lower``,
      ``trace``, ``eval_shape``, ``precompile``) or compile without a new trace
      (inputs placed otherwise than at its compiles; a trace made by ``lower``)
      raises `TraceBudgetError` before it traces or XLA compiles, with the
      budget error's diagnosis: which object, why, and its closest earlier
      trace. Nothing is cached and ``traces_used`` is unchanged. A call JAX
      rejects anyway raises JAX's own error;
    - every other compile (a plain `jax.jit` function, a primitive run eagerly,
      such as ``jnp.ones(3) + 1`` on a new shape) is noted, and the scope raises
      ``AssertionError`` at its end, naming each compiled function, the types
      of its arguments and the line of your code that called it. An executable
      loaded from JAX's persistent compilation cache is noted too (its function
      was traced and lowered again; marked as loaded): whether the scope passes
      does not depend on what the cache holds;
    - a call answered from JAX's caches never fails, budgeted or not, with or
      without host callbacks (`jax.debug.callback`, `jax.pure_callback`: such a
      function misses JAX's C++ fast path on every call, which
      ``jax.no_tracing`` reports as a trace, jax#39289; it is no compile).

    The scope holds for the thread (and asyncio task) that entered it, as JAX's
    configuration context managers do: a compile in another thread is neither
    refused nor reported. Scopes nest: a compile is reported by every scope it
    happened in, the innermost first. An exception raised inside the scope
    passes through unchanged, and the scope then reports nothing. As a
    decorator, each call of the decorated function is a scope of its own. Its
    listeners are installed while a scope is open and removed with the last:
    outside every scope it costs nothing.

    Returns:
        A context manager, also usable as a decorator (``@no_new_compiles()``).

    Raises:
        TraceBudgetError: Inside the scope, when a budgeted object would trace or
            compile (from the call, before it traces or compiles).
        AssertionError: When the scope ends normally and another JAX compile
            happened inside it, in its thread (one line per compile, at most 12
            listed).

    Examples:
        >>> import jax
        >>> import jax.numpy as jnp
        >>> from tinax.jit import bounded_jit
        >>> from tinax.testing import no_new_compiles
        >>> double = bounded_jit(lambda x: 2 * x, max_traces=4)
        >>> x, longer = jnp.ones(3), jnp.ones(5)
        >>> _ = double(x)
        >>> with no_new_compiles():
        ...     _ = double(x)  # cached: passes
        >>> with no_new_compiles():
        ...     _ = double(longer)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tinax.jit.TraceBudgetError: <lambda> (...) would trace inside no_new_compiles: ...
    """
    return compile_guard.NoNewCompiles()
