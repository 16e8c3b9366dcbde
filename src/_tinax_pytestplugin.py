"""tinax's pytest plugin: ``pytest --tinax-budgets[=N]``.

pytest loads it at start-up wherever tinax is installed (entry point ``pytest11``
named ``tinax``; ``-p no:tinax`` turns it off). It is a top-level module, as
hypothesis's own plugin is, so that loading it imports neither JAX nor tinax:
without ``--tinax-budgets`` it only adds the option. With it, tinax collects,
from the start of the session, every budgeted object built and every trace
counted (objects that tests drop included), and prints at the end one row per
function and construction site, most compile time first, as ``--durations``
does for tests. The code is in ``tinax._src.observe.session_budgets``.

PYTEST_DONT_REWRITE: the module has no assertions for pytest to rewrite, and
pytest would warn (an error under ``filterwarnings = error``) when ``-p`` loads
it after something imported it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tinax._src.observe.session_budgets import Collector

OPTION = "--tinax-budgets"
_KEY: pytest.StashKey[tuple[Collector, int]] = pytest.StashKey()


def _top(value: str) -> int:
    """``N`` of ``--tinax-budgets=N``: a whole number, 0 for every row."""
    try:
        top = int(value)
    except ValueError:
        top = -1
    if top < 0:
        raise argparse.ArgumentTypeError(
            f"expected N, a whole number of rows (0 for all); got {value!r}. The bare "
            f"option takes no value: write {OPTION}=N, or put {OPTION} after the paths."
        )
    return top


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tinax", "tinax: trace budgets of compiled functions")
    group.addoption(
        OPTION,
        dest="tinax_budgets",
        nargs="?",
        const=0,
        default=None,
        type=_top,
        metavar="N",
        help=(
            "at the end of the session, print every budgeted function (BoundedJit, "
            "BatchedJit) the session built, by function and construction site: objects, "
            "traces, compiles, retraces and their most common cause, trace and compile "
            "time; most compile time first. =N: the top N only."
        ),
    )


def pytest_configure(config: pytest.Config) -> None:
    top: int | None = config.getoption("tinax_budgets", None)
    if top is None:
        return
    from tinax._src.observe import session_budgets

    config.stash[_KEY] = (session_budgets.start(), top)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    started = config.stash.get(_KEY, None)
    if started is None:
        return
    from tinax._src.observe import session_budgets

    collector, top = started
    title, lines = session_budgets.summary(collector, top)
    terminalreporter.write_sep("=", title)
    for line in lines:
        terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    started = config.stash.get(_KEY, None)
    if started is None:
        return
    from tinax._src.observe import session_budgets

    session_budgets.stop(started[0])
    del config.stash[_KEY]
