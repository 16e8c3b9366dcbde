"""Text for people: the budget error, ``explain``'s report, the history table.

The last step of the diagnosis (record, compare, report). Runs only when an
error is raised, ``explain`` is called or the history is printed.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from tinax._src.diagnosis import compare, elide, kinds, reuse
from tinax._src.diagnosis.errors import TraceBudgetError
from tinax._src.diagnosis.kinds import Difference
from tinax._src.diagnosis.record import Leaf, TracedSignature

_MAX_LISTED = 12
_MAX_NAME = 60
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
    """``name (file:line)``, or the name alone where the location is unknown; a long
    name (a test method's local lambda) is elided in the middle."""
    name = fit(name, _MAX_NAME)
    return f"{name} ({location})" if location else name


def budget_error(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    signature: TracedSignature,
    *,
    outcome: str | None = None,
) -> TraceBudgetError:
    """Builds the error for a trace over budget: headline, location, differences, fixes.

    Its second line says what became of the trace: ``outcome`` for one that runs anyway
    (a sentence: the policy, and that it runs and is counted); else that it was refused.
    """
    return _refused_trace(
        function,
        max_traces,
        used,
        attempt,
        history,
        signature,
        verb="exceeded its trace budget",
        rule=outcome if outcome is not None else _REFUSED_RULE,
    )


_REFUSED_RULE = (
    "JAX traces and compiles again for every new abstract signature; this call was "
    "refused before tracing, and calls that match an earlier trace still run."
)


def _refused_trace(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    signature: TracedSignature,
    *,
    verb: str,
    rule: str,
) -> TraceBudgetError:
    """A refused trace's error: ``<function> <verb>: ...``, the rule it broke, the
    differences from the closest trace with their fixes, and where both were called."""
    name, location, where = _where(function)
    best, found = compare.closest(history, signature)
    lines = [
        fit(
            f"{where} {verb}: max_traces={max_traces}, traces_used={used}; "
            f"this call would be trace {attempt}."
        ),
        rule,
        *explanation_lines(best, found, signature, history),
        *_call_sites(signature, best),
    ]
    return _error(lines, name, location, max_traces, used, signature, best, found)


SCOPE = "no_new_compiles"
COMPILES_AGAIN = (  # how explain and no_new_compiles begin a compile without a new trace
    "XLA would compile again without tracing (compiles_used counts it, the budget does not)"
)
_SCOPE_RULE = (  # str.format: before, still
    "no_new_compiles refuses every new trace and compile of a budgeted object: this call "
    "was refused before {before}, and calls that {still} still run."
)


def scope_trace_error(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    signature: TracedSignature,
) -> TraceBudgetError:
    """The error for a trace refused inside ``no_new_compiles`` (within budget or not):
    the budget error's diagnosis under another headline."""
    return _refused_trace(
        function,
        max_traces,
        used,
        attempt,
        history,
        signature,
        verb=f"would trace inside {SCOPE}",
        rule=_SCOPE_RULE.format(before="tracing", still="match an earlier trace"),
    )


def scope_compile_error(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    history: Sequence[TracedSignature],
    signature: TracedSignature,
    reason: str,
    *,
    reusing: bool = True,
) -> TraceBudgetError:
    """The error for a compile without a new trace refused inside ``no_new_compiles``:
    the trace the call reuses (unless not known: ``reusing`` false), and why XLA would
    compile it (``reason``, a sentence)."""
    name, location, where = _where(function)
    best, found = compare.closest(history, signature)
    reused = (
        f"reusing trace #{best.number}" if best is not None and reusing else "without a new trace"
    )
    lines = [
        fit(
            f"{where} would compile inside {SCOPE}, {reused}: max_traces={max_traces}, "
            f"traces_used={used}."
        ),
        _SCOPE_RULE.format(before="XLA compiled it", still="have an executable"),
        fit(reason),
        *_call_sites(signature, best),
    ]
    return _error(lines, name, location, max_traces, used, signature, best, found)


def _error(
    lines: Sequence[str],
    name: str,
    location: str | None,
    max_traces: int,
    used: int,
    signature: TracedSignature,
    best: TracedSignature | None,
    found: tuple[Difference, ...],
) -> TraceBudgetError:
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


def _call_sites(signature: TracedSignature, best: TracedSignature | None) -> list[str]:
    """Where the refused call, and the closest earlier trace, were called from."""
    if signature.call_site is None:
        return []
    line = f"Called from {signature.call_site}"
    if best is not None and best.call_site is not None:
        line += f"; the closest earlier trace, #{best.number}, was called from {best.call_site}"
    return [fit(line + ".")]


_WORDED_BY = ("BoundedJit:", "BatchedJit:")  # how tinax's own messages begin


@attrs.frozen
class Refusal:
    """How ``explain`` shows the error a call would raise (`Explanation.raises`): its
    exception type's name (``kind``), and whether the message is tinax's own words
    (``worded``: a leaf JAX refuses, a static argument it cannot hash), wrapped whole
    under a line of its own, or JAX's (or Python's), quoted in a sentence."""

    kind: str
    worded: bool

    @classmethod
    def of(cls, raises: str | None) -> Refusal | None:
        """The refusal of an ``Explanation.raises`` (``"<kind>: <message>"``), read once
        where the explanation is made; ``None`` for a call that raises nothing."""
        if raises is None:
            return None
        kind, _, message = raises.partition(": ")
        return cls(kind, message.startswith(_WORDED_BY))


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
        raises: For a call JAX rejects before tracing (an argument missing or
            extra, an unhashable static value, a leaf that is not an array, batch
            sizes `jax.vmap` rejects, a batch that does not divide over the mesh,
            an input placed against ``in_shardings`` or on devices that disagree),
            the exception it would raise, as
            ``"TypeError: g() missing 1 required positional argument: 'y'"``
            (raised whether or not the budget is spent); the call neither traces
            nor reuses a trace. Else ``None``.
        compiles: For a call that reuses a trace, whether XLA would compile
            again without tracing (``compiles_used`` counts it, the budget does
            not), as a sentence; ``""`` when an executable for the inputs'
            placements exists.
        history: The earlier traces the call was compared with, oldest first.
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
    raises: str | None = None
    compiles: str = ""
    history: tuple[TracedSignature, ...] = attrs.field(default=(), repr=False)
    # how ``raises`` is shown, derived from it however the object is made (``explain``,
    # the constructor, `attrs.evolve`); not compared, not shown, not an argument
    _refusal: Refusal | None = attrs.field(
        default=attrs.Factory(lambda self: Refusal.of(self.raises), takes_self=True),
        init=False,
        repr=False,
        eq=False,
    )

    def __str__(self) -> str:
        where = _heading(self.function_name, self.location)
        budget = f"max_traces={self.max_traces}, traces_used={self.traces_used}"
        refusal = self._refusal
        if self.raises is not None and refusal is not None:
            if refusal.worded:
                # tinax's words for a leaf JAX refuses (a TypeError) or an unhashable static
                # argument (a ValueError): a long message, wrapped whole
                refused = (
                    "refuse a leaf of this call"
                    if refusal.kind == "TypeError"
                    else "reject this call before tracing"
                )
                return "\n".join(
                    (
                        fit(f"{where}: JAX would {refused}; {budget}."),
                        "It would raise this error, and trace nothing:",
                        *textwrap.wrap(self.raises, 100),
                    )
                )
            reason = f"It would raise {self.raises}"
            return "\n".join(
                (
                    fit(f"{where}: JAX would reject this call before tracing; {budget}."),
                    *(
                        [reason]
                        if len(reason) <= LINE_LIMIT
                        else textwrap.wrap(reason, 100, subsequent_indent="  ")
                    ),
                    "Nothing is traced or counted, with the budget spent or not.",
                )
            )
        if self.reuses is not None:
            reused = f"this call would reuse trace #{self.reuses.number}"
            if self.compiles.startswith(COMPILES_AGAIN):  # no new trace, but a compile
                reused = f"this call would reuse trace #{self.reuses.number} and compile it"
            head = f"{where}: {reused}; {budget}."
            return head if not self.compiles else f"{head}\n{fit(self.compiles)}"
        if self.exceeds_budget:
            head = f"{where}: this call would exceed the trace budget: {budget}; it would be"
        elif self.closest is None and self.traces_used == 0:
            head = f"{where}: this call would make the first trace: {budget}; it would be"
        else:
            head = f"{where}: this call would trace again: {budget}; it would be"
        lines = [fit(f"{head} trace {self.attempt}.")]
        lines.extend(
            explanation_lines(self.closest, self.differences, self.signature, self.history)
        )
        return "\n".join(lines)


def explain(
    function: Callable[..., Any],
    max_traces: int,
    history: Sequence[TracedSignature],
    used: int,
    attempt: int,
    signature: TracedSignature,
    raises: str | None = None,
    cleared: int = 0,
) -> Explanation:
    """Whether ``signature`` would reuse one of the traces in ``history``, and why not.

    ``raises`` is the error of a call that does not bind to the function;
    traces numbered up to ``cleared`` are no longer in JAX's cache.
    """
    name, location, _ = _where(function)
    if raises is not None:
        return Explanation(
            function_name=name,
            location=location,
            signature=signature,
            retraces=False,
            reuses=None,
            exceeds_budget=False,
            traces_used=used,
            max_traces=max_traces,
            closest=None,
            differences=(),
            attempt=attempt,
            raises=raises,
        )
    reuses = reuse.reused(history, signature, cleared)
    best, found = (reuses, ()) if reuses is not None else compare.closest(history, signature)
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
        history=tuple(history),
    )


