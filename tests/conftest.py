"""Test setup: 8 CPU devices (set before JAX is imported), shared fixtures."""

import os
import subprocess
from pathlib import Path

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import pytest
from jax.sharding import AxisType

from tinax.jit import BatchedJit, BoundedJit, batched_jit, bounded_jit


@pytest.fixture
def make_bounded():
    """Builds a BoundedJit through the factory: the behaviour tests run once, as users build."""
    return bounded_jit


@pytest.fixture
def make_batched():
    """Builds a BatchedJit through the factory: the behaviour tests run once, as users build."""
    return batched_jit


# The factory forwards its arguments to the class, so both must refuse the same inputs with
# the same messages: the validation tests (tests/test_validation.py and the tables of invalid
# options elsewhere) build both ways.


@pytest.fixture(params=["factory", "class"])
def bounded_both_ways(request):
    """Builds a BoundedJit through the factory or the class: both must validate the same."""
    return bounded_jit if request.param == "factory" else BoundedJit


@pytest.fixture(params=["factory", "class"])
def batched_both_ways(request):
    """Builds a BatchedJit through the factory or the class: both must validate the same."""
    return batched_jit if request.param == "factory" else BatchedJit


@pytest.fixture(scope="session")
def mesh8():
    """An 8-device, one-axis Auto mesh."""
    assert jax.device_count() == 8, "tests need 8 CPU devices (XLA_FLAGS set too late?)"
    return jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))


@pytest.fixture(scope="session")
def explicit_mesh8():
    """An 8-device, one-axis Explicit mesh."""
    return jax.make_mesh((8,), ("x",), axis_types=(AxisType.Explicit,))


@pytest.fixture(autouse=True)
def _messages_fit_in_200_characters(monkeypatch):
    """Every error, explain report, history table and budgets() table any test produces:
    no line over 200."""
    from tinax._src.diagnosis import elide, errors, explanation, history

    def checked(text):
        longest = max((len(line) for line in text.splitlines()), default=0)
        assert longest <= elide.LINE_LIMIT, f"a line of {longest} characters:\n{text}"
        return text

    error_init = errors.TraceBudgetError.__init__
    explanation_str = explanation.Explanation.__str__
    table = history.history_table

    def init(self, message, **fields):
        error_init(self, checked(message), **fields)

    monkeypatch.setattr(errors.TraceBudgetError, "__init__", init)
    monkeypatch.setattr(
        explanation.Explanation, "__str__", lambda self: checked(explanation_str(self))
    )
    # the table's one caller reads it from its own module, where it is patched
    shown = history.TraceHistory.__str__
    assert shown.__globals__ is vars(history) and "history_table" in shown.__code__.co_names
    monkeypatch.setattr(history, "history_table", lambda traces: checked(table(traces)))

    from tinax._src.observe import registry_table  # budgets(): every row of the registry too

    registry = registry_table.table
    monkeypatch.setattr(registry_table, "table", lambda *args: checked(registry(*args)))


@pytest.fixture
def outside_session_budgets(monkeypatch):
    """The library as it is without ``pytest --tinax-budgets``: the plugin's collector (which
    keeps each dropped object's ledger for its end-of-session report) hears nothing here."""
    from tinax._src.observe import watchers

    monkeypatch.setattr(watchers, "built_hook", None)
    monkeypatch.setattr(watchers, "traced_hook", None)


# --- the suite leaves no trace in the checkout ---------------------------------------------

_CHECKOUT = Path(__file__).resolve().parent.parent


def _changed_files():
    """``git status`` of the checkout, a line per changed or untracked file (ignored ones,
    such as ``.venv/`` and ``.hypothesis/``, aside); `None` outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=_CHECKOUT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return set(done.stdout.splitlines()) if done.returncode == 0 else None


def pytest_collection_finish(session):
    """Collection imports every module of tests/ (--doctest-modules): none may set a JAX
    persistent cache for the session, or every later compile becomes a load, nor start
    warm start, which would write a manifest into the checkout."""
    folder = jax.config.jax_compilation_cache_dir
    if folder is not None:
        raise pytest.UsageError(
            f"a module imported at collection set jax_compilation_cache_dir={folder!r}"
        )
    from tinax._src.warm import start as warm

    if warm.active() is not None:  # it would write its manifest where pytest was started
        raise pytest.UsageError("a module imported at collection started tinax.warm_start")


def pytest_sessionstart(session):
    session.config.stash[_BEFORE] = _changed_files()


def pytest_sessionfinish(session, exitstatus):
    """Fails the run when a test wrote into the checkout (tests write under tmp_path)."""
    before = session.config.stash.get(_BEFORE, None)
    after = _changed_files()
    if before is None or after is None:
        return
    new = sorted(after - before)
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", "tests wrote into the checkout", red=True)
            for line in new:
                reporter.write_line(line)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_BEFORE = pytest.StashKey()
