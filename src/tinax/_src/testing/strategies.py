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
from collections.abc import Mapping, Sequence
from typing import Any, cast

import attrs
import jax
from jax.sharding import Mesh

from tinax._src.core import validation
from tinax._src.diagnosis import record
from tinax._src.diagnosis.record import TracedSignature
from tinax._src.jit.batched import BatchedJit
from tinax._src.jit.bounded import BoundedJit
from tinax._src.jit.methods import BudgetedMixin

# leaves imports hypothesis first: without it, its ImportError names the extra
from tinax._src.testing.leaves import check_elements, drawn_leaf, st

Call = tuple[tuple[Any, ...], dict[str, Any]]

_API = "arguments"


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
            leaf = drawn_leaf(value, printed, mesh, elements, overrides.get(printed))
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
    given: Mapping[Any, Any] = cast("Mapping[Any, Any]", value)
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
    pair = cast("tuple[Any, ...]", source) if type(source) is tuple else ()
    if len(pair) == 2 and isinstance(pair[0], tuple | list) and isinstance(pair[1], Mapping):
        return
    raise TypeError(validation.message(_API, "source", expected, cast("object", source)))


def arguments(
    source: TracedSignature
    | BoundedJit[..., Any]
    | BatchedJit[..., Any]
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
    kinds = check_elements(elements)
    leaves = _check_overrides(overrides)
    if leaves and not isinstance(source, BudgetedMixin):  # paths checked now, not at a draw
        call, names, _ = _planned(source)
        _check_paths(leaves, _flat(call)[0], names)
    return st.deferred(lambda: _resolved(source, kinds, leaves))