def explanation_lines(
    best: TracedSignature | None,
    found: tuple[Difference, ...],
    signature: TracedSignature,
    history: Sequence[TracedSignature] = (),
    *,
    closest_label: str | None = None,
) -> list[str]:
    """The diff block of the budget error and of ``explain``: differences, what every
    earlier trace in ``history`` held there (where there are two or more), then fixes.

    Differences with one cause (the same cast, the same move onto a mesh) share
    a line; every line fits in `LINE_LIMIT` characters. The differences' heading
    names ``best`` as ``closest_label`` where given (``Closest recorded signature``:
    another run's trace, whose number means nothing here), else as
    ``Closest earlier trace: #<number>``.
    """
    if best is None:
        return [_first_call_line(signature)]
    if not found:
        if reuse.matches(best, signature):
            because = "its cache was emptied (jax.clear_caches() or clear_cache())"
            if not signature.config_values:  # JAX < 0.10 does not name its config options
                because += " or a JAX config option changed (this JAX version does not name them)"
            return [
                f"Closest earlier trace: #{best.number}, which this call matches exactly.",
                fit(f"JAX traced again because {because}."),
            ]
        return [
            fit(
                f"Closest earlier trace: #{best.number}, which differs from this call in a way "
                "the recorded signature does not show."
            )
        ]
    count = f"{len(found)} difference{'s' if len(found) > 1 else ''}"
    label = closest_label if closest_label is not None else f"Closest earlier trace: #{best.number}"
    lines = [f"{label} ({count}):"]
    groups = _groups(found)
    lines.extend(f"  {_group_line(members)}" for members in groups[:_MAX_LISTED])
    if len(groups) > _MAX_LISTED:
        rest = sum(len(members) for members in groups[_MAX_LISTED:])
        lines.append(f"  ... and {rest} more")
    lines.extend(_traced_lines(history, groups, best))
    lines.append("How to fix:")
    fixes: dict[str, str] = {}
    for difference in found:
        for kind in difference.kinds:
            if kind not in fixes:
                fixes[kind] = difference.fix or kinds.HINTS[kind]
    lines.extend(fit(f"  {kind}: {fix}") for kind, fix in fixes.items())
    if all(_on_self(difference) for difference in found):
        lines.append(fit(f"  self: {_SHARED_SELF}"))
    return lines


