"""Loads from JAX's persistent compilation cache, told apart from compiles.

JAX reports a load from its persistent cache (``jax_compilation_cache_dir``)
with the same event as an XLA compile (`private.COMPILE_EVENT`): both end the
same ``compile_or_get_cached`` call. A load records one more event, in the same
thread, before the compile event ends (`private.CACHE_HIT_EVENT`). This module
keeps, per thread, whether the compile in progress was answered that way:
`loaded` is what every listener of the compile's end asks. The mark is cleared
when the next compile in the thread starts (or, on a JAX that does not record a
compile's start, at its next request to the persistent cache), so listeners may
ask in any order, as often as they like.

Nothing here runs on a cached call: JAX records these events only when it
compiles (or loads).
"""

from __future__ import annotations

import threading

import jax.monitoring

from tinax._src import private


class _Local(threading.local):
    loaded: bool = False  # the compile in progress in this thread was a cache load


_local = _Local()


def _on_event(event: str, **metadata: object) -> None:
    if event == private.CACHE_HIT_EVENT:
        _local.loaded = True
    elif event == private.CACHE_REQUEST_EVENT:
        _local.loaded = False


def _on_start(event: str, value: float, **metadata: object) -> None:
    if event == private.COMPILE_EVENT:
        _local.loaded = False


def loaded() -> bool:
    """Whether the compile that ends now, in this thread, was a load from JAX's persistent
    compilation cache (ask from a listener of `private.COMPILE_EVENT`'s duration)."""
    return _local.loaded


jax.monitoring.register_event_listener(_on_event)
jax.monitoring.register_scalar_listener(_on_start)
