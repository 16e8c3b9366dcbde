"""``explain``'s report: what a call would do, worked out without tracing (`Explanation`)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from tinax._src.diagnosis import compare, names, reuse
from tinax._src.diagnosis.diff_lines import explanation_lines
from tinax._src.diagnosis.elide import LINE_LIMIT, fit
from tinax._src.diagnosis.kinds import Difference
from tinax._src.diagnosis.record import TracedSignature

COMPILES_AGAIN = (  # how explain and no_new_compiles begin a compile without a new trace
    "XLA would compile again without tracing (compiles_used counts it, the budget does not)"
)


_WORDED_BY = ("BoundedJit:", "BatchedJit:")  # how tinax's own messages begin


@attrs.frozen
class Refusal:
    """How ``explain`` shows the error a call would raise (`Explanation.raises`): its
    exception type's name (``kind``), and whether the message is tinax's own words
    (``worded``: a leaf JAX refuses, a static argument it cannot hash), wrapped whole
    under a line of its own, or JAX's (or Python's), quoted in a sentence."""

    kind: str
    worded: bool

    @classmethod
    def of(cls, raises: str | None) -> Refusal | None:
        """The refusal of an ``Explanation.raises`` (``"<kind>: <message>"``), read once
        where the explanation is made; ``None`` for a call that raises nothing."""
        if raises is None:
            return None
        kind, _, message = raises.partition(": ")
        return cls(kind, message.startswith(_WORDED_BY))


@attrs.frozen
class Explanation:
    """What a call would do, worked out without tracing; see ``explain``.

    Prints as a short report: the trace the call would reuse, or the trace it
    would make, the differences from the closest earlier trace and their fixes.

    Attributes:
        function_name: Qualified name of the wrapped function.
        location: ``file:line`` where the wrapped function is defined, if known.
        signature: Abstract signature of the call.
        retraces: Whether the call would trace: no earlier trace has its signature.
        reuses: The earlier trace the call would run from, or ``None``.
        exceeds_budget: Whether the call would be trace ``max_traces + 1`` (refused
            with `TraceBudgetError` while chex assertions are on).
        traces_used: Traces made so far.
        attempt: The number the call's trace would have (traces made or in
            flight, plus one); meaningful when ``retraces``.
        max_traces: The budget.
        closest: The earlier trace that differs least from the call, or ``None``.
        differences: What differs between ``closest`` and the call.
        raises: For a call JAX rejects before tracing (an argument missing or
            extra, an unhashable static value, a leaf that is not an array, batch
            sizes `jax.vmap` rejects, a batch that does not divide over the mesh,
            an input placed against ``in_shardings`` or on devices that disagree),
            the exception it would raise, as
            ``"TypeError: g() missing 1 required positional argument: 'y'"``
            (raised whether or not the budget is spent); the call neither traces
            nor reuses a trace. Else ``None``.
        compiles: For a call that reuses a trace, whether XLA would compile
            again without tracing (``compiles_used`` counts it, the budget does
            not), as a sentence; ``""`` when an executable for the inputs'
            placements exists.
        history: The earlier traces the call was compared with, oldest first.
        outside_buckets: For a call that would trace, each axis declared in the
            object's ``buckets`` whose size is no bucket, as a line of the error
            (``"tokens, axis 1: 37 is no bucket of (16, 32, 64): pad it to 64"``):
            its trace would be refused as a trace over budget is. Else ``()``.
        shape_fix: For an object with ``buckets``, the fix for the call's shape
            differences that is true of its buckets (the code that pads each input
            to its bucket, that a size is larger than the largest bucket, or that
            the buckets can be compiled ahead), one line each, shown instead of the
            usual one; else ``()``.
    """

    function_name: str
    location: str | None
    signature: TracedSignature
    retraces: bool
    reuses: TracedSignature | None
    exceeds_budget: bool
    traces_used: int
    max_traces: int
    closest: TracedSignature | None
    differences: tuple[Difference, ...]
    attempt: int
    raises: str | None = None
    compiles: str = ""
    history: tuple[TracedSignature, ...] = attrs.field(default=(), repr=False)
    outside_buckets: tuple[str, ...] = ()
    shape_fix: tuple[str, ...] = ()
    # how ``raises`` is shown, derived from it however the object is made (``explain``,
    # the constructor, `attrs.evolve`); not compared, not shown, not an argument
    _refusal: Refusal | None = attrs.field(
        default=attrs.Factory(lambda self: Refusal.of(self.raises), takes_self=True),
        init=False,
        repr=False,
        eq=False,
    )

    def __str__(self) -> str:
        where = names.heading(self.function_name, self.location)
        budget = f"max_traces={self.max_traces}, traces_used={self.traces_used}"
        refusal = self._refusal
        if self.raises is not None and refusal is not None:
            if refusal.worded:
                # tinax's words for a leaf JAX refuses (a TypeError) or an unhashable static
                # argument (a ValueError): a long message, wrapped whole
                refused = (
                    "refuse a leaf of this call"
                    if refusal.kind == "TypeError"
                    else "reject this call before tracing"
                )
                return "\n".join(
                    (
                        fit(f"{where}: JAX would {refused}; {budget}."),
                        "It would raise this error, and trace nothing:",
                        *textwrap.wrap(self.raises, 100),
                    )
                )
            reason = f"It would raise {self.raises}"
            return "\n".join(
                (
                    fit(f"{where}: JAX would reject this call before tracing; {budget}."),
                    *(
                        [reason]
                        if len(reason) <= LINE_LIMIT
                        else textwrap.wrap(reason, 100, subsequent_indent="  ")
                    ),
                    "Nothing is traced or counted, with the budget spent or not.",
                )
            )
        if self.reuses is not None:
            reused = f"this call would reuse trace #{self.reuses.number}"
            if self.compiles.startswith(COMPILES_AGAIN):  # no new trace, but a compile
                reused = f"this call would reuse trace #{self.reuses.number} and compile it"
            head = f"{where}: {reused}; {budget}."
            return head if not self.compiles else f"{head}\n{fit(self.compiles)}"
        outside = self.outside_buckets
        if outside:
            head = f"{where}: this call is outside its shape buckets: {budget}; it would be"
        elif self.exceeds_budget:
            head = f"{where}: this call would exceed the trace budget: {budget}; it would be"
        elif self.closest is None and self.traces_used == 0:
            head = f"{where}: this call would make the first trace: {budget}; it would be"
        else:
            head = f"{where}: this call would trace again: {budget}; it would be"
        lines = [fit(f"{head} trace {self.attempt}.")]
        if outside:
            plural = "" if len(outside) == 1 else "s"
            lines.append(f"Outside the buckets ({len(outside)} size{plural}):")
            lines.extend(fit(f"  {miss}") for miss in outside)
        lines.extend(
            explanation_lines(
                self.closest,
                self.differences,
                self.signature,
                self.history,
                shape_fix=self.shape_fix,
            )
        )
        if outside and self.closest is None:  # no differences: the buckets' fix alone
            lines.append("How to fix:")
            lines.extend(fit(f"  shape: {fix}") for fix in self.shape_fix)
        return "\n".join(lines)


def explain(
    function: Callable[..., Any],
    max_traces: int,
    history: Sequence[TracedSignature],
    used: int,
    attempt: int,
    signature: TracedSignature,
    raises: str | None = None,
    cleared: int = 0,
) -> Explanation:
    """Whether ``signature`` would reuse one of the traces in ``history``, and why not.

    ``raises`` is the error of a call that does not bind to the function;
    traces numbered up to ``cleared`` are no longer in JAX's cache.
    """
    name, location, _ = names.where(function)
    if raises is not None:
        return Explanation(
            function_name=name,
            location=location,
            signature=signature,
            retraces=False,
            reuses=None,
            exceeds_budget=False,
            traces_used=used,
            max_traces=max_traces,
            closest=None,
            differences=(),
            attempt=attempt,
            raises=raises,
        )
    reuses = reuse.reused(history, signature, cleared)
    best, found = (reuses, ()) if reuses is not None else compare.closest(history, signature)
    return Explanation(
        function_name=name,
        location=location,
        signature=signature,
        retraces=reuses is None,
        reuses=reuses,
        exceeds_budget=reuses is None and attempt > max_traces,
        traces_used=used,
        max_traces=max_traces,
        closest=best,
        differences=found,
        attempt=attempt,
        history=tuple(history),
    )