_MAX_TRACED_PATHS = 3


def _traced_lines(
    history: Sequence[TracedSignature],
    groups: Sequence[Sequence[Difference]],
    best: TracedSignature,
) -> list[str]:
    """``Traced so far, where this call differs:`` and per leaf or static argument that
    differs on its own line (not grouped with others of one cause), its value in every
    earlier trace: ``x: #1 f32[8,3], #2 f32[16,3]``. Nothing for fewer than two traces
    (the difference line shows the one), nor for differences in tree structure."""
    if len(history) < 2:
        return []
    texts = [{leaf.path: leaf.text for leaf in trace.leaves} for trace in history]
    paths = [
        members[0].path
        for members in groups
        if len(members) == 1 and any(members[0].path in leaves for leaves in texts)
    ]
    if not paths:
        return []
    lines = ["Traced so far, where this call differs:"]
    for path in paths[:_MAX_TRACED_PATHS]:
        head = f"  {elide.path(path, _MAX_NAME)}: "
        cells = [
            f"#{trace.number} {elide.words(leaves.get(path, '-'), _MAX_CELL)}"
            for trace, leaves in zip(history, texts, strict=True)
        ]
        closest = [trace is best for trace in history]
        lines.append(head + elide.joined_within(cells, closest, LINE_LIMIT - len(head)))
    if len(paths) > _MAX_TRACED_PATHS:
        lines.append(f"  ... and {len(paths) - _MAX_TRACED_PATHS} more")
    return lines


