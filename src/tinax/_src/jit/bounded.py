"""`BoundedJit` and `bounded_jit`."""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Sequence
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

P = ParamSpec("P")
Q = ParamSpec("Q")
R = TypeVar("R")
S = TypeVar("S")

_API = "BoundedJit"


@attrs.frozen(eq=False, slots=False, repr=False)
class BoundedJit(methods.BudgetedMixin, Generic[P, R]):
    """A `jax.jit`-compiled callable with an exact, per-object trace budget.

    Built by `bounded_jit`, which takes the same arguments; see there for what
    each one means. Every argument is validated when the object is built, and
    the compiled callable is built once, then. Fields are read-only.

    Attributes:
        function: The wrapped callable.
        max_traces: The budget: how many traces are permitted.
        static_argnames: Normalized tuple of static keyword argument names.
        donate_argnames: Normalized tuple of donated keyword argument names.
        mesh: The mesh entered around every call, or ``None``.
        on_exceed: The overrun policy (``"raise"``, ``"warn"``, ``"log"``), or
            ``None`` for the process default.
        static_argnums: Normalized tuple of static argument indices, or ``None``.
        donate_argnums: Normalized tuple of donated argument indices, or ``None``.
        in_shardings: As given to `jax.jit` (unspecified if not given).
        out_shardings: As given to `jax.jit` (unspecified if not given).
        keep_unused: As given to `jax.jit`.
        device: As given to `jax.jit`.
        backend: As given to `jax.jit`.
        inline: As given to `jax.jit`.
        compiler_options: As given to `jax.jit`.
        static_nonarrays: Whether every leaf that is not an array is static.

        propagate_updates: What becomes of a `flax.nnx` Variable the function
            assigns: ``None`` (an error if it would be lost), ``True`` (written
            back) or ``False`` (dropped).
        buckets: The sizes each declared axis may take (read-only; the `Buckets`
            given, where one was), or ``None``.
        traces_used: How many traces this object has made.
        compiles_used: How many XLA compiles this object has caused, including
            compiles without a new trace.
        cache_loads: How many executables of this object JAX loaded from its
            persistent compilation cache instead of compiling them.
        traced_signatures: The abstract signature of each trace, oldest first.
    """

    function: Callable[P, R]
    max_traces: int = attrs.field(kw_only=True)
    static_argnames: Sequence[str] = attrs.field(default=jax_options.NO_NAMES, kw_only=True)
    donate_argnames: Sequence[str] = attrs.field(default=jax_options.NO_NAMES, kw_only=True)
    mesh: Mesh | None = attrs.field(default=None, kw_only=True)
    on_exceed: validation.OnExceed | None = attrs.field(default=None, kw_only=True)
    # jax.jit's other options, with its defaults (jax_options.py): passed on only if given.
    static_argnums: int | Sequence[int] | None = attrs.field(default=None, kw_only=True)
    donate_argnums: int | Sequence[int] | None = attrs.field(default=None, kw_only=True)
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
        build.build(self, plan, plan.function)

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
            self: BoundedJit[Concatenate[S, Q], R], instance: S, owner: type[Any] | None = None
        ) -> Callable[Q, R]: ...
        @overload
        def __get__(self, instance: object, owner: type[Any] | None = None) -> Self: ...
        def __get__(self, instance: object, owner: type[Any] | None = None) -> Any:
            return methods.BudgetedMixin.__get__(self, instance, owner)


@overload
def bounded_jit(
    function: Callable[P, R],
    *,
    max_traces: int,
    static_argnames: str | Sequence[str] = (),
    donate_argnames: str | Sequence[str] = (),
    mesh: Mesh | None = None,
    on_exceed: validation.OnExceed | None = None,
    static_argnums: int | Sequence[int] | None = None,
    donate_argnums: int | Sequence[int] | None = None,
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
) -> BoundedJit[P, R]: ...


@overload
def bounded_jit(
    *,
    max_traces: int,
    static_argnames: str | Sequence[str] = (),
    donate_argnames: str | Sequence[str] = (),
    mesh: Mesh | None = None,
    on_exceed: validation.OnExceed | None = None,
    static_argnums: int | Sequence[int] | None = None,
    donate_argnums: int | Sequence[int] | None = None,
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
) -> Callable[[Callable[P, R]], BoundedJit[P, R]]: ...


