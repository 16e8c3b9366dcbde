"""The modes of `tests/test_feature_matrix.py`: one tiny object factory per way of wrapping,
each with its reference jit, and JAX's own count of what an object made; and the modes
with shape buckets (`BUCKETED`), whose calls are padded to a bucket.

Imported by the tests and by the warm-restart program (`matrix_warm_program.py`), which
builds one object of every mode in a fresh process. Every mode's function has a name of
its own, so that JAX's events (which carry the function's name) are told apart: the
reference jit wraps a renamed copy, and its traces and compiles are never counted.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import pathlib
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from tinax._src import private
from tinax.jit import batched_jit, bounded_jit

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"  # as tests/test_abstract.py reads it
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE_EVENT = private.COMPILE_EVENT  # a compile or a load (tests/test_compiles.py)
CACHE_HIT_EVENT = private.CACHE_HIT_EVENT  # the compile in progress was a load
CACHE_REQUEST_EVENT = private.CACHE_REQUEST_EVENT  # JAX's compile asks its persistent cache

SMALL, LARGE, HUGE = 8, 16, 24  # sizes of a call: each a trace (all divide over 8 devices)
BUCKET_SIZES = (SMALL, LARGE)  # the buckets of a bucketed mode: HUGE and GIANT are outside
GIANT = 32
SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "tinax"


# --- JAX's own count -----------------------------------------------------------------------


@dataclasses.dataclass
class JaxCount:
    """Traces, lowerings, compiles and loads JAX recorded for one function's name."""

    traces: int = 0  # completed: JAX records a trace that raised too (its event's end)
    traces_here: int = 0  # of them, in the thread that counts
    aborted: int = 0  # traces that raised (a refused overrun; explain's stand-in)
    lowerings: int = 0
    compiles: int = 0
    loads: int = 0
    # With JAX's persistent cache on (``jax_counts(..., cache=True)``): the compiles whose
    # event JAX recorded in the thread that counts though its ``compile_or_get_cached``
    # never asked the cache (it did not run: warm start answered with an executable
    # compiled ahead), and JAX's own log of its cache for the function's module in the
    # other threads (warm start's compiles ahead).
    answered: int = 0
    hits_elsewhere: int = 0
    misses_elsewhere: int = 0

    def facts(self) -> tuple[int, int, int]:
        """``(traces, compiles, loads)``, as ``traces_used``, ``compiles_used``,
        ``cache_loads`` count them."""
        return self.traces, self.compiles, self.loads


class _CacheLog(logging.Handler):
    """JAX's log of its persistent cache (``jax._src.compiler``, at DEBUG: "Persistent
    compilation cache hit for 'jit_f'", "PERSISTENT COMPILATION CACHE MISS for 'jit_f'",
    on jax 0.9.2 to 0.12.1) for one module, outside the thread that counts."""

    def __init__(self, count: JaxCount, module: str, here: int) -> None:
        super().__init__(logging.DEBUG)
        self.count, self.module, self.here = count, f"'{module}'", here

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if self.module not in text or threading.get_ident() == self.here:
            return
        if text.startswith("Persistent compilation cache hit for"):
            self.count.hits_elsewhere += 1
        elif text.startswith("PERSISTENT COMPILATION CACHE MISS for"):
            self.count.misses_elsewhere += 1


@contextmanager
def jax_counts(name: str, *, cache: bool = False) -> Iterator[JaxCount]:
    """JAX's events for the function named ``name`` while the block runs, in every
    thread. A compile during which the compiling thread heard a persistent-cache hit is
    a load, not a compile. With ``cache`` (JAX's persistent cache is on), a compile
    whose thread heard no request to the cache is `JaxCount.answered`, neither, and
    JAX's log of its cache in other threads is counted too."""
    count = JaxCount()
    here = threading.get_ident()
    hits: set[int] = set()
    asked: set[int] = set()  # threads whose compile in progress asked the cache
    lock = threading.Lock()

    def on_start(event: str, value: float, **kwargs: Any) -> None:
        if event == COMPILE_EVENT:
            with lock:
                asked.discard(threading.get_ident())

    def on_duration(event: str, duration: float, **kwargs: Any) -> None:
        fun_name = kwargs.get("fun_name")
        with lock:
            if event == TRACE_EVENT and fun_name == name:
                # JAX records the event on leaving its timing block, with or without an
                # exception: one in flight (sys.exc_info) is a trace that did not finish.
                if sys.exc_info()[1] is not None:
                    count.aborted += 1
                else:
                    count.traces += 1
                    count.traces_here += threading.get_ident() == here
            elif event == LOWER_EVENT and fun_name == f"jit({name})":
                count.lowerings += 1
            elif event == COMPILE_EVENT:
                loaded = threading.get_ident() in hits
                hits.discard(threading.get_ident())
                if fun_name == f"jit({name})":
                    if cache and threading.get_ident() not in asked:
                        count.answered += 1
                    elif loaded:
                        count.loads += 1
                    else:
                        count.compiles += 1

    def on_event(event: str, **kwargs: Any) -> None:
        with lock:
            if event == CACHE_HIT_EVENT:
                hits.add(threading.get_ident())
            elif event == CACHE_REQUEST_EVENT:
                asked.add(threading.get_ident())

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    jax.monitoring.register_scalar_listener(on_start)
    log = logging.getLogger("jax._src.compiler")
    handler = _CacheLog(count, f"jit_{name}", here) if cache else None
    level = log.level
    if handler is not None:
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)
    try:
        yield count
    finally:
        jax.monitoring.unregister_event_duration_listener(on_duration)
        jax.monitoring.unregister_event_listener(on_event)
        jax.monitoring.unregister_scalar_listener(on_start)
        if handler is not None:
            log.removeHandler(handler)
            log.setLevel(level)


