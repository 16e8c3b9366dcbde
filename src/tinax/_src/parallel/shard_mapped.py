"""`ShardMapped` and `shard_mapped`: `jax.shard_map`, validated at wrap time.

`jax.shard_map` checks most of its arguments only on the first call, some not
at all (a duplicated axis, ``None`` inside an axis tuple, an unknown
``unreduced`` axis escape as a bare ``Exception``, ``KeyError`` or
``NotImplementedError`` from deep inside tracing). Here every argument is
checked once, when the object is built, in a fixed order: ``function``,
``mesh``, ``axis_names`` (type, then against the mesh), ``in_specs`` and
``out_specs`` (structure and leaf types, then each spec against the mesh and
the Manual axes), ``check_vma``, and last the number of ``in_specs`` entries
against the signature of ``function``.

Each ``check_*`` helper takes the API name, the value (and what it is checked
against) and returns the normalized value or raises exactly one `TypeError` or
`ValueError` built by `validation.message`. Nothing else may escape, whatever
the input.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from typing import Any, Generic, ParamSpec, TypeVar, cast

import attrs
import jax
import numpy as np
from jax.sharding import AxisType, Mesh, PartitionSpec

from tinax._src.core import validation
from tinax._src.core.validation import message
from tinax._src.diagnosis import report

P = ParamSpec("P")
R = TypeVar("R")

_API = "ShardMapped"
_COPIED = ("__module__", "__name__", "__qualname__", "__doc__")
_SPEC_LEAF = "a jax.sharding.PartitionSpec"
# jax.tree_util's PyTreeDef has no type stubs; strict pyright would flag every use.
_tree_util: Any = jax.tree_util


# --- mesh, axis_names, check_vma ------------------------------------------------------------


def check_shard_mesh(api: str, value: object) -> tuple[Mesh, tuple[str, ...]]:
    """Checks ``mesh``: a non-empty `jax.sharding.Mesh`, axes named by ``str``, none Manual.

    Returns the mesh and its axis names as plain ``str``, in mesh order.
    """
    mesh = validation.check_concrete_mesh(
        api,
        value,
        "a jax.sharding.Mesh",
        "shard_map makes the axes in axis_names Manual itself; "
        "build the mesh with Auto or Explicit axes",
    )
    names: tuple[object, ...] = tuple(mesh.axis_names)
    if not all(issubclass(type(name), str) for name in names):
        raise ValueError(message(api, "mesh", "a mesh whose axis names are all str", mesh))
    return mesh, tuple(str.__str__(cast("str", name)) for name in names)


def _order_key(entry: object) -> tuple[bool, str]:
    """Sorts a set's entries reproducibly: non-str entries (a TypeError) first."""
    return issubclass(type(entry), str), validation.describe(entry)


def check_axis_names(api: str, value: object, mesh_axes: tuple[str, ...]) -> tuple[str, ...]:
    """Normalizes ``axis_names`` to a tuple of distinct mesh axes, in mesh order.

    ``None`` means every mesh axis. A single ``str`` is one name (as `jax.jit`
    argnames). Otherwise a set, frozenset, tuple or list of ``str``: unlike
    argnames, order carries no meaning here, so sets are accepted. Empty is
    rejected: `jax.shard_map` reads an empty set as "every axis", which
    ``None`` says without ambiguity.
    """
    if value is None:
        return mesh_axes
    kind = type(value)
    expected = "None, a str, or a set, frozenset, tuple or list of str"
    if issubclass(kind, str):
        entries: tuple[object, ...] = (value,)
    elif issubclass(kind, tuple | list | set | frozenset):
        try:
            entries = tuple(cast("Collection[object]", value))
        except Exception:
            raise TypeError(message(api, "axis_names", expected, value)) from None
    else:
        raise TypeError(message(api, "axis_names", expected, value))
    if not entries:
        raise ValueError(
            message(
                api, "axis_names", "non-empty (pass None to make every mesh axis Manual)", value
            )
        )
    indexed = issubclass(kind, tuple | list)
    if not indexed:  # a reproducible message whatever the set's iteration order
        entries = tuple(sorted(entries, key=_order_key))
    wheres = [f"axis_names[{i}]" if indexed else "axis_names" for i in range(len(entries))]
    names: list[str] = []
    for where, entry in zip(wheres, entries, strict=True):  # types first, then values
        if not issubclass(type(entry), str):
            raise TypeError(
                message(api, where, f"{expected} ({validation.describe(entry)} is not)", value)
            )
        names.append(str.__str__(cast("str", entry)))  # a plain str: no subclass hooks from here on
    for index, (where, name) in enumerate(zip(wheres, names, strict=True)):
        if name not in mesh_axes:
            raise ValueError(
                message(
                    api,
                    where,
                    f"axes of the mesh {mesh_axes!r} ({name!r} is not one of them)",
                    value,
                )
            )
        if name in names[:index]:
            raise ValueError(
                message(api, "axis_names", f"free of duplicates ({name!r} appears twice)", value)
            )
    return tuple(axis for axis in mesh_axes if axis in names)


