"""Benchmark results as data: what a run measured, the table and the chart made from it.

A run of `run.py` writes ``results.json`` (and its table, ``results.md``, and its chart)
to its ``--out`` folder; ``run.py --record`` also merges its rows into the data set of
the JAX it ran on, ``benchmarks/data/<platform>-jax-<version>.json``: one file per JAX
version and platform, holding the latest run of each row. docs/benchmarks.md's tables,
the figures the guides quote and the chart are made from those files (`figures.py`),
never typed by hand.

A data set: ``{"platform", "jax", "python", "machine", "rows": [record, ...]}``. A record:

- ``id``: the row key of `run.py` (``dispatch``), or ``key.N`` for the N-th row of a key
  that makes several (``warm-start.2``);
- ``name``, ``baseline``, ``unit`` (``s`` or ``MiB``), ``target`` (the highest median
  ratio to the baseline acceptable for tinax, or null);
- ``date`` (of the run), and where known ``tinax`` (its version), ``rounds``, ``quick``;
- ``contenders``: per contender, in the row's order, ``name``, ``median`` (its median
  time, in ``unit``) and ``ratio``, ``min``, ``max`` (the median, least and greatest of
  its per-round ratios to the baseline);
- ``against``: tinax's median per-round ratio to another contender
  (``contender``, ``ratio``, ``target`` or null), where a row has a target against one;
- ``notes``: the row's report lines (counts, where the time went), as printed.

This module needs neither JAX nor tinax; `draw` needs matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import re
from dataclasses import dataclass
from typing import Any

Record = dict[str, Any]
DataSet = dict[str, Any]

DATA = pathlib.Path(__file__).resolve().parent / "data"
TABLE_HEADER = "| row | contender | median | ratio (median) | min | max | target |"
TABLE_RULE = "| --- | --- | ---: | ---: | ---: | ---: | --- |"


def dataset_name(platform: str, jax_version: str) -> str:
    """The file stem of the data set of a platform and JAX version: ``cpu-jax-0.10.2``."""
    return f"{platform}-jax-{jax_version}"


def load(path: pathlib.Path) -> DataSet:
    return json.loads(path.read_text())


def save(data: DataSet, path: pathlib.Path) -> None:
    """``data`` as JSON, one line per contender (and per ``against`` entry)."""
    text = json.dumps(data, indent=1, ensure_ascii=False)
    text = re.sub(  # an object holding no object or list: one line
        r"\{\n\s*([^{}\[\]]*?)\n\s*\}",
        lambda match: "{" + " ".join(line.strip() for line in match[1].splitlines()) + "}",
        text,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def datasets(folder: pathlib.Path = DATA) -> dict[str, DataSet]:
    """Every data set in ``folder``, by file stem."""
    return {path.stem: load(path) for path in sorted(folder.glob("*.json"))}


def merged(data: DataSet, records: list[Record], order: list[str]) -> DataSet:
    """``data`` with ``records`` in place of its records of the same run keys (a key's
    rows are replaced together), kept in the order of the run keys ``order``."""
    keys = {key_of(record["id"]) for record in records}
    kept = [record for record in data.get("rows", []) if key_of(record["id"]) not in keys]
    rank = {key: index for index, key in enumerate(order)}
    rows = sorted([*kept, *records], key=lambda record: rank.get(key_of(record["id"]), len(rank)))
    return {**data, "rows": rows}


def key_of(row_id: str) -> str:
    """The run key of a record's id: ``warm-start`` of ``warm-start.2``."""
    return row_id.partition(".")[0]


def selected(data: DataSet, items: list[str]) -> list[Record]:
    """The records of ``data`` named by ``items`` (ids, or run keys for all their rows), in
    the order of ``items``; an item that names none is an error."""
    chosen: list[Record] = []
    for item in items:
        found = [r for r in data["rows"] if r["id"] == item or key_of(r["id"]) == item]
        if not found:
            raise KeyError(f"no row {item!r} in the data set")
        chosen.extend(found)
    return chosen


def find(data: DataSet, row_id: str) -> Record:
    for record in data["rows"]:
        if record["id"] == row_id:
            return record
    raise KeyError(f"no row {row_id!r} in the data set")


def contender(record: Record, name: str) -> dict[str, Any]:
    for entry in record["contenders"]:
        if entry["name"] == name:
            return entry
    raise KeyError(f"row {record['id']!r} has no contender {name!r}")


def against(record: Record, name: str) -> dict[str, Any]:
    for entry in record.get("against", []):
        if entry["contender"] == name:
            return entry
    raise KeyError(f"row {record['id']!r} has no ratio of tinax to {name!r}")


# --- the table -----------------------------------------------------------------------------


def shown_time(value: float, unit: str) -> str:
    """A median time as the tables show it: ``4.3 us``, ``68.822 ms``, ``1.05 MiB``."""
    if unit != "s":
        return f"{value:.2f} {unit}"
    return f"{value * 1e3:.3f} ms" if value > 1e-3 else f"{value * 1e6:.1f} us"


