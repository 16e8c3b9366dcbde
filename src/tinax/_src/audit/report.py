"""The audit's text: the totals, the functions most costly first with each retrace's call
site, differences and fix, the port line, and the call sites that retrace most."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from tinax._src.audit.functions import AuditedFunction, Miss
from tinax._src.core.validation import check_int, message

API = "Audit.report"
_MISSES_SHOWN = 5  # retraces listed per function; the rest counted
_SITES_SHOWN = 10


def check_top(api: str, top: object) -> int | None:
    """``top``: ``None`` (every function) or an int of at least 1 (bool is not accepted)."""
    if top is None:
        return None
    number = check_int(api, "top", "an int of at least 1 or None (bool is not accepted)", top)
    if number < 1:
        raise ValueError(message(api, "top", "at least 1 (or None for every function)", top))
    return number


def _seconds(value: float) -> str:
    return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


@attrs.frozen
class CallSite:
    """One call site's retraces, summed over the functions it retraced."""

    called_at: str
    retraces: int
    seconds: float
    functions: tuple[str, ...]


def call_sites(functions: Sequence[AuditedFunction]) -> list[CallSite]:
    """Every call site of a retrace (a trace after a function's first), most retraces first
    (then most seconds)."""
    retraces: dict[str, int] = {}
    seconds: dict[str, float] = {}
    names: dict[str, dict[str, None]] = {}
    for function in functions:
        for miss in function.misses[1:]:
            site = miss.called_at
            retraces[site] = retraces.get(site, 0) + 1
            seconds[site] = seconds.get(site, 0.0) + miss.seconds
            names.setdefault(site, {})[function.name] = None
    sites = [
        CallSite(site, count, seconds[site], tuple(names[site])) for site, count in retraces.items()
    ]
    sites.sort(key=lambda site: (-site.retraces, -site.seconds, site.called_at))
    return sites


def report(functions: Sequence[AuditedFunction], top: int | None, unattributed: float) -> str:
    """The report ``Audit.report`` returns (``top`` already checked)."""
    traces = sum(function.traces for function in functions)
    retraces = sum(function.retraces for function in functions)
    compiles = sum(function.compiles for function in functions)
    total = sum(function.seconds for function in functions)
    in_retraces = sum(miss.seconds for function in functions for miss in function.misses[1:])
    lines = [
        f"tinax audit: {_plural(len(functions), 'jitted function')}, {_plural(traces, 'trace')} "
        f"({_plural(retraces, 'retrace')}), {_plural(compiles, 'compile')}; "
        f"{_seconds(total)} in traces, lowerings and compiles, "
        f"{_seconds(in_retraces)} of it in retraces."
    ]
    if unattributed >= 0.0005:
        lines.append(f"(JAX's own jits and other compiles: {_seconds(unattributed)} more.)")
    if not functions:
        lines.append("No jitted function of the program traced while the audit was open.")
        return "\n".join(lines)
    shown = list(functions) if top is None else list(functions)[:top]
    lines.append("")
    lines.append("Functions, most costly first:")
    for rank, function in enumerate(shown, 1):
        lines.extend(_function_lines(rank, function))
    if len(shown) < len(functions):
        lines.append(f"... and {_plural(len(functions) - len(shown), 'more function')}")
    sites = call_sites(functions)
    if sites:
        lines.append("")
        lines.append("Call sites that retrace most:")
        for site in sites[:_SITES_SHOWN]:
            lines.append(
                f"  {site.called_at}: {_plural(site.retraces, 'retrace')}, "
                f"{_seconds(site.seconds)} ({', '.join(site.functions)})"
            )
        if len(sites) > _SITES_SHOWN:
            lines.append(f"  ... and {_plural(len(sites) - _SITES_SHOWN, 'more call site')}")
    return "\n".join(lines)


def _function_lines(rank: int, function: AuditedFunction) -> list[str]:
    parts = {
        "trace": sum(miss.trace_seconds for miss in function.misses),
        "lower": sum(miss.lower_seconds for miss in function.misses),
        "compile": sum(miss.compile_seconds for miss in function.misses),
    }
    split = ", ".join(f"{kind} {_seconds(value)}" for kind, value in parts.items())
    lines = [
        f"{rank}. {function.name} ({function.defined_at}) [{function.kind}]: "
        f"{_plural(function.traces, 'trace')}, {_plural(function.compiles, 'compile')}, "
        f"{_seconds(function.seconds)} ({split})"
    ]
    first = function.misses[0]
    lines.append(f"   #1 at {first.called_at}, {_seconds(first.seconds)}{_nested(first)}")
    retraces = function.misses[1:]
    for miss in retraces[:_MISSES_SHOWN]:
        lines.extend(_miss_lines(miss))
    if len(retraces) > _MISSES_SHOWN:
        lines.append(f"   ... and {_plural(len(retraces) - _MISSES_SHOWN, 'more retrace')}")
    first_line, *padding = function.port.splitlines()
    lines.append(f"   port: {first_line}")
    lines.extend(f"         then per call: {line}" for line in padding)
    return lines


def _nested(miss: Miss) -> str:
    return " (inside another trace)" if miss.nested else ""


def _miss_lines(miss: Miss) -> list[str]:
    lines = [
        f"   #{miss.number} at {miss.called_at}, {_seconds(miss.seconds)}{_nested(miss)}, "
        "differs from the closest earlier trace in:"
    ]
    lines.extend(f"     {line}" for line in miss.differences)
    if miss.fix:
        lines.append("     fix:")
        lines.extend(f"       {line}" for line in miss.fix.splitlines())
    return lines
