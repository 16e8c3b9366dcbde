"""XLA compiles an object causes, traced or not: ``compiles_used``.

A trace budget bounds traces, not compiles. JAX compiles again without tracing
when a call reuses a trace (same abstract signature) with inputs placed
otherwise: on a mesh with Auto axes, an array sharded ``P('data')`` and a host
NumPy array have one abstract value, but `jax.jit` resolves their input
shardings differently, lowers and compiles a second executable. No trace is
made, so the budget never sees it; this module counts it, and says why.

How a compile is attributed: JAX reports each backend compile through
`jax.monitoring` (``/jax/core/compile/backend_compile_duration``) from inside
the `jax.jit` call that missed its cache (`private.jit_call` reads the traced
function, its parameters and the flat arguments from that frame). The listener
finds that frame, and the object whose counted
function it holds. A compile outside a call (``precompile``, and the
``compile()`` of a stage the object's ``lower`` or ``trace`` returned, `own_stage`)
says for whom it compiles (`compiling`). Each compile is of one trace: the jaxpr
of each trace is mapped to its number when first seen (`trace_number`: the
trace just counted in this thread, `note_trace`), and a compile of a trace
compiled before is a compile without a new trace; the inputs' placements,
recorded at each compile, name its cause.

An eager transform around the object (`jax.grad`, `jax.vmap`, `jax.jvp`,
`jax.linearize`, `jax.checkpoint`, outside any `jax.jit`) reuses a trace of the
function but compiles jaxprs JAX makes from it (its JVP, its known and linear parts,
its transpose, its batched form), each named as the function (``jit(loss)``), in the
object's call or later (a backward pass). Each is a compile of the object
(`private.compiled_jaxpr` is not its trace's jaxpr, or `private.jaxpr_source` names
the object's `jax.jit` object, `register`), counted, and kept apart from the
compiles of the trace itself: no call of the trace has an executable from them, and
``explain`` and `no_new_compiles` say so (`would_compile`, `transform_cause`).

A load from JAX's persistent compilation cache ends with the same event; it is
counted apart (``cache_loads``), as `observe.cache_loads` tells it: it made no
XLA compile, but it still stands for an executable of the trace, so the inputs'
placements are recorded as for a compile. A compile answered by an executable warm
start compiled ahead (`observe.compile_events.ahead`) is neither: the call compiled
nothing, and its placements are recorded.

Nothing here runs on a cached call: only when XLA compiles (or loads).
"""

from __future__ import annotations

import copy
import logging
import sys
import threading
import types
import weakref
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import jax
import jax.monitoring
import numpy as np
from jax.sharding import NamedSharding

from tinax._src import private
from tinax._src.diagnosis import report
from tinax._src.observe import compile_events
from tinax._src.observe.log import logger

if TYPE_CHECKING:
    from tinax._src.objects.handle import Handle

_books_lock = threading.Lock()  # books made, and the table of sources: never a trace's lock

_COMPILE_EVENT = private.COMPILE_EVENT
UNPLACED = "unspecified"  # what jax.jit resolves an uncommitted input's sharding to


class Book:
    """One object's compiles: the count, the loads from JAX's persistent cache, the
    trace each jaxpr seen is of, and per trace compiled (or loaded), the placements of
    the inputs of each of its compiles."""

    __slots__ = (
        "by_trace",
        "count",
        "jaxprs",
        "loaded",
        "loads",
        "lock",
        "log",
        "staged",
        "transformed",
    )

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.loads = 0  # executables loaded from JAX's persistent cache: no XLA compile
        self.jaxprs: weakref.WeakKeyDictionary[Any, int] | None = None  # jaxpr -> trace number
        # trace number -> the placements ({path: (key, text)}) of each of its compiles
        self.by_trace: dict[int, list[dict[str, tuple[str, str]]]] = {}
        self.log: list[str] = []  # causes of compiles without a new trace, oldest first
        self.transformed: set[int] = set()  # traces compiled inside an eager transform
        self.staged: set[int] = set()  # traces made inside another trace (never compiled alone)
        self.loaded: dict[int, int] = {}  # trace number -> its loads among by_trace's


_ATTRIBUTE = "_tinax_compiles"  # on the counted function: the handle of its object


_sources: dict[int, tuple[str, weakref.ref[Handle] | None]] = {}
"""By the identity of a `jax.jit` object's source text (`private.jit_source`), the handle
of the object that built it; ``None`` where two live objects share one text object. The
text is held here, so that its identity is not reused while the entry lasts; the entry
goes with the handle."""
_sources_lock = threading.RLock()  # re-entrant: a handle may die (and be forgotten) inside


