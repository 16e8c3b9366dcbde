"""`BatchedJit` and `batched_jit`."""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Hashable, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Self,
    TypeVar,
    cast,
    overload,
)

import attrs
from jax.sharding import Mesh

from tinax._src.buckets.dims import Buckets, ShapeBuckets
from tinax._src.core import validation
from tinax._src.jit import build, jax_options, methods, options
from tinax._src.jit import plan as planning
from tinax._src.models.nnx import tracing as nnx_tracing

P = ParamSpec("P")
Q = ParamSpec("Q")
R = TypeVar("R")
S = TypeVar("S")

_API = "BatchedJit"


@attrs.frozen(eq=False, slots=False, repr=False)
class BatchedJit(methods.BudgetedMixin, Generic[P, R]):
    """``jax.jit(jax.vmap(function))`` with an exact, per-object trace budget.

    Built by `batched_jit`, which takes the same arguments; see there for what
    each one means. Every argument is validated when the object is built, and
    the compiled callable is built once, then. Fields are read-only.

    Attributes:
        function: The wrapped (unbatched) callable.
        in_axes: Input batch axis specification, as given to `jax.vmap`.
        out_axes: Output batch axis specification, as given to `jax.vmap`.
        axis_size: Explicit batch size, or ``None`` to infer it.
        max_traces: The budget: how many traces are permitted.
        mesh: The mesh entered around every call, or ``None``.
        on_exceed: The overrun policy (``"raise"``, ``"warn"``, ``"log"``), or
            ``None`` for the process default.
        axis_name: As given to `jax.vmap` (``None`` if not given).
        spmd_axis_name: As given to `jax.vmap` (``None`` if not given).
        sum_match: As given to `jax.vmap`.
        static_argnums: Normalized tuple of static argument indices, or ``None``.
        static_argnames: Normalized tuple of static keyword argument names.
        donate_argnums: Normalized tuple of donated argument indices, or ``None``.
        donate_argnames: Normalized tuple of donated keyword argument names.
        in_shardings: As given to `jax.jit` (unspecified if not given).
        out_shardings: As given to `jax.jit` (unspecified if not given).
        keep_unused: As given to `jax.jit`.
        device: As given to `jax.jit`.
        backend: As given to `jax.jit`.
        inline: As given to `jax.jit`.
        compiler_options: As given to `jax.jit`.
        static_nonarrays: Whether every leaf that is not an array is static.

        propagate_updates: What becomes of a `flax.nnx` Variable the function
            assigns: ``None`` or ``True`` (an error if it would be lost; a
            per-example value cannot be written back) or ``False`` (dropped).
        buckets: The sizes each declared axis may take (read-only; the `Buckets`
            given, where one was), or ``None``.
        traces_used: How many traces this object has made.
        compiles_used: How many XLA compiles this object has caused, including
            compiles without a new trace.
        cache_loads: How many executables of this object JAX loaded from its
            persistent compilation cache instead of compiling them.
        traced_signatures: The abstract (batched) signature of each trace, oldest first.
    """

    function: Callable[P, R]
    in_axes: int | None | Sequence[Any] = attrs.field(default=0, kw_only=True)  # noqa: RUF036 (the page's order)
    out_axes: Any = attrs.field(default=0, kw_only=True)
    axis_size: int | None = attrs.field(default=None, kw_only=True)
    max_traces: int = attrs.field(kw_only=True)
    mesh: Mesh | None = attrs.field(default=None, kw_only=True)
    on_exceed: validation.OnExceed | None = attrs.field(default=None, kw_only=True)
    # jax.vmap's other options, then jax.jit's (jax_options.py): passed on only if given.
    axis_name: Hashable | None = attrs.field(default=None, kw_only=True)
    spmd_axis_name: validation.SpmdAxisName | None = attrs.field(default=None, kw_only=True)
    sum_match: bool = attrs.field(default=False, kw_only=True)
    static_argnums: int | Sequence[int] | None = attrs.field(default=None, kw_only=True)
    static_argnames: Sequence[str] = attrs.field(default=jax_options.NO_NAMES, kw_only=True)
    donate_argnums: int | Sequence[int] | None = attrs.field(default=None, kw_only=True)
    donate_argnames: Sequence[str] = attrs.field(default=jax_options.NO_NAMES, kw_only=True)
    in_shardings: Any = attrs.field(default=jax_options.UNSPECIFIED, kw_only=True)
    out_shardings: Any = attrs.field(default=jax_options.UNSPECIFIED, kw_only=True)
    keep_unused: bool = attrs.field(default=False, kw_only=True)
    device: jax_options.Device | None = attrs.field(default=None, kw_only=True)
    backend: str | None = attrs.field(default=None, kw_only=True)
    inline: bool | enum.Enum = attrs.field(default=False, kw_only=True)
    compiler_options: dict[str, Any] | None = attrs.field(default=None, kw_only=True)
    static_nonarrays: bool = attrs.field(default=False, kw_only=True)

    propagate_updates: bool | None = attrs.field(default=None, kw_only=True)
    buckets: ShapeBuckets | Buckets | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        plan = planning.parse(_API, self.__dict__)  # the fields, as attrs's __init__ set them
        vmap = cast("planning.Vmap", plan.vmap)
        statics, convention = plan.statics, plan.convention
        # Watched per example, under jax.vmap: an assignment there is where it is lost.
        per_example = nnx_tracing.watched(
            plan.function, plan.propagate_updates, plan.function, plan.signature, batched=True
        )
        # in_axes/out_axes pass through: jax.vmap gives specific errors for them.
        in_axes, out_axes, axis_size, vmap_options = vmap

        def split(inner: Callable[..., Any]) -> Callable[..., Any] | None:
            # Batched at trace time, where the call is split (static arguments, or leaves
            # that are not arrays, are not batched); None: the jax.vmap of the whole call.
            return convention.batch(inner, statics, in_axes, out_axes, axis_size, vmap_options)

        def batch(inner: Callable[..., Any]) -> Callable[..., Any]:
            found = split(inner)
            if found is None:
                return validation.vmapped(_API, inner, in_axes, out_axes, axis_size, vmap_options)
            return found

        # Built in every case: jax.vmap checks in_axes/out_axes now, at wrap time, also where
        # the call is batched by a split that builds its jax.vmap only at trace time.
        batched = validation.vmapped(_API, per_example, in_axes, out_axes, axis_size, vmap_options)
        batched = split(per_example) or batched
        build.build(self, plan, batched, around=batch)

    if TYPE_CHECKING:  # at run time, BudgetedMixin's: no Python frame per call

        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
            return self._call(*args, **kwargs)

        @property
        def __wrapped__(self) -> Callable[P, R]:  # the function, as metadata.present sets
            return self.function

        # Bound as a method as at run time (types.MethodType): ``self`` taken off.
        @overload
        def __get__(self, instance: None, owner: type[Any] | None = None) -> Self: ...
        @overload
        def __get__(
            self: BatchedJit[Concatenate[S, Q], R], instance: S, owner: type[Any] | None = None
        ) -> Callable[Q, R]: ...
        @overload
        def __get__(self, instance: object, owner: type[Any] | None = None) -> Self: ...
        def __get__(self, instance: object, owner: type[Any] | None = None) -> Any:
            return methods.BudgetedMixin.__get__(self, instance, owner)