def facts(obj: Any) -> tuple[int, int, int]:
    """What tinax counted: ``(traces_used, compiles_used, cache_loads)``."""
    return obj.traces_used, obj.compiles_used, obj.cache_loads


# --- messages ------------------------------------------------------------------------------


def _public_names() -> set[str]:
    import tinax
    import tinax.jit
    import tinax.parallel
    import tinax.testing

    names: set[str] = set()
    for module in (tinax, tinax.jit, tinax.parallel, tinax.testing):
        names.update(dir(module))
        for name in dir(module):
            names.update(dir(getattr(module, name)))
    return names


def _internal_names() -> tuple[str, ...]:
    """The names of tinax's internal files as a message could leak them: every
    ``file.py``, and every module stem that is no public name and no plain word."""
    public = _public_names()
    stems = {path.stem for path in SRC.rglob("*.py")} - {"__init__"}
    files = {f"{stem}.py" for stem in stems}
    leaked = {stem for stem in stems if "_" in stem and stem not in public}
    files -= {"jit.py", "parallel.py"}  # tinax.jit, tinax.parallel: public modules
    return ("_src", "tinax/", "tinax._", *sorted(files), *sorted(leaked))


INTERNAL_NAMES = _internal_names()

_COUNTED = {
    "traces_used": "traces_used",
    "compiles_used": "compiles_used",
    "cache_loads": "cache_loads",
    "max_traces": "max_traces",
}


def assert_no_internals(text: str) -> None:
    """``text`` names none of tinax's internal modules or files."""
    for name in INTERNAL_NAMES:
        assert name not in text, f"{name!r} named in:\n{text}"


def counts_of(obj: Any) -> types.SimpleNamespace:
    """The object's counts now, to check a message against the moment it describes."""
    return types.SimpleNamespace(**{name: getattr(obj, name) for name in _COUNTED})


def assert_true_to(obj: Any, text: str) -> None:
    """``text`` (an error, a warning, an explain report, a log record, a budgets table)
    names none of tinax's internals, and every count it states is the object's (or a
    `counts_of` snapshot's, for a message about an earlier moment)."""
    assert_no_internals(text)
    for field, attribute in _COUNTED.items():
        for said in re.findall(rf"\b{field}=(\d+)", text):
            assert int(said) == getattr(obj, attribute), f"{field}={said} is false in:\n{text}"


# --- results, bit for bit ------------------------------------------------------------------


def assert_same(result: Any, reference: Any) -> None:
    """Equal tree structures, and every leaf of equal type, dtype, shape and bits."""
    leaves, tree = jax.tree.flatten(result)
    expected, expected_tree = jax.tree.flatten(reference)
    assert tree == expected_tree, (tree, expected_tree)
    for leaf, want in zip(leaves, expected, strict=True):
        if isinstance(want, jax.Array | np.ndarray):
            got, want = np.asarray(leaf), np.asarray(want)
            assert (got.dtype, got.shape) == (want.dtype, want.shape)
            assert got.tobytes() == want.tobytes(), (got, want)
        else:
            assert type(leaf) is type(want) and leaf == want, (leaf, want)


# --- the modes -----------------------------------------------------------------------------


