"""The registry of live budgeted objects (weak references only), `budgets()` and the
table it prints (`registry_table`)."""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tinax._src.buckets import declared, outside
from tinax._src.diagnosis import compare
from tinax._src.observe import bucket_padding, rebuilt, registry_table, sites, watchers
from tinax._src.parallel import trace_agreement

if TYPE_CHECKING:
    from tinax._src.diagnosis.record import TracedSignature
    from tinax._src.objects.handle import Budgeted, Handle


_registry_lock = threading.RLock()
_registry: list[weakref.ref[Handle]] = []  # the handles: each names its object weakly
_prune_at = 64


def register(handle: Handle) -> None:
    """Adds a freshly built object to the registry (its handle, weakly) and gives its
    handle what trace time needs: the construction site, the rank there."""
    global _prune_at
    # Two frames up, the class's __attrs_post_init__: the walk to the user's code starts
    # there (sys._getframe materializes only the frame it returns; each f_back, one more).
    handle.birth = rebuilt.birth(sys._getframe(2))  # pyright: ignore[reportPrivateUsage]
    trace_agreement.constructed(handle)  # its rank, for its identity across processes
    if watchers.built_hook is not None:  # a test session's budgets (--tinax-budgets)
        watchers.built_hook(handle)
    with _registry_lock:
        _registry.append(weakref.ref(handle))
        if len(_registry) >= _prune_at:  # dead references go in amortized O(1)
            _registry[:] = [alive for alive in _registry if _alive(alive) is not None]
            _prune_at = max(64, 2 * len(_registry))
    if watchers.warm_hook is not None:  # tinax.warm_start: compile what last run traced
        watchers.warm_hook.built(handle)


def _alive(ref: weakref.ref[Handle]) -> Budgeted | None:
    """The object of a registered handle, or ``None`` where either is gone."""
    handle = ref()
    return None if handle is None else handle.public()


def handles() -> list[Handle]:
    """The handles of every live object, in the order `budgets` lists the objects."""
    with _registry_lock:
        alive = [
            (owner, handle)
            for ref in _registry
            if (handle := ref()) is not None
            if (owner := handle.public()) is not None
        ]
    return [alive[index][1] for index in _order([owner for owner, _ in alive])]


def _order(alive: Sequence[Budgeted]) -> list[int]:
    """The objects' indices, by total compile time (largest first, then oldest)."""
    totals = [(_total(owner, "compile_seconds"), index) for index, owner in enumerate(alive)]
    return sorted(range(len(alive)), key=lambda index: (-totals[index][0], index))


def budgets() -> Budgets:
    """Every live `BoundedJit` and `BatchedJit` in the process, most compile time first.

    For the end of a training script or a debugging session: ``print(budgets())``
    shows one table of every budgeted function, where it is defined, its traces
    against its budget, its XLA compiles and its loads from JAX's persistent
    compilation cache, the time spent tracing and compiling it, and why it last
    retraced. The registry holds weak references only: an object dropped by the
    program is gone from it (and freed) as from everywhere else.

    Returns:
        A tuple of the objects, sorted by total compile time (largest first, then
        in order of creation), that prints as a table.

    Examples:
        >>> import jax.numpy as jnp
        >>> from tinax.jit import bounded_jit, budgets
        >>> double = bounded_jit(lambda x: x * 2, max_traces=1)
        >>> _ = double(jnp.ones(3))
        >>> double in budgets()
        True
    """
    with _registry_lock:
        alive = [owner for ref in _registry if (owner := _alive(ref)) is not None]
    return Budgets(alive[index] for index in _order(alive))


def _total(owner: Budgeted, fact: str) -> float:
    return sum(getattr(entry, fact) or 0.0 for entry in owner.traced_signatures)


