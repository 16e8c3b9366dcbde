"""Property tests of budgeted functions: draw values at a fixed abstract signature.

A property test that draws shapes or dtypes makes a compiled function trace
and compile on every new draw. `arguments` draws only *values*: every draw has
exactly the abstract signature of a recorded trace (or of given
`jax.ShapeDtypeStruct`s), so thousands of examples run against one compiled
executable, and the trace budget still guards the signature. `no_new_traces`
asserts it; `no_new_compiles` asserts that nothing at all compiles in a block.
hypothesis is an optional dependency (the ``testing`` extra).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

try:
    import hypothesis.extra.numpy as hnp
    from hypothesis import strategies as st
except ImportError as error:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "tinax.testing needs hypothesis, an optional dependency of tinax: "
        "pip install 'tinax[testing]'"
    ) from error

import attrs
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AbstractMesh, Mesh

from tinax._src.core import validation
from tinax._src.diagnosis import abstract, record
from tinax._src.diagnosis.record import TracedSignature, short_dtype
from tinax._src.jit.batched import BatchedJit
from tinax._src.jit.bounded import BoundedJit
from tinax._src.jit.methods import BudgetedMixin

Call = tuple[tuple[Any, ...], dict[str, Any]]

KINDS = ("bool", "int", "uint", "float", "complex")
FLOAT_BOUND = 10.0
INT_BOUND = 100
_KEY_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")
_API = "arguments"
# Untyped views of the JAX modules (some of their signatures name unknown types).
_jax: Any = jax
_jnp: Any = jnp

# --- elements ------------------------------------------------------------------------------


def _kind(dtype: np.dtype[Any]) -> str | None:
    for kind, family in (
        ("bool", jnp.bool_),
        ("int", jnp.signedinteger),
        ("uint", jnp.unsignedinteger),
        ("float", jnp.floating),
        ("complex", jnp.complexfloating),
    ):
        if jnp.issubdtype(dtype, family):
            return kind
    return None


def _rounded(dtype: np.dtype[Any]) -> Callable[[Any], Any]:
    """A drawn scalar as a scalar of ``dtype`` (floats rounded to its precision)."""
    scalar: Any = dtype.type

    def convert(value: Any) -> Any:
        return scalar(value)

    return convert


def _default_elements(dtype: np.dtype[Any], kind: str) -> st.SearchStrategy[Any]:
    """Finite, moderate scalars of ``dtype``, shrinking towards zero.

    NumPy's own dtypes go to `hypothesis.extra.numpy.from_dtype` as they are;
    the narrow types of ``ml_dtypes`` (bfloat16, float8, int4...) are drawn as
    float32 or int64 within their range, then rounded to the type.
    """
    native = dtype.type.__module__ == "numpy"  # not ml_dtypes' (kind "V", or "f" for some)
    if kind == "bool":
        return st.booleans()
    if kind in ("int", "uint"):
        info = jnp.iinfo(dtype)
        low, high = max(int(info.min), -INT_BOUND), min(int(info.max), INT_BOUND)
        carrier = dtype if native else np.dtype(np.int64)
        return hnp.from_dtype(carrier, min_value=low, max_value=high).map(_rounded(dtype))
    if kind == "float":
        info = _jnp.finfo(dtype)
        bound = min(float(info.max), FLOAT_BOUND)
        carrier = dtype if native else np.dtype(np.float32)
        drawn = hnp.from_dtype(
            carrier,
            min_value=-bound,
            max_value=bound,
            allow_nan=False,
            allow_infinity=False,
            allow_subnormal=False,
        )
        return drawn.map(_rounded(dtype))
    return hnp.from_dtype(
        dtype,
        max_magnitude=FLOAT_BOUND,
        allow_nan=False,
        allow_infinity=False,
        allow_subnormal=False,
    )


def _elements(
    dtype: np.dtype[Any], where: str, overrides: Mapping[str, st.SearchStrategy[Any]]
) -> st.SearchStrategy[Any]:
    kind = _kind(dtype)
    if kind is None:
        raise ValueError(f"{_API}: {where} has dtype {dtype}, which tinax.testing cannot draw.")
    if kind in overrides:
        return overrides[kind].map(_rounded(dtype))
    return _default_elements(dtype, kind)


def _check_elements(value: object) -> dict[str, st.SearchStrategy[Any]]:
    if value is None:
        return {}
    expected = f"None or a mapping from dtype kinds {KINDS} to hypothesis strategies"
    if not isinstance(value, Mapping):
        raise TypeError(validation.message(_API, "elements", expected, value))
    given: Mapping[Any, Any] = cast(Mapping[Any, Any], value)
    checked: dict[str, st.SearchStrategy[Any]] = {}
    for key, strategy in given.items():
        if key not in KINDS:
            raise ValueError(
                validation.message(_API, "elements", f"keyed by dtype kinds {KINDS}", key)
            )
        if not isinstance(strategy, st.SearchStrategy):
            raise TypeError(
                validation.message(_API, f"elements[{key!r}]", "a hypothesis strategy", strategy)
            )
        checked[key] = strategy
    return checked


# --- one leaf ------------------------------------------------------------------------------


def _python_scalar(dtype: np.dtype[Any]) -> type | None:
    """The Python scalar type that JAX types as a weak ``dtype`` scalar, if any."""
    for python in (int, float, complex):
        aval: Any = jax.typeof(python(0))
        if aval.dtype == dtype:
            return python
    return None


def _key_impl(dtype: Any) -> tuple[str, tuple[int, ...]]:
    """The name of the PRNG implementation behind a key dtype, and its key-data shape."""
    for name in _KEY_IMPLS:
        sample = jax.random.key(0, impl=name)
        aval: Any = jax.typeof(sample)
        if aval.dtype == dtype:
            return name, tuple(jax.random.key_data(sample).shape)
    raise ValueError(
        f"{_API}: keys of dtype {dtype} come from a PRNG implementation tinax.testing does "
        f"not know (it draws {_KEY_IMPLS})."
    )


def _placed(sharding: Any) -> Callable[[Any], Any]:
    """Puts a drawn NumPy array on the device(s), with ``sharding`` if not ``None``."""

    def place(array: Any) -> Any:
        if sharding is None:
            return _jnp.asarray(array)
        return _jax.device_put(array, sharding)

    return place


def _wrapped_keys(impl: str, sharding: Any) -> Callable[[Any], Any]:
    def wrap_key_data(data: Any) -> Any:  # named as printed in a failing example
        keys = _jax.random.wrap_key_data(_jnp.asarray(data), impl=impl)
        return keys if sharding is None else _jax.device_put(keys, sharding)

    return wrap_key_data


def _sharding(value: jax.ShapeDtypeStruct, where: str, mesh: Mesh | None) -> Any:
    """The sharding to place draws with: ``None`` for none, else a concrete one."""
    sharding: Any = value.sharding
    if sharding is None:
        return None
    sharding = abstract.concrete_sharding(sharding, mesh)
    on: Any = getattr(sharding, "mesh", None)
    if isinstance(on, AbstractMesh):
        if on.empty:
            return None
        raise ValueError(
            f"{_API}: {where} is typed with a sharding on the abstract mesh {on}, but no "
            "concrete mesh with that shape is known: bind the object to the mesh (mesh=), "
            "or draw inside `with jax.set_mesh(mesh):`."
        )
    return sharding


def _leaf(
    value: jax.ShapeDtypeStruct,
    where: str,
    mesh: Mesh | None,
    overrides: Mapping[str, st.SearchStrategy[Any]],
    override: st.SearchStrategy[Any] | None = None,
) -> st.SearchStrategy[Any]:
    """Draws values that JAX types exactly as ``value`` (from ``override``, the user's
    strategy for this leaf, if given)."""
    shape = tuple(value.shape)
    dtype: Any = value.dtype
    sharding = _sharding(value, where, mesh)
    if override is not None:
        return override.map(_fitted(where, value, sharding))
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        impl, key_shape = _key_impl(dtype)
        data = hnp.arrays(np.dtype(np.uint32), shape + key_shape)  # any bits are a valid key
        return data.map(_wrapped_keys(impl, sharding))
    if dtype == jax.dtypes.float0:  # one value: zeros (the tangent of an integer)
        return st.just(np.zeros(shape, dtype))
    dtype = np.dtype(dtype)
    elements = _elements(dtype, where, overrides)
    if value.weak_type:
        python = _python_scalar(dtype)
        if shape or python is None:
            raise ValueError(
                f"{_API}: {where} is a weakly typed {dtype}{list(shape)}; only weakly typed "
                "scalars that a Python number gives can be drawn (as Python numbers). Pass "
                "this argument as a strongly typed array (e.g. jnp.asarray(x, dtype))."
            )
        return elements.map(python)
    # fill: most elements take one drawn value, so a big array is a small example that
    # shrinks to zeros (a mapped strategy is not given as fill by default).
    array = hnp.arrays(dtype, shape, elements=elements, fill=elements)
    return array.map(_placed(sharding))


# --- one leaf, drawn by the user's strategy ----------------------------------------------


def _type_text(value: jax.ShapeDtypeStruct) -> str:
    """``f32[8,3]``, ``weak-typed f32[]``: the leaf as tinax prints it."""
    dtype: Any = value.dtype
    weak = "weak-typed " if value.weak_type else ""
    return f"{weak}{short_dtype(str(dtype))}[{','.join(str(d) for d in value.shape)}]"


def _misfit(where: str, value: jax.ShapeDtypeStruct, drawn: object, why: str) -> ValueError:
    shape = tuple(value.shape)
    dtype = np.dtype(value.dtype)
    python = _python_scalar(dtype) if value.weak_type else None
    if python is not None:
        example = f"Python {python.__name__}s (a weakly typed leaf is passed as one)"
    else:
        example = (
            f"arrays of shape {shape} that convert to {dtype.name}, e.g. "
            f"hnp.arrays(np.{dtype.name}, {shape}, elements=...)"
        )
    return ValueError(
        f"{_API}: overrides[{where!r}] drew {_drawn_text(drawn)}, which does not fit the "
        f"leaf {where} ({_type_text(value)}): {why}. Draw {example}."
    )


def _drawn_text(drawn: object) -> str:
    if isinstance(drawn, bool | int | float | complex):
        return f"{drawn!r} ({type(drawn).__name__})"
    shape = getattr(drawn, "shape", None)
    dtype = getattr(drawn, "dtype", None)
    if shape is not None and dtype is not None:
        return f"an array of shape {tuple(shape)} and dtype {dtype}"
    return validation.describe(drawn)


def _fitted(where: str, value: jax.ShapeDtypeStruct, sharding: Any) -> Callable[[Any], Any]:
    """Checks that a value drawn by the user's strategy fits the leaf (shape; a dtype
    of the same kind, into which it converts without overflow) and converts it to the
    leaf's exact type: dtype, weak type, sharding."""
    shape = tuple(value.shape)
    dtype: Any = value.dtype
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return _fitted_key(where, value, sharding)
    dtype = np.dtype(dtype)
    python = _python_scalar(dtype) if value.weak_type else None

    def fit(drawn: Any) -> Any:
        try:
            array = np.asarray(drawn)
        except Exception as error:
            raise _misfit(where, value, drawn, f"not an array ({error})") from None
        if array.shape != shape:
            raise _misfit(where, value, drawn, f"its shape is {array.shape}, not {shape}")
        if array.dtype.kind not in "biufc" or not np.can_cast(
            array.dtype, dtype, casting="same_kind"
        ):
            raise _misfit(
                where, value, drawn, f"its dtype {array.dtype} does not convert to {dtype.name}"
            )
        with np.errstate(all="ignore"):
            converted = array.astype(dtype)
        exact = dtype.kind in "biu" or array.dtype.kind in "biu"
        kept = (
            np.array_equal(converted.astype(array.dtype), array)
            if exact
            else bool(np.all(np.isfinite(converted) | ~np.isfinite(array)))
        )
        if not kept:
            raise _misfit(where, value, drawn, f"its values do not fit in {dtype.name}")
        if python is not None:
            return python(converted.item())
        return _placed(sharding)(converted)

    return fit