def register(counted: Callable[..., Any], handle: Handle, jitted: object = None) -> None:
    """Marks ``counted`` as the counted function of the object of ``handle``: its compiles
    go in that object's book, made at its first compile (`book`). ``jitted`` is the
    `jax.jit` object of ``counted``: jaxprs that name its source text (`private.jit_source`)
    are made from the object's traces, and their compiles, wherever JAX runs them, are
    the object's."""
    setattr(counted, _ATTRIBUTE, handle)  # a plain function attribute: cheap to set and read
    source = private.jit_source(jitted)
    if source is None:
        return
    key = id(source)

    def forget(gone: weakref.ref[Handle]) -> None:
        with _sources_lock:
            entry = _sources.get(key)
            if entry is not None and entry[1] is gone:
                del _sources[key]

    with _sources_lock:
        found = _sources.get(key)
        known = None if found is None or found[1] is None else found[1]()
        if found is not None and (found[1] is None or known is not None):
            _sources[key] = (source, None)  # shared by two live objects: neither's alone
        else:
            _sources[key] = (source, weakref.ref(handle, forget))


def _derived_owner(jaxpr: Any) -> Handle | None:
    """The handle of the object whose `jax.jit` object traced the jaxpr from which JAX
    made ``jaxpr`` (or ``jaxpr`` itself), or ``None``."""
    source = private.jaxpr_source(jaxpr)
    if source is None:
        return None
    found = _sources.get(id(source))
    if found is None or found[0] is not source or found[1] is None:
        return None
    return found[1]()


def book(handle: Handle) -> Book:
    """The compile book of the object of ``handle`` (its ``book``), made when first
    needed."""
    found = handle.book
    if found is None:
        with _books_lock:  # not the ledger's: a compile must never wait on a trace's lock
            found = handle.book
            if found is None:
                found = handle.book = Book()
    return cast("Book", found)


def _kept(handle: Handle) -> Book | None:
    """The compile book of the object of ``handle``, or ``None`` if none is made yet."""
    return cast("Book | None", handle.book)


class Compiling(NamedTuple):
    """A compile of a budgeted object, seen from a compile event's listener."""

    handle: Handle
    jaxpr: Any  # the closed jaxpr compiled, or None where not known
    arg_names: Sequence[str]  # the flat arguments' names, as jax.jit has them
    flat_args: Sequence[Any]
    args: Sequence[Any]  # the call, as the object's jax.jit object got it
    kwargs: Mapping[str, Any]
    number: int | None = None  # the trace compiled, where known already
    placed: Mapping[str, tuple[str, str]] | None = None  # the inputs' placements, if known
    transformed: bool = False  # a jaxpr an eager transform made from the trace (its JVP...)


class _Local(threading.local):
    compiling: Compiling | None = None  # a compile outside a call, and for whom
    traced: tuple[weakref.ref[Handle], int] | None = None  # the trace just counted here


_local = _Local()


@contextmanager
def compiling(
    handle: Handle,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    number: int | None = None,
    jaxpr: Any = None,
    placed: Mapping[str, tuple[str, str]] | None = None,
) -> Generator[None]:
    """Compiles in this thread, in the block, are for the object of ``handle``
    (``precompile`` and a stage's ``compile()`` run outside a `jax.jit` call), with
    these arguments; of trace ``number`` (jaxpr ``jaxpr``) where known, its inputs
    placed as ``placed`` (`placements_of`)."""
    earlier = _local.compiling
    _local.compiling = Compiling(
        handle, jaxpr, (), (), args, {} if kwargs is None else kwargs, number, placed
    )
    try:
        yield
    finally:
        _local.compiling = earlier


def note_staged(handle: Handle, number: int) -> None:
    """Trace ``number`` of the object of ``handle`` was made inside another trace (an
    outer `jax.jit`, `jax.checkpoint`, a `jax.lax.scan` body): nothing compiles it alone,
    and a call of its signature compiles (`would_compile`)."""
    kept = book(handle)
    with kept.lock:
        kept.staged.add(number)


def note_trace(handle: Handle, number: int) -> None:
    """Trace ``number`` of the object of ``handle`` was just counted in this thread (not
    staged into another trace): the next jaxpr of that object seen here unmapped is its
    own (`trace_number`). Its book is made now if not yet: whoever keeps it (a test
    session's collector, `observe.session_budgets`) finds it after the first trace."""
    book(handle)
    _local.traced = (weakref.ref(handle), number)


