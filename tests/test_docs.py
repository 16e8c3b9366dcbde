"""The documentation site builds strictly, and its API page shows what the published page shows.

`tests/data/jit-page.txt` is the published API page of `tinax.jit`, as text: the
tests read its signature blocks and its Parameters/Returns/Raises tables and look
for each of them in the page that `mkdocs build` generates from our docstrings.
The site is built once per test session, into a temporary directory.
"""

import ast
import importlib
import pathlib
import re
import time
import tomllib
from html.parser import HTMLParser

import pytest

import tinax
from helpers.processes import Module, run_program
from tinax._src.core.statics import NO_NAMES, UNSPECIFIED
from tinax._src.jit import options

ROOT = pathlib.Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "tests" / "data" / "jit-page.txt"
BUILD_TIMEOUT_S = 300
TABLES = ("Parameters", "Returns", "Raises")

# Keyword-only extensions beyond the page (CONTRACT.md), after the page's parameters,
# with their defaults (the page's behaviour): every other keyword the declaration of the
# options gives each factory, in its order (tests/test_jit_options.py holds the factories
# to that declaration).
_PAGE_KEYWORDS = {
    "bounded_jit": ("max_traces", "static_argnames", "donate_argnames", "mesh"),
    "batched_jit": ("in_axes", "out_axes", "axis_size", "max_traces", "mesh"),
}
_API = {"bounded_jit": "BoundedJit", "batched_jit": "BatchedJit"}


def _shown(default):
    """A default as the page shows it."""
    return {id(NO_NAMES): "()", id(UNSPECIFIED): "UNSPECIFIED"}.get(id(default), repr(default))


EXTENSIONS = {
    factory: {
        name: _shown(options.BY_NAME[name].default)
        for name in options.SIGNATURES[_API[factory]]
        if name not in keywords
    }
    for factory, keywords in _PAGE_KEYWORDS.items()
}

# The decorator form (CONTRACT.md, "Decorator factory"): without a function, a factory
# returns a decorator, as jax.jit(**options) does, so `function` has a default.
DECORATOR_DEFAULT = "DECORATE"

# Where our page knowingly differs from the published one, both in types. The factories
# are annotated with the classes they return, which are callables of the published type
# (`BoundedJit[P, R]` is a `Callable[P, R]`, `BatchedJit[P, R]` a `Callable[..., R]`).
RETURN_TYPES = {
    "bounded_jit": ("Callable[P, R]", "BoundedJit[P, R]"),
    "batched_jit": ("Callable[..., R]", "BatchedJit[P, R]"),
}
# And batched_jit's function is a `Callable[P, R]`, which takes every callable a
# `Callable[..., R]` takes, so that the object keeps its parameter types as `jax.vmap`'s
# do (CONTRACT.md: the factories keep them, `ParamSpec`): (published, ours) per parameter.
PARAMETER_TYPES = {
    ("batched_jit", "function"): ("Callable[..., R]", "Callable[P, R]"),
}


def shown_type(name, parameter, published):
    """The annotation our page shows for a parameter the published page types so."""
    found = PARAMETER_TYPES.get((name, parameter), (published, published))
    assert found[0] == published, f"{name}({parameter}): the published type changed"
    return found[1]


# Where the published prose is false on the JAX we support: jax.jit 0.10.2 raises
# for overlapping and unknown argnames when it wraps, and accepts duplicates silently. Our
# docstring says precisely what tinax adds instead.
PROSE_CORRECTIONS = {
    # The budget is tinax's, not chex's (chex counts per definition site, process-wide).
    "with an exact Chex trace budget": "with an exact trace budget",
    # The budget is tinax's own, per object (chex's is a global counter per definition
    # site), and what is validated when the object is built is its options.
    "wraps jax.jit with a Chex trace budget validated at wrap time, ": (
        "wraps jax.jit with a trace budget, its options validated when the object is built, "
    ),
    "static_argnames/donate_argnames overlap or duplication is caught here; raw jax.jit only "
    "raises on first invocation, which can be arbitrarily deep in a loop. ": (
        "static_argnames/donate_argnames overlap or duplication is caught here. Raw jax.jit "
        "(0.10.2) raises for overlapping and unknown argnames when it wraps too, but accepts "
        'duplicates (("x", "x")), a boolean argnum and a set silently; and it checks an '
        "in_shardings tuple's length, device and backend only on the first call, which can be "
        "arbitrarily deep in a loop: all of these are checked here. "
    ),
    "static_argnames/donate_argnames overlap or duplication is caught immediately, not on an "
    "arbitrary later call.": (
        "static_argnames/donate_argnames overlap or duplication is caught when the object is "
        "built (jax.jit 0.10.2 rejects an overlap when it wraps too, but accepts duplicates "
        "silently), and so are the options jax.jit checks only on a call."
    ),
}


