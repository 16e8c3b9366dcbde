"""Draws the benchmark chart from results tables already written, with no benchmark run.

Run from the repository root:
    python benchmarks/plot.py docs/benchmarks.md docs/img/benchmarks.png

The source is a Markdown file holding tables in the format `benchmarks/run.py` writes
(``results.md``, whose tables are pasted into docs/benchmarks.md). From a file with
headings, only the tables of the sections named by ``--section`` are read (by default
the page's "Results" and "Serving loop", not its GPU table); a file without headings,
as ``benchmarks/out/results.md``, is read whole. Each row's baseline is the contender
whose ratio is 1 in every round (median, min and max all 1.000); every other contender
is a bar.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from harness import TABLE_HEADER, Bar, draw

SECTIONS = ("Results", "Serving loop")


def tables(text: str, sections: tuple[str, ...]) -> list[list[list[str]]]:
    """The results tables of ``text`` in the named sections (a section runs to the next
    heading of any level; a text without headings is one section), as rows of cells."""
    headed = any(line.startswith("#") for line in text.splitlines())
    reading = not headed
    found: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            reading = line.lstrip("#").strip() in sections
            current = None
        elif reading and line.strip() == TABLE_HEADER:
            current = []
            found.append(current)
        elif current is not None and line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if set(cells[0]) != {"-"}:  # not the alignment line
                current.append(cells)
        else:
            current = None
    return found


def bars(rows: list[list[str]]) -> list[Bar]:
    """One bar per contender that is not its row's baseline, in the table's order."""
    baselines: dict[str, str] = {}
    for name, contender, _, *ratios, _ in rows:
        if name not in baselines and ratios == ["1.000"] * 3:
            baselines[name] = contender
    made: list[Bar] = []
    for name, contender, _, median, low, high, _ in rows:
        if name not in baselines:
            raise ValueError(f"row {name!r} has no baseline (a contender at 1.000 throughout)")
        if contender != baselines[name]:
            made.append(
                Bar(name, contender, baselines[name], float(median), float(low), float(high))
            )
    return made


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=pathlib.Path, help="a Markdown file of results tables")
    parser.add_argument("out", type=pathlib.Path, help="the picture to write (PNG)")
    parser.add_argument(
        "--section",
        action="append",
        help=f"a heading whose tables to read (default: {', '.join(SECTIONS)})",
    )
    options = parser.parse_args(argv)
    found = tables(options.source.read_text(), tuple(options.section or SECTIONS))
    drawn = [bar for table in found for bar in bars(table)]
    if not drawn:
        parser.error(f"no results table in {options.source}")
    draw(drawn, options.out)
    print(f"wrote {options.out}: {len(drawn)} bars from {len(found)} tables")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
