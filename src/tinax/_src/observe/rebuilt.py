"""The rebuilt-wrapper warning: objects for one function and one set of options built
again and again at one place, each tracing the same signature (counted per test run
inside tests)."""

from __future__ import annotations

import functools
import operator
import os
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import attrs

from tinax._src.diagnosis import report, reuse
from tinax._src.diagnosis.errors import TraceBudgetWarning
from tinax._src.observe.sites import CACHE_LIMIT, construction_site, shown, warn

if TYPE_CHECKING:
    from tinax._src.diagnosis.record import TracedSignature
    from tinax._src.objects.handle import Budgeted, Handle


REBUILT_THRESHOLD = 3  # the third object at one place, for one function, same signature


# The test in progress, as the test frameworks themselves say: pytest's PYTEST_CURRENT_TEST
# ("<node id> (<phase>)", set by pytest's runner, not a plugin) and hypothesis's build
# context (one per example). Read at wrap time only.
TestRun = tuple[str | None, weakref.ref[Any] | None]
_NOT_IN_A_TEST: TestRun = (None, None)
Birth = tuple[tuple[str, int], TestRun]  # (place built, test run): the handle's ``birth``
_PYTEST_VARIABLE = "PYTEST_CURRENT_TEST"
# A process started by a test inherits the variable without importing pytest: read it.
_INHERITED = _PYTEST_VARIABLE in os.environ


def current_test_run() -> TestRun:
    """``(pytest's current test, a weak reference to hypothesis's current example)``;
    ``(None, None)`` outside tests. Imports nothing: hypothesis is asked only when the
    program has imported it."""
    test = None
    if _INHERITED or "_pytest" in sys.modules:  # else reading the variable costs 0.7 us
        test = os.environ.get(_PYTEST_VARIABLE)
    example = None
    control = sys.modules.get("hypothesis.control")
    if control is not None:
        try:
            context = control._current_build_context.value
            if context is not None:
                example = weakref.ref(context)
        except Exception:  # another hypothesis: count per test only
            example = None
    if test is None and example is None:
        return _NOT_IN_A_TEST
    return test, example


_PYTEST_DIRECTORY = f"{os.sep}_pytest{os.sep}"


def _pytest_on_stack() -> bool:
    """Whether pytest runs in this thread (a process started by a test inherits its
    ``PYTEST_CURRENT_TEST``, and counts as one run of it, but is not that test)."""
    frame = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]
    while frame is not None:
        if _PYTEST_DIRECTORY in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _same_run(a: TestRun, b: TestRun) -> bool:
    """Whether two builds were made in one test and one hypothesis example (or both
    outside tests). A dead example is over: no later build is in it."""
    if a[0] != b[0]:
        return False
    if a[1] is None or b[1] is None:
        return a[1] is b[1]
    example = a[1]()
    return example is not None and example is b[1]()


class _Site:
    """Objects built at one place for one function, in one test run: how many in a row
    traced alike."""

    __slots__ = ("alive", "count", "options", "run", "signature", "warned")

    def __init__(
        self,
        alive: Callable[[], object] | None,
        options: object,
        signature: TracedSignature,
        run: TestRun,
    ) -> None:
        self.alive = alive  # a weak reference to what identifies the function, if it has one
        self.options = options
        self.signature = signature
        self.run = run
        self.count = 1
        self.warned = False


_sites_lock = threading.Lock()
_sites: dict[tuple[Any, ...], _Site] = {}
_sites_prune_at = 16
_OPTIONS: dict[type, Callable[[Any], object]] = {}


def _identity(function: object) -> tuple[tuple[int, ...], object]:
    """``(ids that identify function, the object whose life bounds that identity)``."""
    if isinstance(function, types.MethodType):  # a new bound method on every attribute read
        return (id(function.__func__), id(function.__self__)), function.__self__
    return (id(function),), function


def birth(frame: types.FrameType) -> Birth | None:
    """``(place built, test run)`` of a new object, or ``None`` if no user code built it:
    what only wrap time knows. The function's identity and the options are read at the
    first trace (`check_rebuilt`), from the object, whose fields are frozen."""
    built_at = construction_site(frame)
    if built_at is None:
        return None
    return built_at, current_test_run()


def birth_of(handle: Handle) -> Birth | None:
    """Where and in which test run the object of ``handle`` was built (`birth`), or
    ``None`` if no user code built it."""
    return cast("Birth | None", handle.birth)


def _options(owner: Budgeted) -> tuple[type, object]:
    """The object's class and fields other than ``function``, compared with ``==``."""
    kind = cast("type[Any]", type(owner))
    read = _OPTIONS.get(kind)
    if read is None:
        names = [field.name for field in attrs.fields(kind) if field.name != "function"]
        read = _OPTIONS[kind] = operator.attrgetter(*names)
    return kind, read(owner)


