"""Hiding tinax's frames from tracebacks and from the source locations JAX names."""

from __future__ import annotations

from typing import Any


def hide_from_tracebacks(path: str) -> None:
    """Hides the frames of files under ``path`` from tracebacks, as JAX hides its own
    (``JAX_TRACEBACK_FILTERING=off`` shows them again), and from the source
    locations JAX names (``source_info_util``: "This error occurs at source: ...",
    the line jax 0.12 prints for an indivisible sharding, a jaxpr equation's
    location), which then name the user's line, never tinax's. Equinox does the
    first; JAX has no public API for either."""
    from jax._src import source_info_util, traceback_util

    register: Any = traceback_util.register_exclusion
    register(path)
    exclude: Any = getattr(source_info_util, "register_exclusion", None)
    if exclude is not None:  # jax 0.9.2 to 0.12.0.1; missing: JAX may name tinax's line
        exclude(path)


def filter_traceback(error: BaseException) -> None:
    """Drops the hidden frames (JAX's, tinax's) from ``error``'s traceback, unless
    ``JAX_TRACEBACK_FILTERING`` says not to. Re-raise ``error`` with a bare ``raise``
    afterwards, so that the re-raising frame is not added back."""
    from jax._src import traceback_util

    util: Any = traceback_util
    try:
        mode = util._filtering_mode()  # pyright: ignore[reportPrivateUsage]
    except Exception:
        return
    if mode in ("off", "tracebackhide") or error.__traceback__ is None:
        return
    error.with_traceback(util.filter_traceback(error.__traceback__))