def check_vma_flag(api: str, value: object) -> bool:
    """Checks ``check_vma``: a Python or NumPy bool; ints (0, 1) and other truthy values are not."""
    if type(value) is bool or type(value) is np.bool_:
        return bool(cast("bool", value))
    raise TypeError(
        message(api, "check_vma", "a bool (True or False; ints and other values are not)", value)
    )


# --- in_specs and out_specs -----------------------------------------------------------------


def _is_none(value: object) -> bool:
    return value is None


def _path(parameter: str, path: tuple[Any, ...]) -> str:
    try:
        return parameter + _tree_util.keystr(path)
    except Exception:  # a dict key whose repr raises
        return f"{parameter}[...]"


def _flatten(api: str, parameter: str, value: object) -> tuple[list[tuple[str, object]], Any]:
    """The leaves of ``value`` (``None`` kept as a leaf) with their paths, and the treedef."""
    expected = f"{_SPEC_LEAF} or a pytree (tuple, list, dict) of them"
    try:
        flat, treedef = _tree_util.tree_flatten_with_path(value, is_leaf=_is_none)
        leaves: list[tuple[str, object]] = [(_path(parameter, path), leaf) for path, leaf in flat]
    except Exception:  # dict keys that cannot be sorted, a pytree node that cannot flatten
        raise TypeError(message(api, parameter, expected, value)) from None
    return leaves, treedef


def _axis_shown(name: object) -> str:
    return repr(name) if type(name) is str else validation.describe(name)


def _partitions(spec: PartitionSpec) -> tuple[Any, ...]:
    """The per-dimension entries of ``spec``. ``tuple(spec)`` asserts when the spec has
    unreduced/reduced axes; the public ``.partitions`` only exists from JAX 0.10."""
    partitions = getattr(spec, "partitions", None)
    if partitions is None:
        partitions = getattr(spec, "_partitions", None)
    return tuple(partitions) if partitions is not None else tuple(spec)


def _check_spec(
    api: str,
    where: str,
    spec: PartitionSpec,
    mesh: Mesh,
    mesh_axes: tuple[str, ...],
    manual: tuple[str, ...],
) -> None:
    """Checks one `PartitionSpec` against the mesh and the Manual axes."""
    seen: list[str] = []
    for entry in _partitions(spec):
        if entry is None:
            continue
        if entry is PartitionSpec.UNCONSTRAINED:
            raise ValueError(
                message(
                    api,
                    where,
                    f"{_SPEC_LEAF} without P.UNCONSTRAINED (shard_map fixes how every "
                    "dimension is split; use None to replicate a dimension)",
                    spec,
                )
            )
        names: tuple[object, ...] = (
            cast("tuple[object, ...]", entry) if type(entry) is tuple else (entry,)
        )
        for name in names:
            if name is None or name is PartitionSpec.UNCONSTRAINED:
                raise ValueError(
                    message(
                        api,
                        where,
                        f"{_SPEC_LEAF} whose axis tuples hold mesh axis names only "
                        f"({_axis_shown(name)} is not one)",
                        spec,
                    )
                )
            axis = str.__str__(cast("str", name)) if issubclass(type(name), str) else None
            if axis is None or axis not in mesh_axes:
                raise ValueError(
                    message(
                        api,
                        where,
                        f"{_SPEC_LEAF} over the mesh axes {mesh_axes!r} "
                        f"({_axis_shown(name)} is not one of them)",
                        spec,
                    )
                )
            if axis in seen:
                raise ValueError(
                    message(
                        api,
                        where,
                        f"{_SPEC_LEAF} that uses each mesh axis at most once "
                        f"({axis!r} appears twice)",
                        spec,
                    )
                )
            seen.append(axis)
            if axis not in manual:
                raise ValueError(
                    message(
                        api,
                        where,
                        f"{_SPEC_LEAF} over the Manual axes axis_names={manual!r} only "
                        f"({axis!r} stays Auto in the body; add it to axis_names)",
                        spec,
                    )
                )
    for kind, axes in (("unreduced", spec.unreduced), ("reduced", spec.reduced)):
        _check_unreduced(api, where, spec, kind, axes, mesh, mesh_axes, manual)


