"""The handle: a budgeted object as the layers below the wrappers see it.

The build (`jit`) makes one per object and gives it, never the object, to the
registry, the counted function, the compile book, the test session's collector,
trace agreement and warm start. It holds what is fixed at wrap time (the name of
the class, the function, the budget, the statics, the signature, the mesh, the
overrun policy, the shape buckets, and the calling convention's reading of a call
`jax.jit` got as the user made it), the ledger (the count), a weak reference to the
public object, and one slot per layer that keeps state of its own for the object,
typed `object` here and read through that layer's accessor: ``birth`` (`observe.rebuilt`), ``book``
(`budget.compiles`), ``agreement`` (`parallel.trace_agreement`).

It never holds the `jax.jit` object nor the public object itself: the public
object holds it, and the counted function does (the chain counted -> handle ->
ledger), so that dropping the object frees it without the cycle collector.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jax.sharding import Mesh

    from tinax._src.buckets.declared import Declared
    from tinax._src.core.statics import Statics
    from tinax._src.core.validation import LazySignature
    from tinax._src.diagnosis.record import TracedSignature
    from tinax._src.objects.ledger import Ledger


class Budgeted(Protocol):
    """A budgeted object, as the layers below the wrappers may read it (`Handle.public`,
    `observe.budgets`): its public attributes, never its private state."""

    @property
    def function(self) -> Callable[..., Any]:
        """The wrapped callable."""
        ...

    @property
    def max_traces(self) -> int:
        """The budget."""
        ...

    @property
    def traces_used(self) -> int:
        """How many traces it has made."""
        ...

    @property
    def traced_signatures(self) -> Sequence[TracedSignature]:
        """The abstract signature of each trace, oldest first."""
        ...


Arguments = tuple[tuple[Any, ...], dict[str, Any]]
UserArguments = Callable[[tuple[Any, ...], dict[str, Any]], Arguments | None]
"""The calling convention's reading of a call `jax.jit` got, as the user made it
(`jit.conventions.Convention.user_arguments`)."""


class Handle:
    """One budgeted object, as the layers below the wrappers are given it."""

    __slots__ = (
        "__weakref__",
        "agreement",
        "api",
        "birth",
        "book",
        "buckets",
        "first_traced",
        "function",
        "ledger",
        "max_traces",
        "mesh",
        "on_exceed",
        "public",
        "signature",
        "statics",
        "user_arguments",
    )

    def __init__(
        self,
        api: str,
        function: Callable[..., Any],
        max_traces: int,
        signature: LazySignature,
        statics: Statics,
        mesh: Mesh | None,
        on_exceed: str | None,
        ledger: Ledger,
        public: Callable[[], Budgeted | None],
        user_arguments: UserArguments,
        buckets: Declared | None = None,
    ) -> None:
        self.api = api  # the class's name: BoundedJit, BatchedJit
        self.function = function  # the user's function (a BatchedJit's per-example one)
        self.max_traces = max_traces
        self.signature = signature
        self.statics = statics
        self.mesh = mesh
        self.on_exceed = on_exceed  # the object's overrun policy (None: the default)
        self.ledger = ledger
        self.public = public  # a weak reference to the public object
        # a call's arguments as the user passed them, from jax.jit's; None if not read back
        self.user_arguments = user_arguments
        self.buckets = buckets  # the sizes declared axes may take, or None
        # each layer's own state for the object, read through that layer's accessor
        self.birth: object = None  # observe.rebuilt: where and how it was built
        self.first_traced = False  # observe.rebuilt: a first trace was attempted
        self.book: object = None  # budget.compiles: its compiles, from the first
        self.agreement: object = None  # parallel.trace_agreement: its rank (and rounds)