def _same(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an option whose == raises (in_axes pass through unchecked)
        return False


def _same_signature(earlier: TracedSignature, call: TracedSignature) -> bool:
    """Whether JAX's trace cache would treat the two alike."""
    try:
        return reuse.matches(earlier, call)
    except Exception:
        return False


def _forget(key: tuple[Any, ...], alive: weakref.ref[Any]) -> None:
    """Drops the place of a function that died (a weak reference's callback), unless a
    newer entry took its key."""
    site = _sites.get(key)
    if site is not None and site.alive is alive:
        _sites.pop(key, None)


def _prune_sites() -> None:
    """Drops places whose function has died (amortized: the table at most doubles)."""
    global _sites_prune_at
    try:
        entries = tuple(_sites.items())  # other threads add places without the lock
    except RuntimeError:  # changed size while copied: prune next time
        return
    for key, site in entries:
        if site.alive is not None and site.alive() is None:
            _sites.pop(key, None)
    if len(_sites) > CACHE_LIMIT:
        _sites.clear()
    _sites_prune_at = max(16, 2 * len(_sites))


def check_rebuilt(handle: Handle, call: TracedSignature) -> None:
    """At the first trace of an object: warns, once per place (and test), when objects
    built there for this function with these options keep being built and tracing this
    signature.

    Keyed by the place the object was built and the identity of the function
    (for a bound method, of its function and instance), checked through a weak
    reference so that a new function that reuses a dead one's ``id`` starts afresh.
    Inside tests, only builds of one test run count together (`current_test_run`): a
    fresh object per test, per parametrized case or per hypothesis example is
    one build per run, in any order, while a loop that rebuilds within one
    test still counts up.
    """
    handle.first_traced = True
    born, owner = birth_of(handle), handle.public()
    if born is None or owner is None:  # not built by user code, or dropped already
        return
    built_at, run = born
    function = handle.function
    ids, life = _identity(function)
    key = (built_at, ids)
    options = _options(owner)
    site = _sites.get(key)
    if site is not None and site.alive is not None and site.alive() is None:
        site = None  # the function died and its id was reused
    if site is None or not _same(site.options, options) or not _same_run(site.run, run):
        try:  # the place is forgotten with its function
            alive = weakref.ref(life, functools.partial(_forget, key))
        except TypeError:  # not weakly referenceable (a builtin): lives as long as ever
            alive = None
        _sites[key] = _Site(alive, options, call, run)  # one dict store: atomic
        if len(_sites) >= _sites_prune_at:
            with _sites_lock:
                _prune_sites()
        return
    with _sites_lock:
        if _same_signature(site.signature, call):
            site.count += 1
        else:
            site.count, site.signature = 1, call
        should_warn = site.count >= REBUILT_THRESHOLD and not site.warned
        if should_warn:
            site.warned = True
        count = site.count
    if should_warn:
        warning = _rebuilt_warning(owner, function, built_at, count, call, run)
        warn(warning, site=built_at)


def _rebuilt_warning(
    owner: Budgeted,
    function: Callable[..., Any],
    built_at: tuple[str, int],
    count: int,
    call: Any,
    run: TestRun = _NOT_IN_A_TEST,
) -> TraceBudgetWarning:
    name = report.function_name(function)
    kind = type(owner).__name__
    where = f"{shown(built_at[0])}:{built_at[1]}"
    test = None
    if run[0] is not None and _pytest_on_stack():  # else inherited by a subprocess of a test
        test = run[0].rpartition(" (")[0] or run[0]
    if run[1] is not None:
        within = " within one hypothesis example" + (f" of {test}" if test else "")
    else:
        within = f" within one test ({test})" if test else ""
    cost = (
        f"{kind} objects for {name} were built {count} times at {where}{within}, with the "
        f"same options, and each traced the same signature: every new object traces and "
        f"compiles again, and its budget (max_traces={owner.max_traces}) starts from zero, "
        f"so it never sees these retraces."
    )
    if within:
        advice = (
            " Build the wrapper once per test (or in a fixture), outside the loop or function "
            "that runs per step, and reuse it; a fresh wrapper per test, parametrized case or "
            "hypothesis example is fine (builds are counted per test and per example). "
            "(Warned once per place and test.)"
        )
    else:
        advice = (
            " Build the wrapper once, outside the loop or function that runs per step, and "
            "reuse it. (Warned once per place; in tests, builds are counted per test and per "
            "hypothesis example, so a fresh wrapper per test or example is never warned about.)"
        )
    message = cost + advice
    return TraceBudgetWarning(
        message,
        function_name=name,
        location=report.function_location(function),
        max_traces=owner.max_traces,
        traces_used=0,
        signature=call,
        closest=call,
        differences=(),
    )
