"""Hypothesis strategies for the wrap-time inputs of `ShardMapped`.

Built on ``strategies.py`` (the values any argument may receive by mistake,
hostile objects included), plus values shaped like the real arguments: specs
naming good and bad axes, pytrees mixing specs with junk, axis_names
collections. Meshes are built lazily, inside the strategies, so importing this
module does not touch the backend before ``conftest.py`` has set 8 devices.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import jax
from jax.sharding import AxisType, Mesh
from jax.sharding import PartitionSpec as P

from helpers.strategies import hostile_values, meshes_any, wide_values

__all__ = [
    "AXIS_POOL",
    "VALID_SHARD_MESHES",
    "axis_names_any",
    "meshes_for_shard_map",
    "partition_specs",
    "specs_any",
    "valid_shard_setups",
]

AXIS_POOL: tuple[object, ...] = ("x", "y", "z", "", "X", 1, None, P.UNCONSTRAINED)
"""Entries a spec or axis_names may hold: mesh axes, unknown names, non-names."""


def _mesh(shape: tuple[int, ...], names: tuple[str, ...], kind: AxisType) -> Mesh:
    return jax.make_mesh(shape, names, axis_types=(kind,) * len(names))


VALID_SHARD_MESHES: tuple[Callable[[], Mesh], ...] = (
    lambda: _mesh((8,), ("x",), AxisType.Auto),
    lambda: _mesh((8,), ("x",), AxisType.Explicit),
    lambda: _mesh((2, 4), ("x", "y"), AxisType.Auto),
    lambda: _mesh((4, 2), ("y", "x"), AxisType.Explicit),
    lambda: _mesh((1,), ("x",), AxisType.Auto),
)
"""Builders of meshes `ShardMapped` accepts."""


def _entry() -> st.SearchStrategy[object]:
    names = st.sampled_from(AXIS_POOL)
    return st.one_of(names, st.lists(names, max_size=3).map(tuple))


def _spec_or_error(entries: list[object], unreduced: frozenset[object]) -> object:
    """``P(*entries, unreduced=...)``, or the string PartitionSpec refused (it may)."""
    try:
        return P(*entries, unreduced=unreduced)
    except Exception as error:  # PartitionSpec's own checks: the value is then junk
        return f"P refused: {type(error).__name__}"


def partition_specs() -> st.SearchStrategy[object]:
    """PartitionSpecs naming good, unknown, duplicated and odd axes, sometimes unreduced."""
    unreduced = st.frozensets(st.sampled_from(("x", "y", "z", 1)), max_size=2)
    return st.one_of(
        st.lists(_entry(), max_size=3).map(lambda entries: _spec_or_error(entries, frozenset())),
        st.builds(_spec_or_error, st.lists(_entry(), max_size=2), unreduced),
        hostile_values().map(lambda value: _spec_or_error([value], frozenset())),
    )


def specs_any() -> st.SearchStrategy[object]:
    """Values for in_specs/out_specs: specs, pytrees mixing them with junk, anything."""
    leaves = st.one_of(partition_specs(), st.none(), hostile_values(), st.integers(), st.text())
    trees = st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.lists(inner, max_size=3).map(tuple),
            st.dictionaries(st.sampled_from(("a", "b", 1)), inner, max_size=3),
            st.lists(inner, max_size=2).map(collections.deque),
        ),
        max_leaves=6,
    )
    return st.one_of(trees, wide_values())


def axis_names_any() -> st.SearchStrategy[object]:
    """Values for axis_names: names, collections of them (duplicates too), anything."""
    names = st.one_of(st.sampled_from(AXIS_POOL), hostile_values())
    hashable_names = st.sampled_from(AXIS_POOL)
    return st.one_of(
        names,
        st.lists(names, max_size=3),
        st.lists(names, max_size=3).map(tuple),
        st.sets(hashable_names, max_size=3),
        st.frozensets(hashable_names, max_size=3),
        wide_values(),
    )


def meshes_for_shard_map() -> st.SearchStrategy[object]:
    """Valid shard meshes, and the mesh-like values to reject (a Manual mesh, ...)."""
    return st.one_of(st.sampled_from(VALID_SHARD_MESHES).map(lambda build: build()), meshes_any())


def valid_shard_setups() -> st.SearchStrategy[dict[str, Any]]:
    """Accepted (mesh, axis_names, in_specs, out_specs) for a one-argument function.

    Also returns ``manual``, the normalized axis_names `ShardMapped` must report.
    """

    def for_mesh(mesh: Mesh) -> st.SearchStrategy[dict[str, Any]]:
        axes = tuple(mesh.axis_names)
        chosen = st.one_of(
            st.none(), st.lists(st.sampled_from(axes), min_size=1, unique=True)
        ).flatmap(lambda names: st.tuples(st.just(names), _as_collection(names)))

        def with_specs(pair: tuple[list[str] | None, object]) -> st.SearchStrategy[dict[str, Any]]:
            names, given = pair
            manual = axes if names is None else tuple(a for a in axes if a in names)
            spec = _valid_spec(manual)
            return st.fixed_dictionaries(
                {
                    "mesh": st.just(mesh),
                    "axis_names": st.just(given),
                    "manual": st.just(manual),
                    "in_specs": st.one_of(spec, st.tuples(spec), st.tuples(st.none())),
                    "out_specs": st.one_of(
                        spec, st.tuples(spec), st.dictionaries(st.just("a"), spec, max_size=1)
                    ),
                }
            )

        return chosen.flatmap(with_specs)

    return st.sampled_from(VALID_SHARD_MESHES).map(lambda build: build()).flatmap(for_mesh)


def _as_collection(names: list[str] | None) -> st.SearchStrategy[object]:
    if names is None:
        return st.none()
    options: list[st.SearchStrategy[object]] = [
        st.just(list(names)),
        st.just(tuple(names)),
        st.just(set(names)),
        st.just(frozenset(names)),
    ]
    if len(names) == 1:
        options.append(st.just(names[0]))
    return st.one_of(*options)


def _valid_spec(manual: tuple[str, ...]) -> st.SearchStrategy[P]:
    """PartitionSpecs over distinct Manual axes, with replicated (None) dimensions."""

    def build(order: list[str], cut: int, pad: int) -> P:
        entries: list[object] = [None] * pad
        if cut == 1 and len(order) >= 2:
            entries.append(tuple(order))  # several mesh axes on one dimension
        else:
            entries.extend(order)
        return P(*entries)

    return st.builds(
        build,
        st.lists(st.sampled_from(manual), unique=True, max_size=len(manual)),
        st.integers(0, 1),
        st.integers(0, 1),
    )