class Budgets(tuple[Any, ...]):
    """The live budgeted objects, as `budgets` returns them; prints as a table.

    Under the table, where `pad_ragged` or `pad_to_bucket` padded batches to
    sizes of a `Dim` that an object's buckets declare, a line per combination
    padded to: its batches and its share of padding. `padding` holds them.
    """

    __slots__ = ()

    def __str__(self) -> str:
        return budgets_table(self)

    @property
    def padding(self) -> tuple[bucket_padding.BucketPadding, ...]:
        """The batches padded per combination of each object's `Dim`s, as data.

        A cached call runs no Python, so it cannot be counted; `pad_ragged` and
        `pad_to_bucket`, given `Dim`s, count each batch they pad on the `Dim`,
        under its combination: each `Dim`'s name and the size padded to. Each
        object is given the counts of the `Dim` objects its buckets were given,
        every combination whose names are all its own (a length-only pad counts
        for an object with rows and length). A pad knows its `Dim`s, not the
        object the batch is for: two objects given one `Dim` are given the same
        counts, and an equal `Dim` made apart counts apart. Read now, at each
        access. To choose buckets: a combination with many batches and a large
        share of padding wants a size between its own and the one below.

        Returns:
            One record per object and combination (``object``, ``combination``:
            name to size, ``batches``, ``real`` and ``padded`` entries, ``share``
            of padding), in the order of the objects, most batches first;
            empty where nothing was padded to a `Dim`'s sizes.

        Examples:
            >>> import numpy as np
            >>> from tinax.jit import Dim, bounded_jit, budgets, pad_ragged
            >>> length = Dim("doc_length", (4, 8))
            >>> first = bounded_jit(lambda x: x, max_traces=2, buckets={"x": {1: length}})
            >>> _ = pad_ragged([np.ones(3, np.int32), np.ones(5, np.int32)], length)
            >>> [(dict(r.combination), r.share) for r in budgets().padding if r.object is first]
            [({'doc_length': 8}, 0.5)]
        """
        return bucket_padding.records(self, _declared_of(self))


def _declared_of(objects: Sequence[Budgeted]) -> Callable[[Budgeted], declared.Declared | None]:
    """The buckets each of ``objects`` declares (through its handle), or ``None``."""
    with _registry_lock:
        found = [handle for ref in _registry if (handle := ref()) is not None]
    by_id = {
        id(owner): handle.buckets
        for handle in found
        if handle.buckets is not None and (owner := handle.public()) is not None
    }
    return lambda owner: by_id.get(id(owner))


def last_retrace_cause(
    history: Sequence[TracedSignature], buckets: declared.Declared | None = None
) -> str | registry_table.Cause:
    """The first difference of the latest retrace from its closest earlier trace; with
    ``buckets``, the first trace of a combination of them is no retrace (it was declared)."""
    if buckets is not None:
        retraces = [
            index
            for index, entry in enumerate(history)
            if index and not outside.declared_trace(buckets, entry, history[:index])
        ]
        history = history[: retraces[-1] + 1] if retraces else history[:1]
    if len(history) < 2:
        return "-"
    try:
        found = list(compare.closest(history[:-1], history[-1])[1])
    except Exception:  # a table for a person must print whatever the history holds
        return "?"
    if not found:
        return "no difference in the abstract signature"
    return registry_table.Cause(history[-1].number, found[0], len(found) - 1)


def budgets_table(objects: Sequence[Budgeted]) -> str:
    """One row per function and place built: function, location, traces/budget,
    compiles, loads from JAX's persistent cache, trace and compile time, the buckets
    compiled (where an object declares some), last retrace cause (`registry_table`)."""
    with _registry_lock:
        found = [handle for ref in _registry if (handle := ref()) is not None]
    places = {
        id(owner): rebuilt.birth_of(handle)
        for handle in found
        if (owner := handle.public()) is not None
    }
    declared_by = {
        id(owner): handle.buckets
        for handle in found
        if handle.buckets is not None and (owner := handle.public()) is not None
    }

    def built_at(owner: Budgeted) -> str:
        """``file:line`` where the user's code built ``owner``, or ``?``."""
        birth = places.get(id(owner))
        if not birth:
            return "?"
        (filename, line) = birth[0]
        return f"{sites.shown(filename)}:{line}"

    def bucketed(owner: Budgeted) -> tuple[int, int, float] | None:
        """How many of ``owner``'s combinations of buckets are compiled, of how many, and
        their compile time; ``None`` for an object without buckets."""
        buckets = declared_by.get(id(owner))
        if buckets is None:
            return None
        done, seconds = outside.compiled_summary(buckets, owner.traced_signatures)
        return done, buckets.combinations, seconds

    def cause(owner: Budgeted) -> str | registry_table.Cause:
        return last_retrace_cause(owner.traced_signatures, declared_by.get(id(owner)))

    threaded_ids = {
        id(owner)
        for handle in found
        if handle.ledger.threaded and (owner := handle.public()) is not None
    }

    def threaded(owner: Budgeted) -> bool:
        """Whether ``owner``'s compiles ran in threads at once (``precompile_buckets``)."""
        return id(owner) in threaded_ids

    shown = registry_table.table(objects, built_at, cause, bucketed, threaded)
    padding = bucket_padding.lines(
        bucket_padding.records(objects, lambda owner: declared_by.get(id(owner)))
    )
    return "\n".join([shown, *padding])