def _fitted_key(where: str, value: jax.ShapeDtypeStruct, sharding: Any) -> Callable[[Any], Any]:
    def fit(drawn: Any) -> Any:
        try:
            aval: Any = jax.typeof(drawn)
        except Exception:
            raise _misfit(where, value, drawn, "not a JAX array of keys") from None
        if aval.dtype != value.dtype or tuple(aval.shape) != tuple(value.shape):
            raise _misfit(where, value, drawn, f"it is typed {aval.str_short()}")
        return drawn if sharding is None else _jax.device_put(drawn, sharding)

    return fit


# --- a whole call ------------------------------------------------------------------------


def _is_struct(value: object) -> bool:
    return isinstance(value, jax.ShapeDtypeStruct)


@attrs.frozen
class _Static:
    """A static argument's value, kept whole (not flattened into leaves) and as is."""

    value: Any


def _call_strategy(
    call: Call,
    names: Sequence[str],
    mesh: Mesh | None,
    elements: Mapping[str, st.SearchStrategy[Any]],
    overrides: Mapping[str, st.SearchStrategy[Any]],
) -> st.SearchStrategy[Call]:
    """Draws ``call`` with each `jax.ShapeDtypeStruct` leaf replaced by drawn values
    (``overrides`` keyed by printed path, else ``elements`` per dtype kind)."""
    flat, treedef = _flat(call)
    _check_paths(overrides, flat, names)
    leaves: list[st.SearchStrategy[Any]] = []
    for path, value in flat:
        if _is_struct(value):
            printed = _printed(path, names)
            leaf = _leaf(value, printed, mesh, elements, overrides.get(printed))
            leaves.append(leaf)
        elif isinstance(value, _Static):
            leaves.append(st.just(value.value))
        else:
            leaves.append(st.just(value))

    return _assembled(tuple(leaves), treedef)