def words(text):
    """Text with every run of whitespace made one space."""
    return " ".join(text.split())


def union_members(annotation):
    """The members of a union annotation, sorted: ``int | None`` equals ``None | int``."""
    parts, depth = [""], 0
    for char in annotation:
        depth += (char in "[(") - (char in "])")
        if char == "|" and depth == 0:
            parts.append("")
        else:
            parts[-1] += char
    return sorted(part.strip() for part in parts)


# --- the published page --------------------------------------------------------------------


def published_cell(text):
    """A cell of the published page's tables: code marks dropped, ``\\|`` unescaped."""
    return words(text.replace("\\|", "|").replace("`", ""))


def parse_published_function(body):
    """One function of the published page: signature, prose paragraphs, tables."""
    signature, *blocks = body.strip("\n").split("\n\n")
    prose, tables = [], {}
    blocks = iter(blocks)
    for block in blocks:
        if block.endswith(":") and block[:-1] in TABLES:
            header, *rows = next(blocks).splitlines()
            columns = header.split("\t")
            tables[block[:-1]] = [
                dict(zip(columns, map(published_cell, row.split("\t")), strict=True))
                for row in rows
            ]
        else:
            prose.append(words(block))
    return {"signature": signature, "prose": prose, "tables": tables}


def parse_published_page():
    intro, *sections = re.split(r"^(\w+) ¶$", PUBLISHED.read_text(), flags=re.MULTILINE)
    functions = {
        name: parse_published_function(body)
        for name, body in zip(sections[::2], sections[1::2], strict=True)
    }
    _title, *paragraphs = intro.strip("\n").split("\n\n")
    return [words(paragraph) for paragraph in paragraphs], functions


INTRO, FUNCTIONS = parse_published_page()


def published_rows(table):
    return [
        pytest.param(name, row, id=f"{name}-{row.get('Name', row['Type'])}")
        for name, function in FUNCTIONS.items()
        for row in function["tables"][table]
    ]


# --- the generated page --------------------------------------------------------------------


