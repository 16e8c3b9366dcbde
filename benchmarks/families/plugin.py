"""The pytest plugin: loaded and idle, it must cost nothing."""

from __future__ import annotations

import os
import subprocess
import sys

from harness import Row, Setup


def pytest_plugin_row(quick: bool) -> Row:
    """``pytest --co`` of an empty project, with tinax's plugin loaded and without it: the
    plugin must cost nothing measurable when ``--tinax-budgets`` is not given."""
    import tempfile

    empty = tempfile.mkdtemp(prefix="tinax-empty-project-")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # only the plugins named here
    # Cached bytecode, as an installed plugin has: without it each run compiles the plugin
    # (~2 ms, 1% of the row) where pytest's own modules come compiled from site-packages.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    base = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
    subprocess.run([*base, "-p", "_tinax_pytestplugin"], cwd=empty, env=env, capture_output=True)

    def collect(*plugin: str) -> Setup:
        def action() -> object:
            return subprocess.run([*base, *plugin], cwd=empty, env=env, capture_output=True)

        return lambda: action

    return Row(
        "pytest --co of an empty project: tinax's plugin loaded vs not",
        "no plugin",
        {"no plugin": collect(), "tinax": collect("-p", "_tinax_pytestplugin")},
        target=1.02,
        rounds=11,
        repeat=3,
    )
