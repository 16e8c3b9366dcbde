"""Observability for long runs: the ``tinax`` logger, the overrun policy, per-trace facts,
the registry of live budgeted objects, and the rebuilt-wrapper warning.

Everything here runs at wrap time or at trace time, never on a cached call. With
logging off, a trace pays for a walk up the stack (its call site), two clock
reads, and a few dictionary lookups; nothing is formatted unless the ``tinax``
logger is enabled for the record's level.

- **Logging**: one record per trace on the ``tinax`` logger: ``DEBUG`` for the
  first trace of an object, ``INFO`` for a retrace (with its differences from
  the closest earlier trace), ``WARNING`` for a trace refused or over budget.
  Silent by default, like any library's logger (a `logging.NullHandler`).
- **Overrun policy**: ``"raise"`` (the default), ``"warn"`` (a
  `TraceBudgetWarning`, then the trace runs and is counted) or ``"log"`` (a
  ``WARNING`` record, then the trace runs). The object's ``on_exceed`` wins,
  then the innermost `exceed_policy` of the current thread, then the
  ``TINAX_ON_EXCEED`` environment variable (read at import), then ``"raise"``.
- **Per-trace facts**: the call site (first frame outside JAX, tinax and the
  standard library), trace wall time, and compile time, attributed from
  `jax.monitoring` duration events to the trace that caused them.
- **Registry**: `budgets` lists every live `BoundedJit`/`BatchedJit` through
  weak references.
- **Rebuilt wrappers**: a `TraceBudgetWarning` once per place where objects for
  one function and one set of options keep being built, each tracing the same
  signature; inside tests, builds are counted per test and per hypothesis
  example (`current_test_run`).
"""

from __future__ import annotations

import contextvars
import logging
import operator
import os
import sys
import sysconfig
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from site import getsitepackages
from typing import TYPE_CHECKING, Any, cast

import attrs
import jax
import jax.monitoring

from tinax._src import compare, elide, job_failure, registry_table, report, trace_agreement
from tinax._src.errors import TraceBudgetError, TraceBudgetWarning
from tinax._src.validation import ON_EXCEED, OnExceed, check_on_exceed

if TYPE_CHECKING:
    from tinax._src.budget import Ledger
    from tinax._src.record import TracedSignature

Policy = OnExceed

logger = logging.getLogger("tinax")
logger.addHandler(logging.NullHandler())  # silent until the application configures logging

# --- the overrun policy --------------------------------------------------------------------

ENVIRONMENT_VARIABLE = "TINAX_ON_EXCEED"


def policy_from_environment(value: str | None) -> Policy | None:
    """The policy named by the environment variable's value (``None`` if unset or empty).

    Raises:
        ValueError: The value is not one of ``raise``, ``warn``, ``log`` (case and
            surrounding spaces ignored): a typo must stop the job at start, not
            at hour 40.
    """
    if value is None or not value.strip():
        return None
    policy = value.strip().lower()
    if policy not in ON_EXCEED:
        raise ValueError(
            f"tinax: the environment variable {ENVIRONMENT_VARIABLE} must be one of "
            f"'raise', 'warn', 'log' (or empty); got {value!r}."
        )
    return policy


_ENVIRONMENT: Policy | None = policy_from_environment(os.environ.get(ENVIRONMENT_VARIABLE))
_CONTEXT: contextvars.ContextVar[Policy | None] = contextvars.ContextVar(
    "tinax_on_exceed", default=None
)


def resolve(own: str | None) -> Policy:
    """The policy for an overrun: the object's own, the innermost context, the
    environment, then ``"raise"``."""
    return cast(Policy, own or _CONTEXT.get() or _ENVIRONMENT or "raise")


class _PolicyScope:
    """The context manager `exceed_policy` returns; re-entrant, one token per entry."""

    __slots__ = ("_policy", "_tokens")

    def __init__(self, policy: Policy) -> None:
        self._policy: Policy = policy
        self._tokens: list[contextvars.Token[Policy | None]] = []

    def __enter__(self) -> None:
        self._tokens.append(_CONTEXT.set(self._policy))

    def __exit__(self, *exc_info: object) -> None:
        _CONTEXT.reset(self._tokens.pop())

    def __repr__(self) -> str:
        return f"exceed_policy({self._policy!r})"


