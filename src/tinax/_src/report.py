"""Text for people: the budget error, ``explain``'s report, the history table.

The last step of the diagnosis (record, compare, report). Runs only when an
error is raised, ``explain`` is called or the history is printed.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from tinax._src import compare
from tinax._src.compare import Difference
from tinax._src.errors import TraceBudgetError
from tinax._src.record import TracedSignature

_MAX_LISTED = 12
_MAX_TABLE_ROWS = 40

# --- the error -----------------------------------------------------------------------------


def function_name(function: Callable[..., Any]) -> str:
    """A readable name for any callable: qualified name, or what it wraps."""
    if isinstance(function, functools.partial):
        return f"partial({function_name(function.func)})"  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    if isinstance(name, str):
        return name
    return f"{type(function).__qualname__} instance"


def function_location(function: Callable[..., Any]) -> str | None:
    """``file:line`` of the code behind ``function``, where Python knows it."""
    try:
        return _location(function)
    except Exception:  # an odd callable must not turn the budget error into another error
        return None


def _location(function: Callable[..., Any]) -> str | None:
    seen = 0
    target: Any = function
    while seen < 32:  # unwrap partials, bound methods, decorators and callable instances
        seen += 1
        if isinstance(target, functools.partial):
            target = target.func  # pyright: ignore[reportUnknownMemberType]
        elif inspect.ismethod(target):
            target = target.__func__
        elif hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        elif not hasattr(target, "__code__") and not isinstance(target, type):
            call = getattr(type(target), "__call__", None)  # noqa: B004  # pyright: ignore[reportUnknownArgumentType]
            if call is None or call is target:
                break
            target = call
        else:
            break
    code = getattr(target, "__code__", None)
    if code is None:
        return None
    filename: str = code.co_filename
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        relative = filename
    if not relative.startswith(".."):
        filename = relative
    return f"{filename}:{code.co_firstlineno}"


def _where(function: Callable[..., Any]) -> tuple[str, str | None, str]:
    name = function_name(function)
    location = function_location(function)
    return name, location, _heading(name, location)


def _heading(name: str, location: str | None) -> str:
    """``name (file:line)``, or the name alone where the location is unknown."""
    return f"{name} ({location})" if location else name


def budget_error(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    signature: TracedSignature,
) -> TraceBudgetError:
    """Builds the error for a refused trace: headline, location, differences, fixes."""
    name, location, where = _where(function)
    best, found = compare.closest(history, signature)
    lines = [
        f"{where} exceeded its trace budget: max_traces={max_traces}, traces_used={used}; "
        f"this call would be trace {attempt}.",
        "JAX traces and compiles again for every new abstract signature; this call was refused "
        "before tracing, and calls that match an earlier trace still run.",
        *explanation_lines(best, found, signature),
    ]
    return TraceBudgetError(
        "\n".join(lines),
        function_name=name,
        location=location,
        max_traces=max_traces,
        traces_used=used,
        signature=signature,
        closest=best,
        differences=found,
    )


@attrs.frozen
class Explanation:
    """What a call would do, worked out without tracing; see ``explain``.

    Prints as a short report: the trace the call would reuse, or the trace it
    would make, the differences from the closest earlier trace and their fixes.

    Attributes:
        function_name: Qualified name of the wrapped function.
        location: ``file:line`` where the wrapped function is defined, if known.
        signature: Abstract signature of the call.
        retraces: Whether the call would trace: no earlier trace has its signature.
        reuses: The earlier trace the call would run from, or ``None``.
        exceeds_budget: Whether the call would be trace ``max_traces + 1`` (refused
            with `TraceBudgetError` while chex assertions are on).
        traces_used: Traces made so far.
        attempt: The number the call's trace would have (traces made or in
            flight, plus one); meaningful when ``retraces``.
        max_traces: The budget.
        closest: The earlier trace that differs least from the call, or ``None``.
        differences: What differs between ``closest`` and the call.
    """

    function_name: str
    location: str | None
    signature: TracedSignature
    retraces: bool
    reuses: TracedSignature | None
    exceeds_budget: bool
    traces_used: int
    max_traces: int
    closest: TracedSignature | None
    differences: tuple[Difference, ...]
    attempt: int

    def __str__(self) -> str:
        where = _heading(self.function_name, self.location)
        budget = f"max_traces={self.max_traces}, traces_used={self.traces_used}"
        if self.reuses is not None:
            return f"{where}: this call would reuse trace #{self.reuses.number}; {budget}."
        if self.exceeds_budget:
            head = f"{where}: this call would exceed the trace budget: {budget}; it would be"
        else:
            head = f"{where}: this call would trace again: {budget}; it would be"
        lines = [f"{head} trace {self.attempt}."]
        lines.extend(explanation_lines(self.closest, self.differences, self.signature))
        return "\n".join(lines)


def explain(
    function: Callable[..., Any],
    max_traces: int,
    history: Sequence[TracedSignature],
    used: int,
    attempt: int,
    signature: TracedSignature,
) -> Explanation:
    """Whether ``signature`` would reuse one of the traces in ``history``, and why not."""
    name, location, _ = _where(function)
    best, found = compare.closest(history, signature)
    reuses = best if best is not None and not found else None
    return Explanation(
        function_name=name,
        location=location,
        signature=signature,
        retraces=reuses is None,
        reuses=reuses,
        exceeds_budget=reuses is None and attempt > max_traces,
        traces_used=used,
        max_traces=max_traces,
        closest=best,
        differences=found,
        attempt=attempt,
    )


def explanation_lines(
    best: TracedSignature | None, found: tuple[Difference, ...], signature: TracedSignature
) -> list[str]:
    """The diff block of the budget error and of ``explain``: differences, then fixes."""
    if best is None:
        return [f"No earlier trace to compare with. This call: {str(signature)[4:]}"]
    if not found:
        return [
            f"Closest earlier trace: #{best.number}, with no difference in the abstract "
            "signature: JAX retraced for a reason the signature does not show (a static "
            "argument that prints the same but compares unequal, or jax.clear_caches())."
        ]
    count = f"{len(found)} difference{'s' if len(found) > 1 else ''}"
    lines = [f"Closest earlier trace: #{best.number} ({count}):"]
    lines.extend(f"  {difference}" for difference in found[:_MAX_LISTED])
    if len(found) > _MAX_LISTED:
        lines.append(f"  ... and {len(found) - _MAX_LISTED} more")
    lines.append("How to fix:")
    kinds = dict.fromkeys(kind for difference in found for kind in difference.kinds)
    lines.extend(f"  {kind}: {compare.HINTS[kind]}" for kind in kinds)
    return lines


def history_table(history: Sequence[TracedSignature]) -> str:
    """One column per trace, one row per leaf; ``*`` marks rows that differ."""
    if not history:
        return "no traces yet"
    count = len(history)
    rows: dict[str, list[str]] = {}
    for column, signature in enumerate(history):
        for leaf in signature.leaves:
            cell = (
                leaf.text if leaf.mesh is None or leaf.sharding else f"{leaf.text} on {leaf.mesh}"
            )
            rows.setdefault(leaf.path, ["-"] * count)[column] = cell
    extra = {
        "(by keyword)": [", ".join(signature.keywords) or "-" for signature in history],
        "(mesh)": [signature.mesh for signature in history],
    }
    for name, cells in extra.items():
        if any(cell not in ("-", "no mesh") for cell in cells):
            rows[name] = cells
    for name in dict.fromkeys(name for signature in history for name, _ in signature.config):
        cells = [dict(signature.config).get(name, "-") for signature in history]
        if len(set(cells)) > 1:
            rows[f"(jax config {name})"] = cells
    shown = list(rows.items())
    hidden = 0
    if len(shown) > _MAX_TABLE_ROWS:
        varying = [(name, cells) for name, cells in shown if len(set(cells)) > 1]
        hidden = len(shown) - len(varying)
        shown = varying
    marked = any(len(set(cells)) > 1 for _, cells in shown)
    header = ["argument", *(f"#{signature.number}" for signature in history)]
    table = [header] + [[name, *cells] for name, cells in shown]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines: list[str] = []
    for row in table:
        mark = ("* " if len(set(row[1:])) > 1 and row is not header else "  ") if marked else ""
        lines.append(
            mark + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        )
    if hidden:
        lines.append(f"... and {hidden} rows the same in every trace")
    if marked:
        lines.append("* marks a row that differs between traces")
    return "\n".join(lines)


class TraceHistory(tuple[TracedSignature, ...]):
    """The traced signatures of an object, oldest first; prints as a table."""

    __slots__ = ()

    def __str__(self) -> str:
        return history_table(self)
