"""Every Python block of the README and of docs/ runs as a newcomer pastes it: each page
as one session, in a fresh interpreter with 8 CPU devices, block after block, in a
temporary working directory; a ``text`` block right after a block that prints shows
what it printed (tests/programs/doc_page.py, on sybil)."""

import pytest

from helpers.processes import PROGRAMS, ROOT, run_program

PAGES = [
    page
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    if "```python\n" in page.read_text()
]


def test_the_pages_with_python_blocks_are_found():
    assert {"README.md", "docs/serving.md", "docs/api/jit.md"} <= {
        page.relative_to(ROOT).as_posix() for page in PAGES
    }


@pytest.mark.parametrize("page", PAGES, ids=[page.relative_to(ROOT).as_posix() for page in PAGES])
def test_every_python_block_of_the_page_runs_as_one_session(page, tmp_path):
    blocks = page.read_text().count("```python\n")
    done = run_program(PROGRAMS / "doc_page.py", page, cwd=tmp_path, timeout=120)
    assert done.stderr.count("ran the block at line") == blocks, done.stderr[-3000:]