def exceed_policy(policy: Policy) -> AbstractContextManager[None]:
    """Sets what a trace over its budget does, for objects without their own ``on_exceed``.

    A three-day training job wants an overrun reported, not a crash at hour 40.
    Inside ``with exceed_policy("warn"):`` every `BoundedJit`/`BatchedJit`
    whose ``on_exceed`` is ``None`` warns instead of raising. The scope is the
    current thread (and asyncio task), as for JAX's own configuration context
    managers; nested scopes stack, the innermost wins. An object's own
    ``on_exceed`` wins over any scope; outside every scope, the environment
    variable ``TINAX_ON_EXCEED`` (read when tinax is imported) applies, then
    ``"raise"``. Under `chex.disable_asserts` a trace over budget is counted,
    never raised or warned, as before (it is still logged).

    Args:
        policy: ``"raise"``: refuse the trace with `TraceBudgetError` (the
            default). ``"warn"``: emit a `TraceBudgetWarning` carrying the same
            diagnosis, then let the trace run and count it. ``"log"``: log the
            diagnosis at ``WARNING`` on the ``tinax`` logger, then let the trace
            run and count it.

    Returns:
        A context manager (re-entrant) that sets the policy while it is entered.

    Raises:
        TypeError: If `policy` is not a str.
        ValueError: If `policy` is not ``"raise"``, ``"warn"`` or ``"log"``.

    Examples:
        >>> import jax.numpy as jnp
        >>> from tinax.jit import bounded_jit, exceed_policy
        >>> step = bounded_jit(lambda x: x + 1, max_traces=0)
        >>> with exceed_policy("log"):
        ...     step(jnp.ones(3)).tolist()
        [2.0, 2.0, 2.0]
        >>> step.traces_used
        1
    """
    checked = check_on_exceed("exceed_policy", policy, parameter="policy")
    if checked is None:
        raise TypeError(
            "exceed_policy: policy must be one of 'raise', 'warn', 'log'; got None (NoneType)."
        )
    return _PolicyScope(cast(Policy, checked))


# --- frames: the call site and the construction site ---------------------------------------

_USER, _LIBRARY, _JAX = 0, 1, 2


def _directory(module: types.ModuleType) -> str:
    return os.path.dirname(os.path.abspath(module.__file__ or "")) + os.sep


