"""The diff block of the budget error and of ``explain``: the differences from the closest
earlier trace (those with one cause on one line), what every earlier trace held there,
and the fixes; or the call's signature, where no trace came before."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tinax._src.diagnosis import elide, kinds, reuse
from tinax._src.diagnosis.elide import LINE_LIMIT, MAX_CELL, MAX_NAME, fit, pair, window
from tinax._src.diagnosis.kinds import Difference
from tinax._src.diagnosis.record import TracedSignature

_MAX_LISTED = 12
_GROUP_AT = 3  # this many differences with one cause share a line
_PATH_PART = re.compile(r"[^.\[]+|\[[^\]]*\]|\.[^.\[]+")


def explanation_lines(
    best: TracedSignature | None,
    found: tuple[Difference, ...],
    signature: TracedSignature,
    history: Sequence[TracedSignature] = (),
    *,
    closest_label: str | None = None,
    shape_fix: Sequence[str] = (),
) -> list[str]:
    """The diff block of the budget error and of ``explain``: differences, what every
    earlier trace in ``history`` held there (where there are two or more), then fixes.

    Differences with one cause (the same cast, the same move onto a mesh) share
    a line; every line fits in `LINE_LIMIT` characters. The differences' heading
    names ``best`` as ``closest_label`` where given (``Closest recorded signature``:
    another run's trace, whose number means nothing here), else as
    ``Closest earlier trace: #<number>``. ``shape_fix`` (lines) replaces the usual fix for
    a shape difference where the object knows a truer one (its shape buckets).
    """
    if best is None:
        return [_first_call_line(signature)]
    if not found and closest_label is not None:  # another run's trace: no retrace here
        how = (
            "matches this call in all it records"
            if reuse.matches(best, signature)
            else ("differs from this call in a way the recorded signature does not show")
        )
        return [fit(f"{closest_label} {how}.")]
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
    lines.extend(f"  {line}" for line in _listed(groups))
    lines.extend(_traced_lines(history, groups, best))
    lines.append("How to fix:")
    lines.extend(f"  {line}" for line in fix_lines(found, shape_fix=shape_fix))
    return lines


def difference_lines(found: Sequence[Difference]) -> list[str]:
    """The differences' lines of the diff block, unindented: one per difference, those
    with one cause on one line, at most a dozen and a count of the rest."""
    return _listed(_groups(found))


def fix_lines(found: Sequence[Difference], *, shape_fix: Sequence[str] = ()) -> list[str]:
    """The fixes of the diff block, unindented: ``<kind>: <fix>`` once per kind of
    difference, in order (``shape_fix`` for a shape difference where given)."""
    fixes: dict[str, str] = {}
    for difference in found:
        for kind in difference.kinds:
            if kind not in fixes:
                fixes[kind] = difference.fix or kinds.HINTS[kind]
    lines: list[str] = []
    for kind, fix in fixes.items():
        told = shape_fix if kind == "shape" and shape_fix else (fix,)
        lines.extend(fit(f"{kind}: {line}", LINE_LIMIT - 2) for line in told)
    if found and all(_on_self(difference) for difference in found):
        lines.append(fit(f"self: {_SHARED_SELF}", LINE_LIMIT - 2))
    return lines


def _listed(groups: Sequence[Sequence[Difference]]) -> list[str]:
    lines = [_group_line(members) for members in groups[:_MAX_LISTED]]
    if len(groups) > _MAX_LISTED:
        rest = sum(len(members) for members in groups[_MAX_LISTED:])
        lines.append(f"... and {rest} more")
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
        head = f"  {elide.path(path, MAX_NAME)}: "
        cells = [
            f"#{trace.number} {elide.words(leaves.get(path, '-'), MAX_CELL)}"
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


def _line(path: str, before: str, after: str, detail: str) -> str:
    if before == kinds.ABSENT or after == kinds.ABSENT:
        added = before == kinds.ABSENT
        text = after if added else before
        return fit(f"{path}: {'added' if added else 'removed'} ({window(text, 0, 120)})")
    room = max((LINE_LIMIT - len(path) - len(detail) - 12) // 2, 40)
    before, after = pair(before, after, room)
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