def shown_ratio(value: float) -> str:
    """A ratio of ``against``, at the precision it was recorded with (at most 3 places)."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def verdict(value: float, target: float) -> str:
    return f"<= {target:.2f}: {'met' if value <= target else 'missed'}"


def _target_cell(record: Record, name: str) -> str:
    if name == "tinax" and record.get("target") is not None:
        return verdict(contender(record, "tinax")["ratio"], record["target"])
    for entry in record.get("against", []):
        if entry["contender"] == name:
            cell = f"tinax / this: {shown_ratio(entry['ratio'])}"
            if entry.get("target") is not None:
                cell += f", {verdict(entry['ratio'], entry['target'])}"
            return cell
    return ""


def table_lines(records: list[Record]) -> list[str]:
    """The Markdown table of ``records``: a line per contender. The target column gives
    tinax's verdict on the row's target and, on another contender's line, tinax's median
    ratio to that contender (and its target) where the row records one."""
    lines = [TABLE_HEADER, TABLE_RULE]
    for record in records:
        for entry in record["contenders"]:
            median = shown_time(entry["median"], record["unit"])
            lines.append(
                f"| {record['name']} | {entry['name']} | {median}"
                f" | {entry['ratio']:.3f} | {entry['min']:.3f} | {entry['max']:.3f}"
                f" | {_target_cell(record, entry['name'])} |"
            )
    return lines


# --- the chart -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """One bar of the chart: a contender's ratio to its row's baseline."""

    row: str
    contender: str
    baseline: str
    median: float
    low: float  # the least per-round ratio
    high: float  # the greatest


def _ratios(entry: dict[str, Any]) -> tuple[float, float, float]:
    return entry["ratio"], entry["min"], entry["max"]


def bars(records: list[Record]) -> list[Bar]:
    """A bar per contender that is not its row's baseline, in the records' order."""
    return [
        Bar(record["name"], entry["name"], record["baseline"], *_ratios(entry))
        for record in records
        for entry in record["contenders"]
        if entry["name"] != record["baseline"]
    ]


def digest(drawn: list[Bar]) -> str:
    """A digest of what a chart shows, written into the PNG so that a test can tell a chart
    drawn from other data."""
    text = json.dumps([list(vars(bar).values()) for bar in drawn])
    return hashlib.sha256(text.encode()).hexdigest()


DIGEST_KEY = "Source-Digest"


def png_text(path: pathlib.Path) -> dict[str, str]:
    """The tEXt entries of a PNG file (where `draw` writes the digest)."""
    data = path.read_bytes()
    found: dict[str, str] = {}
    position = 8  # after the signature
    while position < len(data):
        length = int.from_bytes(data[position : position + 4], "big")
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        position += 12 + length
    return found


LABEL_WIDTH = 64  # characters per line of a bar's label; longer row names wrap


def draw(drawn: list[Bar], path: pathlib.Path) -> None:
    """A bar per contender (ratio to the row's baseline, log scale), whiskers from min to
    max, its median written beside it; tinax blue, other contenders grey, the rows'
    groups on alternating backgrounds. Labels wrap, and the figure grows to hold them.
    The PNG carries the digest of ``drawn``."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [
        textwrap.fill(bar.row, LABEL_WIDTH) + f"\n{bar.contender} vs {bar.baseline}"
        for bar in drawn
    ]
    pitch = 0.14 * max(label.count("\n") + 1 for label in labels) + 0.12  # inches per bar
    figure, axes = plt.subplots(figsize=(12, pitch * len(drawn) + 1.2))
    positions = list(range(len(drawn)))[::-1]
    medians = [bar.median for bar in drawn]
    error = [[b.median - b.low for b in drawn], [b.high - b.median for b in drawn]]
    colors = ["tab:blue" if bar.contender == "tinax" else "tab:gray" for bar in drawn]
    group, previous = 0, None
    for position, bar in zip(positions, drawn, strict=True):
        group += bar.row != previous
        previous = bar.row
        if group % 2 == 0:
            axes.axhspan(position - 0.5, position + 0.5, color="0.93", zorder=0)
    axes.barh(positions, medians, xerr=error, color=colors, capsize=3, zorder=2)
    for position, bar in zip(positions, drawn, strict=True):
        axes.annotate(
            f"{bar.median:.2f}",
            (max(bar.high, bar.median), position),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=6,
        )
    axes.axvline(1.0, color="black", linewidth=0.8, zorder=3)
    axes.set_yticks(positions, labels, fontsize=7)
    axes.set_ylim(-0.5, len(drawn) - 0.5)
    axes.set_xscale("log")
    reach = min(bar.low for bar in drawn), max(bar.high for bar in drawn)
    steps = (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
    ticks = [t for t in steps if reach[0] < t * 2 and t / 2 < reach[1]]
    axes.set_xticks(ticks, [f"{t:g}" for t in ticks])
    axes.set_xlabel("time (memory) relative to the row's baseline; median, whiskers min to max")
    axes.set_title("tinax benchmarks (blue: tinax; grey: other contenders)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(
        path,
        dpi=110,
        bbox_inches="tight",  # every label whole, however long
        metadata={DIGEST_KEY: digest(drawn)},
    )
    plt.close(figure)