def _check_unreduced(
    api: str,
    where: str,
    spec: PartitionSpec,
    kind: str,
    axes: frozenset[Any],
    mesh: Mesh,
    mesh_axes: tuple[str, ...],
    manual: tuple[str, ...],
) -> None:
    """`jax.shard_map`'s rules for ``unreduced``/``reduced`` axes, which it checks
    only on the first call (and for an unknown axis, fails with ``KeyError``)."""
    if not axes:
        return
    for name in sorted(axes, key=_order_key):
        axis = str.__str__(cast("str", name)) if issubclass(type(name), str) else None
        if axis is None or axis not in mesh_axes:
            raise ValueError(
                message(
                    api,
                    where,
                    f"{_SPEC_LEAF} whose {kind} axes are axes of the mesh {mesh_axes!r} "
                    f"({_axis_shown(name)} is not one of them)",
                    spec,
                )
            )
        axis_type = mesh.axis_types[mesh_axes.index(axis)]
        if axis_type != AxisType.Explicit:
            raise ValueError(
                message(
                    api,
                    where,
                    f"{_SPEC_LEAF} whose {kind} axes are Explicit mesh axes "
                    f"({axis!r} is {axis_type.name})",
                    spec,
                )
            )
    if manual != mesh_axes:
        raise ValueError(
            message(
                api,
                where,
                f"{_SPEC_LEAF} without {kind} axes unless every mesh axis is Manual "
                f"(axis_names={manual!r}, mesh axes {mesh_axes!r})",
                spec,
            )
        )


def check_specs(
    api: str,
    parameter: str,
    value: object,
    mesh: Mesh,
    mesh_axes: tuple[str, ...],
    manual: tuple[str, ...],
) -> Any:
    """Checks ``in_specs`` or ``out_specs`` and returns a fresh copy of the pytree.

    ``in_specs`` is one `PartitionSpec` (applied to every positional argument)
    or a tuple with one entry per positional argument, each a `PartitionSpec`,
    ``None`` (the argument is passed to the body as is, unmapped, as in
    `jax.shard_map`) or a pytree of them matching that argument. ``out_specs``
    is a `PartitionSpec` or any pytree of them; ``None`` leaves match only
    ``None`` outputs. A top-level ``None`` is rejected for both.
    The copy keeps later mutation of a caller's list or dict from reaching
    the mapped function.
    """
    top = type(value)
    if parameter == "in_specs" and top is not PartitionSpec and top is not tuple:
        raise TypeError(
            message(
                api,
                parameter,
                f"{_SPEC_LEAF} or a tuple with one entry per positional argument "
                "(the arguments always arrive as a tuple; did you mean P() or a tuple?)",
                value,
            )
        )
    if value is None:
        raise TypeError(
            message(api, parameter, f"{_SPEC_LEAF} or a pytree of them (P() replicates)", value)
        )
    leaves, treedef = _flatten(api, parameter, value)
    specs: list[tuple[str, PartitionSpec]] = []
    for where, leaf in leaves:  # every leaf's type first, then each spec's axes
        if leaf is None:
            continue
        if type(leaf) is not PartitionSpec:
            allowed = "or None" if parameter == "in_specs" else "or None (for a None output)"
            raise TypeError(message(api, where, f"{_SPEC_LEAF} {allowed}", leaf))
        specs.append((where, leaf))
    for where, spec in specs:
        _check_spec(api, where, spec, mesh, mesh_axes, manual)
    try:
        return _tree_util.tree_unflatten(treedef, [leaf for _, leaf in leaves])
    except Exception:  # a custom pytree node that cannot be rebuilt
        raise TypeError(
            message(api, parameter, f"a pytree of {_SPEC_LEAF} that JAX can rebuild", value)
        ) from None


def check_arity(api: str, in_specs: Any, signature: inspect.Signature | None) -> None:
    """Checks that a tuple ``in_specs`` has as many entries as ``function`` can take
    positional arguments (`jax.shard_map` passes the arguments positionally)."""
    if type(in_specs) is not tuple or signature is None:
        return
    parameters = signature.parameters.values()
    positional_kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in parameters if p.kind in positional_kinds]
    required = sum(1 for p in positional if p.default is inspect.Parameter.empty)
    variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    specs = cast("tuple[object, ...]", in_specs)
    count = len(specs)
    if count >= required and (variadic or count <= len(positional)):
        return
    if variadic:
        takes = f"at least {required}"
    elif required == len(positional):
        takes = f"exactly {required}"
    else:
        takes = f"{required} to {len(positional)}"
    raise ValueError(
        message(
            api,
            "in_specs",
            f"a tuple with one entry per positional argument of function{signature}, "
            f"which takes {takes} (not {count})",
            specs,
        )
    )


