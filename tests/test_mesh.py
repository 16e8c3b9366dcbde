"""The mesh: entered around every call and ahead-of-time method, also inside traces."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tinax.jit import batched_jit, bounded_jit


def ambient_mesh_probe():
    """A function that records the abstract mesh it was traced under."""
    seen = []

    def body(x):
        seen.append(jax.sharding.get_abstract_mesh())
        return x * 2

    return body, seen


class TestMeshEntered:
    def test_call_runs_under_mesh_when_set(self, make_bounded, mesh8):
        body, seen = ambient_mesh_probe()
        step = make_bounded(body, max_traces=1, mesh=mesh8)
        np.testing.assert_array_equal(step(jnp.ones(8)), np.full(8, 2.0))
        assert seen == [mesh8.abstract_mesh]
        assert jax.sharding.get_abstract_mesh().empty

    def test_batched_call_runs_under_mesh_when_set(self, make_batched, mesh8):
        body, seen = ambient_mesh_probe()
        step = make_batched(body, max_traces=1, mesh=mesh8)
        step(jnp.ones((8, 2)))
        assert seen == [mesh8.abstract_mesh]

    @pytest.mark.parametrize("method", ["lower", "trace", "eval_shape"])
    def test_ahead_of_time_methods_run_under_mesh(self, mesh8, method):
        body, seen = ambient_mesh_probe()
        step = bounded_jit(body, max_traces=1, mesh=mesh8)
        getattr(step, method)(jnp.ones(8))
        assert seen == [mesh8.abstract_mesh]

    def test_ambient_mesh_is_used_when_mesh_is_none(self, mesh8):
        body, seen = ambient_mesh_probe()
        step = bounded_jit(body, max_traces=1)
        with jax.set_mesh(mesh8):
            step(jnp.ones(8))
        assert seen == [mesh8.abstract_mesh]

    def test_bare_partition_specs_resolve_against_the_mesh(self, mesh8):
        step = bounded_jit(
            lambda x: jax.lax.with_sharding_constraint(x * 2, P("x")), max_traces=1, mesh=mesh8
        )
        out = step(jnp.ones(16))
        assert out.sharding == NamedSharding(mesh8, P("x"))

    def test_mesh_restored_when_body_raises(self, mesh8):
        def broken(x):
            raise RuntimeError("boom")

        step = bounded_jit(broken, max_traces=1, mesh=mesh8)
        with pytest.raises(RuntimeError, match="boom"):
            step(jnp.ones(8))
        assert jax.sharding.get_abstract_mesh().empty

    def test_explicit_mesh_shards_batched_output(self, explicit_mesh8):
        step = batched_jit(lambda v: v * 2, max_traces=1, mesh=explicit_mesh8)
        with jax.set_mesh(explicit_mesh8):
            x = jax.device_put(jnp.arange(16.0).reshape(8, 2), P("x"))
        out = step(x)
        np.testing.assert_array_equal(out, np.arange(16.0).reshape(8, 2) * 2)
        assert out.sharding.spec == P("x", None)


class TestMeshInsideTraces:
    @pytest.mark.parametrize(
        "transform",
        [
            jax.jit,
            jax.vmap,
            lambda f: jax.vmap(jax.grad(lambda x: f(x).sum())),
            lambda f: lambda xs: jax.lax.scan(lambda c, x: (c, f(x)), 0.0, xs)[1],
        ],
        ids=["jit", "vmap", "grad", "scan"],
    )
    def test_nested_call_runs_under_mesh(self, mesh8, transform):
        body, seen = ambient_mesh_probe()
        inner = bounded_jit(body, max_traces=1, mesh=mesh8)
        out = transform(inner)(jnp.ones((2, 8)))
        assert np.asarray(out).shape == (2, 8)
        assert seen == [mesh8.abstract_mesh]
        assert jax.sharding.get_abstract_mesh().empty

    def test_nested_call_runs_when_outer_trace_has_same_mesh(self, mesh8):
        body, seen = ambient_mesh_probe()
        inner = bounded_jit(body, max_traces=1, mesh=mesh8)
        outer = bounded_jit(lambda x: inner(x) + 1, max_traces=1, mesh=mesh8)
        np.testing.assert_array_equal(outer(jnp.ones(8)), np.full(8, 3.0))
        assert seen == [mesh8.abstract_mesh]

    def test_conflicting_meshes_raise_naming_both(self, mesh8):
        other = jax.make_mesh((4, 2), ("a", "b"))
        inner = bounded_jit(lambda x: x, max_traces=1, mesh=mesh8)
        outer = bounded_jit(lambda x: inner(x), max_traces=1, mesh=other)
        with pytest.raises(ValueError, match="bound to mesh") as info:
            outer(jnp.ones(8))
        message = str(info.value)
        assert "'x': 8" in message
        assert "'a': 4" in message and "'b': 2" in message
        assert "set_mesh` can only be used" not in message
