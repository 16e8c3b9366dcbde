"""A documentation page shows a program's real output: each section the program prints
(a ``=== title`` line, then its text) is the page's next ``text`` code block."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from helpers.processes import ROOT


def text_blocks(page: str) -> list[tuple[int, int]]:
    """The ``text`` code blocks of a markdown page, in order, as (start, end) offsets of
    their content (empty blocks included)."""
    return [match.span(1) for match in re.finditer(r"```text\n(.*?)\n?```", page, re.DOTALL)]


def untimed(text: str) -> str:
    """``text`` with durations (trace and compile times differ per run) masked, and runs of
    spaces made one."""
    text = re.sub(r"\d+(\.\d+)? (us|ms|s)\b", "<time>", text)
    return re.sub(r" +", " ", text)  # the timing columns widen with the figures


def assert_page_shows(
    out: str,
    page_name: str,
    count: int,
    *,
    section: str | None = None,
    normalize: Callable[[str], object] = lambda text: text,
) -> None:
    """Each section an example printed (``=== title`` lines) is the next ``text`` block of
    the page (or of its ``## section``), verbatim after ``normalize``. With
    ``TINAX_REGENERATE_DOCS=1`` the output is written into the page instead (then check
    the diff and commit it)."""
    path = ROOT / "docs" / page_name
    page = path.read_text()
    start, end = 0, len(page)
    if section is not None:
        start = page.index(f"\n## {section}\n")
        following = page.find("\n## ", start + 1)
        end = len(page) if following < 0 else following
    sections = [part.partition("\n") for part in out.split("\n=== ")[1:]]
    blocks = [(a + start, b + start) for a, b in text_blocks(page[start:end])]
    assert len(sections) == len(blocks) == count
    if os.environ.get("TINAX_REGENERATE_DOCS") == "1":
        for (a, b), (_, _, body) in reversed(list(zip(blocks, sections, strict=True))):
            page = page[:a] + body.rstrip() + page[b:]
        path.write_text(page)
        return
    for (a, b), (title, _, body) in zip(blocks, sections, strict=True):
        shown, printed = normalize(page[a:b]), normalize(body.rstrip())
        assert shown == printed, f"section {title!r} is out of date"
