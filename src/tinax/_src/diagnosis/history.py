"""The history table: an object's traced signatures side by side, one column per trace
(`TraceHistory`, ``traced_signatures``), and the durations it shows."""

from __future__ import annotations

from collections.abc import Sequence

from tinax._src.diagnosis import compare
from tinax._src.diagnosis.elide import LINE_LIMIT, MAX_CELL, fit, pair, window
from tinax._src.diagnosis.record import Leaf, TracedSignature

_MAX_TABLE_ROWS = 40


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
        [fit(name, MAX_CELL), *_cells(cells)] for name, cells in shown
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
            fit(signature.call_site or "-", MAX_CELL),
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
    """A row's cells cut to `MAX_CELL` characters, each keeping where it differs from
    the first cell (so that cells that differ still read differently)."""
    first = cells[0]
    if first == "-":
        first = next((cell for cell in cells if cell != "-"), first)
    shown: list[str] = []
    for cell in cells:
        if cell == first:
            shown.append(window(cell, 0, MAX_CELL))
        else:
            shown.append(pair(first, cell, MAX_CELL)[1])
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
