"""Text for people: the budget error and the errors of a trace or compile refused inside
``no_new_compiles``; and where the layers above find every piece of the diagnosis's text.

The last step of the diagnosis (record, compare, report), in rooms that import only
backwards: how a function is named (`names`), the diff block (`diff_lines`), ``explain``'s
report (`explanation`), the history table (`history`), then the errors here. Runs only
when an error is raised, ``explain`` is called or the history is printed. The layers
above call ``report.X`` for each of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tinax._src.diagnosis import compare, names
from tinax._src.diagnosis.diff_lines import explanation_lines as explanation_lines
from tinax._src.diagnosis.elide import LINE_LIMIT as LINE_LIMIT
from tinax._src.diagnosis.elide import fit as fit
from tinax._src.diagnosis.errors import TraceBudgetError
from tinax._src.diagnosis.explanation import COMPILES_AGAIN as COMPILES_AGAIN
from tinax._src.diagnosis.explanation import Explanation as Explanation
from tinax._src.diagnosis.explanation import explain as explain
from tinax._src.diagnosis.history import TraceHistory as TraceHistory
from tinax._src.diagnosis.history import duration as duration
from tinax._src.diagnosis.kinds import Difference
from tinax._src.diagnosis.names import function_location as function_location
from tinax._src.diagnosis.names import function_name as function_name
from tinax._src.diagnosis.record import TracedSignature


def budget_error(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    signature: TracedSignature,
    *,
    outcome: str | None = None,
    shape_fix: Sequence[str] = (),
) -> TraceBudgetError:
    """Builds the error for a trace over budget: headline, location, differences, fixes.

    Its second line says what became of the trace: ``outcome`` for one that runs anyway
    (a sentence: the policy, and that it runs and is counted); else that it was refused.
    ``shape_fix`` replaces the usual fix for a shape difference (`explanation_lines`).
    """
    return _refused_trace(
        function,
        max_traces,
        used,
        attempt,
        history,
        signature,
        verb="exceeded its trace budget",
        rule=outcome if outcome is not None else _REFUSED_RULE,
        shape_fix=shape_fix,
    )


_REFUSED_RULE = (
    "JAX traces and compiles again for every new abstract signature; this call was "
    "refused before tracing, and calls that match an earlier trace still run."
)


def _refused_trace(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    signature: TracedSignature,
    *,
    verb: str,
    rule: str,
    shape_fix: Sequence[str] = (),
) -> TraceBudgetError:
    """A refused trace's error: ``<function> <verb>: ...``, the rule it broke, the
    differences from the closest trace with their fixes, and where both were called."""
    name, location, where = names.where(function)
    best, found = compare.closest(history, signature)
    lines = [
        fit(
            f"{where} {verb}: max_traces={max_traces}, traces_used={used}; "
            f"this call would be trace {attempt}."
        ),
        rule,
        *explanation_lines(best, found, signature, history, shape_fix=shape_fix),
        *_call_sites(signature, best),
    ]
    return _error(lines, name, location, max_traces, used, signature, best, found)


_BUCKET_RULE = (
    "buckets= declares the sizes this function traces; this call was refused before "
    "tracing, and calls whose sizes are buckets still run."
)


def bucket_error(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    signature: TracedSignature,
    misses: Sequence[str],
    fixes: Sequence[str],
    *,
    outcome: str | None = None,
) -> TraceBudgetError:
    """The error for a trace outside the object's shape buckets: headline, what became of
    the trace (``outcome``, as in `budget_error`), each declared axis whose size is no
    bucket (``misses``, one line each), the ``fixes`` (one line each), and where it was
    called."""
    name, location, where = names.where(function)
    plural = "" if len(misses) == 1 else "s"
    lines = [
        fit(
            f"{where} was called outside its shape buckets: max_traces={max_traces}, "
            f"traces_used={used}; this call would be trace {attempt}."
        ),
        outcome if outcome is not None else _BUCKET_RULE,
        f"Outside the buckets ({len(misses)} size{plural}):",
        *(fit(f"  {miss}") for miss in misses),
        "How to fix:",
        *(fit(f"  {fix}") for fix in fixes),
        *_call_sites(signature, None),
    ]
    return _error(lines, name, location, max_traces, used, signature, None, ())


SCOPE = "no_new_compiles"

_SCOPE_RULE = (  # str.format: before, still
    "no_new_compiles refuses every new trace and compile of a budgeted object: this call "
    "was refused before {before}, and calls that {still} still run."
)


def scope_trace_error(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    signature: TracedSignature,
) -> TraceBudgetError:
    """The error for a trace refused inside ``no_new_compiles`` (within budget or not):
    the budget error's diagnosis under another headline."""
    return _refused_trace(
        function,
        max_traces,
        used,
        attempt,
        history,
        signature,
        verb=f"would trace inside {SCOPE}",
        rule=_SCOPE_RULE.format(before="tracing", still="match an earlier trace"),
    )


def scope_compile_error(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    history: Sequence[TracedSignature],
    signature: TracedSignature,
    reason: str,
    *,
    reusing: bool = True,
) -> TraceBudgetError:
    """The error for a compile without a new trace refused inside ``no_new_compiles``:
    the trace the call reuses (unless not known: ``reusing`` false), and why XLA would
    compile it (``reason``, a sentence)."""
    name, location, where = names.where(function)
    best, found = compare.closest(history, signature)
    reused = (
        f"reusing trace #{best.number}" if best is not None and reusing else "without a new trace"
    )
    lines = [
        fit(
            f"{where} would compile inside {SCOPE}, {reused}: max_traces={max_traces}, "
            f"traces_used={used}."
        ),
        _SCOPE_RULE.format(before="XLA compiled it", still="have an executable"),
        fit(reason),
        *_call_sites(signature, best),
    ]
    return _error(lines, name, location, max_traces, used, signature, best, found)


def _error(
    lines: Sequence[str],
    name: str,
    location: str | None,
    max_traces: int,
    used: int,
    signature: TracedSignature,
    best: TracedSignature | None,
    found: tuple[Difference, ...],
) -> TraceBudgetError:
    return TraceBudgetError(
        "\n".join(lines),
        function_name=name,
        location=location,
        max_traces=max_traces,
        traces_used=used,
        signature=signature,
        closest=best,
        differences=found,
    )


def _call_sites(signature: TracedSignature, best: TracedSignature | None) -> list[str]:
    """Where the refused call, and the closest earlier trace, were called from."""
    if signature.call_site is None:
        return []
    line = f"Called from {signature.call_site}"
    if best is not None and best.call_site is not None:
        line += f"; the closest earlier trace, #{best.number}, was called from {best.call_site}"
    return [fit(line + ".")]
