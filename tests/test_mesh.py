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

    def test_inside_a_shard_map_body_runs_under_its_manual_form_of_the_mesh(self, mesh8):
        body, seen = ambient_mesh_probe()
        inner = bounded_jit(body, max_traces=1, mesh=mesh8)
        mapped = jax.shard_map(inner, mesh=mesh8, in_specs=P("x"), out_specs=P("x"))
        out = jax.jit(mapped)(jnp.arange(16.0))
        np.testing.assert_array_equal(out, np.arange(16.0) * 2)
        [ambient] = seen
        assert ambient.axis_names == ("x",) and ambient.axis_sizes == (8,)
        assert ambient.axis_types == (jax.sharding.AxisType.Manual,)


TRANSFORMS = {
    "jit": lambda f: jax.jit(f),
    "vmap": lambda f: jax.vmap(f),
    "grad": lambda f: jax.grad(lambda x: f(x).sum()),
    "jit(vmap(grad))": lambda f: jax.jit(jax.vmap(jax.grad(lambda x: f(x).sum()))),
    "scan": lambda f: lambda xs: jax.lax.scan(lambda c, x: (c, f(x)), 0.0, xs)[1],
}


class TestExplicitAxesInsideTraces:
    """With Explicit axes the mesh is part of the types: the enclosing trace needs it too."""

    @pytest.mark.parametrize("name", ["jit", "grad", "jit(vmap(grad))", "scan"])
    def test_without_an_ambient_mesh_the_error_says_to_enter_it(self, explicit_mesh8, name):
        inner = bounded_jit(lambda x: x * 2, max_traces=1, mesh=explicit_mesh8)
        with pytest.raises(ValueError, match="are Explicit") as info:
            TRANSFORMS[name](inner)(jnp.ones((2, 8)))
        assert "'x': 8" in str(info.value)
        assert "with jax.set_mesh(mesh)" in str(info.value)

    @pytest.mark.parametrize("name", list(TRANSFORMS))
    def test_under_the_ambient_mesh_every_transformation_runs(self, explicit_mesh8, name):
        body, seen = ambient_mesh_probe()
        inner = bounded_jit(body, max_traces=1, mesh=explicit_mesh8)
        plain = TRANSFORMS[name](lambda x: x * 2)
        with jax.set_mesh(explicit_mesh8):
            out = TRANSFORMS[name](inner)(jnp.ones((2, 8)))
            expected = plain(jnp.ones((2, 8)))
        np.testing.assert_array_equal(out, expected)
        assert seen == [explicit_mesh8.abstract_mesh]


class TestMeshEntryCost:
    def test_no_mesh_is_entered_when_the_mesh_is_already_ambient(self, mesh8, monkeypatch):
        entered = []
        real_set_mesh = jax.set_mesh

        def counting_set_mesh(mesh):
            entered.append(mesh)
            return real_set_mesh(mesh)

        step = bounded_jit(lambda x: x * 2, max_traces=1, mesh=mesh8)
        x = jnp.ones(8)
        with real_set_mesh(mesh8):
            monkeypatch.setattr(jax, "set_mesh", counting_set_mesh)
            step(x)
            assert entered == []
        step(x)  # from outside: entered once, and traced only once
        assert entered == [mesh8] and step.traces_used == 1

    def test_an_equal_but_other_ambient_mesh_is_entered_over(self, mesh8):
        body, seen = ambient_mesh_probe()
        other = jax.make_mesh((4, 2), ("a", "b"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
        step = bounded_jit(body, max_traces=1, mesh=mesh8)
        with jax.set_mesh(other):
            step(jnp.ones(8))
        assert seen == [mesh8.abstract_mesh]