def _flat(call: Call) -> tuple[list[tuple[Any, Any]], Any]:
    tree_util: Any = jax.tree_util
    return tree_util.tree_flatten_with_path(call, is_leaf=_is_struct_or_static)


def _is_struct_or_static(value: object) -> bool:
    return isinstance(value, jax.ShapeDtypeStruct | _Static)


@st.composite
def _assembled(draw: st.DrawFn, leaves: tuple[st.SearchStrategy[Any], ...], treedef: Any) -> Call:
    """The call rebuilt from drawn leaves. Drawn in a composite (not mapped), so that
    hypothesis prints a failing example as the call itself."""
    return treedef.unflatten([draw(leaf) for leaf in leaves])


def _printed(path: tuple[Any, ...], names: Sequence[str]) -> str:
    """A leaf's path as tinax prints it (``batch['x']``, ``model.rate``, ``lr``), for a
    path into ``(args, kwargs)``: ``names[i]`` names positional argument ``i``, a
    keyword argument is named by its key."""
    tree_util: Any = jax.tree_util
    keystr = tree_util.keystr
    head, argument, *rest = path
    if getattr(head, "idx", None) == 0:
        index = int(argument.idx)
        name = names[index] if index < len(names) else f"args[{index}]"
    else:
        name = str(argument.key)
    return name + keystr(tuple(rest))


