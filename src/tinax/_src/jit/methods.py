"""What both classes offer besides a call (`BudgetedMixin`): the counts, the history,
``explain``, ``lower``/``trace``/``eval_shape``/``precompile``, ``clear_cache``, copies,
binding as a method, the repr; and the cached call itself, the property over ``_call``."""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import attrs
import jax
from jax.sharding import Mesh

from tinax._src import private
from tinax._src.buckets import outside
from tinax._src.budget import compiles, rejections
from tinax._src.core import validation
from tinax._src.diagnosis import record, report, reuse
from tinax._src.jit import bucket_compiles, jax_options, meshes
from tinax._src.jit.build import AtFirstUse
from tinax._src.jit.call_errors import leaf_error, named_arguments, static_error
from tinax._src.jit.plan import Plan
from tinax._src.jit.probe import Probe
from tinax._src.models.nnx import trees as nnx_trees
from tinax._src.objects.handle import Handle
from tinax._src.objects.ledger import Ledger

P = ParamSpec("P")
R = TypeVar("R")


def _user_facing(method: Callable[P, R]) -> Callable[P, R]:
    """``method`` with tinax's and JAX's frames dropped from the traceback of anything
    it raises (as JAX does), so that the user's own call is the last frame shown."""

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except Exception as error:
            private.filter_traceback(error)
            raise  # bare: this frame is not added back

    return run


def shape_fix(
    owner: BudgetedMixin, closest: record.TracedSignature | None, call: record.TracedSignature
) -> tuple[str, ...]:
    """The fix for ``call``'s shape differences from ``closest`` that is true of
    ``owner``'s buckets (`outside.shape_fix`); none for an object without buckets."""
    buckets = owner._plan.buckets  # pyright: ignore[reportPrivateUsage]
    if buckets is None:
        return ()
    return outside.shape_fix(type(owner).__name__, buckets, closest, call)


