"""The repository's layout, beyond src's layers (those are tests/test_architecture.py's):
the tests run every program through one helper, `helpers.processes`; code, tests and pages
are named and described by their idea, never by the number of the issue that brought them."""

import ast
import re

import pytest

from helpers.processes import ROOT, run_program

TESTS = ROOT / "tests"
RUNNER = TESTS / "helpers" / "processes.py"

# What starts a process: a call of one of these (module, function) pairs, or an import of one.
STARTERS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput"}
    | {"getstatusoutput"},
    "os": {"system", "popen", "execv", "execve", "execvp", "spawnv", "posix_spawn"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
}
# The places allowed to start one, with why: (file under tests/, "module.function").
ALLOWED = {
    # The suite's own check that no test wrote into the checkout: git, not a Python program.
    ("conftest.py", "subprocess.run"),
}


def process_starts(path):
    """The ``module.function`` process starts in one file, as (line, name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in STARTERS.get(node.value.id, ()):
                found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module in STARTERS:
            for alias in node.names:
                if alias.name in STARTERS[node.module]:
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
    return found


def test_only_the_helper_starts_a_process():
    """Every program a test runs goes through `run_program` or `start_program`, which give it
    the tests' environment and show its output when it fails."""
    found = [
        f"tests/{path.relative_to(TESTS)}:{line}: {name}"
        for path in sorted(TESTS.rglob("*.py"))
        if path != RUNNER
        for line, name in process_starts(path)
        if (str(path.relative_to(TESTS)), name) not in ALLOWED
    ]
    assert found == [], "use helpers.processes.run_program:\n" + "\n".join(found)


def test_the_check_finds_each_way_of_starting_a_process(tmp_path):
    """The check above would see a start if one were added (so its empty answer means it)."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import os, subprocess\n"
        "from subprocess import check_output\n"
        "subprocess.run(['true'])\n"
        "subprocess.Popen(['true'])\n"
        "os.system('true')\n"
        "subprocess.PIPE\n"
    )
    assert process_starts(planted) == [
        (2, "subprocess.check_output"),
        (3, "subprocess.run"),
        (4, "subprocess.Popen"),
        (5, "os.system"),
    ]
    assert {name for _, name in process_starts(RUNNER)} == {"subprocess.run", "subprocess.Popen"}


class TestRunProgram:
    def test_a_failing_program_fails_the_test_showing_its_status_stdout_and_stderr(self):
        code = "import sys; print('the stdout'); sys.exit('the stderr')"
        with pytest.raises(pytest.fail.Exception) as failure:
            run_program(code)
        message = str(failure.value)
        assert "exited with status 1, not 0" in message
        assert "--- stdout ---\nthe stdout\n" in message
        assert "--- stderr ---\nthe stderr\n" in message
        assert run_program(code, returncode=1).stdout == "the stdout\n"

    def test_a_program_past_its_time_fails_the_test_showing_its_output(self):
        code = "import time; print('started', flush=True); time.sleep(60)"
        with pytest.raises(pytest.fail.Exception) as failure:
            run_program(code, timeout=5)
        assert "ran past its 5 s" in str(failure.value)
        assert "started" in str(failure.value)

    def test_the_program_gets_this_checkout_cpu_devices_and_no_tinax_variable(self, monkeypatch):
        monkeypatch.setenv("TINAX_ON_EXCEED", "warn")
        monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/nowhere")
        code = (
            "import os, sys, tinax; "
            "print(os.environ.get('XLA_FLAGS'), os.environ['JAX_PLATFORMS'], "
            "'TINAX_ON_EXCEED' in os.environ, os.environ.get('SET'), "
            "sys.path[1:3] == [os.path.join(os.environ['ROOT'], p) for p in ('src', 'tests')], "
            "tinax.__file__.startswith(os.path.join(os.environ['ROOT'], 'src')))"
        )
        env = {"ROOT": str(ROOT), "SET": "yes"}
        assert run_program(code, env=env).stdout.split() == [
            "--xla_force_host_platform_device_count=8",
            "cpu",
            "False",
            "yes",
            "True",
            "True",
        ]
        assert run_program(code, env=env, devices=None).stdout.split()[0] == "None"
        assert run_program(code, env={**env, "SET": None}).stdout.split()[3] == "None"


# --- named by idea, not by issue number ----------------------------------------------------

# The word for an issue (either case, singular or plural) followed by its number, also as a
# page anchor; a number after "#" in parentheses; a pull request's abbreviation and its
# number. Not the numbered traces of tinax's own messages ("#1", "(#2, #3)"), nor another
# project's issue links ("jax#39289", ".../issues/39289").
ISSUE_NUMBER = re.compile(r"\b[Ii]ssues?[ _-]?#?\d+|\(#\d+\)|\b(?:PR|[Pp]ull request) ?#?\d+")
SEARCHED = ("src", "tests", "benchmarks", "examples", "docs", "README.md")
# The history has its own place: the changelog.
HISTORY = ("CHANGELOG.md", "docs/changelog.md")
TEXT = {".py", ".md", ".txt", ".toml", ".yml", ".yaml", ".cfg", ".json", ".sh"}


def issue_numbers(root):
    """Every line under ``root``'s searched places (history aside) naming an issue number:
    {(file relative to ``root``, the words naming it): the lines, stripped}."""
    found = {}
    for place in SEARCHED:
        paths = [root / place] if (root / place).is_file() else sorted((root / place).rglob("*"))
        for path in paths:
            relative = path.relative_to(root).as_posix()
            if path.suffix not in TEXT or "__pycache__" in relative or not path.is_file():
                continue
            if relative.startswith(HISTORY):
                continue  # the history's own places
            for line in path.read_text(errors="replace").splitlines():
                for match in ISSUE_NUMBER.finditer(line):
                    found.setdefault((relative, match.group()), []).append(line.strip())
    return found


def test_no_line_names_an_issue_number():
    """A reader learns what a test, comment or page is about from its words; the issue that
    brought it is history (the changelog's)."""
    found = issue_numbers(ROOT)
    named = [f"{key[0]}: {line}" for key in sorted(found) for line in found[key]]
    assert named == [], "reword by idea:\n" + "\n".join(named)


def test_the_issue_number_check_finds_each_spelling(tmp_path):
    # The examples spell the word through a placeholder, so that this file names no issue.
    word, title, pr = "is" + "sue", "Is" + "sue", "(#" + "27)"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(
        f"x = 1  # {word} 35\n"
        f'"""{title} 19: a docstring."""\n'
        f"see [notes](decisions.md#{word}-29-equinox)\n"
        f"fixed in {pr}\n"
        "the closest earlier trace, #1, was called (#2, #3)\n"
        "jax#39289 and https://github.com/jax-ml/jax/issues/39289\n"
    )
    (tmp_path / "docs" / "decisions").mkdir(parents=True)
    (tmp_path / "docs" / "decisions" / "warm.md").write_text(f"## {title} 27\n")
    (tmp_path / "CHANGELOG.md").write_text(f"{word} 40\n")
    assert sorted(issue_numbers(tmp_path)) == [
        ("docs/decisions/warm.md", f"{title} 27"),
        ("src/a.py", pr),
        ("src/a.py", f"{title} 19"),
        ("src/a.py", f"{word} 35"),
        ("src/a.py", f"{word}-29"),
    ]