def bounded_jit(  # pyright: ignore[reportInconsistentOverload] (returns a decorator without function)
    function: Callable[P, R] = options.DECORATE,
    *,
    max_traces: int,
    static_argnames: Sequence[str] = (),
    donate_argnames: Sequence[str] = (),
    mesh: Mesh | None = None,
    on_exceed: validation.OnExceed | None = None,
    static_argnums: int | Sequence[int] | None = None,
    donate_argnums: int | Sequence[int] | None = None,
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
) -> BoundedJit[P, R]:
    """JIT a callable with an exact trace budget, validated at wrap time, not first call.

    static_argnames/donate_argnames overlap or duplication is caught here. Raw
    jax.jit (0.10.2) raises for overlapping and unknown argnames when it wraps
    too, but accepts duplicates (``("x", "x")``), a boolean argnum and a set
    silently; and it checks an ``in_shardings`` tuple's length, ``device`` and
    ``backend`` only on the first call, which can be arbitrarily deep in a
    loop: all of these are checked here. An
    optional mesh is entered around every call, removing the need for every
    call site to remember ``with jax.set_mesh(mesh):``.

    Each object owns its budget: a trace is one run of ``function`` by JAX's
    tracing (a call that misses the compilation cache, or ``.lower``,
    ``.trace``, ``.eval_shape``), including traces whose arguments are all
    static. The ``max_traces + 1``-th trace raises `TraceBudgetError` before
    the body runs; a trace whose body raises is not counted; nothing is counted
    under `jax.disable_jit`; under `chex.disable_asserts` traces are counted
    but the budget does not raise.

    Args:
        function: Callable to JIT-compile.
        max_traces: Maximum number of distinct traces to permit. Must be non-negative.
        static_argnames: Keyword argument names to treat as static. Defaults to none.
            `None`, `jax.jit`'s default, means the same.
        donate_argnames: Keyword argument names whose buffers may be donated. Defaults to none.
            `None`, `jax.jit`'s default, means the same.
        mesh: Mesh to enter around every call, or `None` to use the ambient mesh.
        on_exceed: What a trace over the budget does: ``"raise"`` (raise
            `TraceBudgetError`, as with no policy set), ``"warn"`` (emit a
            `TraceBudgetWarning` with the same diagnosis, then run and count
            the trace) or ``"log"`` (log it at ``WARNING`` on the ``tinax``
            logger, then run and count the trace). Defaults to `None`: the
            innermost `exceed_policy`, else the ``TINAX_ON_EXCEED`` environment
            variable, else ``"raise"``.
        static_argnums: As `jax.jit`: positional argument indices to treat as
            static (a negative index counts from the end of the call's positional
            arguments). Given alone, the parameters at these indices are static
            when passed by keyword too, as JAX infers their names. Defaults to none.
        donate_argnums: As `jax.jit`: positional argument indices whose buffers may
            be donated. Defaults to none.
        in_shardings: As `jax.jit`: a sharding, or a tuple with one per positional
            argument that is not static (a prefix tree of each); a `PartitionSpec`
            resolves against `mesh` when one is bound, else the ambient mesh.
            Defaults to unspecified (inferred from the arguments).
        out_shardings: As `jax.jit`: the sharding of the outputs (a prefix tree).
            Defaults to unspecified.
        keep_unused: As `jax.jit`: keep unused arguments in the compiled program.
            Defaults to `False`.
        device: As `jax.jit` (deprecated there): the device to run on. Not with
            `mesh`. Defaults to `None`.
        backend: As `jax.jit` (deprecated there): the platform to run on, e.g.
            ``"cpu"``. Not with `mesh`. Defaults to `None`.
        inline: As `jax.jit`: inline the function into enclosing traces instead of
            a nested call; a bool, or a `jax.Inline` where the running JAX has it
            (0.11 and later). Defaults to `False`.
        compiler_options: As `jax.jit`: XLA compiler options by name. Defaults to
            `None`.
        static_nonarrays: Hold every leaf of the arguments that is not a JAX or NumPy
            array static, as ``eqx.filter_jit`` does: the functions, Python numbers
            and strings inside a model (an equinox ``Module``) are compared as JAX
            compares static arguments (same type and ``==``; they must be
            hashable), each new value traces again, and the non-array leaves of
            the output come back as they are (``model = step(model, x)``).
            `donate_argnums`/`donate_argnames` donate the array leaves of the
            arguments they name (as ``eqx.filter_jit(donate="all")`` donates every
            argument's). Not with `static_argnums`, `static_argnames` or
            `in_shardings`. Defaults to `False`: `jax.jit`'s behaviour, and a
            cached call is the `jax.jit` object itself.

        propagate_updates: For `flax.nnx` objects (Modules, Optimizers, Rngs)
            among the arguments, what becomes of a ``Variable`` the function
            assigns (``optimizer.update``, BatchNorm statistics, Dropout's RNG
            counter), which `jax.jit` drops silently. `None` (the default): a
            trace that assigns a Variable whose new value is not returned raises
            `ValueError`, naming each path, before anything is cached; a
            function that returns the objects is untouched, and a cached call
            costs nothing more. `True`: the new values are written back into the
            caller's objects after every call, as ``nnx.jit`` does (nnx
            objects passed as arguments or inside tuple, list or dict
            arguments, nested up to 32 levels; one the function returns comes back as the caller's
            own; ``lower(...).compile()`` is called with the objects too;
            `out_shardings` is for the function's output). A change of their
            structure inside the function (a Variable replaced, submodules
            swapped) raises `ValueError` naming each attribute, as does a
            cycle among them, before any flatten. `False`: dropped, as
            `jax.jit` does.

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
        The trace-budgeted, JIT-compiled callable. Without `function`, a decorator
            that builds it (``@bounded_jit(max_traces=1, static_argnames="n")``).

    Raises:
        TypeError: If `function` is not callable, `max_traces` is not an integer
            (booleans rejected), `static_argnames`/`donate_argnames` is not a
            sequence of strings, or `mesh` is not a `jax.sharding.Mesh` or `None`.
            Also: `function` is a generator function, or a `staticmethod` or
            `classmethod` object (as `jax.jit` rejects them); an argnames option is an
            unordered or one-shot iterable (set, generator); `mesh` is an
            `AbstractMesh`; `on_exceed` is neither a str nor `None`; an argnums
            option is not an int or an ordered sequence of int (booleans rejected);
            `keep_unused` is not a bool; `inline` is neither a bool nor a
            `jax.Inline`; `device` is not a `jax.Device`;
            `backend` is not a str; `compiler_options` is not a dict of str;
            `jax.jit` rejects a sharding (its own error); `static_nonarrays` is not
            a bool; `propagate_updates` is not `True`, `False` or `None`;
            `buckets` is not a `Buckets` or a mapping of str to a mapping of int
            to a sequence of int or a `Dim`. On a call with `static_nonarrays`, a
            leaf that is not an array is not hashable (the error names its path).
        ValueError: If `max_traces` is negative, an argname entry is empty or
            duplicated, `static_argnames` and `donate_argnames` overlap, or
            `mesh` is empty. Also: an argname is not a keyword parameter of
            `function` (positional-only, ``*args``, or absent without
            ``**kwargs``); `donate_argnames` is given for a function without a
            signature; `mesh` has a Manual axis; `on_exceed` is a str other
            than ``"raise"``, ``"warn"`` and ``"log"``; an argnums entry is
            duplicated or out of range for the positional parameters of `function`;
            a parameter is both static and donated, by number or by name; an
            `in_shardings` tuple does not have one entry per positional argument
            that is not static; `device` or `backend` is given with `mesh`;
            `backend` names no platform JAX can run on here; `static_nonarrays` is
            given with `static_argnums`, `static_argnames` or `in_shardings`, or
            with ``propagate_updates=True``; `function` is a method bound to a
            `flax.nnx` object (``model.__call__``; ``nnx.jit`` refuses it too); `buckets` names
            no parameter of `function`, or a static one, or one array twice, has a
            negative axis or sizes that are not positive and increasing, two
            different Dims of one name, or more combinations than `max_traces`. On
            a call, an axis `buckets` declares beyond an array's rank, or a path
            under which the argument has no array.

    Examples:
        >>> import jax.numpy as jnp
        >>> from tinax.jit import bounded_jit
        >>> step = bounded_jit(lambda x: x * 2, max_traces=1)
        >>> step(jnp.ones(3)).tolist()
        [2.0, 2.0, 2.0]
        >>> step.traces_used
        1
        >>> @bounded_jit(max_traces=2, static_argnames="n")
        ... def power(x, n):
        ...     return x**n
        >>> power(jnp.full(2, 3.0), n=2).tolist()
        [9.0, 9.0]
    """
    # The arguments, as the class takes them (the signature is the class's: held to the
    # declaration by tests/test_jit_options.py); no dict built for them in between.
    values = locals()
    if function is options.DECORATE:  # @bounded_jit(max_traces=..., ...): as jax.jit(**options)
        return cast("Any", functools.partial(BoundedJit, **options.given(_API, values)))
    return BoundedJit(**values)


# The page's default () for the argnames, told apart from a () the user passes: next to
# static_argnums, jax.jit infers names from numbers only when no names were given.
options.page_defaults(bounded_jit)