class ApiPage(HTMLParser):
    """Collects, per documented object (heading id), its signature, tables and text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.objects = {}
        self.text = []
        self._object = None
        self._capture = None  # "signature", "section" or "cell" while inside one
        self._buffer = []
        self._section = None
        self._row = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if "doc-heading" in classes and attributes.get("id"):
            self._object = self.objects.setdefault(
                attributes["id"], {"signature": "", "tables": {}, "text": []}
            )
            self._section = None
        elif self._object is None:
            return
        elif tag == "div" and "doc-signature" in classes:
            self._start("signature")
        elif tag == "span" and "doc-section-title" in classes:
            self._start("section")
        elif tag == "tr":
            self._row = []
        elif tag == "td":
            self._start("cell")

    def handle_endtag(self, tag):
        if self._capture == "signature" and tag == "pre":
            self._object["signature"] = self._stop()
        elif self._capture == "section" and tag == "span":
            self._section = words(self._stop()).rstrip(":")
        elif self._capture == "cell" and tag == "td":
            self._row.append(words(self._stop()))
        elif tag == "tr" and self._row:
            self._object["tables"].setdefault(self._section, []).append(self._row)
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._object is not None:
            self._object["text"].append(data)
        if self._capture is not None:
            self._buffer.append(data)

    def _start(self, capture):
        self._capture, self._buffer = capture, []

    def _stop(self):
        text = "".join(self._buffer)
        self._capture, self._buffer = None, []
        return text


def signature_parts(signature):
    """``(parameters, return annotation)`` of a signature block, whatever its line breaks."""
    head, _, returns = words(signature).rpartition(") -> ")
    inside = head.partition("(")[2]
    parameters, depth, current = [], 0, ""
    for char in inside:
        depth += (char in "[(") - (char in "])")
        if char == "," and depth == 0:
            parameters.append(current.strip())
            current = ""
        else:
            current += char
    parameters.append(current.strip())
    return [parameter for parameter in parameters if parameter], returns.strip()


def parameter_parts(parameter):
    """``(name, annotation members, default)`` of one ``name: type = default``."""
    name, _, rest = parameter.partition(":")
    annotation, _, default = rest.partition(" = ")
    return name.strip(), union_members(annotation), default.strip()


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """``mkdocs build --strict`` into a temporary directory, once for this module."""
    site = tmp_path_factory.mktemp("site")
    started = time.perf_counter()
    result = run_program(
        Module("mkdocs"),
        *("build", "--strict", "--site-dir", site),
        cwd=ROOT,
        env={"NO_MKDOCS_2_WARNING": "1"},
        timeout=BUILD_TIMEOUT_S,
        returncode=None,
    )
    return site, result, time.perf_counter() - started


@pytest.fixture(scope="module")
def site(build):
    site, result, _ = build
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    return site


@pytest.fixture(scope="module")
def jit_page(site):
    page = ApiPage()
    page.feed((site / "api" / "jit" / "index.html").read_text())
    return page


def generated(jit_page, name):
    assert f"tinax.jit.{name}" in jit_page.objects, f"{name} is not documented on the page"
    return jit_page.objects[f"tinax.jit.{name}"]


def generated_row(jit_page, name, table, first_cell):
    rows = generated(jit_page, name)["tables"].get(table, [])
    matches = [row for row in rows if row[0] == first_cell]
    assert len(matches) == 1, f"{name}: no single {table} row {first_cell!r} in {rows}"
    return matches[0]


class TestBuild:
    def test_mkdocs_build_succeeds_when_strict(self, build):
        _, result, _ = build
        assert result.returncode == 0, result.stderr

    @pytest.mark.parametrize(
        "page",
        [
            "index.html",
            "api/jit/index.html",
            "api/parallel/index.html",
            "api/testing/index.html",
            "debugging-retraces/index.html",
            "migrating-from-pmap/index.html",
            "porting/index.html",
            "serving/index.html",
            "property-tests/index.html",
            "benchmarks/index.html",
            "decisions/index.html",
            "changelog/index.html",
        ],
    )
    def test_every_page_of_the_nav_is_built(self, site, page):
        assert (site / page).is_file()

    def test_changelog_page_shows_the_changelog(self, site):
        page = ApiPage()
        page.feed((site / "changelog" / "index.html").read_text())
        text = words(" ".join(page.text))
        assert f"[{tinax.__version__}]" in text
        assert "Keep a Changelog" in text


class TestPublishedJitPage:
    """Every row of the published page's tables, and its signatures, on our page."""

    def test_published_page_was_parsed_when_read(self):
        assert set(FUNCTIONS) == {"bounded_jit", "batched_jit"}
        for function in FUNCTIONS.values():
            assert set(function["tables"]) == set(TABLES)
            assert all(function["tables"].values())

    @pytest.mark.parametrize("paragraph", INTRO, ids=lambda paragraph: paragraph[:30])
    def test_module_intro_paragraph_is_shown(self, jit_page, paragraph):
        for false, true in PROSE_CORRECTIONS.items():
            paragraph = paragraph.replace(false, true)
        assert paragraph in words("".join(jit_page.text))

    @pytest.mark.parametrize("name", FUNCTIONS)
    def test_summary_and_why_paragraphs_are_shown(self, jit_page, name):
        text = words("".join(generated(jit_page, name)["text"]))
        for paragraph in FUNCTIONS[name]["prose"]:
            for false, true in PROSE_CORRECTIONS.items():
                paragraph = paragraph.replace(false, true)
            assert paragraph in text

    @pytest.mark.parametrize("name", FUNCTIONS)
    def test_signature_lists_the_published_parameters_in_order(self, jit_page, name):
        ours, _ = signature_parts(generated(jit_page, name)["signature"])
        published, _ = signature_parts(FUNCTIONS[name]["signature"])
        shown = [parameter_parts(p) for p in ours]
        expected = [parameter_parts(p) for p in published]
        function, annotation, _ = expected[0]
        annotation = union_members(shown_type(name, function, " | ".join(annotation)))
        assert shown[0] == (function, annotation, DECORATOR_DEFAULT)
        assert shown[1 : len(published)] == expected[1:]
        # Then the extensions, each defaulting to the page's behaviour (CONTRACT.md).
        extensions = [(n, d) for n, _, d in shown[len(published) :]]
        assert extensions == list(EXTENSIONS[name].items())

    @pytest.mark.parametrize("name", FUNCTIONS)
    def test_signature_shows_one_parameter_per_line(self, jit_page, name):
        ours = generated(jit_page, name)["signature"].strip().splitlines()
        published = FUNCTIONS[name]["signature"].strip().splitlines()
        expected = len(published) + len(EXTENSIONS[name])
        assert len(ours) == expected, "signatures are formatted by ruff: is it installed?"

    @pytest.mark.parametrize("name", FUNCTIONS)
    def test_signature_returns_the_published_type_or_its_wrapper_class(self, jit_page, name):
        _, ours = signature_parts(generated(jit_page, name)["signature"])
        _, published = signature_parts(FUNCTIONS[name]["signature"])
        assert (published, ours) == RETURN_TYPES[name]

    @pytest.mark.parametrize(("name", "row"), published_rows("Parameters"))
    def test_parameter_row_is_shown(self, jit_page, name, row):
        _, annotation, description, default = generated_row(
            jit_page, name, "Parameters", row["Name"]
        )
        expected = shown_type(name, row["Name"], row["Type"])
        assert union_members(annotation) == union_members(expected)
        assert row["Description"] in description
        assert default == (DECORATOR_DEFAULT if row["Name"] == "function" else row["Default"])

    @pytest.mark.parametrize(("name", "row"), published_rows("Returns"))
    def test_returns_row_is_shown(self, jit_page, name, row):
        (annotation, description), *others = generated(jit_page, name)["tables"]["Returns"]
        assert not others
        assert (row["Type"], annotation) == RETURN_TYPES[name]
        assert row["Description"] in description

    @pytest.mark.parametrize(("name", "row"), published_rows("Raises"))
    def test_raises_row_is_shown_when_ours_adds_more_conditions(self, jit_page, name, row):
        _, description = generated_row(jit_page, name, "Raises", row["Type"])
        assert row["Description"] in description


