"""The examples run, end to end, as a newcomer would run them; the docs show their output."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_example(name):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_quickstart_runs_and_shows_the_budget_error():
    out = run_example("quickstart.py")
    assert "TraceBudgetError: step (examples/quickstart.py:" in out
    assert "this call would exceed the trace budget: max_traces=1, traces_used=1" in out
    assert out.count("      batch['x']: f32[16,3] -> f32[10,3] (shape)\n") == 2  # explain, error
    assert "      shape: every new shape is a new trace: pad or bucket inputs" in out
    assert "    batch['x']   f32[16,3]\n" in out  # the history table
    assert "per-example losses match plain jax.vmap" in out


def test_debugging_retraces_page_shows_the_real_output():
    """Each section the script prints is pasted, verbatim, as a text block of the page."""
    out = run_example("retraces.py")
    page = (ROOT / "docs" / "debugging-retraces.md").read_text()
    sections = out.split("\n=== ")[1:]
    assert len(sections) == 5
    for section in sections:
        title, _, body = section.partition("\n")
        assert f"```text\n{body.rstrip()}\n```" in page, f"section {title!r} is out of date"
