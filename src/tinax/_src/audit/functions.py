"""What an audit says of each function: its traces, each after the first compared by tinax's
diagnosis with the closest earlier one, and what they cost (`AuditedFunction`, `Miss`)."""

from __future__ import annotations

import attrs

from tinax._src.audit.port import port_line
from tinax._src.audit.recorder import Book, Trace
from tinax._src.diagnosis import compare, reuse
from tinax._src.diagnosis.diff_lines import difference_lines, fix_lines
from tinax._src.diagnosis.record import TracedSignature

NEW_FUNCTION = (
    "the same signature, but a new function object: JAX's cache is per function, and this "
    "one was made again (a lambda, functools.partial or jax.jit built inside a loop or a call)"
)
NEW_FUNCTION_FIX = "function: build the jitted function once, outside the loop, and call it there"
UNREADABLE = "the call's arguments could not be read"


@attrs.frozen
class Miss:
    """One trace of a function: the first, or a miss of JAX's trace cache after it.

    Attributes:
        number: The trace it caused, from 1.
        called_at: ``file:line`` of the user's call that traced (the first frame
            outside JAX, tinax, equinox, flax and the standard library), or ``"?"``.
        differences: tinax's difference lines against the closest earlier trace
            (statics, tree structure, shapes, dtypes, weak types, placements,
            equinox fields, nnx graph changes); empty for the first trace.
        fix: tinax's fix for them, one ``<kind>: <fix>`` per line; empty for the first.
        seconds: What the trace, its lowering and its compile took.
        trace_seconds: The trace alone.
        lower_seconds: Its lowering to StableHLO.
        compile_seconds: Its XLA compiles (a trace can compile again without tracing).
        compiles: The compiles it caused (0 for a trace nested in another one, which
            is compiled as part of it, or for ``lower``/``eval_shape``).
        nested: Traced inside another function's trace.
    """

    number: int
    called_at: str
    differences: list[str]
    fix: str
    seconds: float
    trace_seconds: float = 0.0
    lower_seconds: float = 0.0
    compile_seconds: float = 0.0
    compiles: int = 0
    nested: bool = False


@attrs.frozen
class AuditedFunction:
    """One jitted function of the audited program and what its traces cost.

    Attributes:
        name: Its qualified name.
        defined_at: ``file:line`` where it is defined.
        kind: How it was jitted: ``"jax.jit"``, ``"equinox.filter_jit"``,
            ``"nnx.jit"`` or ``"tinax"`` (a `BoundedJit` or `BatchedJit`).
        traces: Its traces, as JAX counts them (each is one ``jaxpr_trace`` event
            where it is not nested in another trace).
        compiles: Its XLA compiles.
        seconds: Its traces, lowerings and compiles together.
        misses: Every trace, in order (the first has no differences).
        port: The ``bounded_jit(...)`` line that would hold the run audited: its
            ``max_traces``, and its ``buckets=``, ``static_nonarrays`` or
            ``propagate_updates`` where the run calls for them; with buckets, a
            line per bucketed axis follows that pads a call's input to its bucket.
    """

    name: str
    defined_at: str
    kind: str
    traces: int
    compiles: int
    seconds: float
    misses: list[Miss]
    port: str

    @property
    def retraces(self) -> int:
        """Traces after the first."""
        return max(self.traces - 1, 0)


def audited(book: Book) -> AuditedFunction:
    """A function's report from its book; each trace compared with the closest earlier one."""
    misses: list[Miss] = []
    seen: list[Trace] = []
    for trace in book.traces:
        differences, fix = _diagnosis(seen, trace)
        misses.append(
            Miss(
                number=trace.number,
                called_at=trace.called_at,
                differences=differences,
                fix=fix,
                seconds=trace.seconds(),
                trace_seconds=trace.seconds("trace"),
                lower_seconds=trace.seconds("lower"),
                compile_seconds=trace.seconds("compile"),
                compiles=trace.compiles,
                nested=trace.nested,
            )
        )
        seen.append(trace)
    return AuditedFunction(
        name=book.name,
        defined_at=book.defined_at,
        kind=book.kind,
        traces=len(book.traces),
        compiles=sum(trace.compiles for trace in book.traces),
        seconds=sum(miss.seconds for miss in misses),
        misses=misses,
        port=port_line(book),
    )


def _diagnosis(earlier: list[Trace], trace: Trace) -> tuple[list[str], str]:
    if not earlier:
        return [], ""
    signature = trace.signature
    history: list[TracedSignature] = [t.signature for t in earlier if t.signature is not None]
    if signature is None or not history:
        return [UNREADABLE], ""
    best, found = compare.closest(history, signature)
    if found:
        return difference_lines(found), "\n".join(fix_lines(found))
    assert best is not None
    if reuse.matches(best, signature):
        same = next(t for t in earlier if t.signature is best)
        if same.function_id != trace.function_id:
            return [f"#{best.number}: {NEW_FUNCTION}"], NEW_FUNCTION_FIX
        if same.failed:
            return [f"#{best.number} raised, so JAX cached nothing and traced again"], ""
        return [
            f"#{best.number} has this signature: JAX traced again because its cache was "
            "emptied (jax.clear_caches()) or a setting outside the arguments changed"
        ], ""
    return [f"#{best.number} differs in a way the recorded signature does not show"], ""