class TestVersion:
    def test_version_matches_pyproject(self):
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        assert tinax.__version__ == project["version"]

    def test_version_is_the_top_heading_of_the_changelog(self):
        headings = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
        assert headings, "CHANGELOG.md has no version heading"
        assert headings[0] == tinax.__version__


def test_every_design_note_is_linked_from_a_guide():
    """The notes of docs/decisions/ say why; a reader reaches each from the guide (or the
    architecture page) about its topic, not only from their index."""
    docs = ROOT / "docs"
    guides = "\n".join(
        page.read_text() for page in sorted(docs.glob("*.md")) if page.name != "changelog.md"
    )
    notes = sorted(note.name for note in (docs / "decisions").glob("*.md"))
    assert len(notes) > 20
    unlinked = [name for name in notes if name != "index.md" and f"(decisions/{name}" not in guides]
    assert unlinked == []


# --- the benchmarks page ---------------------------------------------------------------------

BENCHMARKS_PAGE = ROOT / "docs" / "benchmarks.md"


def _run_rows():
    """The row keys `benchmarks/run.py` runs (its ``ROWS``), read from its source."""
    for node in ast.parse((ROOT / "benchmarks" / "run.py").read_text()).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "ROWS":
            return {key.value for key in node.value.keys}
    raise AssertionError("benchmarks/run.py has no ROWS")


def _outside_parentheses(text):
    depth, kept = 0, []
    for char in text:
        depth += char == "("
        if depth == 0:
            kept.append(char)
        depth -= char == ")" and depth > 0
    return "".join(kept)


def test_the_benchmarks_page_names_every_row_of_run_py_and_no_other():
    """The page's table of families lists each row key once (its descriptions, in
    parentheses, aside), and those are the keys `benchmarks/run.py` runs."""
    page = BENCHMARKS_PAGE.read_text()
    table = page[page.index("| Family | Rows |") :].split("\n\n")[0].splitlines()[2:]
    named = [
        key
        for line in table
        for key in re.findall(r"`([^`]+)`", _outside_parentheses(line.split("|")[2]))
    ]
    assert sorted(named) == sorted(_run_rows())