@overload
def batched_jit(
    function: Callable[P, R],
    *,
    in_axes: int | None | Sequence[Any] = 0,  # noqa: RUF036 (the page's order)
    out_axes: Any = 0,
    axis_size: int | None = None,
    max_traces: int,
    mesh: Mesh | None = None,
    on_exceed: validation.OnExceed | None = None,
    axis_name: Hashable | None = None,
    spmd_axis_name: validation.SpmdAxisName | None = None,
    sum_match: bool = False,
    static_argnums: int | Sequence[int] | None = None,
    static_argnames: str | Sequence[str] = (),
    donate_argnums: int | Sequence[int] | None = None,
    donate_argnames: str | Sequence[str] = (),
    in_shardings: Any = ...,
    out_shardings: Any = ...,
    keep_unused: bool = False,
    device: jax_options.Device | None = None,
    backend: str | None = None,
    inline: bool | enum.Enum = False,
    compiler_options: dict[str, Any] | None = None,
    static_nonarrays: bool = False,
    propagate_updates: bool | None = None,
    buckets: ShapeBuckets | Buckets | None = None,
) -> BatchedJit[P, R]: ...


@overload
def batched_jit(
    *,
    in_axes: int | None | Sequence[Any] = 0,  # noqa: RUF036 (the page's order)
    out_axes: Any = 0,
    axis_size: int | None = None,
    max_traces: int,
    mesh: Mesh | None = None,
    on_exceed: validation.OnExceed | None = None,
    axis_name: Hashable | None = None,
    spmd_axis_name: validation.SpmdAxisName | None = None,
    sum_match: bool = False,
    static_argnums: int | Sequence[int] | None = None,
    static_argnames: str | Sequence[str] = (),
    donate_argnums: int | Sequence[int] | None = None,
    donate_argnames: str | Sequence[str] = (),
    in_shardings: Any = ...,
    out_shardings: Any = ...,
    keep_unused: bool = False,
    device: jax_options.Device | None = None,
    backend: str | None = None,
    inline: bool | enum.Enum = False,
    compiler_options: dict[str, Any] | None = None,
    static_nonarrays: bool = False,
    propagate_updates: bool | None = None,
    buckets: ShapeBuckets | Buckets | None = None,
) -> Callable[[Callable[P, R]], BatchedJit[P, R]]: ...