def _positional_names(signature: TracedSignature) -> list[str]:
    """The name tinax prints for each positional argument of a recorded call; the
    elements of a ``*args`` tuple are ``args[0]``, ``args[1]``..."""
    names: list[str] = []
    for argument in signature.recorded:
        if argument.keyword:
            continue
        if argument.star:  # its value is the tuple of the extra positional arguments
            count = len(argument.treedef.children())
            names.extend(f"{argument.name}[{offset}]" for offset in range(count))
        else:
            names.append(argument.name)
    return names


def _check_paths(
    overrides: Mapping[str, st.SearchStrategy[Any]],
    flat: Sequence[tuple[Any, Any]],
    names: Sequence[str],
) -> None:
    """Each path of ``overrides`` must name a drawn leaf (an array of the signature)."""
    if not overrides:
        return
    drawn = [_printed(path, names) for path, value in flat if _is_struct(value)]
    kept = [_printed(path, names) for path, value in flat if not _is_struct(value)]
    for path in overrides:
        if path in drawn:
            continue
        if path in kept:
            raise ValueError(
                f"{_API}: overrides[{path!r}] names a leaf that is not drawn (a static "
                f"argument, or a leaf that is not an array): it is passed as traced or given. "
                f"Drawn leaves: {_listed(drawn)}."
            )
        close = difflib.get_close_matches(path, drawn, n=1, cutoff=0.0)
        hint = f"; the closest is {close[0]!r}" if close else ""
        raise ValueError(
            f"{_API}: overrides[{path!r}] matches no leaf of the signature{hint}. Paths are "
            f"written as tinax prints them (as in traced_signatures). Drawn leaves: "
            f"{_listed(drawn)}."
        )


