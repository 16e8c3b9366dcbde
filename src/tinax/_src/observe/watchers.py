"""What a test session is told of every object built and every trace counted (the
pytest plugin's ``--tinax-budgets``); nothing unless it asks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinax._src.budget.ledger import Ledger


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