def renamed(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A copy of ``function`` under another ``__name__`` (JAX's events carry the name)."""
    copy = types.FunctionType(
        function.__code__, function.__globals__, name, function.__defaults__, function.__closure__
    )
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__qualname__ = name
    return copy


def m_plain(x):
    return x * 2.0 + 1.0


def m_static(x, n, *, k):
    return x * n + k


def m_donated(x):
    return x * 3.0 - 1.0


def m_meshed(x):
    return x * x + 1.0


def m_sharded(x):
    return x * 0.5 + 2.0


def m_equinox(model, x):
    return model(x)


def m_equinox_donated(model, x):
    return model(x)


def m_nnx(counter, x):
    counter.count[...] = counter.count[...] + 1
    return counter.w[...] * x


def m_batched(v):
    return (v * v).sum()


def m_bucketed_plain(x):
    return x * 2.0 + 1.0


def m_bucketed_meshed(x):
    return x * x + 1.0


def m_bucketed_equinox(model, x):
    return model(x)


def m_bucketed_batched(v):
    return (v * v).sum()


def mesh8() -> jax.sharding.Mesh:
    return jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))


class Scale(eqx.Module):
    """A tiny equinox model (module-level: a warm start pickles its signature)."""

    w: jax.Array
    activation: str = "tanh"  # a non-array leaf: static under static_nonarrays

    def __call__(self, x):
        return getattr(jnp, self.activation)(self.w * x)


class Counter(nnx.Module):
    """A tiny nnx module whose call assigns a Variable (module-level, as `Scale`)."""

    def __init__(self, size):
        self.count = nnx.Variable(jnp.zeros((), jnp.int32))
        self.w = nnx.Param(jnp.linspace(0.5, 1.5, size))


@dataclasses.dataclass(frozen=True)
class Mode:
    """One way of wrapping: how to build the object, its reference, and a call of a size.

    ``arguments(size)`` makes new arguments on each use (donation deletes them; an nnx
    object is updated by the call); sizes are multiples of 8 (the mesh's devices).
    ``result(output, arguments)`` is what is compared: the output, and for nnx the
    object's state after the call. ``bucket``: see `BUCKETED`.
    """

    name: str
    function: Callable[..., Any]
    wrap: Callable[..., Any]
    reference: Callable[[Callable[..., Any]], Callable[..., Any]]
    arguments: Callable[[int], tuple[tuple[Any, ...], dict[str, Any]]]
    under_mesh: bool = False
    result: Callable[[Any, tuple[Any, ...]], Any] = lambda output, args: output
    bucket: str = ""  # a bucketed mode's declared axis, as a message names it: "x, axis 0"

    @property
    def jax_name(self) -> str:
        return self.function.__name__

    def build(self, max_traces: int, **options: Any) -> Any:
        """A new object of this mode."""
        return self.wrap(self.function, max_traces=max_traces, **options)

    def run(self, obj: Any, size: int) -> Any:
        """A call of ``size`` (its arguments made first, outside any scope)."""
        return self.call(obj, self.arguments(size))

    def call(self, obj: Any, call: tuple[tuple[Any, ...], dict[str, Any]]) -> Any:
        """``obj`` called with arguments made by ``arguments``."""
        args, kwargs = call
        return self.result(obj(*args, **kwargs), args)

    def expected(self, size: int) -> Any:
        """The reference jit's result for a call of ``size`` (its trace is never counted:
        it wraps a renamed copy of the function)."""
        return _reference_result(self.name, size)


def _vector(size: int) -> jax.Array:
    return jnp.linspace(-1.0, 1.0, size, dtype=jnp.float32)


def _sharded(size: int) -> jax.Array:
    return jax.device_put(_vector(size), jax.sharding.NamedSharding(mesh8(), jax.P("x")))


def _padded(size: int) -> jax.Array:
    """A vector of ``size``: 3 values and a tail of zeros, as a call padded to a bucket."""
    return jnp.pad(_vector(size - 3), (0, 3))


def _nnx_state(output: Any, args: tuple[Any, ...]) -> Any:
    return output, nnx.state(args[0])


