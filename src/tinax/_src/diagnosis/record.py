"""What one trace looked like: the abstract signature JAX's trace cache keys on.

Recording runs once per trace and is kept to what the diff needs, taken
cheaply: per argument, how it was passed, its tree structure, the key path and
abstract value of each leaf (JAX's own objects, not text), the ambient mesh and
the JAX config options in the trace cache key. Text for people (``Leaf``,
``structures``) is built only when someone asks: an error, ``explain``, or the
history printed in a debugger.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

import attrs
import jax
from jax.core import AbstractValue, Tracer
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from tinax._src import private
from tinax._src.core.statics import Statics, is_array
from tinax._src.diagnosis import abstract

_LONG_TEXT = 4000
_NO_MESH: AbstractMesh = AbstractMesh((), ())


@attrs.frozen
class Leaf:
    """One leaf of a traced call: an array's abstract value or a static value.

    Attributes:
        argument: Name of the parameter the leaf belongs to.
        path: The leaf as a user would write it, e.g. ``params['dense']['w']``.
        kind: ``"array"`` for a traced array, ``"static"`` for a static argument.
        text: What JAX keys the trace on, e.g. ``f32[8,3]``, ``weak-typed f32[]``
            or, for a static argument, its ``repr`` (a function as
            ``<function name>``; cut at 4,000 characters). Static values are
            compared by value, not by this text.
        shape: Array shape (``None`` for static values).
        dtype: Short dtype name such as ``f32`` (``None`` for static values).
        weak_type: Whether the array is weakly typed (a Python scalar).
        sharding: Partition spec of the array where its type carries one (a
            mesh with Explicit axes), e.g. ``P('x', None)``; else ``None``.
        mesh: The mesh in the array's type (an array placed on a mesh, e.g. by
            `jax.device_put` with a `NamedSharding`), or ``None``.
    """

    argument: str
    path: str
    kind: str
    text: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    weak_type: bool = False
    sharding: str | None = None
    mesh: str | None = None


@attrs.frozen(eq=False)
class Argument:
    """One argument of a traced call, as recorded (JAX objects, no text yet).

    A static argument has ``treedef=None``, ``paths=((),)`` and its value itself
    as the only entry of ``values`` (JAX's cache holds it too). Otherwise
    ``values`` holds the abstract value of each leaf (``jax.typeof``), or the
    leaf itself where it is not an array (JAX would refuse the call).
    ``star`` marks a ``*args`` parameter: its value is the tuple of the extra
    positional arguments. ``nonarrays`` marks an argument of an object with
    ``static_nonarrays=True``: its leaves that are not arrays are static values.
    ``placements`` (see `placed`), per leaf, the entries of the partition spec the
    call's array was placed with on the trace's mesh where its abstract value does not
    say it (an Auto mesh), else ``None``; ``None`` for all. Not part of what JAX keys
    the trace on: no comparison reads it.
    """

    name: str
    keyword: bool
    static: bool
    treedef: Any  # None for a static argument
    paths: tuple[Any, ...]  # key path per leaf
    values: tuple[Any, ...]
    star: bool = False
    nonarrays: bool = False
    placements: tuple[tuple[Any, ...] | None, ...] | None = None


@attrs.frozen(eq=False, slots=False, repr=False)  # slots=False: cached text properties
class TracedSignature:
    """The abstract signature of one trace: the key JAX's trace cache used.

    Attributes:
        number: 1-based trace number within the object (0 for a call that was
            not traced: a refused one, or one given to ``explain``).
        arguments: Argument names in call order.
        keywords: Names of the arguments passed by keyword (JAX keys on how an
            argument was passed, not only on its value).
        structures: ``(argument, tree structure)`` per argument, in call order.
        leaves: Every leaf of every argument.
        mesh: The ambient abstract mesh during the trace (``"no mesh"`` if none).
        config: ``(option, value)`` for each JAX config option in JAX's trace
            cache key (empty on JAX versions that do not name them).
    """

    number: int
    recorded: tuple[Argument, ...] = attrs.field(repr=False)
    abstract_mesh: AbstractMesh = attrs.field(repr=False)
    config_values: tuple[tuple[str, Any], ...] = attrs.field(repr=False)
    call_site: str | None = attrs.field(default=None, kw_only=True)
    trace_seconds: float | None = attrs.field(default=None, kw_only=True)
    compile_seconds: float | None = attrs.field(default=None, kw_only=True)

    @property
    def arguments(self) -> tuple[str, ...]:
        return tuple(argument.name for argument in self.recorded)

    @property
    def keywords(self) -> tuple[str, ...]:
        return tuple(argument.name for argument in self.recorded if argument.keyword)

    @functools.cached_property
    def structures(self) -> tuple[tuple[str, str], ...]:
        return tuple((argument.name, structure_text(argument)) for argument in self.recorded)

    @functools.cached_property
    def leaves(self) -> tuple[Leaf, ...]:
        return tuple(leaf for argument in self.recorded for leaf in leaves_of(argument))

    @property
    def mesh(self) -> str:
        return mesh_text(self.abstract_mesh)

    @property
    def config(self) -> tuple[tuple[str, str], ...]:
        return tuple((name, repr(value)) for name, value in self.config_values)

    def abstract_arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """This trace's arguments back as ``(args, kwargs)``: a `jax.ShapeDtypeStruct`
        per array leaf, static arguments as the values traced, tree structure as
        recorded. Passing them to ``lower``, ``eval_shape`` or ``explain`` hits this trace.
        """
        return abstract_arguments(self)

    def numbered(self, number: int, **facts: Any) -> TracedSignature:
        """This signature with another trace number (and optionally other per-trace facts:
        ``call_site``, ``trace_seconds``, ``compile_seconds``)."""
        return attrs.evolve(self, number=number, **facts)

    def __repr__(self) -> str:
        return f"<TracedSignature {self}>"

    def __str__(self) -> str:
        return f"#{self.number}: {signature_text(self)}"


def signature_text(signature: TracedSignature) -> str:
    """A signature without its number, as ``str`` shows it after ``#number: ``: each leaf
    (``x: f32[8,3], n: 3``, or ``(no arguments)``), then the mesh it was traced under, if
    any. Two traces of one call read alike here whatever their numbers."""
    leaves = ", ".join(f"{leaf.path}: {leaf.text}" for leaf in signature.leaves)
    text = leaves or "(no arguments)"
    if not signature.abstract_mesh.empty:
        text += f" under {signature.mesh}"
    return text


# --- text, on demand -----------------------------------------------------------------------


def mesh_text(mesh: AbstractMesh) -> str:
    """A short, readable form of an abstract mesh (JAX's repr adds device details)."""
    if mesh.empty:
        return "no mesh"
    axes = ", ".join(
        f"{name!r}: {size}" for name, size in zip(mesh.axis_names, mesh.axis_sizes, strict=True)
    )
    types = ", ".join(_axis_type_name(axis_type) for axis_type in mesh.axis_types)
    return f"AbstractMesh({axes}, axis_types=({types},))"


def structure_text(argument: Argument) -> str:
    if argument.static:
        return "static"
    text = str(argument.treedef)
    if text.startswith("PyTreeDef(") and text.endswith(")"):
        text = text[len("PyTreeDef(") : -1]
    return text


def leaves_of(argument: Argument) -> Iterator[Leaf]:
    if argument.static:
        yield Leaf(argument.name, argument.name, "static", value_text(argument.values[0]))
        return
    tree_util: Any = jax.tree_util
    keystr = tree_util.keystr
    for path, value in zip(argument.paths, argument.values, strict=True):
        text_path = argument.name + keystr(path)
        if is_abstract(value):
            yield array_leaf(argument.name, text_path, value)
        else:  # a leaf that is not an array
            yield Leaf(argument.name, text_path, "static", value_text(value))


def short_dtype(name: str) -> str:
    for long, short in (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("int", "i")):
        if name.startswith(long):
            return short + name[len(long) :]
    return name.replace("complex", "c")


def array_leaf(argument: str, path: str, aval: Any) -> Leaf:
    """The text view of an abstract value: any of JAX's (arrays, PRNG keys, float0,
    tokens...); what a kind lacks (a token has no shape) is left ``None``."""
    shape_of = getattr(aval, "shape", None)
    shape = None if shape_of is None else tuple(int(d) for d in shape_of)
    dtype_of = getattr(aval, "dtype", None)
    dtype = None if dtype_of is None else short_dtype(str(dtype_of))
    weak = bool(getattr(aval, "weak_type", False))
    sharding = getattr(aval, "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    spec = mesh_name = None
    if mesh is not None and not mesh.empty:
        mesh_name = mesh_text(mesh)
        if _has_explicit_axis(mesh):
            spec = str(getattr(sharding, "spec", None))
    try:
        text = aval.str_short(short_dtypes=True)
    except Exception:  # an abstract value with no short form (a token)
        text = str(aval)
    if weak:
        text = "weak-typed " + text
    return Leaf(argument, path, "array", text, shape, dtype, weak, spec, mesh_name)


def _axis_type_name(axis_type: Any) -> str:
    return str(getattr(axis_type, "name", axis_type))


def _has_explicit_axis(mesh: Any) -> bool:
    types = getattr(mesh, "axis_types", ())
    return any(_axis_type_name(axis_type) == "Explicit" for axis_type in types)


def value_text(value: object, limit: int = _LONG_TEXT) -> str:
    """How a value reads to a person: its ``repr``, a function as ``<function name>``,
    cut at ``limit`` characters; never raises."""
    try:
        text = repr(value)
    except Exception:
        text = object.__repr__(value)
    if text.startswith("<") and callable(value) and not isinstance(value, type):
        try:  # <function relu at 0x7f...>, <...custom_jvp object at 0x...>: the name says more
            name = getattr(value, "__name__", None)
        except Exception:
            name = None
        if isinstance(name, str):
            text = f"<function {name}>"
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


# --- recording -----------------------------------------------------------------------------


def named_arguments(
    signature: inspect.Signature | None,
    statics: Statics,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> Iterator[tuple[str, bool, Any, bool, bool]]:
    """``(parameter name, passed by keyword, value, is *args, is static)`` per argument,
    in call order. A ``*args`` tuple holding a static argument (``static_argnums``
    past the named parameters) is given element by element, named ``args[i]``."""
    count = len(args)
    if signature is not None:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            pass
        else:
            position = 0
            for name, value in bound.arguments.items():
                kind = signature.parameters[name].kind
                if kind is inspect.Parameter.VAR_KEYWORD:
                    for key, item in value.items():
                        yield key, True, item, False, key in statics.argnames
                elif kind is inspect.Parameter.VAR_POSITIONAL:
                    start, position = position, position + len(value)
                    if not any(statics.positional(i, count) for i in range(start, position)):
                        yield name, False, value, True, False
                        continue
                    for offset, item in enumerate(value):
                        static = statics.positional(start + offset, count)
                        yield f"{name}[{offset}]", False, item, False, static
                elif name in kwargs:
                    yield name, True, value, False, name in statics.argnames
                else:
                    yield name, False, value, False, statics.positional(position, count)
                    position += 1
            return
    for index, value in enumerate(args):
        yield f"args[{index}]", False, value, False, statics.positional(index, count)
    for key, value in kwargs.items():
        yield key, True, value, False, key in statics.argnames


def is_abstract(value: object) -> bool:
    """Whether a recorded leaf value is an abstract value (else: a non-array leaf)."""
    return isinstance(value, AbstractValue)


def _abstract(leaf: Any) -> Any:
    """A leaf's abstract value: a tracer's own, else the one JAX would give it."""
    if isinstance(leaf, Tracer):
        return leaf.aval
    try:
        return jax.typeof(leaf)
    except Exception:  # not an array: JAX would refuse it; keep the leaf
        return leaf


def record(
    signature: inspect.Signature | None,
    statics: Statics,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> TracedSignature:
    """Records the abstract signature of a call, traced or not. O(number of leaves).

    Inside a trace the leaves are tracers and their abstract values are read
    off; outside (``explain``) they are computed as JAX would for the call.
    """
    tree_util: Any = jax.tree_util
    flatten = tree_util.tree_flatten_with_path
    recorded: list[Argument] = []
    for name, keyword, value, star, static in named_arguments(signature, statics, args, kwargs):
        if static:
            recorded.append(Argument(name, keyword, True, None, ((),), (value,)))
            continue
        flat, treedef = flatten(value)
        paths = tuple(path for path, _ in flat)
        if statics.nonarrays:  # static_nonarrays: leaves that are not arrays stay values
            values = tuple(_abstract(leaf) if is_array(leaf) else leaf for _, leaf in flat)
        else:
            values = tuple(_abstract(leaf) for _, leaf in flat)
        recorded.append(
            Argument(name, keyword, False, treedef, paths, values, star, statics.nonarrays)
        )
    mesh: AbstractMesh = jax.sharding.get_abstract_mesh()
    return TracedSignature(0, tuple(recorded), mesh, private.trace_config())


def placed(
    call: TracedSignature,
    signature: inspect.Signature | None,
    statics: Statics,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> TracedSignature:
    """``call`` (recorded inside its trace) with the placement of each array of the
    call's own arguments ``args`` and ``kwargs`` (concrete arrays, or
    `jax.ShapeDtypeStruct` values given to ``lower``) that its abstract value does not
    carry: on a mesh with Auto axes JAX types an array split over the mesh as
    replicated, and a warm start that compiled from the type alone would compile for
    replicated inputs. Kept: the partition spec of a `NamedSharding` on the trace's
    mesh, as plain entries, where it differs from the abstract value's. An argument
    whose tree or shapes are not the traced ones (`batched_jit`'s batch) is left
    without. Runs once per trace; never raises."""
    mesh = call.abstract_mesh
    if mesh.empty or not (args or kwargs):
        return call
    try:
        given = {
            name: value
            for name, _, value, _, static in named_arguments(
                signature, statics, tuple(args), kwargs
            )
            if not static
        }
        arguments = tuple(_placed(argument, given, mesh) for argument in call.recorded)
    except Exception:  # an odd tree: no placements, as before they were recorded
        return call
    if all(argument.placements is None for argument in arguments):
        return call
    return attrs.evolve(call, recorded=arguments)


def _placed(argument: Argument, given: Mapping[str, Any], mesh: AbstractMesh) -> Argument:
    if argument.static or argument.name not in given:
        return argument
    tree_util: Any = jax.tree_util
    leaves, treedef = tree_util.tree_flatten(given[argument.name])
    if treedef != argument.treedef:
        return argument
    placements = tuple(
        _placement(leaf, value, mesh) for leaf, value in zip(leaves, argument.values, strict=True)
    )
    if all(placement is None for placement in placements):
        return argument
    return attrs.evolve(argument, placements=placements)


def _placement(leaf: Any, value: Any, mesh: AbstractMesh) -> tuple[Any, ...] | None:
    """The entries of ``leaf``'s partition spec on ``mesh`` where its abstract value
    ``value`` (of the same shape) reads another, else ``None``."""
    sharding = getattr(leaf, "sharding", None)
    if not is_abstract(value) or not isinstance(sharding, NamedSharding):
        return None
    if getattr(sharding.mesh, "abstract_mesh", None) != mesh:
        return None
    if tuple(getattr(leaf, "shape", ())) != tuple(getattr(value, "shape", ())):
        return None
    spec = sharding.spec
    entries = tuple(spec)
    if not all(_plain_entry(entry) for entry in entries) or PartitionSpec(*entries) != spec:
        return None  # unreduced axes, UNCONSTRAINED: not written
    own = getattr(getattr(value, "sharding", None), "spec", None)
    if own is not None and _padded(entries, value) == _padded(tuple(own), value):
        return None  # the type says it (Explicit axes): P('x') is P('x', None)
    return entries


def _padded(entries: tuple[Any, ...], value: Any) -> tuple[Any, ...]:
    rank = len(getattr(value, "shape", ()))
    return entries + (None,) * (rank - len(entries))


def _plain_entry(entry: object) -> bool:
    if entry is None or isinstance(entry, str):
        return True
    return isinstance(entry, tuple) and all(
        isinstance(name, str) for name in cast("tuple[object, ...]", entry)
    )


def unrecorded(error: Exception) -> TracedSignature:
    """Stands in for a signature that could not be recorded (an exotic leaf)."""
    argument = Argument("(unrecorded)", False, True, None, ((),), (type(error).__name__,))
    return TracedSignature(0, (argument,), _NO_MESH, ())


# --- a recorded trace given back: its arguments, abstract ---------------------------------


def _argument_value(
    argument: Argument, mesh: Mesh | None, static: Callable[[Any], Any] | None
) -> Any:
    if argument.static:
        value = argument.values[0]
        return value if static is None else static(value)
    # A signature recorded before placements were (an older manifest's) has no such slot.
    placements = getattr(argument, "placements", None) or (None,) * len(argument.values)
    leaves = [
        abstract.shape_dtype_struct(value, mesh, placement) if is_abstract(value) else value
        for value, placement in zip(argument.values, placements, strict=True)
    ]
    return argument.treedef.unflatten(leaves)


def abstract_arguments(
    signature: TracedSignature,
    mesh: Mesh | None = None,
    *,
    static: Callable[[Any], Any] | None = None,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` that JAX keys exactly as the traced call of ``signature``.

    Each array leaf becomes a `jax.ShapeDtypeStruct` (shape, dtype, weak type,
    and sharding where the abstract value has one, split as the traced call's
    array was where `placed` recorded it; see `abstract` for meshes), an abstract
    token a fresh token; other leaves, and static
    arguments, are the values traced. Arguments passed by keyword go into
    ``kwargs``, the others into ``args`` in call order, a ``*args`` tuple
    splatted back into ``args``.

    Args:
        signature: A recorded trace.
        mesh: A concrete mesh to place abstract shardings on, tried before the
            ambient one.
        static: Applied to each static argument's value (``tinax.testing`` marks
            them so that they are not flattened).

    Returns:
        ``(args, kwargs)``.

    Raises:
        ValueError: The trace was not recorded (a leaf could not be read), or a
            leaf's abstract value is neither an array nor a token.
    """
    if signature.arguments == unrecorded(Exception()).arguments:
        raise ValueError(
            f"trace #{signature.number} could not be recorded (an argument leaf could not "
            "be read), so its arguments cannot be given back."
        )
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for argument in signature.recorded:
        value = _argument_value(argument, mesh, static)
        if argument.star:
            args.extend(value)
        elif argument.keyword:
            kwargs[argument.name] = value
        else:
            args.append(value)
    return tuple(args), kwargs


def precompile_arguments(
    owner: str,
    mesh: Mesh | None,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """What ``precompile(*args, **kwargs)`` lowers: a `TracedSignature` given alone
    becomes its abstract arguments; abstract shardings are placed on ``mesh`` (the
    object's) or the ambient mesh.

    Raises:
        ValueError: A `TracedSignature` traced under another ambient mesh than the
            one ``precompile`` runs under (the object's mesh, else the ambient one).
    """
    if len(args) == 1 and not kwargs and isinstance(args[0], TracedSignature):
        signature = args[0]
        here: AbstractMesh = (
            mesh.abstract_mesh if mesh is not None else jax.sharding.get_abstract_mesh()
        )
        if signature.abstract_mesh != here:
            raise ValueError(
                f"{owner}.precompile: trace #{signature.number} ran under the ambient mesh "
                f"{mesh_text(signature.abstract_mesh)}, but precompile runs under "
                f"{mesh_text(here)}; call it inside `with jax.set_mesh(mesh):` for that mesh "
                "(or bind the object to it with mesh=)."
            )
        return abstract_arguments(signature, mesh)
    concrete_args: tuple[Any, ...] = abstract.concrete_leaves(args, mesh)
    concrete_kwargs: dict[str, Any] = abstract.concrete_leaves(dict(kwargs), mesh)
    return concrete_args, concrete_kwargs
