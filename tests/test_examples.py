"""The quickstart runs, end to end, as a newcomer would run it."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_quickstart_runs_and_shows_the_budget_error():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "TraceBudgetError: step (examples/quickstart.py:" in result.stdout
    out = result.stdout
    assert "this call would exceed the trace budget: max_traces=1, traces_used=1" in out
    assert out.count("      batch['x']: f32[16,3] -> f32[10,3] (shape)\n") == 2  # explain, error
    assert "      shape: every new shape is a new trace: pad or bucket inputs" in out
    assert "    batch['x']   f32[16,3]\n" in out  # the history table
    assert "per-example losses match plain jax.vmap" in result.stdout
