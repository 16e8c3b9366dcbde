"""What a test session (the pytest plugin's ``--tinax-budgets``) and a warm start
(`tinax.warm_start`) are told of every object built and every trace counted;
nothing unless one asks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tinax._src.diagnosis.record import TracedSignature
    from tinax._src.objects.ledger import Ledger


class WarmHook(Protocol):
    """What `tinax.warm_start` is told: each object built (wrap time, after it is
    registered) and each trace committed (trace time)."""

    def built(self, owner: Any, ledger: Ledger) -> None: ...

    def traced(
        self, ledger: Ledger, function: Callable[..., Any], entry: TracedSignature
    ) -> None: ...


warm_hook: WarmHook | None = None  # set by tinax.warm_start only


built_hook: Callable[[Any, Ledger], None] | None = None
traced_hook: Callable[[Ledger, Callable[..., Any]], None] | None = None


def watch(
    built: Callable[[Any, Ledger], None] | None,
    traced: Callable[[Ledger, Callable[..., Any]], None] | None,
) -> None:
    """Sets what is told of every object built (``built(owner, ledger)``, at wrap time)
    and of every counted trace (``traced(ledger, function)``, at trace time); ``None``
    for nothing, the default. Only the pytest plugin's ``--tinax-budgets`` sets them."""
    global built_hook, traced_hook
    built_hook, traced_hook = built, traced
