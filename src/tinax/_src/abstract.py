"""A recorded trace's arguments back as abstract values (see issue 12)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinax._src.record import TracedSignature


def abstract_arguments(signature: TracedSignature) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Placeholder until issue 12 lands."""
    raise NotImplementedError