# --- the class and the factory --------------------------------------------------------------


def _copy_tree(tree: Any) -> Any:
    """A fresh copy of an already validated specs pytree (``None`` leaves kept)."""
    leaves, treedef = _tree_util.tree_flatten(tree, is_leaf=_is_none)
    return _tree_util.tree_unflatten(treedef, leaves)


def _function_name(function: Callable[..., Any]) -> str:
    try:
        return report.function_name(function)
    except Exception:  # an odd callable whose attribute lookup raises
        return f"{type(function).__qualname__} instance"


def _short_repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:
        return object.__repr__(value)


@attrs.frozen(eq=False, slots=False, repr=False)
class ShardMapped(Generic[P, R]):
    """A `jax.shard_map`-ped callable whose arguments were validated at wrap time.

    Built by `shard_mapped`, which takes the same arguments; see there for what
    each one means. Every argument is validated when the object is built, and
    the mapped callable is built once, then. Fields are read-only.

    Attributes:
        function: The wrapped callable (the per-shard body).
        mesh: The mesh the body runs over.
        in_specs: The input specs, as a fresh copy of the given pytree.
        out_specs: The output specs, as a fresh copy of the given pytree.
        axis_names: Normalized tuple of the axes Manual in the body, in mesh
            order (every mesh axis when ``None`` was given).
        check_vma: Whether `jax.shard_map` checks varying manual axes.
    """

    function: Callable[P, R]
    mesh: Mesh = attrs.field(kw_only=True)
    in_specs: Any = attrs.field(kw_only=True)
    out_specs: Any = attrs.field(kw_only=True)
    axis_names: Collection[str] | None = attrs.field(default=None, kw_only=True)
    check_vma: bool = attrs.field(default=True, kw_only=True)
    _mapped: Callable[P, R] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        set_ = object.__setattr__
        function = validation.check_function(_API, self.function)
        mesh, mesh_axes = check_shard_mesh(_API, self.mesh)
        manual = check_axis_names(_API, self.axis_names, mesh_axes)
        in_specs = check_specs(_API, "in_specs", self.in_specs, mesh, mesh_axes, manual)
        out_specs = check_specs(_API, "out_specs", self.out_specs, mesh, mesh_axes, manual)
        check_vma = check_vma_flag(_API, self.check_vma)
        check_arity(_API, in_specs, validation.signature_of(function))
        # None is jax's own default, frozenset(): every mesh axis that a surrounding
        # vmap has not claimed.
        jax_axis_names = frozenset[str]() if self.axis_names is None else frozenset(manual)
        mapped = jax.shard_map(
            function,
            mesh=mesh,
            # jax gets copies of its own: mutating the exposed fields changes nothing.
            in_specs=_copy_tree(in_specs),
            out_specs=_copy_tree(out_specs),
            axis_names=jax_axis_names,
            check_vma=check_vma,
        )
        set_(self, "in_specs", in_specs)
        set_(self, "out_specs", out_specs)
        set_(self, "axis_names", manual)
        set_(self, "check_vma", check_vma)
        set_(self, "_mapped", mapped)
        for name in _COPIED:
            try:
                copied = getattr(function, name)
            except Exception:  # an odd callable: keep the class's own attribute
                continue
            set_(self, name, copied)
        set_(self, "__wrapped__", function)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._mapped(*args, **kwargs)

    def __repr__(self) -> str:
        extra = ""
        if self.axis_names != tuple(self.mesh.axis_names):
            extra += f", axis_names={self.axis_names!r}"
        if not self.check_vma:
            extra += ", check_vma=False"
        return (
            f"{type(self).__name__}({_function_name(self.function)}, mesh={self.mesh}, "
            f"in_specs={_short_repr(self.in_specs)}, out_specs={_short_repr(self.out_specs)}"
            f"{extra})"
        )