def _benchmarks_module(monkeypatch, name):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module(name)


def test_the_recorded_serving_rows_are_the_rows_the_family_makes(monkeypatch):
    """The recorded rows of the serving key are the serving family's rows of a full run,
    each with its contenders in the family's order."""
    results = _benchmarks_module(monkeypatch, "results")
    serving = _benchmarks_module(monkeypatch, "families.serving")
    sizes = tinax.jit.bucket_sizes(serving.FLOOR, serving.CEILING, gap=serving.GAP)
    expected = serving.row_names(serving.REQUESTS, serving.BLOCK, len(sizes))
    recorded = results.selected(results.datasets()["cpu-jax-0.10.2"], ["serving"])
    quoted = {
        record["name"]: [entry["name"] for entry in record["contenders"]] for record in recorded
    }
    assert quoted == {row: list(contenders) for row, contenders in expected.items()}


class TestBenchmarkFigures:
    """Every benchmark figure the docs show is made from the recorded data
    (benchmarks/data/, by benchmarks/figures.py): the page's tables, the figures README
    and the guides quote, and the chart."""

    def test_page_tables_and_quoted_figures_are_those_of_the_data(self, monkeypatch):
        figures = _benchmarks_module(monkeypatch, "figures")
        stale = sorted(str(path.relative_to(ROOT)) for path in figures.made_files())
        assert stale == [], "run: python benchmarks/figures.py"

    def test_every_recorded_row_is_in_one_table_of_the_page(self, monkeypatch):
        figures = _benchmarks_module(monkeypatch, "figures")
        sets = figures.datasets()
        assert figures.unshown(BENCHMARKS_PAGE.read_text(), sets) == []

    def test_the_chart_is_drawn_from_the_data(self, monkeypatch):
        figures = _benchmarks_module(monkeypatch, "figures")
        assert figures.chart_is_current(), "run: python benchmarks/figures.py"

    def test_recorded_rows_are_full_runs_of_rows_run_py_runs(self, monkeypatch):
        results = _benchmarks_module(monkeypatch, "results")
        for name, data in results.datasets().items():
            assert name == results.dataset_name(data["platform"], data["jax"])
            for record in data["rows"]:
                assert results.key_of(record["id"]) in _run_rows(), record["id"]
                assert not record.get("quick"), f"{name} {record['id']}: a --quick run"

    def test_a_page_quote_reads_its_figure_at_its_own_precision(self, monkeypatch):
        figures = _benchmarks_module(monkeypatch, "figures")
        sets = {"d": _one_row_data()}
        text = (
            'a [1.20x](benchmarks.md#old "d r: tinax"), [0.4](benchmarks.md "d r: tinax / other"),'
            ' [1.0 to 1.3](benchmarks.md "d r: tinax (range)"), [9 ms](benchmarks.md "d r: base'
            ' (time)"), [1.2x](serving.md "d r: tinax"), [1.2x](benchmarks.md)'
        )
        made = figures.quotes(
            text, sets, {("d", "r"): "#results"}, lambda path: path != "serving.md"
        )
        assert made == (
            'a [1.03x](benchmarks.md#results "d r: tinax"), [0.2](benchmarks.md#results "d r:'
            ' tinax / other"), [0.9 to 1.1](benchmarks.md#results "d r: tinax (range)"), [4 ms]'
            '(benchmarks.md#results "d r: base (time)"), [1.2x](serving.md "d r: tinax"),'
            " [1.2x](benchmarks.md)"
        )

    @pytest.mark.parametrize(
        ("title", "text"),
        [
            ("d nope: tinax", "1.0"),  # no such row
            ("d r: chex", "1.0"),  # no such contender
            ("d r: tinax / chex", "1.0"),  # no such ratio recorded
            ("d r: tinax", "1.0 to 1.1"),  # two numbers for one figure
            ("d r: tinax (median)", "1.0"),  # no such field (nor contender)
            ("dr tinax", "1.0"),  # not '<data> <row>: <what>'
        ],
    )
    def test_a_quote_that_names_no_figure_is_an_error(self, monkeypatch, title, text):
        figures = _benchmarks_module(monkeypatch, "figures")
        with pytest.raises(figures.FiguresError):
            figures.quotes(
                f'[{text}](benchmarks.md "{title}")',
                {"d": _one_row_data()},
                {("d", "r"): "#results", ("d", "nope"): "#results"},
                lambda path: True,
            )

    def test_a_table_marker_makes_its_rows_table(self, monkeypatch):
        figures = _benchmarks_module(monkeypatch, "figures")
        text = "## Results\n\n<!-- figures: table d: r -->\nstale\n<!-- figures: end -->\n"
        made = figures.tables(text, {"d": _one_row_data()})
        assert made.splitlines()[3:] == [
            "| row | contender | median | ratio (median) | min | max | target |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- |",
            "| a row | base | 4.000 ms | 1.000 | 1.000 | 1.000 |  |",
            "| a row | tinax | 4.1 us | 1.034 | 0.948 | 1.129 | <= 1.03: missed |",
            "| a row | other | 20.0 us | 5.000 | 4.000 | 6.000 | "
            "tinax / this: 0.206, <= 0.50: met |",
            "<!-- figures: end -->",
        ]
        assert figures.sections(made, {"d": _one_row_data()}) == {("d", "r"): "#results"}

    def test_a_run_recorded_replaces_its_keys_rows_and_keeps_the_others(self, monkeypatch):
        results = _benchmarks_module(monkeypatch, "results")
        held = {"jax": "0.10.2", "rows": [{"id": "a"}, {"id": "b.1"}, {"id": "b.2"}, {"id": "c"}]}
        new = [{"id": "b", "new": True}, {"id": "d", "new": True}]
        made = results.merged(held, new, ["d", "a", "b", "c"])
        assert [(row["id"], row.get("new", False)) for row in made["rows"]] == [
            ("d", True),
            ("a", False),
            ("b", True),
            ("c", False),
        ]
        assert made["jax"] == "0.10.2"


