"""README.md, as a newcomer reads it: every Python block runs as written, alone, in a fresh
interpreter; the example's error is the one it prints; the set-up commands are CI's."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FIRST_SCREEN = 40  # lines


def blocks(language):
    """The ``language`` code blocks of the README: (first line number, content)."""
    return [
        (README.count("\n", 0, match.start(1)) + 1, match.group(1))
        for match in re.finditer(rf"^```{language}\n(.*?)^```$", README, re.M | re.S)
    ]


def run_alone(code, tmp_path):
    """Runs ``code`` as ``example.py`` in a fresh interpreter, in ``tmp_path``, with 8 CPU
    devices, as the README's reader would (no test's setup, no TINAX_ variable)."""
    (tmp_path / "example.py").write_text(code)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_"))}
    environment["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    environment["JAX_PLATFORMS"] = "cpu"
    return subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


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
    done = run_alone(example, tmp_path)
    assert done.returncode == 1, done.stderr
    printed = done.stderr.splitlines()
    start = printed.index(shown.splitlines()[0])
    assert printed[start : start + len(shown.splitlines())] == shown.splitlines()


@pytest.mark.parametrize(
    "code", [code for _, code in PYTHON[1:]], ids=[f"line-{line}" for line, _ in PYTHON[1:]]
)
def test_every_other_python_block_runs_alone_and_prints_what_its_comments_say(code, tmp_path):
    done = run_alone(code, tmp_path)
    assert done.returncode == 0, done.stderr
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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONHASHSEED"))}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    runs = [
        subprocess.Popen(
            command,
            cwd=ROOT,
            env={**env, "PYTHONHASHSEED": seed},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
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
