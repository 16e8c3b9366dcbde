"""What a trace reports: the error for a trace refused by the budget, the warning or
record for one over budget that runs, and the log record of every counted trace."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from tinax._src.buckets import declared, outside
from tinax._src.diagnosis import compare, elide, record, report
from tinax._src.diagnosis.errors import TraceBudgetError, TraceBudgetWarning
from tinax._src.observe import compile_events, watchers
from tinax._src.observe.log import logger
from tinax._src.observe.policy import Policy
from tinax._src.observe.sites import warn
from tinax._src.parallel import job_failure

if TYPE_CHECKING:
    from tinax._src.diagnosis.record import TracedSignature
    from tinax._src.objects.handle import Handle


def refused(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    call: TracedSignature,
    buckets: declared.Declared | None = None,
) -> TraceBudgetError:
    """The error for a trace refused by the budget, with a one-line ``WARNING`` record
    first; its shape fix is true of the object's ``buckets`` where it declares some."""
    fix = _shape_fix(buckets, history, call)
    error = report.budget_error(function, max_traces, used, attempt, history, call, shape_fix=fix)
    return _refusal(error, attempt, f"is over max_traces={max_traces}")


def _shape_fix(
    buckets: declared.Declared | None, history: Sequence[TracedSignature], call: TracedSignature
) -> tuple[str, ...]:
    """`outside.shape_fix` against the trace closest to ``call``; none without buckets."""
    if buckets is None:
        return ()
    return outside.shape_fix("", buckets, compare.closest(history, call)[0], call)


_REFUSED = "is refused (on_exceed='raise')"


def _refusal(
    error: TraceBudgetError, attempt: int, what: str, first: str | None = None
) -> TraceBudgetError:
    """``error``, to raise, and under ``fail_fast`` ending the whole job. Its ``WARNING``
    record is one line that points at it (`_pointer`): with logging on, the diagnosis is
    printed once, by the error, which reaches the caller whatever logging does (the record
    stays, for a log that must show every refusal, one caught and dropped among them)."""
    if logger.isEnabledFor(logging.WARNING):
        logger.warning("%s", _pointer(error, what, first, attempt, _REFUSED))
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
    buckets: declared.Declared | None = None,
) -> None:
    """Reports a trace over budget that runs anyway: a warning (policy ``"warn"``) and a
    ``WARNING`` record. ``policy`` is ``None`` when chex assertions are disabled."""
    if policy != "warn" and not logger.isEnabledFor(logging.WARNING):
        return
    error = report.budget_error(
        function,
        max_traces,
        used,
        attempt,
        history,
        call,
        outcome=_outcome(policy),
        shape_fix=_shape_fix(buckets, history, call),
    )
    _report_overrun(error, policy, f"is over max_traces={max_traces}")


def outside_buckets(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    call: TracedSignature,
    misses: Sequence[outside.Outside],
    policy: Policy | None,
) -> TraceBudgetError | None:
    """A trace outside the shape buckets: under ``"raise"``, its error (logged at
    ``WARNING`` first) to raise; else reported as `overrun` reports a trace over budget
    that runs anyway, and ``None``."""
    lines = outside.miss_lines(misses, call)
    fixes = outside.fix_lines(misses)
    if policy == "raise":
        error = report.bucket_error(function, max_traces, used, attempt, call, lines, fixes)
        return _refusal(error, attempt, "is outside its shape buckets", lines[0])
    if policy != "warn" and not logger.isEnabledFor(logging.WARNING):
        return None
    error = report.bucket_error(
        function,
        max_traces,
        used,
        attempt,
        call,
        lines,
        fixes,
        outcome=_outcome(policy),
    )
    _report_overrun(error, policy, "is outside its shape buckets", lines[0])
    return None


def _report_overrun(
    error: TraceBudgetError, policy: Policy | None, what: str, first: str | None = None
) -> None:
    """A warning (policy ``"warn"``) with ``error``'s diagnosis, and a ``WARNING`` record:
    the diagnosis, or under ``"warn"`` one line that points to the warning."""
    message = str(error)
    if logger.isEnabledFor(logging.WARNING):
        logger.warning(
            "%s",
            message
            if policy != "warn"
            else _pointer(error, what, first, error.traces_used + 1, "runs (on_exceed='warn')"),
        )
    if policy == "warn":
        warn(
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


def _pointer(
    error: TraceBudgetError, what: str, first: str | None, trace: int, outcome: str
) -> str:
    """The one-line record of a trace whose diagnosis ``error`` (raised) or the
    `TraceBudgetWarning` made of it (emitted) carries: the trace, ``what`` it is (over the
    budget, outside the buckets), its ``outcome``, its first difference (or ``first``),
    and where the diagnosis is."""
    where = f" ({error.location})" if error.location else ""
    if first is not None:
        detail = f"; {first}"
    else:
        detail = f"; {error.differences[0]}" if error.differences else ""
        if len(error.differences) > 1:
            detail += f" (+{len(error.differences) - 1} more)"
    name = elide.tail(error.function_name, 60)
    head = f"{name}{where}: trace {trace} {what} and {outcome}"
    carrier = "TraceBudgetError raised" if outcome == _REFUSED else "TraceBudgetWarning emitted"
    tail = f"; the {carrier} now has the diagnosis."
    room = max(report.LINE_LIMIT - len(head) - len(tail), 20)
    return head + elide.words(detail, room) + tail


def committed(
    handle: Handle,
    name: str,
    entry: TracedSignature,
    earlier: Sequence[TracedSignature],
    nested: bool,
    logged: bool,
) -> None:
    """After a trace is counted: waits for its compile, and logs it (``DEBUG`` for a
    first trace and for one of a combination of buckets, ``INFO`` for any other
    retrace) unless it was logged as over budget or outside the buckets."""
    ledger, function, max_traces = handle.ledger, handle.function, handle.max_traces
    compile_events.await_compile(ledger, entry, name, nested)
    if watchers.traced_hook is not None:
        watchers.traced_hook(handle)
    if watchers.warm_hook is not None:
        watchers.warm_hook.traced(handle, entry)
    if logged or not logger.isEnabledFor(logging.INFO if earlier else logging.DEBUG):
        return
    where = report.function_location(function)
    heading = report.function_name(function) + (f" ({where})" if where else "")
    called = f"called from {entry.call_site}" if entry.call_site else "call site unknown"
    counted = entry.number
    buckets = handle.buckets
    if buckets is not None and outside.declared_trace(buckets, entry, earlier):  # expected
        if logger.isEnabledFor(logging.DEBUG):
            taken = cast("tuple[int, ...]", outside.combination(buckets, entry))
            sizes = outside.combination_text(buckets, taken)
            logger.debug(
                "%s: trace %d of max_traces=%d, bucket %s, %s, traced in %s",
                heading,
                counted,
                max_traces,
                sizes,
                called,
                report.duration(entry.trace_seconds),
            )
        return
    head = (
        f"{heading}: {'trace' if not earlier else 'retrace, trace'} {counted} of "
        f"max_traces={max_traces}, {called}, traced in {report.duration(entry.trace_seconds)}"
    )
    if not earlier:
        logger.debug("%s: %s", head, record.signature_text(entry))
        return
    best, found = compare.closest(earlier, entry)
    fix = () if buckets is None else outside.shape_fix("", buckets, best, entry)
    lines = report.explanation_lines(best, found, entry, earlier, shape_fix=fix)
    logger.info("%s\n%s", head, "\n".join(lines))