def _listed(paths: Sequence[str], limit: int = 12) -> str:
    if not paths:
        return "none"
    shown = ", ".join(paths[:limit])
    return shown + (f" (+{len(paths) - limit} more)" if len(paths) > limit else "")


def _latest(source: BudgetedMixin) -> TracedSignature:
    history = source.traced_signatures
    if not history:
        raise ValueError(
            f"{_API}: {source!r} has no trace yet to draw arguments for: call it or "
            "precompile it first (draws start when the test runs, so a fixture can)."
        )
    return history[-1]


def _planned(source: Any) -> tuple[Call, list[str], Mesh | None]:
    """``(call with ShapeDtypeStruct leaves, positional argument names, mesh)``."""
    mesh: Mesh | None = None
    if isinstance(source, BudgetedMixin):
        mesh = source.mesh
        source = _latest(source)
    if isinstance(source, TracedSignature):
        call = record.abstract_arguments(source, mesh, static=_Static)
        return call, _positional_names(source), mesh
    args = tuple(source[0])
    return (args, dict(source[1])), [f"args[{index}]" for index in range(len(args))], mesh


def _resolved(
    source: Any,
    elements: Mapping[str, st.SearchStrategy[Any]],
    overrides: Mapping[str, st.SearchStrategy[Any]],
) -> Any:
    call, names, mesh = _planned(source)
    return _call_strategy(call, names, mesh, elements, overrides)


def _check_overrides(value: object) -> dict[str, st.SearchStrategy[Any]]:
    if value is None:
        return {}
    expected = (
        "None or a mapping from leaf paths, as tinax prints them (\"batch['x']\"), "
        "to hypothesis strategies"
    )
    if not isinstance(value, Mapping):
        raise TypeError(validation.message(_API, "overrides", expected, value))
    given: Mapping[Any, Any] = cast(Mapping[Any, Any], value)
    checked: dict[str, st.SearchStrategy[Any]] = {}
    for key, strategy in given.items():
        if type(key) is not str:
            raise TypeError(validation.message(_API, "overrides", "keyed by str paths", key))
        if not isinstance(strategy, st.SearchStrategy):
            raise TypeError(
                validation.message(_API, f"overrides[{key!r}]", "a hypothesis strategy", strategy)
            )
        checked[key] = strategy
    return checked


def _check_source(source: Any) -> None:
    expected = (
        "a TracedSignature, a BoundedJit or BatchedJit (its latest trace), "
        "or (args, kwargs) with jax.ShapeDtypeStruct leaves"
    )
    if isinstance(source, TracedSignature | BudgetedMixin):
        return
    pair = cast(tuple[Any, ...], source) if type(source) is tuple else ()
    if len(pair) == 2 and isinstance(pair[0], tuple | list) and isinstance(pair[1], Mapping):
        return
    raise TypeError(validation.message(_API, "source", expected, cast(object, source)))