def _modes() -> dict[str, Mode]:
    sharding = jax.sharding.NamedSharding(mesh8(), jax.P("x"))
    replicated = jax.sharding.NamedSharding(mesh8(), jax.P())

    def meshed_jit(function):
        jitted = jax.jit(function)

        def run(*args, **kwargs):
            with jax.set_mesh(mesh8()):
                return jitted(*args, **kwargs)

        return run

    modes = [
        Mode("plain", m_plain, bounded_jit, jax.jit, lambda n: ((_vector(n),), {})),
        Mode(
            "static argnums/argnames",
            m_static,
            functools.partial(bounded_jit, static_argnums=1, static_argnames="k"),
            functools.partial(jax.jit, static_argnums=1, static_argnames="k"),
            lambda n: ((_vector(n), 3), {"k": 2.0}),
        ),
        Mode(
            "donation",
            m_donated,
            functools.partial(bounded_jit, donate_argnums=0),
            functools.partial(jax.jit, donate_argnums=0),
            lambda n: ((_vector(n),), {}),
        ),
        Mode(
            "mesh",
            m_meshed,
            functools.partial(bounded_jit, mesh=mesh8()),
            meshed_jit,
            lambda n: ((_vector(n),), {}),
            under_mesh=True,
        ),
        Mode(
            "in/out shardings",
            m_sharded,
            functools.partial(bounded_jit, in_shardings=(sharding,), out_shardings=replicated),
            functools.partial(jax.jit, in_shardings=(sharding,), out_shardings=replicated),
            lambda n: ((_sharded(n),), {}),
        ),
        Mode(
            "static_nonarrays (equinox)",
            m_equinox,
            functools.partial(bounded_jit, static_nonarrays=True),
            eqx.filter_jit,
            lambda n: ((Scale(_vector(n)), _vector(n)), {}),
        ),
        Mode(
            "static_nonarrays with donation",
            m_equinox_donated,
            functools.partial(bounded_jit, static_nonarrays=True, donate_argnums=0),
            functools.partial(eqx.filter_jit, donate="all"),
            lambda n: ((Scale(_vector(n)), _vector(n)), {}),
        ),
        Mode(
            "propagate_updates (nnx)",
            m_nnx,
            functools.partial(bounded_jit, propagate_updates=True),
            nnx.jit,
            lambda n: ((Counter(n), _vector(n)), {}),
            result=_nnx_state,
        ),
        Mode(
            "batched_jit",
            m_batched,
            batched_jit,
            lambda function: jax.jit(jax.vmap(function)),
            lambda n: ((jnp.linspace(-1.0, 1.0, 4 * n, dtype=jnp.float32).reshape(4, n),), {}),
        ),
    ]
    return {mode.name: mode for mode in modes}


MODES = _modes()
NAMES = tuple(MODES)


def _bucketed() -> dict[str, Mode]:
    """Plain, ``mesh=`` (sharded arrays), ``static_nonarrays`` (an equinox module, its
    bucket a path into it) and ``batched_jit`` (the bucket on axis 1 of the batch as
    passed, axis 0 of what the function sees), each with ``buckets`` of `BUCKET_SIZES`."""
    sizes = {0: BUCKET_SIZES}
    sharding = jax.sharding.NamedSharding(mesh8(), jax.P("x"))
    meshed = MODES["mesh"].reference

    def batch(n: int) -> jax.Array:
        return jnp.stack([_padded(n) * scale for scale in (1.0, 0.5, -1.0, 2.0)])

    modes = [
        Mode(
            "plain, buckets",
            m_bucketed_plain,
            functools.partial(bounded_jit, buckets={"x": sizes}),
            jax.jit,
            lambda n: ((_padded(n),), {}),
            bucket="x, axis 0",
        ),
        Mode(
            "mesh, buckets",
            m_bucketed_meshed,
            functools.partial(bounded_jit, mesh=mesh8(), buckets={"x": sizes}),
            meshed,
            lambda n: ((jax.device_put(_padded(n), sharding),), {}),
            under_mesh=True,
            bucket="x, axis 0",
        ),
        Mode(
            "static_nonarrays (equinox), buckets",
            m_bucketed_equinox,
            functools.partial(bounded_jit, static_nonarrays=True, buckets={"model.w": sizes}),
            eqx.filter_jit,
            lambda n: ((Scale(_padded(n)), jnp.asarray(0.5, jnp.float32)), {}),
            bucket="model.w, axis 0",
        ),
        Mode(
            "batched_jit, buckets",
            m_bucketed_batched,
            functools.partial(batched_jit, buckets={"v": {1: BUCKET_SIZES}}),
            MODES["batched_jit"].reference,
            lambda n: ((batch(n),), {}),
            bucket="v, axis 1",
        ),
    ]
    return {mode.name: mode for mode in modes}


BUCKETED = _bucketed()
BUCKETED_NAMES = tuple(BUCKETED)
_ALL = {**MODES, **BUCKETED}


@functools.cache
def _reference(name: str) -> Callable[..., Any]:
    mode = _ALL[name]
    return mode.reference(renamed(mode.function, f"reference_{mode.jax_name}"))


@functools.cache
def _reference_result(name: str, size: int) -> Any:
    mode = _ALL[name]
    args, kwargs = mode.arguments(size)
    return mode.result(_reference(name)(*args, **kwargs), args)