def _library_directories() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(JAX's, tinax's and the standard library's, site-packages)`` directories."""
    import jaxlib  # pyright: ignore[reportMissingTypeStubs]

    import tinax

    jax_dirs = (_directory(jax), _directory(jaxlib))
    paths = sysconfig.get_paths()
    stdlib = {
        os.path.abspath(paths[key]) + os.sep for key in ("stdlib", "platstdlib") if key in paths
    }
    sites = {os.path.abspath(paths[key]) + os.sep for key in ("purelib", "platlib") if key in paths}
    try:
        sites.update(os.path.abspath(path) + os.sep for path in getsitepackages())
    except Exception:  # some embedded interpreters have no site.getsitepackages
        pass
    sites.update(os.path.abspath(path) + os.sep for path in sys.path if path.endswith("-packages"))
    return jax_dirs, (_directory(tinax), *sorted(stdlib)), tuple(sorted(sites))


_JAX_DIRS, _LIBRARY_DIRS, _SITE_DIRS = _library_directories()
_KINDS: dict[str, int] = {}
_SHOWN: dict[str, str] = {}
_CACHE_LIMIT = 4096


def _classify(filename: str) -> int:
    if filename.startswith(("<frozen ", "<attrs generated")):
        return _LIBRARY  # the import system; attrs' generated __init__ of our classes
    if filename.startswith("<"):
        return _USER  # <string>, <stdin>, a notebook cell
    path = os.path.abspath(filename)
    if path.startswith(_JAX_DIRS):
        return _JAX
    if path.startswith(_LIBRARY_DIRS) and not path.startswith(_SITE_DIRS):
        return _LIBRARY
    return _USER


def _kind(filename: str) -> int:
    kind = _KINDS.get(filename)
    if kind is None:
        if len(_KINDS) > _CACHE_LIMIT:
            _KINDS.clear()
        kind = _KINDS[filename] = _classify(filename)
    return kind


def _shown(filename: str) -> str:
    """The file as the budget error shows locations: relative to the working directory
    when inside it."""
    shown = _SHOWN.get(filename)
    if shown is None:
        shown = filename
        try:
            relative = os.path.relpath(filename)
        except ValueError:  # another drive (Windows)
            relative = filename
        if not relative.startswith(".."):
            shown = relative
        if len(_SHOWN) > _CACHE_LIMIT:
            _SHOWN.clear()
        _SHOWN[filename] = shown
    return shown


def _user_frame(frame: types.FrameType | None) -> types.FrameType | None:
    """The first frame, from ``frame`` outwards, outside JAX, tinax and the standard library."""
    kinds = _KINDS
    while frame is not None:
        filename = frame.f_code.co_filename
        kind = kinds.get(filename)
        if kind is None:
            kind = _kind(filename)
        if kind == _USER:
            return frame
        frame = frame.f_back
    return None


def call_site() -> str | None:
    """``file:line`` of the user's call that made the trace in progress (called from
    the traced function, whose own frame is tinax's and skipped)."""
    frame = _user_frame(sys._getframe(2))  # pyright: ignore[reportPrivateUsage]
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    return f"{_SHOWN.get(filename) or _shown(filename)}:{frame.f_lineno}"


def construction_site(frame: types.FrameType | None) -> tuple[str, int] | None:
    """``(file, line)`` of the user's code that is building a budgeted object, from
    ``frame`` (inside tinax) outwards."""
    frame = _user_frame(frame)
    if frame is None:
        return None
    return frame.f_code.co_filename, frame.f_lineno


def _warn(warning: Warning, site: tuple[str, int] | None = None) -> None:
    """Emits ``warning`` as if from ``site``, else from the user's frame on the stack."""
    if site is not None:
        warnings.warn_explicit(warning, type(warning), site[0], site[1])
        return
    frame = _user_frame(sys._getframe(1))  # pyright: ignore[reportPrivateUsage]
    if frame is None:
        warnings.warn(warning, stacklevel=2)
        return
    globals_ = frame.f_globals
    registry = globals_.setdefault("__warningregistry__", {})
    warnings.warn_explicit(
        warning,
        type(warning),
        frame.f_code.co_filename,
        frame.f_lineno,
        module=globals_.get("__name__"),
        registry=registry,
    )


# --- compile time, from jax.monitoring ----------------------------------------------------

_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class _Pending(threading.local):
    """Per thread: ``(ledger, trace, name, own trace event seen)`` awaiting its compile."""

    pending: tuple[Ledger, TracedSignature, str, bool] | None = None


_local = _Pending()


def _compiled_as(event_name: object, name: str) -> bool:
    """Whether a compile event's ``fun_name`` (``jit(step)``, ``jit_step``) names ``name``."""
    if not isinstance(event_name, str):
        return True  # a JAX that does not name it: the thread's last trace it is
    return event_name == name or event_name.endswith(f"({name})") or event_name == f"jit_{name}"


def _on_duration(event: str, duration_secs: float, **metadata: str | int) -> None:
    """Adds XLA compile time to the trace that caused it: the last trace counted in
    this thread, when the compiled module carries its name.

    After the trace, JAX reports at most one trace event, for the trace itself
    (none when it ran under `jax.grad` or `jax.vmap`); a further trace event,
    for any function, means the program has moved on, and ends the attribution.
    """
    try:
        pending = _local.pending
        if pending is None:
            return
        ledger, entry, name, own_event_seen = pending
        if event == _TRACE_EVENT:
            if own_event_seen or metadata.get("fun_name") != name:
                _local.pending = None
            else:
                _local.pending = (ledger, entry, name, True)
            return
        if event != _COMPILE_EVENT or not _compiled_as(metadata.get("fun_name"), name):
            return
        updated = ledger.add_compile_seconds(entry, duration_secs)
        _local.pending = None if updated is None else (ledger, updated, name, own_event_seen)
    except Exception:  # a listener must never break a compile
        _local.pending = None


jax.monitoring.register_event_duration_secs_listener(_on_duration)


# --- watchers: what a test session built and traced (the pytest plugin) --------------------

_watch_built: Callable[[Any, Ledger], None] | None = None
_watch_traced: Callable[[Ledger, Callable[..., Any]], None] | None = None


def watch(
    built: Callable[[Any, Ledger], None] | None,
    traced: Callable[[Ledger, Callable[..., Any]], None] | None,
) -> None:
    """Sets what is told of every object built (``built(owner, ledger)``, at wrap time)
    and of every counted trace (``traced(ledger, function)``, at trace time); ``None``
    for nothing, the default. Only the pytest plugin's ``--tinax-budgets`` sets them."""
    global _watch_built, _watch_traced
    _watch_built, _watch_traced = built, traced


# --- the registry of live objects ----------------------------------------------------------

_registry_lock = threading.RLock()
_registry: list[weakref.ref[Any]] = []
_prune_at = 64


def register(owner: Any, ledger: Ledger) -> None:
    """Adds a freshly built object to the registry (a weak reference) and gives its
    ledger what trace time needs: the construction site, the policy, the owner."""
    global _prune_at
    # Two frames up, the class's __attrs_post_init__: the walk to the user's code starts
    # there (sys._getframe materializes only the frame it returns; each f_back, one more).
    ledger.birth = _birth(owner, sys._getframe(2))  # pyright: ignore[reportPrivateUsage]
    ledger.on_exceed = owner.on_exceed
    trace_agreement.constructed(ledger, owner.function)  # its identity across processes
    ref = weakref.ref(owner)
    ledger.owner = ref
    if _watch_built is not None:  # a test session's budgets (--tinax-budgets) are collected
        _watch_built(owner, ledger)
    with _registry_lock:
        _registry.append(ref)
        if len(_registry) >= _prune_at:  # dead references go in amortized O(1)
            _registry[:] = [alive for alive in _registry if alive() is not None]
            _prune_at = max(64, 2 * len(_registry))


def budgets() -> Budgets:
    """Every live `BoundedJit` and `BatchedJit` in the process, most compile time first.

    For the end of a training script or a debugging session: ``print(budgets())``
    shows one table of every budgeted function, where it is defined, its traces
    against its budget, the time spent tracing and compiling it, and why it last
    retraced. The registry holds weak references only: an object dropped by the
    program is gone from it (and freed) as from everywhere else.

    Returns:
        A tuple of the objects, sorted by total compile time (largest first, then
        in order of creation), that prints as a table.

    Examples:
        >>> import jax.numpy as jnp
        >>> from tinax.jit import bounded_jit, budgets
        >>> double = bounded_jit(lambda x: x * 2, max_traces=1)
        >>> _ = double(jnp.ones(3))
        >>> double in budgets()
        True
    """
    with _registry_lock:
        alive = [owner for ref in _registry if (owner := ref()) is not None]
    totals = [(_total(owner, "compile_seconds"), index) for index, owner in enumerate(alive)]
    order = sorted(range(len(alive)), key=lambda index: (-totals[index][0], index))
    return Budgets(alive[index] for index in order)


def _total(owner: Any, fact: str) -> float:
    return sum(getattr(entry, fact) or 0.0 for entry in owner.traced_signatures)


class Budgets(tuple[Any, ...]):
    """The live budgeted objects, as `budgets` returns them; prints as a table."""

    __slots__ = ()

    def __str__(self) -> str:
        return budgets_table(self)


def last_retrace_cause(history: Sequence[TracedSignature]) -> str:
    """The first difference of the latest retrace from its closest earlier trace."""
    if len(history) < 2:
        return "-"
    try:
        found = list(compare.closest(history[:-1], history[-1])[1])
    except Exception:  # a table for a person must print whatever the history holds
        return "?"
    if not found:
        return "no difference in the abstract signature"
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return f"#{history[-1].number}: {found[0]}{more}"


def budgets_table(objects: Sequence[Any]) -> str:
    """One row per function and place built: function, location, traces/budget,
    compiles, trace and compile time, last retrace cause (`registry_table`)."""
    return registry_table.table(objects, _built_at, last_retrace_cause)


def _built_at(owner: Any) -> str:
    """``file:line`` where the user's code built ``owner``, or ``?``."""
    birth = getattr(getattr(owner, "_ledger", None), "birth", None)
    if not birth:
        return "?"
    (filename, line) = birth[0]
    return f"{_shown(filename)}:{line}"


# --- rebuilt wrappers ----------------------------------------------------------------------

REBUILT_THRESHOLD = 3  # the third object at one place, for one function, same signature


# The test in progress, as the test frameworks themselves say: pytest's PYTEST_CURRENT_TEST
# ("<node id> (<phase>)", set by pytest's runner, not a plugin) and hypothesis's build
# context (one per example). Read at wrap time only.
TestRun = tuple[str | None, weakref.ref[Any] | None]
_NOT_IN_A_TEST: TestRun = (None, None)
_PYTEST_VARIABLE = "PYTEST_CURRENT_TEST"


def current_test_run() -> TestRun:
    """``(pytest's current test, a weak reference to hypothesis's current example)``;
    ``(None, None)`` outside tests. Imports nothing: hypothesis is asked only when the
    program has imported it."""
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


def _birth(
    owner: Any, frame: types.FrameType
) -> tuple[tuple[str, int], tuple[Any, ...], Any, object, TestRun] | None:
    """``(place built, key of its places table, weak reference that identifies the
    function, options, test run)`` of a new object, or ``None`` if no user code built it."""
    built_at = construction_site(frame)
    if built_at is None:
        return None
    ids, life = _identity(owner.function)
    try:
        alive = weakref.ref(life)
    except TypeError:  # not weakly referenceable (a builtin): lives as long as ever
        alive = None
    return built_at, (built_at, ids), alive, _options(owner), current_test_run()


def _options(owner: Any) -> tuple[type, object]:
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
        return compare.matches(earlier, call)
    except Exception:
        return False


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
    if len(_sites) > _CACHE_LIMIT:
        _sites.clear()
    _sites_prune_at = max(16, 2 * len(_sites))


def check_rebuilt(ledger: Ledger, function: Callable[..., Any], call: TracedSignature) -> None:
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
    ledger.first_traced = True
    if ledger.birth is None:
        return
    built_at, key, alive, options, run = ledger.birth
    site = _sites.get(key)
    if site is not None and site.alive is not None and site.alive() is None:
        site = None  # the function died and its id was reused
    if site is None or not _same(site.options, options) or not _same_run(site.run, run):
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
        warn = site.count >= REBUILT_THRESHOLD and not site.warned
        if warn:
            site.warned = True
        count = site.count
    owner = None if ledger.owner is None else ledger.owner()
    if warn and owner is not None:
        warning = _rebuilt_warning(owner, function, built_at, count, call, run)
        _warn(warning, site=built_at)


def _rebuilt_warning(
    owner: Any,
    function: Callable[..., Any],
    built_at: tuple[str, int],
    count: int,
    call: Any,
    run: TestRun = _NOT_IN_A_TEST,
) -> TraceBudgetWarning:
    name = report.function_name(function)
    kind = type(owner).__name__
    where = f"{_shown(built_at[0])}:{built_at[1]}"
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


# --- what a trace reports ------------------------------------------------------------------


def refused(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    call: TracedSignature,
) -> TraceBudgetError:
    """The error for a trace refused by the budget, logged at ``WARNING`` first."""
    error = report.budget_error(function, max_traces, used, attempt, history, call)
    if logger.isEnabledFor(logging.WARNING):
        logger.warning("%s", error)
    if job_failure.armed:  # fail_fast: a refused trace ends the whole job
        job_failure.budget_error(error)
    return error


def _outcome(policy: Policy | None) -> str:
    if policy is None:
        return "chex assertions are disabled: this trace runs and is counted."
    return f"on_exceed={policy!r}: this trace runs and is counted."


def overrun(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    call: TracedSignature,
    policy: Policy | None,
) -> None:
    """Reports a trace over budget that runs anyway: a warning (policy ``"warn"``) and a
    ``WARNING`` record. ``policy`` is ``None`` when chex assertions are disabled."""
    logged = logger.isEnabledFor(logging.WARNING)
    if policy != "warn" and not logged:
        return
    error = report.budget_error(function, max_traces, used, attempt, history, call)
    message = _overrun_message(str(error), _outcome(policy))
    if logged:  # under "warn", one line: the warning carries the diagnosis (issue 19)
        logger.warning("%s", message if policy != "warn" else _pointer(error))
    if policy == "warn":
        _warn(
            TraceBudgetWarning(
                message,
                function_name=error.function_name,
                location=error.location,
                max_traces=error.max_traces,
                traces_used=error.traces_used,
                signature=error.signature,
                closest=error.closest,
                differences=error.differences,
            )
        )


def _pointer(error: TraceBudgetError) -> str:
    """The one-line record of an overrun whose diagnosis a `TraceBudgetWarning` carries."""
    where = f" ({error.location})" if error.location else ""
    first = f"; {error.differences[0]}" if error.differences else ""
    more = f" (+{len(error.differences) - 1} more)" if len(error.differences) > 1 else ""
    name = elide.tail(error.function_name, 60)
    head = (
        f"{name}{where}: trace {error.traces_used + 1} is over max_traces="
        f"{error.max_traces} and runs (on_exceed='warn')"
    )
    tail = "; the TraceBudgetWarning emitted now has the diagnosis."
    room = max(report.LINE_LIMIT - len(head) - len(tail), 20)
    return head + elide.words(first + more, room) + tail


def _overrun_message(text: str, outcome: str) -> str:
    """The error's text for a trace that runs: its second line, which says the call
    was refused, becomes ``outcome``."""
    lines = text.split("\n")
    if len(lines) > 1 and "refused" in lines[1]:
        lines[1] = outcome
    else:
        lines.insert(1, outcome)
    return "\n".join(lines)


def committed(
    ledger: Ledger,
    function: Callable[..., Any],
    name: str,
    max_traces: int,
    entry: TracedSignature,
    earlier: Sequence[TracedSignature],
    nested: bool,
    logged: bool,
) -> None:
    """After a trace is counted: waits for its compile, and logs it (``DEBUG`` for a
    first trace, ``INFO`` for a retrace) unless it was logged as over budget."""
    # The next compiles of ``name`` in this thread are for this trace; a trace that is
    # staged out is compiled with the outer one, never alone. The ledger is held until
    # then, not the object: dropping the object still frees it.
    _local.pending = None if nested else (ledger, entry, name, False)
    if _watch_traced is not None:
        _watch_traced(ledger, function)
    if logged or not logger.isEnabledFor(logging.INFO if earlier else logging.DEBUG):
        return
    where = report.function_location(function)
    heading = report.function_name(function) + (f" ({where})" if where else "")
    called = f"called from {entry.call_site}" if entry.call_site else "call site unknown"
    head = (
        f"{heading}: {'trace' if not earlier else 'retrace, trace'} {entry.number} of "
        f"max_traces={max_traces}, {called}, traced in {report.duration(entry.trace_seconds)}"
    )
    if not earlier:
        logger.debug("%s: %s", head, str(entry).partition(": ")[2])
        return
    best, found = compare.closest(earlier, entry)
    lines = report.explanation_lines(best, found, entry)
    logger.info("%s\n%s", head, "\n".join(lines))