def _first_call_line(signature: TracedSignature) -> str:
    """``No earlier trace ... This call: x: f32[3], ...``: whole leaves dropped from the
    middle when too long, never a name cut in two."""
    head = "No earlier trace to compare with. This call: "
    under = "" if signature.abstract_mesh.empty else f" under {signature.mesh}"
    room = LINE_LIMIT - len(head) - len(under)
    if room < 60:
        under, room = "", LINE_LIMIT - len(head)
    entries = [(leaf.path, leaf.text, leaf.kind == "static") for leaf in signature.leaves]
    listed = elide.items(entries, room) if entries else "(no arguments)"
    return fit(head + listed + under)


_SHARED_SELF = (
    "a method wrapped at class level has one budget for all instances; for one per "
    "instance, wrap the bound method in __init__: self.step = bounded_jit(self._step, ...)"
)


def _on_self(difference: Difference) -> bool:
    """Whether a difference lies in the argument ``self`` (a bound method's instance)."""
    path = difference.path
    return path == "self" or path.startswith(("self.", "self["))


# --- lines that fit ------------------------------------------------------------------------

LINE_LIMIT = 200
_GROUP_AT = 3  # this many differences with one cause share a line
_PATH_PART = re.compile(r"[^.\[]+|\[[^\]]*\]|\.[^.\[]+")


def fit(line: str, limit: int = LINE_LIMIT) -> str:
    """``line``, elided in the middle to at most ``limit`` characters."""
    if len(line) <= limit:
        return line
    keep = limit - 5
    head = keep * 2 // 3
    return f"{line[:head]} ... {line[len(line) - (keep - head) :]}"