def trace_number(handle: Handle, jaxpr: Any, *, consume: bool = True) -> int | None:
    """The number of the trace whose jaxpr is ``jaxpr``: as mapped when first seen, else
    the trace just counted in this thread for this object (mapped now, unless
    ``consume`` is false); ``None`` where neither is known."""
    if jaxpr is None:
        return None
    kept = book(handle)
    with kept.lock:
        if kept.jaxprs is not None:
            number = kept.jaxprs.get(jaxpr)
            if number is not None:
                return number
        noted = _local.traced
        if noted is None or noted[0]() is not handle:
            return None
        number = noted[1]
        if consume:
            _local.traced = None
            if kept.jaxprs is None:
                kept.jaxprs = weakref.WeakKeyDictionary()
            kept.jaxprs[jaxpr] = number
        return number


def owner_of(frame: types.FrameType | None) -> Compiling | None:
    """The budgeted object whose compile is starting or ending, as seen from ``frame``
    (a compile event's listener's caller): the `jax.jit` call that missed its cache,
    else ``precompile``'s; ``None`` for the compile of another function (one of ours
    staged into another `jax.jit` compiles with it, as the other's)."""
    found = private.jit_call(frame)
    handle = None if found is None else getattr(found.function, _ATTRIBUTE, None)
    compiled = private.compiled_jaxpr(frame)
    if found is not None and handle is not None:
        # in the object's call: its trace's jaxpr, else one a transform made from it
        transformed = compiled is not None and compiled is not found.jaxpr
        return Compiling(
            handle,
            found.jaxpr,
            found.arg_names,
            found.flat_args,
            found.args,
            found.kwargs,
            transformed=transformed,
        )
    if compiled is not None:  # outside its call: a jaxpr made from one of its traces
        derived = _derived_owner(compiled)
        if derived is not None:
            return Compiling(derived, None, (), (), (), {}, transformed=True)
        if found is not None:
            return None  # another function's compile
    elif found is not None:
        return None  # another jit's compile (one of ours staged into it compiles with it)
    return _local.compiling


def compiled_trace(found: Compiling) -> int | None:
    """The number of the trace ``found`` compiles, if XLA compiled it before (asked at
    a compile's start: nothing is mapped here)."""
    number = found.number
    if number is None:
        number = trace_number(found.handle, found.jaxpr, consume=False)
    if number is None:
        return None
    kept = book(found.handle)
    with kept.lock:
        return number if kept.by_trace.get(number) else None


def placement(value: object) -> tuple[str, str]:
    """``(key, text)``: how `jax.jit` resolves an input's sharding when none was given
    (``key``, compared), and how a person reads it (``text``)."""
    if isinstance(value, np.ndarray):
        return UNPLACED, "a host NumPy array"
    if isinstance(value, np.generic):
        return UNPLACED, "a NumPy scalar"
    if isinstance(value, bool | int | float | complex):
        return UNPLACED, f"a Python {type(value).__name__}"
    sharding = getattr(value, "sharding", None)
    if sharding is None:
        return UNPLACED, "no sharding (abstract)"
    committed = bool(getattr(value, "_committed", True))
    if isinstance(sharding, NamedSharding) and not sharding.mesh.empty:
        spec = str(sharding.spec)
        if committed:
            return f"named {spec} {sharding.mesh.axis_names}", f"placed {spec}"
        return UNPLACED, f"uncommitted {spec}"
    if not committed:
        return UNPLACED, "an uncommitted array (on its default device)"
    devices = sorted(str(device) for device in getattr(sharding, "device_set", ()))
    where = devices[0] if len(devices) == 1 else f"{len(devices)} devices"
    return f"{type(sharding).__name__} {devices}", f"committed to {where}"


def placements(names: Sequence[str], args: Sequence[Any]) -> dict[str, tuple[str, str]]:
    """The placements of a compile's flat arguments by name (`placement`)."""
    return {name: placement(arg) for name, arg in zip(names, args, strict=False)}


def _cause(before: Mapping[str, tuple[str, str]], after: Mapping[str, tuple[str, str]]) -> str:
    """The inputs whose resolved sharding changed, as ``path: before -> after``."""
    changed = [
        f"{path}: {before[path][1]} -> {after[path][1]}"
        for path in after
        if path in before and before[path][0] != after[path][0]
    ]
    if not changed:
        return "the inputs' shardings are as in an earlier compile of it; the cause is not visible"
    more = f" (+{len(changed) - 1} more)" if len(changed) > 1 else ""
    return f"input sharding changed: {changed[0]}{more}"