def arguments(
    source: TracedSignature
    | BoundedJit[..., Any]
    | BatchedJit[Any]
    | tuple[Sequence[Any], Mapping[str, Any]],
    *,
    elements: Mapping[str, st.SearchStrategy[Any]] | None = None,
    overrides: Mapping[str, st.SearchStrategy[Any]] | None = None,
) -> st.SearchStrategy[tuple[tuple[Any, ...], dict[str, Any]]]:
    """A hypothesis strategy of ``(args, kwargs)`` at one fixed abstract signature.

    Fuzzing shapes or dtypes makes a compiled function trace and compile again
    for every new draw; this draws only values. Each draw has exactly the
    abstract signature of ``source`` (tree structure, shape, dtype, weak type
    and sharding of every array leaf, static values, how each argument is
    passed), so every draw runs from one compiled executable, and
    ``step(*args, **kwargs)`` never traces again.

    How leaves are drawn:

    - arrays: `hypothesis.extra.numpy.arrays` of the leaf's dtype (NumPy's, or
      ``ml_dtypes``' for bfloat16, float8, int4...), made JAX arrays; where the
      type has a sharding on a mesh, placed with `jax.device_put` on the
      object's mesh (or the ambient one from `jax.set_mesh`);
    - by default, finite and moderate: floats in [-10, 10], integers in
      [-100, 100] (within the dtype's range), complex numbers of magnitude at
      most 10, any booleans; no NaN, infinity or subnormal; shrinking towards
      zeros;
    - weakly typed scalars (a Python number at the trace) as Python numbers;
    - PRNG keys (`jax.random.key`) from drawn key data; float0 arrays as zeros,
      their only value; tokens as fresh tokens;
    - static arguments, ``None`` and every other leaf as traced or given; the
      tree structure (custom pytree nodes included) as recorded.

    Args:
        source: The signature to draw at: a `TracedSignature`; a `BoundedJit`
            or `BatchedJit`, for its latest trace, looked up when the strategy
            first draws (when the test runs, so after a fixture that
            precompiles it); or ``(args, kwargs)`` whose `jax.ShapeDtypeStruct`
            leaves are drawn and whose other leaves are kept as given.
        elements: Strategies of scalars that replace the defaults, per dtype
            kind: ``"bool"``, ``"int"``, ``"uint"``, ``"float"``, ``"complex"``,
            e.g. ``{"float": st.floats(0, 1)}``. Each value drawn is converted
            to the leaf's dtype (rounded, for floats), so it must fit in that
            dtype. Defaults to None: finite and moderate values, as above.
        overrides: Strategies for single leaves, keyed by the leaf's path as
            tinax prints it (in ``traced_signatures`` and the budget error):
            ``{"batch['x']": ..., "model.rate": st.floats(0, 1)}``. For a
            ``(args, kwargs)`` source, positional arguments are ``args[0]``,
            ``args[1]``..., keyword arguments their names. Each strategy draws
            the whole leaf: an array of its shape (a scalar for a ``[]`` leaf),
            whose dtype converts to the leaf's within its kind (an int drawn
            for a float leaf converts; a float for an int leaf does not) and
            whose values fit in it; it is then given the leaf's exact type
            (dtype, weak type, sharding). Other leaves keep ``elements``.
            Defaults to None: no leaf drawn apart.

    Returns:
        A strategy of ``(args, kwargs)``: call ``step(*args, **kwargs)``.

    Raises:
        TypeError: ``source`` is none of the above, or ``elements`` or
            ``overrides`` is not a mapping of hypothesis strategies (with str
            keys, for ``overrides``).
        ValueError: ``elements`` has a key that is not a dtype kind. A path of
            ``overrides`` matches no leaf that is drawn (the message names the
            closest path); checked at once for a signature or ``(args,
            kwargs)``, at the first draw for an object. When the strategy
            draws: the object has no trace yet; a leaf cannot be drawn (a
            weakly typed array that no Python number gives, an unknown PRNG
            implementation or dtype, a sharding on a mesh for which no
            concrete mesh is known); a value drawn by an override does not fit
            its leaf's shape or dtype (the message names the path).

    Examples:
        >>> import jax.numpy as jnp
        >>> from hypothesis import given
        >>> from tinax.jit import bounded_jit
        >>> from tinax.testing import arguments
        >>> step = bounded_jit(lambda w, x: (x @ w).sum(), max_traces=1)
        >>> _ = step.precompile(jnp.zeros((3, 2)), jnp.zeros((8, 3)))
        >>> @given(arguments(step))
        ... def test_step_runs_from_one_compile(call):
        ...     args, kwargs = call
        ...     step(*args, **kwargs)
        >>> test_step_runs_from_one_compile()
        >>> step.traces_used
        1
    """
    _check_source(source)
    kinds = _check_elements(elements)
    leaves = _check_overrides(overrides)
    if leaves and not isinstance(source, BudgetedMixin):  # paths checked now, not at a draw
        call, names, _ = _planned(source)
        _check_paths(leaves, _flat(call)[0], names)
    return st.deferred(lambda: _resolved(source, kinds, leaves))
