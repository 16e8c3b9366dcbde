"""One leaf of a drawn call: the values a dtype may take (`KINDS`, bounded by
`FLOAT_BOUND` and `INT_BOUND`), a leaf drawn at its abstract value and placed as its
sharding says, and a leaf drawn by the user's strategy, checked against that abstract
value. `strategies` assembles them into a whole call. Needs hypothesis.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

try:
    import hypothesis.extra.numpy as hnp
    from hypothesis import strategies as st
except ImportError as error:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "tinax.testing needs hypothesis, an optional dependency of tinax: "
        "pip install 'tinax[testing]'"
    ) from error

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AbstractMesh, Mesh

from tinax._src.core import validation
from tinax._src.diagnosis import abstract
from tinax._src.diagnosis.record import short_dtype

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


def check_elements(value: object) -> dict[str, st.SearchStrategy[Any]]:
    if value is None:
        return {}
    expected = f"None or a mapping from dtype kinds {KINDS} to hypothesis strategies"
    if not isinstance(value, Mapping):
        raise TypeError(validation.message(_API, "elements", expected, value))
    given: Mapping[Any, Any] = cast("Mapping[Any, Any]", value)
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


def drawn_leaf(
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