def _on_duration(event: str, duration_secs: float, **metadata: Any) -> None:
    if event != _COMPILE_EVENT:
        return
    try:
        _count(sys._getframe(1))  # pyright: ignore[reportPrivateUsage]
    except Exception:  # a listener must never break a compile
        pass


def _count(frame: types.FrameType) -> None:
    found = owner_of(frame)
    if found is None:
        return  # another jit's compile (one of ours staged into it compiles with it)
    if found.transformed:
        _count_transformed(found)
        return
    handle, jaxpr = found.handle, found.jaxpr
    placed = found.placed
    if placed is None:
        placed = placements(found.arg_names, found.flat_args)
    number = found.number
    if number is None:
        number = trace_number(handle, jaxpr)
    if number is None and jaxpr is not None:  # a trace seen nowhere before: the latest
        number = handle.ledger.used
        kept = book(handle)
        with kept.lock:
            if kept.jaxprs is None:
                kept.jaxprs = weakref.WeakKeyDictionary()
            kept.jaxprs[jaxpr] = number
    loaded = compile_events.loaded()
    ahead = compile_events.ahead()  # warm start's executable: neither compiled nor loaded
    kept = book(handle)
    with kept.lock:
        if loaded:
            kept.loads += 1
        elif not ahead:
            kept.count += 1
        if number is None:
            return
        if loaded:
            kept.loaded[number] = kept.loaded.get(number, 0) + 1
        earlier = kept.by_trace.setdefault(number, [])
        if not earlier:  # the first compile of this trace
            earlier.append(dict(placed))
            return
        cause = _cause(earlier[-1], placed)
        earlier.append(dict(placed))
        count = kept.loads if loaded else kept.count
    _report(handle, number, count, cause, loaded)


def transformed_trace(found: Compiling) -> int | None:
    """The number of the trace from which an eager transform made the jaxpr ``found``
    compiles, where known: in the object's own call (the trace just counted there, or
    the jaxpr of the call); else ``None`` (a backward pass, `jax.checkpoint`)."""
    if found.jaxpr is None:
        return None
    number = trace_number(found.handle, found.jaxpr)
    if number is None:  # a trace seen nowhere before: the latest
        number = found.handle.ledger.used
        kept = book(found.handle)
        with kept.lock:
            if kept.jaxprs is None:
                kept.jaxprs = weakref.WeakKeyDictionary()
            kept.jaxprs[found.jaxpr] = number
    return number


def _count_transformed(found: Compiling) -> None:
    """A compile of a jaxpr an eager transform made from a trace: the object's compile
    (or load), and no executable of the trace itself."""
    number = transformed_trace(found)
    loaded = compile_events.loaded()
    kept = book(found.handle)
    with kept.lock:
        if loaded:
            kept.loads += 1
        else:
            kept.count += 1
        if number is not None:
            kept.transformed.add(number)


def transform_cause(number: int | None) -> str:
    """Why XLA compiles a jaxpr an eager transform made from trace ``number`` (``None``:
    from one of the object's traces, not known which)."""
    which = "one of its traces" if number is None else f"trace #{number}"
    return (
        f"XLA would compile what a transform (jax.grad, jax.vmap, jax.checkpoint...) made "
        f"from {which}: a function of its own, without a new trace; once per transform "
        "and signature."
    )


def _report(handle: Handle, number: int, count: int, cause: str, loaded: bool = False) -> None:
    if handle.public() is None or not logger.isEnabledFor(logging.INFO):
        return
    where = report.function_location(handle.function)
    heading = report.function_name(handle.function) + (f" ({where})" if where else "")
    what = (
        "loaded again from JAX's persistent cache without a new trace (reusing trace #%d; "
        "load %d of this object, traces_used=%d): %s"
        if loaded
        else "XLA compiled again without a new trace (reusing trace #%d; compile %d of "
        "this object, traces_used=%d): %s"
    )
    logger.info("%s: " + what, heading, number, count, handle.ledger.used, cause)


def count(handle: Handle) -> int:
    """How many compiles the object of ``handle`` has caused (loads from JAX's
    persistent cache are not compiles)."""
    kept = _kept(handle)
    if kept is None:
        return 0
    with kept.lock:
        return kept.count


