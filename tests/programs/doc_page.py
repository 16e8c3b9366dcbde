"""Runs the Python blocks of one Markdown page, in order, as one session: what a block
defines, the later blocks of the page use. Usage: ``python doc_page.py PAGE``.

sybil parses the page and keeps one namespace per document; on top of its code-block
parser, the evaluators here check that a ``text`` block right after a Python block shows
what that block printed (addresses and durations masked), or the exception it raised.
A text block after a block that prints nothing, or on a page whose outputs an example
printed, shows an example's output, which tests/test_examples.py and the tests of its
subject check. Prints one line per Python block run; exits non-zero at
the first failure.
"""

import contextlib
import io
import re
import sys
import textwrap
from pathlib import Path

from sybil import Example, Sybil
from sybil.evaluators.python import pad
from sybil.parsers.markdown import CodeBlockParser

PENDING = "_doc_page_pending"  # in the document's namespace: (output, exception) unshown
# A page whose outputs an example printed says so; tests/test_examples.py (and the tests of
# its subject) keep those text blocks equal to that example's output.
FROM_AN_EXAMPLE = re.compile(r"^Every output (on this page|below) was produced by `examples/", re.M)


def masked(text: str) -> str:
    """``text`` with what changes from run to run masked: addresses, durations, and the
    file and line of the code (a page shows them as ``example.py:4``)."""
    text = re.sub(r"0x[0-9a-f]+", "0x…", text)
    text = re.sub(r"[\w./-]+\.(py|md):\d+", "<where>", text)
    return re.sub(r"\d+(\.\d+)? ?(us|ms|s|µs)\b", "<time>", text).strip()


def unshown(example: Example) -> None:
    """Raises the exception an earlier block raised that no text block showed."""
    _, error = example.namespace.pop(PENDING, ("", None))
    if error is not None:
        raise error


def run_python(example: Example) -> None:
    unshown(example)
    out, error = io.StringIO(), None
    with contextlib.redirect_stdout(out):
        try:
            source = pad(example.parsed, example.line + example.parsed.line_offset)
            exec(compile(source, example.path, "exec"), example.namespace)
        except Exception as raised:  # shown by the next text block, or raised then
            error = raised
    sys.stdout.write(out.getvalue())
    example.namespace[PENDING] = (out.getvalue(), error)
    print(f"ran the block at line {example.line}", file=sys.stderr)


def check_text(example: Example) -> None:
    output, error = example.namespace.pop(PENDING, ("", None))
    if FROM_AN_EXAMPLE.search(example.document.text):
        output = ""  # the example's output: its test compares it
    shown = example.parsed
    if error is not None:
        name = type(error).__name__
        assert re.search(rf"^([\w.]+\.)?{name}: ", shown, re.M), (
            f"line {example.line}: the block before raised {name}: {error}; this shows:\n{shown}"
        )
    elif output:  # the text shows the output, or a run of its lines ("the error prints:")
        assert f"\n{masked(shown)}\n" in f"\n{masked(output)}\n", (
            f"line {example.line} shows:\n{textwrap.indent(shown, '  ')}\n"
            f"the block before printed:\n{textwrap.indent(output, '  ')}"
        )


def main(page: str) -> None:
    sybil = Sybil(
        parsers=[
            CodeBlockParser(language="python", evaluator=run_python),
            CodeBlockParser(language="text", evaluator=check_text),
        ]
    )
    document = sybil.parse(Path(page))
    document.namespace["__name__"] = "__main__"
    for example in document:
        example.evaluate()
    _, error = document.namespace.pop(PENDING, ("", None))
    if error is not None:
        raise error


if __name__ == "__main__":
    main(sys.argv[1])
