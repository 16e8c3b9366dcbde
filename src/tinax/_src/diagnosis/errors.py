"""The budget error, and the warning that stands in for it."""

from __future__ import annotations

import copy
import pickle
from typing import TYPE_CHECKING, Any

import attrs

from tinax._src import private
from tinax._src.diagnosis import record

if TYPE_CHECKING:
    from tinax._src.diagnosis.kinds import Difference
    from tinax._src.diagnosis.record import Argument, TracedSignature


class _Diagnosis(Exception):
    """The facts the budget error and warning carry besides their message.

    They travel as Python's own exceptions do (``pickle``, ``copy``, a process
    pool), with their message and every attribute: the keyword-only constructor
    is bypassed on the way back, as ``BaseException`` does with ``args``.
    """

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

    def __reduce__(self) -> tuple[Any, ...]:
        return _restore, (type(self), self.args, _pickled(self.__dict__))

    def __copy__(self) -> _Diagnosis:
        return _rebuilt(type(self), self.args, dict(self.__dict__))

    def __deepcopy__(self, memo: dict[int, Any]) -> _Diagnosis:
        try:
            state = copy.deepcopy(self.__dict__, memo)
        except Exception:  # a static value that cannot be copied: a pickled one is
            state = pickle.loads(_pickled(self.__dict__))
        return _rebuilt(type(self), copy.deepcopy(self.args, memo), state)


def _rebuilt(cls: type[_Diagnosis], args: tuple[Any, ...], state: dict[str, Any]) -> _Diagnosis:
    error = cls.__new__(cls, *args)
    error.__dict__.update(state)
    return error


def _restore(cls: type[_Diagnosis], args: tuple[Any, ...], payload: bytes) -> _Diagnosis:
    """Unpickles a budget error or warning (`_Diagnosis.__reduce__`)."""
    return _rebuilt(cls, args, pickle.loads(payload))


def _pickled(state: dict[str, Any]) -> bytes:
    """The error's attributes, pickled so that abstract values load as the receiver's own
    (`private.portable_dumps`); an argument whose values do not pickle (a lambda passed
    as a static argument, a pytree node holding one) travels as its text, so that the
    diagnosis, not a pickling error, reaches the receiver."""
    try:
        return private.portable_dumps(state)
    except Exception:
        pass
    state = dict(state)
    for name in ("signature", "closest"):
        signature = state.get(name)
        if isinstance(signature, record.TracedSignature):
            recorded = tuple(_portable_argument(argument) for argument in signature.recorded)
            state[name] = attrs.evolve(signature, recorded=recorded)
    try:
        return private.portable_dumps(state)
    except Exception:  # an attribute a user set: kept where it pickles
        return private.portable_dumps({k: v for k, v in state.items() if _pickles(v)})


def _portable_argument(argument: Argument) -> Argument:
    if _pickles(argument):
        return argument
    values = tuple(
        value if _pickles(value) else _StandIn(record.value_text(value))
        for value in argument.values
    )
    treedef = argument.treedef
    if treedef is not None and not _pickles(treedef):
        treedef = _StandIn(str(treedef))
    return attrs.evolve(argument, treedef=treedef, values=values)


def _pickles(value: object) -> bool:
    try:
        private.portable_dumps(value)
    except Exception:
        return False
    return True


class _StandIn:
    """A value that could not be pickled, as its text (which is what a person reads)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, ...]:
        return _StandIn, (self.text,)


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