def loads(handle: Handle) -> int:
    """How many executables of the object of ``handle`` JAX loaded from its persistent
    compilation cache instead of compiling them."""
    kept = _kept(handle)
    if kept is None:
        return 0
    with kept.lock:
        return kept.loads


def would_compile(handle: Handle, number: int, call: Mapping[str, tuple[str, str]] | None) -> str:
    """What ``explain`` says of a call that reuses trace ``number``: whether XLA has an
    executable for its inputs' placements, as far as they can be known (``""``: it has).
    ``call`` is `call_placements`'s, ``None`` where the arguments are abstract."""
    kept = book(handle)
    with kept.lock:
        seen = list(kept.by_trace.get(number, ()))
        transformed = number in kept.transformed
        staged = number in kept.staged
    if not seen and (transformed or staged):
        return f"{report.COMPILES_AGAIN}: {never_compiled_alone(number, transformed)}."
    if call is None:
        return "XLA may compile it again: where abstract arguments will be placed is not known."
    if not seen:
        return (
            f"No compile of trace #{number} has been seen (made by lower, trace or "
            "eval_shape?): XLA may compile."
        )
    for placed in seen:
        if all(placed.get(path, key)[0] == key[0] for path, key in call.items()):
            return ""
    return f"{report.COMPILES_AGAIN}: {_cause(seen[-1], call)}."


def never_compiled_alone(number: int, transformed: bool) -> str:
    """Why a call of trace ``number``, never compiled for a call, compiles: the trace was
    compiled only inside an eager transform (``transformed``), or made inside another
    trace."""
    if transformed:
        return (
            f"trace #{number} was compiled only inside a transform (jax.grad, jax.vmap...), "
            "as the function it made"
        )
    return (
        f"trace #{number} was made inside another trace (jax.checkpoint, an outer "
        "jax.jit...) and never compiled alone"
    )


def call_placements(
    arguments: Sequence[tuple[str, Any]], *, stand_ins: bool = False
) -> dict[str, tuple[str, str]] | None:
    """The placements of a call's array leaves by path (``batch['x']``), as `jax.jit`
    names its flat arguments; ``None`` when any leaf is abstract (nothing is known),
    unless ``stand_ins``: then a `jax.ShapeDtypeStruct` is placed as its sharding says,
    as `jax.jit` compiles for it (``lower``, ``precompile``)."""
    tree_util: Any = jax.tree_util
    flatten = tree_util.tree_flatten_with_path
    keystr = tree_util.keystr
    placed: dict[str, tuple[str, str]] = {}
    for name, value in arguments:
        for path, leaf in flatten(value)[0]:
            if isinstance(leaf, jax.ShapeDtypeStruct) and not stand_ins:
                return None
            placed[name + keystr(path)] = placement(leaf)
    return placed


def own_stage(
    stage: Any, handle: Handle, number: int | None, placed: Mapping[str, tuple[str, str]] | None
) -> None:
    """Makes the compiles of ``stage`` (JAX's ``Traced`` or ``Lowered`` of trace
    ``number`` of the object of ``handle``, inputs placed as ``placed``) that object's:
    a ``Traced``'s ``lower()`` returns a ``Lowered`` made so, and a ``Lowered``'s
    ``compile()`` runs inside `compiling`. Nothing is held but the handle, the number
    and the placements' text (never the arguments).

    The method set on the stage calls the method of a shallow copy (``twin``), never
    one bound to the stage itself: that would be a reference cycle (the stage, its
    ``__dict__``, the closure, the bound method, the stage) that keeps the stage and
    its jaxpr alive until the cycle collector runs, where `jax.jit`'s stage is freed
    when its last reference goes."""
    if isinstance(stage, jax.stages.Traced):
        twin: Any = copy.copy(stage)  # shares the stage's jaxpr; no cycle
        lower: Callable[..., Any] = twin.lower

        def lowered(*args: Any, **kwargs: Any) -> Any:
            out = lower(*args, **kwargs)
            own_stage(out, handle, number, placed)
            return out

        private.shadow_method(stage, "lower", lowered)
    elif isinstance(stage, jax.stages.Lowered):
        twin = copy.copy(stage)  # shares the stage's lowering
        compile_: Callable[..., Any] = twin.compile

        def compiled(*args: Any, **kwargs: Any) -> Any:
            with compiling(handle, number=number, placed=placed):
                return compile_(*args, **kwargs)

        private.shadow_method(stage, "compile", compiled)


jax.monitoring.register_event_duration_secs_listener(_on_duration)