def batched_jit(  # pyright: ignore[reportInconsistentOverload] (returns a decorator without function)
    function: Callable[P, R] = options.DECORATE,
    *,
    in_axes: int | None | Sequence[Any] = 0,  # noqa: RUF036 (the page's order)
    out_axes: Any = 0,
    axis_size: int | None = None,
    max_traces: int,
    mesh: Mesh | None = None,
    on_exceed: validation.OnExceed | None = None,
    axis_name: Hashable | None = None,
    spmd_axis_name: validation.SpmdAxisName | None = None,
    sum_match: bool = False,
    static_argnums: int | Sequence[int] | None = None,
    static_argnames: Sequence[str] = (),
    donate_argnums: int | Sequence[int] | None = None,
    donate_argnames: Sequence[str] = (),
    in_shardings: Any = jax_options.UNSPECIFIED,
    out_shardings: Any = jax_options.UNSPECIFIED,
    keep_unused: bool = False,
    device: jax_options.Device | None = None,
    backend: str | None = None,
    inline: bool | enum.Enum = False,
    compiler_options: dict[str, Any] | None = None,
    static_nonarrays: bool = False,
    propagate_updates: bool | None = None,
    buckets: ShapeBuckets | Buckets | None = None,
) -> BatchedJit[P, R]:
    """Batch a callable with jax.vmap, then JIT it with an exact trace budget.

    in_axes/out_axes are passed through unvalidated: raw jax.vmap already gives
    clear, specific errors for a malformed axis specification. axis_size is
    validated because raw jax.vmap silently accepts a boolean there, producing
    an unrelated, confusing error instead of a clear rejection. This is the
    auto-parallel, JAX-native replacement for legacy pmap-style batching;
    combine with a Manual-axis tinax.parallel.shard_mapped for the manual-SPMD
    alternative.

    The budget counts traces of the whole batched computation, exactly as for
    `bounded_jit`; the traced signatures record the batched arguments.

    Args:
        function: Callable to batch and JIT-compile.
        in_axes: Input batch axis specification, forwarded to `jax.vmap`. Defaults to 0.
        out_axes: Output batch axis specification, forwarded to `jax.vmap`. Defaults to 0.
        axis_size: Explicit batch size, or `None` to infer it from the arguments.
            Must be positive if given.
        max_traces: Maximum number of distinct traces to permit. Must be non-negative.
        mesh: Mesh to enter around every call, or `None` to use the ambient mesh.
        on_exceed: What a trace over the budget does: ``"raise"`` (raise
            `TraceBudgetError`, as with no policy set), ``"warn"`` (emit a
            `TraceBudgetWarning` with the same diagnosis, then run and count
            the trace) or ``"log"`` (log it at ``WARNING`` on the ``tinax``
            logger, then run and count the trace). Defaults to `None`: the
            innermost `exceed_policy`, else the ``TINAX_ON_EXCEED`` environment
            variable, else ``"raise"``.
        axis_name: As `jax.vmap`: a name for the batch axis, for collectives over
            it (``jax.lax.psum(x, "batch")``). Defaults to none.
        spmd_axis_name: As `jax.vmap`: mesh axes the batch axis is partitioned
            over. Must be axes of `mesh` when one is bound. Defaults to none.
        sum_match: As `jax.vmap`. Defaults to `False`.
        static_argnums: As `jax.jit`: positional argument indices to treat as
            static. Static arguments are not batched (they never reach `jax.vmap`);
            an `in_axes` tuple with an entry per positional argument has the
            static ones' entries dropped. Defaults to none.
        static_argnames: As `jax.jit`: argument names to treat as static; not
            batched. Defaults to none. `None`, `jax.jit`'s default, means the same.
        donate_argnums: As `jax.jit`: positional argument indices whose buffers may
            be donated. Defaults to none.
        donate_argnames: As `jax.jit`: argument names whose buffers may be
            donated. Defaults to none. `None`, `jax.jit`'s default, means the same.
        in_shardings: As `jax.jit`, for the batched arguments. Defaults to
            unspecified.
        out_shardings: As `jax.jit`, for the batched outputs. Defaults to
            unspecified.
        keep_unused: As `jax.jit`. Defaults to `False`.
        device: As `jax.jit` (deprecated there). Not with `mesh`. Defaults to `None`.
        backend: As `jax.jit` (deprecated there). Not with `mesh`. Defaults to `None`.
        inline: As `jax.jit`: a bool, or a `jax.Inline` where the running JAX has
            it (0.11 and later). Defaults to `False`.
        compiler_options: As `jax.jit`: XLA compiler options by name. Defaults to
            `None`.
        static_nonarrays: Hold every leaf of the arguments that is not a JAX or NumPy
            array static, as ``eqx.filter_jit`` does: the functions, Python numbers
            and strings inside a model (an equinox ``Module``) are compared as JAX
            compares static arguments (same type and ``==``; they must be
            hashable), each new value traces again, and the non-array leaves of
            the output come back as they are (``model = step(model, x)``).
            Leaves that are not arrays are not batched. `donate_argnums`/
            `donate_argnames` donate the array leaves of the arguments they name.
            Not with `static_argnums`, `static_argnames` or `in_shardings`.
            Defaults to `False`: `jax.jit`'s behaviour, and a cached call is the
            `jax.jit` object itself.

        propagate_updates: For `flax.nnx` objects among the arguments, what
            becomes of a ``Variable`` the function assigns, which `jax.vmap` and
            `jax.jit` drop silently. `None` (the default) and `True`: a trace
            that assigns a Variable whose new value is not returned raises
            `ValueError`, naming each path (each example would assign its own
            value, which cannot be written back into one object: return the
            objects, with `out_axes` for them). `False`: dropped, as `jax.jit`
            does.

        buckets: The sizes each declared axis of an argument may take: a mapping
            of an argument's name, or a path into it as tinax prints paths
            (``"batch['tokens']"``), to a mapping of axis (of the argument as the
            caller passes it) to its sizes, increasing (`bucket_sizes` makes the
            usual lists) or to a `Dim`. A key names every array under it, and
            those arrays share one size per axis. Every axis given one `Dim` (by
            name) is one dimension: those axes take one size, and it counts once.
            A `Buckets` adds ``where``, the combinations that can occur. A trace
            whose size on a declared axis is no bucket, whose axes of one `Dim`
            differ, or whose combination ``where`` rules out is refused before it
            traces, as a trace over budget is (`on_exceed`), naming the path, the
            axis, the size and the bucket to pad it to (`pad_to_bucket`,
            `pad_ragged`); tinax never pads a call itself. A call inside the
            buckets costs nothing more; ``precompile_buckets`` compiles them all
            ahead. `max_traces` counts every trace and must be at least the number
            of combinations of buckets (those ``where`` allows). Defaults to
            `None`: no buckets.

    Returns:
        The batched, trace-budgeted, JIT-compiled callable. Without `function`, a
            decorator that builds it (``@batched_jit(in_axes=(None, 0), max_traces=1)``).

    Raises:
        TypeError: If `function` is not callable, `axis_size` is not an integer
            or `None` (booleans rejected), `max_traces` is not an integer
            (booleans rejected), or `mesh` is not a `jax.sharding.Mesh` or `None`.
            Also: `function` is a generator function, or a `staticmethod` or
            `classmethod` object (as `jax.jit` rejects them); `mesh` is an
            `AbstractMesh`; `jax.vmap` rejects `in_axes`/`out_axes` (its own
            error, passed through); `on_exceed` is neither a str nor `None`; an axis
            name is not hashable; `sum_match` is not a bool; any `jax.jit` option
            is malformed, or `static_nonarrays` is not a bool, as for `bounded_jit`;
            `propagate_updates` is not `True`, `False` or `None`; `buckets` is not a `Buckets` or a
            mapping of str to a mapping of int to a sequence of int or a `Dim`.
        ValueError: If `axis_size` is not positive, `max_traces` is negative, or
            `mesh` is empty. Also: `mesh` has a Manual axis; `on_exceed` is a
            str other than ``"raise"``, ``"warn"`` and ``"log"``; `spmd_axis_name`
            names an axis `mesh` lacks; a `jax.jit` option is invalid, or given
            with `static_nonarrays`, as for `bounded_jit`; `propagate_updates` is
            `True` with `static_nonarrays`; `function` is a method bound to a
            `flax.nnx` object, as for `bounded_jit`; `buckets` names
            no parameter of `function`, or a static one, or one array twice, has a
            negative axis or sizes that are not positive and increasing, two
            different Dims of one name, or more combinations than `max_traces`. On
            a call, an axis `buckets` declares beyond an array's rank, or a path
            under which the argument has no array.

    Examples:
        >>> import jax.numpy as jnp
        >>> from tinax.jit import batched_jit
        >>> norms = batched_jit(lambda v: (v * v).sum(), max_traces=1)
        >>> norms(jnp.ones((4, 3))).tolist()
        [3.0, 3.0, 3.0, 3.0]
    """
    # The arguments, as the class takes them (the signature is the class's: held to the
    # declaration by tests/test_jit_options.py); no dict built for them in between.
    values = locals()
    if function is options.DECORATE:  # @batched_jit(max_traces=..., ...): as jax.jit(**options)
        return cast("Any", functools.partial(BatchedJit, **options.given(_API, values)))
    return BatchedJit(**values)


options.page_defaults(batched_jit)  # see bounded_jit
