"""Makes every benchmark figure the docs show from the recorded data, with no benchmark run.

Run from the repository root after ``run.py --record``:
    python benchmarks/figures.py            # rewrite what differs from the data
    python benchmarks/figures.py --check    # say what differs; exit 1 if anything does

From the data sets under ``benchmarks/data/`` (`results.py`) it makes:

- **the tables of docs/benchmarks.md**, each between a marker naming its data set and its
  rows (run keys, or ids such as ``warm-start.2``) and an end marker::

      <!-- figures: table cpu-jax-0.10.2: dispatch batched -->
      | row | contender | ... |
      <!-- figures: end -->

- **every figure the page's text quotes**: a link to the row's table whose title names
  the figure, ``[1.034](#results "cpu-jax-0.10.2 dispatch: tinax")`` (README.md and
  the other pages are read too, but name the row instead of quoting its figure:
  tests/test_docs.py holds them to that). The title is ``<data set> <row id>: <what>``,
  where ``<what>`` is a contender (its median ratio to the baseline), ``tinax /
  <contender>`` (tinax's median ratio to it), ``<contender> (range)`` (its least and
  greatest ratio: the text's two numbers) or ``<contender> (time)`` (its median time,
  in the text's unit). The numbers of the link's text are rewritten at the precision
  the text gives them, and its anchor is made the section that holds the row's table;

- **the chart**, docs/img/benchmarks.png, from the data set `CHART` (drawn again only
  when its data changed: the PNG carries a digest of what it shows).
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from results import (
    DATA,
    DIGEST_KEY,
    DataSet,
    Record,
    against,
    bars,
    contender,
    datasets,
    digest,
    draw,
    find,
    png_text,
    selected,
    table_lines,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
CHART = "cpu-jax-0.10.2"  # the data set the chart draws: the latest CPU runs
CHART_PATH = ROOT / "docs" / "img" / "benchmarks.png"

TABLE = re.compile(
    r"(?P<start><!-- figures: table (?P<data>\S+): (?P<items>[^>]*?) -->\n)"
    r"(?P<body>.*?)(?P<end><!-- figures: end -->)",
    re.S,
)
LINK = re.compile(
    r"\[(?P<text>[^\]\n]+)\]\((?P<path>[^)\s#]*)(?P<anchor>#[^)\s]*)? \"(?P<title>[^\"]+)\"\)"
)
TITLE = re.compile(r"(?P<data>\S+) (?P<id>\S+): (?P<what>.+)")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}


class FiguresError(ValueError):
    """A marker or a quote that names no figure of the data."""


def slug(heading: str) -> str:
    """The anchor mkdocs gives a heading (Python-Markdown's toc slugify)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _data(sets: dict[str, DataSet], name: str) -> DataSet:
    if name not in sets:
        raise FiguresError(f"no data set {name!r} in {DATA} (have {sorted(sets)})")
    return sets[name]


# --- the page's tables ---------------------------------------------------------------------


def tables(text: str, sets: dict[str, DataSet]) -> str:
    """``text`` with each marked table made from its data."""

    def made(match: re.Match[str]) -> str:
        records = selected(_data(sets, match["data"]), match["items"].split())
        body = "\n".join(table_lines(records)) + "\n"
        return match["start"] + body + match["end"]

    return TABLE.sub(made, text)


def sections(text: str, sets: dict[str, DataSet]) -> dict[tuple[str, str], str]:
    """``(data set, row id) -> anchor`` of the section whose table shows the row; a row
    shown in two tables is an error."""
    found: dict[tuple[str, str], str] = {}
    for match in TABLE.finditer(text):
        headings = re.findall(r"^#+ (.*)$", text[: match.start()], re.M)
        anchor = "#" + slug(headings[-1]) if headings else ""
        for record in selected(_data(sets, match["data"]), match["items"].split()):
            key = (match["data"], record["id"])
            if key in found:
                raise FiguresError(f"row {record['id']!r} of {match['data']} is in two tables")
            found[key] = anchor
    return found


def unshown(text: str, sets: dict[str, DataSet]) -> list[str]:
    """The recorded rows that no table of the page shows (each should be shown once)."""
    shown = sections(text, sets)
    return [
        f"{name} {record['id']}"
        for name, data in sets.items()
        for record in data["rows"]
        if (name, record["id"]) not in shown
    ]


# --- quoted figures ------------------------------------------------------------------------


@dataclass(frozen=True)
class Quote:
    """What a quote's title names: a figure of one row of one data set."""

    data: str
    row: str
    what: str

    def values(self, record: Record) -> tuple[float, ...]:
        """The figure's numbers (ratios; a time in seconds, or in the row's unit)."""
        name, _, other = self.what.partition(" / ")
        if other:
            if name != "tinax":
                raise FiguresError(f"{self.what!r}: only tinax's ratio to a contender is kept")
            return (against(record, other)["ratio"],)
        if name.endswith(" (range)"):
            entry = contender(record, name.removesuffix(" (range)"))
            return entry["min"], entry["max"]
        if name.endswith(" (time)"):
            return (contender(record, name.removesuffix(" (time)"))["median"],)
        return (contender(record, name)["ratio"],)


def _rewritten(text: str, values: tuple[float, ...], is_time: bool, unit: str) -> str:
    """``text`` with its numbers replaced by ``values``, each at the precision the text
    gives it (a time in the unit that follows it)."""
    numbers = list(NUMBER.finditer(text))
    if len(numbers) != len(values):
        raise FiguresError(f"{text!r} should hold {len(values)} number(s)")
    pieces, end = [], 0
    for match, value in zip(numbers, values, strict=True):
        if is_time and unit == "s":
            shown_unit = text[match.end() :].split()[0] if text[match.end() :].split() else ""
            if shown_unit not in SECONDS:
                raise FiguresError(f"{text!r}: a time is followed by s, ms or us")
            value /= SECONDS[shown_unit]
        places = len(match[0].partition(".")[2])
        pieces += [text[end : match.start()], f"{value:.{places}f}"]
        end = match.end()
    return "".join(pieces) + text[end:]


def quotes(
    text: str,
    sets: dict[str, DataSet],
    anchors: dict[tuple[str, str], str],
    page_path: Callable[[str], bool],
) -> str:
    """``text`` with the text and anchor of each quote made from the data; a link is a
    quote when its path is the benchmarks page (``page_path``) and it has a title."""

    def made(match: re.Match[str]) -> str:
        if not page_path(match["path"]):
            return match[0]
        title = TITLE.fullmatch(match["title"])
        if title is None:
            raise FiguresError(f"quote title {match['title']!r} is not '<data> <row>: <what>'")
        quote = Quote(title["data"], title["id"], title["what"])
        try:
            record = find(_data(sets, quote.data), quote.row)
            values = quote.values(record)
        except KeyError as error:
            raise FiguresError(f"quote {match[0]!r}: {error.args[0]}") from None
        if (quote.data, quote.row) not in anchors:
            raise FiguresError(f"{match['title']!r}: no table of the page shows that row")
        is_time = quote.what.endswith(" (time)")
        shown = _rewritten(match["text"], values, is_time, record["unit"])
        return f'[{shown}]({match["path"]}{anchors[quote.data, quote.row]} "{match["title"]}")'

    return LINK.sub(made, text)


def quoting_files() -> list[pathlib.Path]:
    """README.md and the docs' pages (the changelog aside: its figures are history)."""
    pages = sorted((ROOT / "docs").rglob("*.md"))
    return [ROOT / "README.md", *(page for page in pages if page.name != "changelog.md")]


def _to_page(source: pathlib.Path) -> Callable[[str], bool]:
    """Whether a link's path, written in ``source``, leads to the benchmarks page."""

    def check(path: str) -> bool:
        if not path:
            return source == PAGE
        return (source.parent / path).resolve() == PAGE

    return check


# --- all of it -----------------------------------------------------------------------------


def made_files(sets: dict[str, DataSet] | None = None) -> dict[pathlib.Path, str]:
    """Each file that the data would change, with its text made from the data."""
    sets = datasets() if sets is None else sets
    page = tables(PAGE.read_text(), sets)
    anchors = sections(page, sets)
    changed: dict[pathlib.Path, str] = {}
    for path in quoting_files():
        old = page if path == PAGE else path.read_text()
        new = quotes(old, sets, anchors, _to_page(path))
        if new != path.read_text():
            changed[path] = new
    return changed


def chart_is_current(sets: dict[str, DataSet] | None = None) -> bool:
    sets = datasets() if sets is None else sets
    drawn = digest(bars(_data(sets, CHART)["rows"]))
    return CHART_PATH.exists() and png_text(CHART_PATH).get(DIGEST_KEY) == drawn


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    options = parser.parse_args(argv)
    sets = datasets()
    stale = [str(path.relative_to(ROOT)) for path in made_files(sets)]
    stale += [] if chart_is_current(sets) else [str(CHART_PATH.relative_to(ROOT))]
    missing = unshown(tables(PAGE.read_text(), sets), sets)
    for row in missing:
        print(f"recorded but in no table of {PAGE.relative_to(ROOT)}: {row}")
    if options.check:
        for path in stale:
            print(f"differs from the data: {path}")
        return 1 if stale or missing else 0
    for path, text in made_files(sets).items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    if not chart_is_current(sets):
        draw(bars(sets[CHART]["rows"]), CHART_PATH)
        print(f"drew {CHART_PATH.relative_to(ROOT)} from {CHART}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