def _window(text: str, at: int, limit: int) -> str:
    """At most ``limit`` characters of ``text`` around position ``at``."""
    if len(text) <= limit:
        return text
    size = max(limit - 6, 1)
    start = max(0, min(at - size // 3, len(text) - size))
    piece = text[start : start + size]
    return ("..." if start > 0 else "") + piece + ("..." if start + size < len(text) else "")


def elide_pair(before: str, after: str, limit: int) -> tuple[str, str]:
    """Two texts cut to ``limit`` characters each, keeping the part where they differ."""
    at = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        at += 1
    return _window(before, at, limit), _window(after, at, limit)


def _line(path: str, before: str, after: str, detail: str) -> str:
    if before == kinds.ABSENT or after == kinds.ABSENT:
        added = before == kinds.ABSENT
        text = after if added else before
        return fit(f"{path}: {'added' if added else 'removed'} ({_window(text, 0, 120)})")
    room = max((LINE_LIMIT - len(path) - len(detail) - 12) // 2, 40)
    before, after = elide_pair(before, after, room)
    return fit(f"{path}: {before} -> {after} ({detail})")


def _common_prefix(paths: Sequence[str]) -> str:
    """The longest run of whole path parts (``params``, ``['dense']``, ``.w``) all share."""
    split = [_PATH_PART.findall(path) for path in paths]
    common: list[str] = []
    for parts in zip(*split, strict=False):
        if any(part != parts[0] for part in parts):
            break
        common.append(parts[0])
    if common:
        return "".join(common)
    return ", ".join(dict.fromkeys(parts[0] for parts in split if parts))


def _groups(found: Sequence[Difference]) -> list[list[Difference]]:
    """Differences in order, those with one cause (and more than a few) together."""
    by_cause: dict[Any, list[Difference]] = {}
    for index, difference in enumerate(found):
        key = (difference.kinds, difference.cause) if difference.cause is not None else index
        by_cause.setdefault(key, []).append(difference)
    groups: list[list[Difference]] = []
    for members in by_cause.values():
        if len(members) >= _GROUP_AT:
            groups.append(members)
        else:
            groups.extend([member] for member in members)
    order = {id(difference): index for index, difference in enumerate(found)}
    groups.sort(key=lambda members: order[id(members[0])])
    return groups


def _group_line(members: Sequence[Difference]) -> str:
    """One difference's line, or one line for several with one cause:
    ``params (13 leaves): f32 -> bf16 (dtype)``."""
    if len(members) == 1:
        [one] = members
        return _line(one.path, one.before, one.after, one.detail)
    before, after, detail = members[0].cause or ("", "", "")
    where = f"{_common_prefix([member.path for member in members])} ({len(members)} leaves)"
    return _line(fit(where, 100), before, after, detail)


def history_table(history: Sequence[TracedSignature]) -> str:
    """One column per trace, one row per leaf; ``*`` marks rows that differ."""
    if not history:
        return "no traces yet"
    count = len(history)
    rows: dict[str, list[str]] = {}
    by_path: dict[str, list[Leaf | None]] = {}
    for column, signature in enumerate(history):
        for leaf in signature.leaves:
            cell = (
                leaf.text if leaf.mesh is None or leaf.sharding else f"{leaf.text} on {leaf.mesh}"
            )
            rows.setdefault(leaf.path, ["-"] * count)[column] = cell
            by_path.setdefault(leaf.path, [None] * count)[column] = leaf
    for path, leaves in by_path.items():
        if _placement_hidden(rows[path], leaves):
            rows[path] = [
                "-" if leaf is None else f"{leaf.text} ({compare.placement(leaf)})"
                for leaf in leaves
            ]
    extra = {
        "(by keyword)": [", ".join(signature.keywords) or "-" for signature in history],
        "(mesh)": [signature.mesh for signature in history],
    }
    for name, cells in extra.items():
        if any(cell not in ("-", "no mesh") for cell in cells):
            rows[name] = cells
    rows.update(_static_field_rows(history))
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
    numbers = [f"#{signature.number}" for signature in history]
    table = [["argument", *numbers]] + [
        [fit(name, _MAX_CELL), *_cells(cells)] for name, cells in shown
    ]
    columns = _columns_that_fit(table, marked)
    lines: list[str] = []
    for index, row in enumerate(table):
        kept = [row[0], *(row[column] for column in columns)]
        differs = index > 0 and len(set(row[1:])) > 1
        mark = ("* " if differs else "  ") if marked else ""
        lines.append(
            mark
            + "  ".join(kept[i].ljust(w) for i, w in enumerate(_widths(table, columns))).rstrip()
        )
    if len(columns) < count:
        left_out = [numbers[column - 1] for column in range(1, count + 1) if column not in columns]
        lines.append(fit(f"... and {len(left_out)} traces not shown ({', '.join(left_out)})"))
    if hidden:
        lines.append(f"... and {hidden} rows the same in every trace")
    if marked:
        lines.append("* marks a row that differs between traces")
    lines.extend(_facts_table([history[column - 1] for column in columns]))
    return "\n".join(lines)


_MAX_CELL = 60


def _placement_hidden(cells: Sequence[str], leaves: Sequence[Leaf | None]) -> bool:
    """Whether two cells of a row read alike for arrays placed otherwise (a replicated
    array on an Explicit mesh and a NumPy array both print ``f32[16]``): then every
    cell of the row says where its array is, as the budget error does."""
    seen: dict[str, tuple[str | None, str | None]] = {}
    for cell, leaf in zip(cells, leaves, strict=True):
        if leaf is None or leaf.kind != "array":
            continue
        placed = (leaf.sharding, leaf.mesh)
        if seen.setdefault(cell, placed) != placed:
            return True
    return False


def _static_field_rows(history: Sequence[TracedSignature]) -> dict[str, list[str]]:
    """Rows for the static fields and auxiliary data of pytree nodes that differ between
    consecutive traces (they are part of the tree structure, not leaves): each
    trace's value, carried over from a neighbour where that pair did not differ."""
    rows: dict[str, list[str | None]] = {}
    count = len(history)
    for index in range(1, count):
        try:
            found = compare.differences(history[index - 1], history[index])
        except Exception:  # a table for a person must print whatever the history holds
            continue
        for difference in found:
            if "static field" not in difference.kinds:
                continue
            path = difference.path
            name = path if path.endswith(")") else f"{path} (static field)"
            cells = rows.setdefault(name, [None] * count)
            cells[index - 1], cells[index] = difference.before, difference.after
    filled: dict[str, list[str]] = {}
    for name, cells in rows.items():
        for index in range(1, count):  # equal to the neighbour where no difference was found
            cells[index] = cells[index] if cells[index] is not None else cells[index - 1]
        for index in range(count - 2, -1, -1):
            cells[index] = cells[index] if cells[index] is not None else cells[index + 1]
        filled[name] = [cell if cell is not None else "-" for cell in cells]
    return filled


def _facts_table(history: Sequence[TracedSignature]) -> list[str]:
    """Below the signatures: where each trace was called from and what it cost (absent
    when no trace recorded it)."""
    if all(
        signature.call_site is None and signature.trace_seconds is None for signature in history
    ):
        return []
    table = [["", "called from", "trace time", "compile time"]] + [
        [
            f"#{signature.number}",
            fit(signature.call_site or "-", _MAX_CELL),
            duration(signature.trace_seconds),
            duration(signature.compile_seconds),
        ]
        for signature in history
    ]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]


def duration(seconds: float | None) -> str:
    """``12.3 ms``, ``45 us`` or ``1.23 s``; ``-`` for an unknown duration."""
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1.0 else f"{seconds:.2f} s"


def _cells(cells: list[str]) -> list[str]:
    """A row's cells cut to `_MAX_CELL` characters, each keeping where it differs from
    the first cell (so that cells that differ still read differently)."""
    first = cells[0]
    if first == "-":
        first = next((cell for cell in cells if cell != "-"), first)
    shown: list[str] = []
    for cell in cells:
        if cell == first:
            shown.append(_window(cell, 0, _MAX_CELL))
        else:
            shown.append(elide_pair(first, cell, _MAX_CELL)[1])
    return shown


def _widths(table: list[list[str]], columns: Sequence[int]) -> list[int]:
    return [max(len(row[i]) for row in table) for i in (0, *columns)]


def _columns_that_fit(table: list[list[str]], marked: bool) -> list[int]:
    """The trace columns to show: all if they fit in `LINE_LIMIT`, else the first and
    as many of the latest as fit."""
    count = len(table[0]) - 1
    columns = list(range(1, count + 1))
    margin = 2 if marked else 0  # the "* " mark

    def width(kept: list[int]) -> int:
        return sum(_widths(table, kept)) + 2 * len(kept) + margin

    while len(columns) > 2 and width(columns) > LINE_LIMIT:
        del columns[1]
    return columns


class TraceHistory(tuple[TracedSignature, ...]):
    """The traced signatures of an object, oldest first; prints as a table."""

    __slots__ = ()

    def __str__(self) -> str:
        return history_table(self)