def shard_mapped(
    function: Callable[P, R],
    *,
    mesh: Mesh,
    in_specs: Any,
    out_specs: Any,
    axis_names: Collection[str] | None = None,
    check_vma: bool = True,
) -> ShardMapped[P, R]:
    """Map a callable over shards of a mesh with `jax.shard_map`, validated at wrap time.

    Raw jax.shard_map checks its specs only on the first call, and lets some
    mistakes (an axis used twice in one spec, ``None`` inside an axis tuple,
    an unknown ``unreduced`` axis) escape as a bare ``Exception``, ``KeyError``
    or ``NotImplementedError`` from deep inside tracing. Here every argument is
    checked when the object is built, with a message naming the argument, the
    value and what was expected. Combined with an unbound `tinax.jit.batched_jit`
    in the body, this is the manual-SPMD alternative to legacy ``jax.pmap``.

    The body sees, per device, the local shard of each argument, and may use
    collectives (``jax.lax.psum(x, "x")``) over the Manual axes. The result
    can be called eagerly or inside ``jax.jit``/`tinax.jit.bounded_jit`.
    Arguments are passed positionally: `jax.shard_map` accepts no keyword
    arguments. The mesh is given explicitly, so no ``jax.set_mesh`` is needed
    around calls; under a different ambient mesh `jax.shard_map` refuses the
    call. On a mesh with Explicit axes, JAX requires each argument to be
    sharded already as its in_spec says (it does not reshard).

    Args:
        function: Callable to map: the per-shard body.
        mesh: Mesh to map over. Must be a concrete, non-empty `jax.sharding.Mesh`
            without Manual axes, whose axis names are strings.
        in_specs: How each positional argument is split over the mesh: one
            `PartitionSpec` for every argument, or a tuple with one entry per
            positional argument, each a `PartitionSpec`, ``None`` (the argument
            reaches the body whole and unmapped, as a static value) or a pytree
            of them that is a prefix of that argument. Every axis named must
            be in ``axis_names``, at most once per spec.
        out_specs: How each output is assembled from the shards: a
            `PartitionSpec` or a pytree of them that is a prefix of the
            output (``None`` leaves only where the output is ``None``). An
            axis left out of a spec is a promise that the output is the same
            on every device along it (checked when ``check_vma`` is true).
        axis_names: Mesh axes Manual in the body (the others stay Auto, under
            the compiler's control): a str (one name) or a set, frozenset,
            tuple or list of names. Defaults to `None`: every mesh axis.
            Normalized to a tuple in mesh order.
        check_vma: Whether `jax.shard_map` tracks which values vary over which
            Manual axes, checking ``out_specs`` against them and making
            collectives' gradients efficient. Must be a `bool`. Defaults to `True`.

    Returns:
        The mapped callable: it takes the global arrays and returns global arrays.

    Raises:
        TypeError: If `function` is not callable (or is a generator function);
            `mesh` is not a `jax.sharding.Mesh` (an `AbstractMesh` or `None`
            included); `in_specs` is not a `PartitionSpec` or a tuple (a list,
            dict or `None` included), or `out_specs` is not a `PartitionSpec`
            or a pytree (`None` included); a spec leaf is neither a
            `PartitionSpec` nor `None` (the message gives its path), or a
            pytree cannot be flattened; `axis_names` is not `None`, a str or a
            set, frozenset, tuple or list of str; `check_vma` is not a `bool`
            (Python or NumPy; ints such as 1 rejected).
        ValueError: If `mesh` is empty, has a Manual axis, or has an axis name
            that is not a str; `axis_names` is empty, names an axis twice or an
            axis not in `mesh`; a spec names an axis not in `mesh`, an axis
            twice, an axis not in `axis_names`, holds ``P.UNCONSTRAINED`` or
            ``None`` inside an axis tuple; a spec's ``unreduced``/``reduced``
            axes are not Explicit axes of `mesh`, or are used while some mesh
            axis stays Auto; a tuple `in_specs` has more or fewer entries than
            `function` can take positional arguments.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jax.sharding import AxisType, PartitionSpec as P
        >>> from tinax.parallel import shard_mapped
        >>> n = jax.device_count()
        >>> mesh = jax.make_mesh((n,), ("x",), axis_types=(AxisType.Auto,))
        >>> center = shard_mapped(
        ...     lambda x: x - jax.lax.pmean(x.mean(), "x"),
        ...     mesh=mesh, in_specs=P("x"), out_specs=P("x"),
        ... )
        >>> center(jnp.arange(2.0 * n)).sum().item()
        0.0
        >>> center.axis_names
        ('x',)
    """
    return ShardMapped(
        function,
        mesh=mesh,
        in_specs=in_specs,
        out_specs=out_specs,
        axis_names=axis_names,
        check_vma=check_vma,
    )