def _one_row_data():
    contenders = [
        {"name": "base", "median": 4e-3, "ratio": 1.0, "min": 1.0, "max": 1.0},
        {"name": "tinax", "median": 4.1e-6, "ratio": 1.034, "min": 0.948, "max": 1.129},
        {"name": "other", "median": 2e-5, "ratio": 5.0, "min": 4.0, "max": 6.0},
    ]
    return {
        "rows": [
            {
                "id": "r",
                "name": "a row",
                "unit": "s",
                "baseline": "base",
                "target": 1.03,
                "contenders": contenders,
                "against": [{"contender": "other", "ratio": 0.206, "target": 0.5}],
            }
        ]
    }


def _prose(text):
    """``text`` without its fenced blocks and inline code: what a reader reads as claims."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.DOTALL))


_FIGURE = re.compile(r"(?<![\d.\w])\d\.\d{3}(?![\d.\w])|(?<![\d.\w])\d\.\d{2}x(?!\w)")
"""A benchmark figure as the docs write one: a ratio to three places, or ``1.03x``."""


def test_every_figure_in_the_benchmarks_prose_is_in_one_of_its_tables():
    """The tables are the runs' results, pasted; the text around them quotes them and
    nothing else, so that a figure lives in one place (a rerun, another JAX, a figure of
    before lives in a table of its own, or not on the page)."""
    page = _prose((ROOT / "docs" / "benchmarks.md").read_text())
    in_tables = {
        figure
        for line in page.splitlines()
        if line.startswith("|")
        for figure in re.findall(r"\d+\.\d+", line)
    }
    quoted = [
        (figure, line.strip())
        for line in page.splitlines()
        if not line.startswith("|")
        for figure in _FIGURE.findall(line)
    ]
    assert quoted, "the benchmarks page quotes no figure: the check reads nothing"
    assert [(figure, line) for figure, line in quoted if figure not in in_tables] == []


@pytest.mark.parametrize(
    "page",
    [
        "README.md",
        *(
            str(path.relative_to(ROOT))
            for path in sorted((ROOT / "docs").glob("**/*.md"))
            if path.name not in ("benchmarks.md", "changelog.md") and "decisions" not in path.parts
        ),
    ],
)
def test_a_guide_quotes_no_benchmark_figure_of_its_own(page):
    """A guide names the benchmarks page's row instead of copying its figure, which would
    go stale apart from it (design notes record the figures a decision was made on)."""
    text = _prose((ROOT / page).read_text())
    assert [line.strip() for line in text.splitlines() if _FIGURE.search(line)] == []
