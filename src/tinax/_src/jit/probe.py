"""The stand-in for an object's function (`budget/rejections.stand_in`), through its own
`jax.vmap` and `jax.jit`: what finds the error a call would raise (an overrun, ``explain``)
without running the function; built when first needed, never at wrap time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinax._src.budget import counting, rejections
from tinax._src.core import validation
from tinax._src.jit import conventions


class Probe:
    """The stand-in for the function (`rejections.stand_in`) through the object's own
    pipeline (``around``: its `jax.vmap`), and its ``jit``; both built when first
    needed (an overrun, ``explain``), never at wrap time."""

    __slots__ = (
        "_around",
        "_convention",
        "_function",
        "_jitted",
        "_signature",
        "_traced",
        "jit",
    )

    def __init__(
        self,
        function: Callable[..., Any],
        signature: validation.LazySignature,
        around: Callable[[Callable[..., Any]], Callable[..., Any]] | None,
        jit: Callable[[Callable[..., Any]], Any],
        convention: conventions.Convention,
    ) -> None:
        self._convention = convention  # how the jit takes a call
        self._function = function
        self._signature = signature
        self._around = around
        self.jit = jit
        self._traced: Callable[..., Any] | None = None
        self._jitted: Any = None

    def _built(self, placements: bool = False) -> Callable[..., Any]:
        if placements:  # explain's: built once, for the jit (rejections.stand_in)
            inner = rejections.stand_in(self._function, self._signature, placements=True)
            return inner if self._around is None else self._around(inner)
        if self._traced is None:
            inner = rejections.stand_in(self._function, self._signature)
            self._traced = inner if self._around is None else self._around(inner)
        return self._traced

    def traced(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the stand-in inside a trace: raises what the call would raise."""
        return self._built()(*args, **kwargs)

    def get(self) -> Any:
        """The stand-in, jitted with the object's options (``explain``); with
        ``static_nonarrays``, called as the object's `jax.jit` is: split."""
        if self._jitted is None:
            built = self._built(placements=True)
            names = counting.jax_names(self._function)
            self._jitted = self.jit(self._convention.stand_in(built, names))
        return self._jitted
