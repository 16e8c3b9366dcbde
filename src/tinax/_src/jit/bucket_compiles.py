"""``precompile_buckets``: every combination of an object's buckets traced and lowered
now in the calling thread, then compiled by it and a few threads from one queue (XLA
releases the GIL while it compiles), each one logged as it ends.

A combination that fails (a bucket size its mesh axis does not divide, sizes the
function cannot take together) leaves the others to compile; then one `ValueError`
names every failed combination and its cause (JAX's exception chained), and none of
them keeps a place in the budget."""

from __future__ import annotations

import inspect
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, cast

import jax
import numpy

from tinax._src.buckets import declared, outside
from tinax._src.budget import counting
from tinax._src.diagnosis import elide, names
from tinax._src.diagnosis.errors import TraceBudgetError
from tinax._src.diagnosis.record import short_dtype
from tinax._src.observe.log import logger

# At most this many compiles at once: XLA's CPU and GPU compilers run threads of their own.
_MAX_WORKERS = 8


class _Failed(NamedTuple):
    """A combination that did not compile: its index (``number``), tinax's words for the cause, the
    error (chained), and whether the cause is a mesh axis that does not divide a size."""

    number: int  # the combination's index
    cause: str
    error: BaseException
    indivisible: bool = False


def precompile_buckets(owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Traces and compiles ``owner`` for every combination of its buckets, with the
    other dimensions of ``args``/``kwargs``; returns how many signatures it traced: each
    combination counted where this call traced it, not where another thread (a warm
    start, a concurrent call) traced one meanwhile. A combination that fails gives its
    trace's place in the budget back; the others compile, then `_failure` is raised."""
    api = type(owner).__name__
    buckets: declared.Declared | None = owner._plan.buckets
    if buckets is None:
        raise ValueError(
            f"{api}: precompile_buckets compiles the buckets an object declares; this one "
            "declares none (buckets=None)."
        )
    signature = owner._signature.get()
    combinations = list(declared.combinations(buckets))
    calls = [
        declared.example_arguments(buckets, signature, taken, args, kwargs)
        for taken in combinations
    ]
    _, _, where = names.where(owner.function)
    total = len(calls)
    done = 0
    ledger = owner._ledger
    failed: list[_Failed] = []
    for index, call in enumerate(calls):  # refused before a trace: no place in the budget
        cause = indivisible(signature, *call)
        if cause is not None:
            failed.append(_Failed(index, cause[0], cause[1], indivisible=True))
    skipped = {failure.number for failure in failed}

    # Traced and lowered here, one after the other: tracing and lowering are Python under
    # the GIL, and threads doing them only wait on each other. Each is compiled, as soon
    # as it is lowered, by the workers and then this thread too, from one queue: XLA
    # releases the GIL while it compiles.
    todo = [index for index in range(total) if index not in skipped]
    lowered: dict[int, Any] = {}
    numbers: dict[int, list[int]] = {}  # each combination's traces of this object
    seconds: dict[int, float] = {}  # its trace and lowering, then its compile added

    def failing(index: int, error: Exception) -> None:
        for number in numbers.pop(index, ()):  # traced, then failed: its place given back
            ledger.give_back(number)
        failed.append(_Failed(index, _cause(error), error))  # list.append: atomic

    ready: queue.SimpleQueue[int | None] = queue.SimpleQueue()  # lowered, to compile
    lock = threading.Lock()

    def compile_some() -> None:
        nonlocal done
        while (index := ready.get()) is not None:
            started = time.perf_counter()
            try:
                owner._under_mesh(lowered[index].compile)
            except Exception as error:
                failing(index, error)
                continue
            finally:
                lowered[index] = None  # the lowered module freed once it is compiled
            if logger.isEnabledFor(logging.INFO):
                sizes = outside.combination_text(buckets, combinations[index])
                with lock:
                    done += 1
                    count = done
                if numbers[index]:
                    took = seconds[index] + time.perf_counter() - started
                    logger.info(
                        "%s: bucket %d of %d compiled in %.2f s (%s)",
                        where,
                        count,
                        total,
                        took,
                        sizes,
                    )
                else:  # its trace, and its executable, were there already
                    logger.info(
                        "%s: bucket %d of %d was already compiled (%s)", where, count, total, sizes
                    )

    # The threads compile each combination as soon as this one has lowered it.
    helpers = max(0, min(len(todo), os.cpu_count() or 1, _MAX_WORKERS) - 1)
    if helpers:
        ledger.threaded = True  # compile seconds now add up threads' time (`budgets`)
    workers = [threading.Thread(target=compile_some, name="tinax-buckets") for _ in range(helpers)]
    for worker in workers:
        worker.start()
    try:
        for index in todo:
            started = time.perf_counter()
            with counting.collecting() as made:  # the traces of this thread: its own
                try:
                    lowered[index] = owner._lowered(*calls[index])[3]
                except Exception as error:
                    numbers[index] = [number for traced, number in made if traced is ledger]
                    failing(index, error)
                    continue
            numbers[index] = [number for traced, number in made if traced is ledger]
            seconds[index] = time.perf_counter() - started
            ready.put(index)
    finally:
        for _ in range(helpers + 1):  # one end for each thread, and one for this one
            ready.put(None)
    compile_some()
    for worker in workers:
        worker.join()
    if failed:
        _raise_failed(api, owner, buckets, combinations, sorted(failed), total)
    return sum(len(found) for found in numbers.values())


def _cause(error: BaseException) -> str:
    """An error's first line, with its type where JAX (not tinax) raised it."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if isinstance(error, TraceBudgetError) or text.startswith(("BoundedJit:", "BatchedJit:")):
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _raise_failed(
    api: str,
    owner: Any,
    buckets: declared.Declared,
    combinations: Sequence[tuple[int, ...]],
    failed: Sequence[_Failed],
    total: int,
) -> None:
    """Raises for the combinations that failed: where every one failed alike, the first
    error itself (the example call is at fault, not a combination); else one
    `ValueError` naming each, the first one's error chained."""
    first = failed[0].error
    if len(failed) == total and len({failure.cause for failure in failed}) == 1:
        if failed[0].indivisible:
            raise ValueError(_failed_message(api, owner, buckets, combinations, failed)) from first
        raise first
    if all(isinstance(failure.error, TraceBudgetError) for failure in failed):
        raise first  # the budget, spent by traces outside the buckets: its own error
    raise ValueError(_failed_message(api, owner, buckets, combinations, failed)) from first


def _failed_message(
    api: str,
    owner: Any,
    buckets: declared.Declared,
    combinations: Sequence[tuple[int, ...]],
    failed: Sequence[_Failed],
) -> str:
    """Headline, each failed combination with its cause, how to fix."""
    _, _, where = names.where(owner.function)
    total, count = len(combinations), len(failed)
    plural = "" if count == 1 else "s"
    lines = [
        elide.fit(
            f"{api}: precompile_buckets compiled {total - count} of {total} combinations of "
            f"buckets of {where}; {count} failed, and "
            f"{'it holds' if count == 1 else 'they hold'} no place in "
            f"max_traces={owner.max_traces}."
        ),
        f"Failed ({count} combination{plural}):",
        *(
            elide.fit(
                f"  {outside.combination_text(buckets, combinations[failure.number])}: "
                f"{failure.cause}"
            )
            for failure in failed
        ),
        "How to fix:",
    ]
    if any(failure.indivisible for failure in failed):
        lines.append(
            "  give the axis sharded over a mesh axis only sizes that the mesh axis divides "
            "(tinax.jit.Dim or Buckets(where=...) leave out the others), or replicate it"
        )
    if not all(failure.indivisible for failure in failed):
        tie = _tie_code(buckets)
        if tie:
            lines.append(
                "  where sizes under different keys must be equal, tie their axes with one "
                f"Dim, so that only equal sizes combine: {tie}"
            )
        lines.append(
            "  else leave out the combinations that cannot occur with "
            "tinax.jit.Buckets(..., where=...), or fix the function for them (the first "
            "failure's error is chained)"
        )
    return "\n".join(elide.fit(line) for line in lines)


def _tie_code(buckets: declared.Declared) -> str:
    """``tinax.jit.Dim`` code that ties the axes of equal sizes lists, each an axis's own
    dimension (``buckets={"a": {0: size}, "b": {0: size}}``), or ``""`` where none do."""
    shown = buckets.shown
    if not isinstance(shown, Mapping):
        return ""
    alike: dict[tuple[int, ...], list[int]] = {}
    for dimension in buckets.dimensions:
        if dimension.name is None:
            alike.setdefault(dimension.sizes, []).extend(dimension.entries)
    groups = [entries for entries in alike.values() if len(entries) > 1]
    if not groups:
        return ""
    entries = groups[0]
    sizes = buckets.entries[entries[0]].sizes
    tied = {(buckets.entries[index].path, buckets.entries[index].axis) for index in entries}
    parts: list[str] = []
    for path, axes in shown.items():
        shown_axes = ", ".join(
            f"{axis}: {'size' if (path, axis) in tied else repr(value)}"
            for axis, value in axes.items()
        )
        parts.append(f"{path!r}: {{{shown_axes}}}")
    return f'size = tinax.jit.Dim("size", {sizes!r}); buckets={{{", ".join(parts)}}}'


def indivisible(
    signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[str, Exception] | None:
    """Where an array of the call (as `declared.example_arguments` builds it) is sharded
    over a mesh axis that does not divide its size: tinax's words for it, and JAX's
    error; ``None`` where every array's sharding fits."""
    for path, leaf in _named_leaves(signature, args, kwargs):
        sharding = leaf.sharding
        if not isinstance(sharding, jax.sharding.NamedSharding):
            continue
        try:
            sharding.shard_shape(leaf.shape)
        except Exception as error:
            return _indivisible_text(path, leaf, sharding), error
    return None


def _indivisible_text(path: str, leaf: Any, sharding: jax.sharding.NamedSharding) -> str:
    """``x is f32[2,3], its axis 0 sharded over mesh axis 'x' (8 devices): 2 is no
    multiple of 8``."""
    sizes: Mapping[str, int] = dict(sharding.mesh.shape)
    dtype = short_dtype(numpy.dtype(leaf.dtype).name)
    text = f"{path} is {dtype}[{','.join(map(str, leaf.shape))}]"
    specs: tuple[Any, ...] = tuple(sharding.spec)
    for axis, spec in enumerate(specs):
        parts = cast("tuple[Any, ...]", spec if isinstance(spec, tuple) else (spec,))
        over = tuple(name for name in parts if isinstance(name, str))
        devices = math.prod(sizes.get(name, 1) for name in over)
        if axis < len(leaf.shape) and devices > 1 and leaf.shape[axis] % devices:
            axes = ", ".join(repr(name) for name in over)
            return (
                f"{text}, its axis {axis} sharded over mesh axis {axes} ({devices} devices): "
                f"{leaf.shape[axis]} is no multiple of {devices}"
            )
    return f"{text}: its sharding {sharding.spec} does not divide its shape"


def _named_leaves(
    signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> Iterator[tuple[str, jax.ShapeDtypeStruct]]:
    """Each `jax.ShapeDtypeStruct` of a call with its path as tinax prints paths (as
    `declared.example_arguments` names them)."""
    roots: list[tuple[str, Any]]
    if signature is None:
        roots = [(f"args[{index}]", value) for index, value in enumerate(args)]
        roots += list(kwargs.items())
    else:
        roots = []
        for name, value in signature.bind(*args, **kwargs).arguments.items():
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                roots += list(value.items())
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                roots += [(f"{name}[{index}]", item) for index, item in enumerate(value)]
            else:
                roots.append((name, value))
    tree_util: Any = jax.tree_util
    for root, value in roots:
        for path, leaf in tree_util.tree_flatten_with_path(value)[0]:
            if isinstance(leaf, jax.ShapeDtypeStruct):
                yield root + tree_util.keystr(path), leaf