class BudgetedMixin:
    """Introspection and forwarding shared by the two classes (no fields)."""

    _handle: Handle
    _ledger: Ledger
    _signature: validation.LazySignature
    _static: jax_options.Statics
    _probe: Probe
    _plan: Plan
    # Built at the first call (or the first lower, trace, precompile...) unless jax.jit
    # checks the options itself (`build`): a program's wrap costs less than jax.jit's, and
    # the build is lost in the first trace. A cached call finds them in the __dict__.
    _jitted = AtFirstUse()
    _call = AtFirstUse()
    function: Callable[..., Any]
    max_traces: int
    mesh: Mesh | None
    if TYPE_CHECKING:  # the function's, as `functools.wraps` gives them (metadata.present)
        __name__: str
        __qualname__: str

    @property
    def traces_used(self) -> int:
        """How many traces this object has made so far (never more than `max_traces`
        while chex assertions are on), less those given back: a combination whose
        compile failed in ``precompile_buckets`` keeps its trace in
        `traced_signatures` but not its place in the budget."""
        return self._ledger.counted

    @property
    def compiles_used(self) -> int:
        """How many XLA compiles this object has caused: one per trace that was
        compiled, and one per compile without a new trace (a call that reuses a
        trace with inputs placed otherwise, e.g. host NumPy where the trace had
        arrays sharded over a mesh's Auto axes), which the budget does not bound.
        An executable loaded from JAX's persistent compilation cache is no compile:
        `cache_loads` counts it."""
        return compiles.count(self._handle)

    @property
    def cache_loads(self) -> int:
        """How many executables of this object JAX loaded from its persistent
        compilation cache (``jax_compilation_cache_dir``) instead of compiling
        them; `compiles_used` does not count them. Each load still follows a
        trace (or a compile without a new trace) in this process."""
        return compiles.loads(self._handle)

    @property
    def traced_signatures(self) -> report.TraceHistory:
        """The abstract signature of each trace so far, oldest first; prints as a table
        with one column per trace and one row per argument leaf."""
        with self._ledger.lock:
            return report.TraceHistory(self._ledger.history)

    @_user_facing
    def explain(self, *args: Any, **kwargs: Any) -> report.Explanation:
        """Says whether a call with these arguments would reuse an earlier trace or
        trace again, and why, without tracing or running anything.

        The call's abstract signature (under the object's mesh, if set) is
        compared with each earlier trace as JAX's trace cache compares them:
        abstract values and tree structures by ``==``, static arguments by
        type, ``hash`` and ``==``. JAX caches emptied by `jax.clear_caches` are
        not seen: there the call traces although ``explain`` found a match. A
        call JAX rejects before tracing (an argument missing or extra, an
        unhashable static value, a leaf that is not an array, batch sizes
        `jax.vmap` rejects, a batch that does not divide over the mesh, an input
        placed against ``in_shardings`` or on devices that disagree) is reported
        as the exception it would raise, found by JAX's own checks around a
        stand-in for the function, which never runs.

        Args:
            *args: Positional arguments, as they would be passed to the call.
            **kwargs: Keyword arguments, as they would be passed to the call.

        Returns:
            An `Explanation`; ``print`` it for a readable report.

        Raises:
            ValueError: An argument holds a cycle (a Module that refers to itself),
                which no flatten can take: refused before one would recurse to
                Python's limit.
        """
        known = self._signature.get()
        named = named_arguments(known, self._static, args, kwargs, static=False)
        nnx_trees.refuse_cycles(self.function, named)
        call = self._under_mesh(record.record, known, self._static, args, kwargs)
        raises = rejections.deleted(named)
        if raises is None:  # a static argument JAX cannot hash: its dispatch checks first
            unhashable = self._static_error(args, kwargs)
            raises = None if unhashable is None else f"ValueError: {unhashable}"
        if raises is None:  # a leaf JAX refuses, or cannot hash as a static value
            leaf_error = self._leaf_error(args, kwargs)
            raises = None if leaf_error is None else f"TypeError: {leaf_error}"
        if raises is None:  # JAX's own checks, around a stand-in for the function
            jax_args, jax_kwargs = self._plan.convention.jax_arguments(args, kwargs)
            rejected = self._under_mesh(
                rejections.rejection, self._probe.get(), jax_args, jax_kwargs
            )
            raises = None if rejected is None else rejections.describe(rejected)
        history, used, attempt, cleared = self._ledger.snapshot()
        explanation = report.explain(
            self.function,
            self.max_traces,
            history,
            used,
            attempt,
            call,
            raises=raises,
            cleared=cleared,
        )
        buckets = self._plan.buckets
        if explanation.retraces and buckets is not None:  # named as its trace would be
            api = type(self).__name__
            misses = outside.misses(api, buckets, call)
            lines = tuple(miss.text() for miss in misses)
            fix = shape_fix(self, explanation.closest, call)
            return attrs.evolve(explanation, outside_buckets=lines, shape_fix=fix)
        if explanation.reuses is None:
            return explanation
        placed = compiles.call_placements(named)
        note = compiles.would_compile(self._handle, explanation.reuses.number, placed)
        return attrs.evolve(explanation, compiles=note)

    def _reused(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
        """The number of the trace a call with these arguments reuses, as ``explain``
        finds it, or ``None``; for a call that ran, so without ``explain``'s search
        for the error a call would raise (JAX's checks around a stand-in: ~2 ms)."""
        call = self._under_mesh(record.record, self._signature.get(), self._static, args, kwargs)
        history, _, _, cleared = self._ledger.snapshot()
        found = reuse.reused(history, call, cleared)
        return None if found is None else found.number

    def _leaf_error(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """tinax's message for a call JAX refuses for one of its leaves, or ``None``."""
        api, convention = type(self).__name__, self._plan.convention
        return leaf_error(api, self._signature, self._static, convention, args, kwargs)

    def _static_error(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """tinax's message for a call with an unhashable static argument, or ``None``."""
        return static_error(type(self).__name__, self._signature, self._static, args, kwargs)

    def _forward(
        self, method: Callable[..., R], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> R:
        """``method`` (of the `jax.jit` object) for a call, under the mesh; with
        ``static_nonarrays``, on the call split into array leaves and a static key.
        JAX's `TypeError` for a leaf it cannot take, and its `ValueError` for an
        unhashable static argument, are told in tinax's words (the same type)."""
        jax_args, jax_kwargs = self._plan.convention.jax_arguments(args, kwargs)
        try:
            return self._under_mesh(method, *jax_args, **jax_kwargs)
        except ValueError:  # JAX's, for an unhashable static argument (or key)
            static = self._static_error(args, kwargs)
            text = None if static is not None else self._leaf_error(args, kwargs)
            if static is None and text is None:
                raise
        except TypeError:
            static, text = None, self._leaf_error(args, kwargs)
            if text is None:
                raise
        if static is not None:
            raise ValueError(static)
        raise TypeError(text)

    def _under_mesh(self, function: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """``function(*args, **kwargs)`` as if inside ``with jax.set_mesh(self.mesh):``."""
        if self.mesh is None:
            return function(*args, **kwargs)
        with meshes.mesh_scope(self.mesh, type(self).__name__):
            return function(*args, **kwargs)

    def _traced(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``trace`` for a call (`jax.jit`'s ``lower`` is ``trace(...).lower()``): JAX's
        stage, whose ``lower()`` and that stage's ``compile()`` count their compiles
        for this object (`compiles.own_stage`), with the number of the trace and the
        placements of the call's inputs."""
        stage = self._forward(self._jitted.trace, args, kwargs)
        known = self._signature.get()
        traced = self._plan.convention.jax_stage(stage)
        number = compiles.trace_number(self._handle, getattr(traced, "jaxpr", None))
        try:
            if number is None:  # a trace no compile or stage has shown its jaxpr yet
                number = self._reused(args, kwargs)
            named = named_arguments(known, self._static, args, kwargs, static=False)
            placed = compiles.call_placements(named, stand_ins=True)
        except Exception:  # what explain refuses (a cycle): what is not known stays so
            placed = None
        compiles.own_stage(traced, self._handle, number, placed)
        return stage

    @_user_facing
    def lower(self, *args: Any, **kwargs: Any) -> jax.stages.Lowered:
        """Lowers the function for these arguments (under the mesh if set); counts a trace
        if the signature is new, and its ``compile()`` counts in `compiles_used`. See
        `jax.jit`'s ``lower``. With ``propagate_updates=True``, its ``compile()`` is
        called with the `flax.nnx` objects, as the object is, and writes back their
        updates (a stage of tinax's that has every attribute of JAX's, typed as it)."""
        with private.lowering():  # lowered at once: placed against in_shardings, JAX's error
            stage = self._traced(args, kwargs)
        return self._under_mesh(stage.lower)

    @_user_facing
    def trace(self, *args: Any, **kwargs: Any) -> jax.stages.Traced:
        """Traces the function for these arguments (under the mesh if set); counts a trace
        if the signature is new, and its ``lower().compile()`` counts in
        `compiles_used`. See `jax.jit`'s ``trace``. With ``propagate_updates=True``, a
        stage of tinax's that has every attribute of JAX's, typed as it."""
        return self._traced(args, kwargs)

    @_user_facing
    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """Output shapes and dtypes for these arguments, without running the function;
        counts a trace if the signature is new. See `jax.jit`'s ``eval_shape``."""
        out = self._forward(self._jitted.eval_shape, args, kwargs)
        return self._plan.convention.output(out)

    @_user_facing
    def precompile(self, *args: Any, **kwargs: Any) -> jax.stages.Compiled:
        """Traces and compiles now for these arguments, so that the next call with
        the same abstract signature runs at once: no trace and no compile.

        Use it before timing a step, or in a test fixture before a property test,
        where the first call's compile would otherwise land in the clock (or in
        hypothesis's deadline). ``lower`` or ``eval_shape`` alone trace but leave
        the compile to the first call. A new signature counts as a trace like any
        other; one traced before does not count again.

        Arguments can be concrete arrays, `jax.ShapeDtypeStruct`s (give them the
        sharding the real arguments will have; one naming an abstract mesh is
        placed on the object's mesh, or on the ambient one from `jax.set_mesh`),
        or a single `TracedSignature`, whose recorded arguments are used (see
        ``TracedSignature.abstract_arguments``): ``step.precompile(sig)`` with
        ``sig = step.traced_signatures[-1]``. JAX's types do not say how arrays
        were split over a mesh's Auto axes; a trace records it from the traced
        call's own arrays, and its signature compiles for that split. For
        another split, give the arrays, or `jax.ShapeDtypeStruct`s with their
        sharding.

        Args:
            *args: Positional arguments, as they would be passed to the call, or
                a single `TracedSignature`.
            **kwargs: Keyword arguments, as they would be passed to the call.

        Returns:
            The compiled function (`jax.stages.Compiled`), as ``lower(...).compile()``
            returns it. Calling the object itself runs the same executable. With
            ``propagate_updates=True``, a compiled stage called as the object is,
            with the `flax.nnx` objects, writing back their updates.

        Raises:
            TraceBudgetError: The signature is new and the budget is spent.
            ValueError: A `TracedSignature` recorded under another ambient mesh than
                the one ``precompile`` runs under, or one that was not recorded.
        """
        return self._precompiled(args, kwargs)[3]

    @_user_facing
    def precompile_buckets(self, *args: Any, **kwargs: Any) -> int:
        """Traces and compiles now every combination of the object's ``buckets``, so
        that no call inside them traces or compiles later.

        The arguments are an example call that gives every other dimension, dtype
        and sharding (arrays or `jax.ShapeDtypeStruct`s); each array under a declared
        path takes each combination of sizes on its declared axes. Each is traced
        and lowered in the calling thread, then compiled by it and up to one fewer
        threads than the CPUs (XLA releases the GIL while it compiles), each logged
        at ``INFO`` on the ``tinax`` logger as it ends; JAX's persistent compilation cache and
        warm start serve them as any trace. Each new signature counts as a trace.

        Args:
            *args: Positional arguments of an example call.
            **kwargs: Keyword arguments of an example call.

        Returns:
            How many combinations this call traced and compiled: those that were
            new (one traced before is compiled again by JAX only if its executable
            is gone). A trace another thread makes meanwhile (a warm start, a
            concurrent call) counts against the budget but not here.

        Raises:
            ValueError: The object declares no buckets, or an example argument has
                no array under a declared path, or too few axes; or a bucket size
                is no multiple of the devices its axis is sharded over (before any
                trace); or some combinations failed to trace or compile: raised
                after the others are compiled, naming each failed combination and
                its cause (JAX's error is its ``__cause__``), its budget slot given
                back.
            TraceBudgetError: The budget is spent before every combination is
                traced (a trace outside the buckets ran under ``on_exceed``).
        """
        return bucket_compiles.precompile_buckets(self, args, kwargs)

    def _precompiled(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any], Any, Any]:
        """`precompile`: the arguments it traced (abstract where given a signature), its
        JAX stage (``Traced``) and the compiled function."""
        args, kwargs, jax_stage, lowered = self._lowered(args, kwargs)
        # compile() under the mesh too: compiled outside it, the executable is not the one
        # a call under the mesh looks up, and that call compiles again.
        return args, kwargs, jax_stage, self._under_mesh(lowered.compile)

    def _lowered(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any], Any, Any]:
        """`precompile` up to its compile: the arguments it traced, its JAX stage and the
        lowered stage (``precompile_buckets`` lowers in the calling thread, under the GIL,
        and compiles in threads)."""
        args, kwargs = record.precompile_arguments(type(self).__name__, self.mesh, args, kwargs)
        stage = self._traced(args, kwargs)
        lowered = self._under_mesh(stage.lower)
        return args, kwargs, self._plan.convention.jax_stage(stage), lowered

    def _jax_level(
        self,
        method: Callable[[Any, tuple[Any, ...], dict[str, Any]], R],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> R:
        """``method(jitted, jax_args, jax_kwargs)``: the object's own `jax.jit` object and
        a call's arguments as it gets them (split under ``static_nonarrays``, the nnx
        objects replaced under ``propagate_updates``), under the mesh."""
        jitted, convention = self._jitted, self._plan.convention

        def run(*jax_args: Any, **jax_kwargs: Any) -> R:
            return convention.at_jax(jitted, method, jax_args, jax_kwargs)

        return self._forward(run, args, kwargs)

    def clear_cache(self) -> None:
        """Empties this object's compilation cache, as `jax.jit`'s ``clear_cache``.

        The next call traces again, whatever its signature, and that trace counts
        against the budget like any other: the count and the history are kept,
        and ``explain`` knows that no earlier trace can be reused.
        """
        self._jitted.clear_cache()
        self._ledger.clear()

    # Copies. A compiled function behaves like a function, which `copy` returns
    # unchanged: a model or trainer deep-copied keeps the same object, its compiled
    # code and its budget (docs/decisions/as-jax-jit.md).
    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self

    def __reduce__(self) -> Any:
        name = type(self).__name__
        raise TypeError(
            f"{name} objects cannot be pickled: the compiled function and its trace budget "
            f"belong to this process (jax.jit objects cannot be pickled either); pickle the "
            f"function instead and build a new {name} where it is loaded."
        )

    # The hot path. Calling the object looks up ``__call__`` on its type, finds this
    # property, whose getter (C code, no Python frame) returns the callable built at
    # wrap time: the `jax.jit` object itself when no mesh is bound. A ``def __call__``
    # would add one Python frame, about 12% of a jax.jit dispatch (docs/benchmarks.md).
    __call__ = property(operator.attrgetter("_call"))

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return types.MethodType(cast("Callable[..., Any]", self), instance)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({report.function_name(self.function)}, "
            f"traces_used={self.traces_used}, max_traces={self.max_traces}, mesh={self.mesh!r})"
        )
