"""What a test session (the pytest plugin's ``--tinax-budgets``) and a warm start
(`tinax.warm_start`) are told of every object built and every trace counted;
nothing unless one asks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tinax._src.diagnosis.record import TracedSignature
    from tinax._src.objects.handle import Handle


class WarmHook(Protocol):
    """What `tinax.warm_start` is told: each object built (wrap time, after it is
    registered) and each trace committed (trace time)."""

    def built(self, handle: Handle) -> None: ...

    def traced(self, handle: Handle, entry: TracedSignature) -> None: ...


warm_hook: WarmHook | None = None  # set by tinax.warm_start only


built_hook: Callable[[Handle], None] | None = None
traced_hook: Callable[[Handle], None] | None = None


def watch(
    built: Callable[[Handle], None] | None,
    traced: Callable[[Handle], None] | None,
) -> None:
    """Sets what is told of every object built (``built(handle)``, at wrap time) and of
    every counted trace (``traced(handle)``, at trace time); ``None``
    for nothing, the default. Only the pytest plugin's ``--tinax-budgets`` sets them."""
    global built_hook, traced_hook
    built_hook, traced_hook = built, traced
