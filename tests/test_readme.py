"""README.md, as a newcomer reads it: every Python block runs as written, alone, in a fresh
interpreter; the example's error is the one it prints; the set-up commands are CI's."""

import os
import re
from pathlib import Path

import pytest

from helpers.processes import PIPE, STDOUT, Module, run_program, start_program

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FIRST_SCREEN = 40  # lines


def blocks(language):
    """The ``language`` code blocks of the README: (first line number, content)."""
    return [
        (README.count("\n", 0, match.start(1)) + 1, match.group(1))
        for match in re.finditer(rf"^```{language}\n(.*?)^```$", README, re.M | re.S)
    ]


def run_alone(code, tmp_path, returncode=0):
    """Runs ``code`` as ``example.py`` in a fresh interpreter, in ``tmp_path``, with 8 CPU
    devices, as the README's reader would (no test's setup, no TINAX_ variable); the test
    fails unless it exits with ``returncode``."""
    (tmp_path / "example.py").write_text(code)
    return run_program(tmp_path / "example.py", cwd=tmp_path, returncode=returncode)


PYTHON = blocks("python")


def test_the_readme_is_short_and_its_example_and_output_are_on_the_first_screen():
    assert len(README.splitlines()) < 160
    (example_line, _), *_ = PYTHON
    (output_line, output), *_ = blocks("text")
    assert example_line < output_line
    assert output_line + len(output.splitlines()) - 1 <= FIRST_SCREEN


def test_the_example_raises_the_error_the_readme_shows(tmp_path):
    (_, example), *_ = PYTHON
    (_, shown), *_ = blocks("text")
    done = run_alone(example, tmp_path, returncode=1)
    printed = done.stderr.splitlines()
    start = printed.index(shown.splitlines()[0])
    assert printed[start : start + len(shown.splitlines())] == shown.splitlines()


@pytest.mark.parametrize(
    "code", [code for _, code in PYTHON[1:]], ids=[f"line-{line}" for line, _ in PYTHON[1:]]
)
def test_every_other_python_block_runs_alone_and_prints_what_its_comments_say(code, tmp_path):
    done = run_alone(code, tmp_path)
    # A block's `print(...)  # shown: text` lines say what the print shows.
    claimed = re.findall(r"^print\(.*\)\s+# (\S+):", code, re.M)
    assert done.stdout.split() == claimed


def test_the_test_command_is_the_one_ci_runs():
    commands = [code.strip() for _, code in blocks("sh")]
    [test_command] = [command for command in commands if "pytest" in command]
    assert test_command in (ROOT / ".ci" / "run").read_text()
    assert "examples/quickstart.py" in commands[commands.index(test_command) - 1]


def test_the_test_commands_workers_collect_the_same_tests_whatever_their_hash_seed():
    """The test command runs pytest-xdist workers, which refuse to run unless each
    collected the same test ids; a test id made from a set's repr follows its strings'
    hashes, seeded per process. Two collections with two seeds must agree."""
    env = {name: None for name in os.environ if name.startswith("PYTEST_")}
    runs = [
        start_program(
            Module("pytest"),
            *("--collect-only", "-q", "-p", "no:cacheprovider"),
            cwd=ROOT,
            env={**env, "PYTHONHASHSEED": seed},
            stdout=PIPE,
            stderr=STDOUT,
        )
        for seed in ("1", "2")
    ]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    ids = [[line for line in out.splitlines() if "::" in line] for out in outputs]
    assert len(ids[0]) > 3000, outputs[0][-2000:]
    assert ids[0] == ids[1], sorted(set(ids[0]) ^ set(ids[1]))[:10]
    # An address differs from process to process whatever the seed (and a cut one, in
    # its first digits, only sometimes): no id may hold one.
    assert [test for test in ids[0] if re.search(r" at 0x|0x[0-9a-f]{6,}", test)] == []


def slug(heading):
    """The anchor mkdocs (and GitHub) give a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("link", sorted(set(re.findall(r"\]\(([^)#:]+)(#[^)]*)?\)", README))))
def test_every_link_leads_to_a_file_and_heading_that_exist(link):
    path, anchor = link
    target = ROOT / path
    assert target.exists(), path
    if anchor:
        headings = re.findall(r"^#+ (.*)$", target.read_text(), re.M)
        assert anchor[1:] in {slug(heading) for heading in headings}, link
