"""Warm start's check of a warm trace (`warm/session`): a fresh trace whatever JAX's
caches hold, and what it left in them."""

from __future__ import annotations

import contextlib
import itertools
import types
import weakref
from typing import Any, cast

from jax._src import config as _jax_config
from jax._src import core as _jax_core
from jax._src import lib as _jax_lib
from jax._src import pjit as _pjit
from jax._src import tree_util as _tree_util
from jax._src import util as _jax_util
from jax._src.interpreters import partial_eval as _partial_eval

CHECK_SUFFIX = "__warm_start_check"  # the name JAX gives a fresh trace (`fresh_trace`)


def fresh_trace(jitted: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """JAX's stage (``Traced``) of the `jax.jit` object ``jitted`` for a call, traced now
    whatever JAX's caches hold: its function is traced as a new object (a function
    that calls it, keyed nowhere else, so each trace cache misses and its entries die
    with it), with the object's own options (``_jit_info``). JAX names it
    ``<name>__warm_start_check`` (`CHECK_SUFFIX`) in its logs and events: a trace that
    checks another, never lowered. Read on 0.10.2 (``pjit.jit_trace``, ``_fun``,
    ``_jit_info``); raises where JAX moved them, and the warm trace is then dropped
    (`warm/session`)."""
    function = jitted._fun

    def fresh(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    fresh.__name__ = fresh.__qualname__ = f"{jitted.__name__}{CHECK_SUFFIX}"
    stand_in = types.SimpleNamespace(_fun=fresh, _jit_info=jitted._jit_info)
    # Every trace cache of JAX keys on the trace context: under a context of its own, the
    # check misses them all, so a function the step calls through one (a nested jax.jit,
    # a lax.scan body) is traced again too, with the state the program holds now.
    marker = f"(?!)tinax-warm-start-check-{next(_CHECKS)}"  # a regex matching no file
    config: Any = _jax_config
    with config.hlo_source_file_canonicalization_regex(marker):  # in the trace context only
        stage: Any = _pjit.jit_trace(stand_in, *args, **kwargs)  # pyright: ignore[reportUnknownMemberType]
    _NESTED[stage] = _traced_under(marker)
    return stage


_CHECKS = itertools.count()
# a check's stage -> the functions its trace traced through JAX's trace caches
_NESTED: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def _trace_caches() -> list[Any]:
    """JAX's caches of traces keyed on a function and the trace context:
    ``pjit._infer_params_cached`` (a nested `jax.jit`), ``pe.trace_to_jaxpr`` (a
    control-flow body, a custom rule) and every ``linear_util.cache`` (registered in
    ``util._caches``). Other weakref LRU caches key on jaxprs, and reading their keys
    can crash the process (``_cached_abstract_eval``'s, on 0.10.2): they are left."""
    util: Any = _jax_util
    pjit: Any = _pjit
    partial_eval: Any = _partial_eval
    memoized = [
        cache
        for cache in list(util._caches)
        if isinstance(
            getattr(getattr(cache, "cache_clear", None), "__self__", None),
            weakref.WeakKeyDictionary,
        )
    ]
    return [pjit._infer_params_cached, partial_eval.trace_to_jaxpr, *memoized]


def _traced_under(marker: str) -> tuple[Any, ...]:
    """The functions (or other weakly keyed objects) whose entries in JAX's trace
    caches were made under the trace context holding ``marker``."""
    found: list[Any] = []
    for cache in _trace_caches():
        keys = getattr(cache, "cache_keys", None)
        if keys is not None:  # a weakref LRU cache: (weakref, context, args, kwargs)
            for key in keys():
                if len(key) > 1 and isinstance(key[1], tuple) and marker in key[1]:
                    target = key[0]() if isinstance(key[0], weakref.ref) else key[0]
                    if target is not None:
                        found.append(target)
            continue
        table = getattr(getattr(cache, "cache_clear", None), "__self__", None)
        if isinstance(table, weakref.WeakKeyDictionary):  # linear_util.cache: f -> {key: ...}
            items = cast("weakref.WeakKeyDictionary[Any, dict[Any, Any]]", table).items()
            for function, entries in list(items):
                if any(_marked(key, marker) for key in list(entries)):
                    found.append(function)
    return tuple(found)


def _marked(key: object, marker: str) -> bool:
    """Whether a ``linear_util.cache`` key (its last part: the trace context) holds
    ``marker``."""
    if not isinstance(key, tuple) or not key:
        return False
    context = cast("tuple[object, ...]", key)[-1]
    return isinstance(context, tuple) and marker in context


def forget_nested(stage: Any) -> None:
    """Evicts from every JAX trace cache the functions that the check ``stage``
    (`fresh_trace`) traced through them: a warm trace that differs from its check
    may have left their entries with the state of its time (a nested `jax.jit` that
    reads a global), so that the call's trace, and any later one, traces them again."""
    for target in _NESTED.pop(stage, ()):
        for cache in _trace_caches():
            evict = getattr(cache, "evict_weakref", None) or getattr(cache, "evict_function", None)
            if evict is None:
                continue
            with contextlib.suppress(Exception):  # not weakly keyable there: never cached
                evict(target)


def forget_trace(jitted: Any, args: tuple[Any, ...], kwargs: dict[str, Any], jaxpr: Any) -> None:
    """Drops from JAX's trace caches the trace of ``jitted`` whose closed jaxpr is
    ``jaxpr``, for a call with these arguments (in this thread's mesh context): its
    entry in ``pjit._infer_params_cached`` is emptied if it holds that trace, and
    ``pe.trace_to_jaxpr``'s entries for the function are evicted, so that a call
    with them traces again (its other signatures keep their entries; the C++ dispatch
    cache holds only signatures already called). Read on 0.10.2; raises where JAX
    moved them (the caller then empties the object's whole cache)."""
    pjit: Any = _pjit
    lib: Any = _jax_lib
    core: Any = _jax_core
    tree_util: Any = _tree_util
    partial_eval: Any = _partial_eval
    info: Any = jitted._jit_info
    fun = jitted._fun
    arg_signature, dynargs = lib.jax_jit.parse_arguments(
        args,
        tuple(kwargs.values()),
        tuple(kwargs.keys()),
        info.static_argnums,
        info.static_argnames,
        tree_util.tracing_registry,
    )
    avals = tuple(core.shaped_abstractify(value) for value in dynargs)
    mesh = pjit.get_ctx_mesh(info.use_resource_env)
    entry: Any = pjit._infer_params_cached(fun, info, arg_signature, avals, mesh)
    partial_eval.trace_to_jaxpr.evict_weakref(fun)
    found = entry.pjit_params
    if found is not None and found.params["jaxpr"] is jaxpr:
        entry.pjit_params = None
