"""The budget error, and the warning that stands in for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tinax._src.diagnosis.kinds import Difference
    from tinax._src.diagnosis.record import TracedSignature


class _Diagnosis(Exception):
    """The facts the budget error and warning carry besides their message."""

    function_name: str
    location: str | None
    max_traces: int
    traces_used: int
    signature: TracedSignature
    closest: TracedSignature | None
    differences: tuple[Difference, ...]

    def __init__(
        self,
        message: str,
        *,
        function_name: str,
        location: str | None,
        max_traces: int,
        traces_used: int,
        signature: TracedSignature,
        closest: TracedSignature | None,
        differences: tuple[Difference, ...],
    ) -> None:
        super().__init__(message)
        self.function_name = function_name
        self.location = location
        self.max_traces = max_traces
        self.traces_used = traces_used
        self.signature = signature
        self.closest = closest
        self.differences = differences


class TraceBudgetError(_Diagnosis, AssertionError):
    """A compiled function was about to trace more often than its budget allows.

    Raised by a `BoundedJit` or `BatchedJit` object, before the function body
    runs, when a call (or ``.lower``/``.trace``/``.eval_shape``) would be trace
    ``max_traces + 1``. Nothing is cached and ``traces_used`` is unchanged, so
    calls whose signatures were traced before keep working.

    It subclasses `AssertionError`, as `chex.assert_max_traces` does, so code
    that catches chex's error catches this one too.

    Attributes:
        function_name: Qualified name of the wrapped function.
        location: ``file:line`` where the wrapped function is defined, if known.
        max_traces: The budget.
        traces_used: Traces made before the refused call.
        signature: Abstract signature of the refused call.
        closest: The earlier trace that differs least from the refused call,
            or ``None`` when there was no earlier trace.
        differences: What changed between ``closest`` and the refused call.
    """


class TraceBudgetWarning(_Diagnosis, UserWarning):
    """A compiled function traced more often than its budget allows, and was let run.

    Emitted instead of raising `TraceBudgetError` where the overrun policy is
    ``"warn"`` (``on_exceed="warn"``, `exceed_policy`, or ``TINAX_ON_EXCEED``):
    the trace then runs and is counted, so ``traces_used`` may exceed
    ``max_traces``. Also emitted, once per place, when a wrapper is rebuilt
    over and over for the same function (each new object traces and compiles
    again, and its budget never sees the retraces); inside tests, only
    rebuilds within one test and one hypothesis example count, so a fresh
    wrapper per test or per example is never warned about. Under pytest's
    ``filterwarnings = error`` it is raised like an error; catch it with
    ``pytest.warns(TraceBudgetWarning)``.

    Attributes:
        function_name: Qualified name of the wrapped function.
        location: ``file:line`` where the wrapped function is defined, if known.
        max_traces: The budget.
        traces_used: Traces made before this one.
        signature: Abstract signature of the call that exceeded the budget.
        closest: The earlier trace that differs least from the call, or ``None``.
        differences: What changed between ``closest`` and the call.
    """


TraceBudgetError.__module__ = "tinax.jit"
TraceBudgetWarning.__module__ = "tinax.jit"
