"""A trace's arguments back as abstract values, and ``precompile``.

``TracedSignature.abstract_arguments()`` must give ``(args, kwargs)`` that JAX
keys exactly as the traced call: ``lower``, ``eval_shape`` and ``explain`` with
them hit that trace. ``precompile`` must leave nothing for the next matching
call to do: no trace and no compile, checked with JAX's own monitoring events.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tinax.jit import TraceBudgetError, TracedSignature

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@functools.partial(jax.tree_util.register_dataclass, data_fields=["w", "b"], meta_fields=["n"])
@dataclasses.dataclass
class Layer:
    w: jax.Array
    b: jax.Array | None
    n: int


@pytest.fixture
def jax_events():
    """Names of JAX's trace, lowering and compile events recorded while the test runs."""
    events = []

    def listener(event, duration, **kwargs):
        if event in (TRACE_EVENT, LOWER_EVENT, COMPILE_EVENT):
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    yield events
    jax.monitoring.unregister_event_duration_listener(listener)


def make_everything():
    """A new function each time (objects rebuilt for one function at one place warn)."""

    def everything(params, batch, *extra, lr, mode="train", **options):
        """Positional, *args, keyword-only, static and **kwargs arguments at once."""
        total = batch["x"].sum() + sum(jnp.sum(e) for e in extra) + sum(options.values())
        layer = params["layer"]
        return total * lr + layer.w.sum() * layer.n, mode == "train"

    return everything


def everything_arguments():
    params = {
        "layer": Layer(jnp.ones((3, 2)), None, 4),
        "list": [jnp.zeros(2, jnp.bfloat16), (jnp.int8(3), None)],
    }
    batch = {"x": jnp.ones((4, 3))}
    args = (params, batch, jnp.ones(2, jnp.int32), 2.5)
    kwargs = {"lr": 0.1, "mode": "eval", "momentum": jnp.float32(0.9)}
    return args, kwargs


def traced(make_bounded, function=None, call=None, **options):
    function = function if function is not None else make_everything()
    step = make_bounded(function, max_traces=options.pop("max_traces", 3), **options)
    args, kwargs = call if call is not None else everything_arguments()
    step(*args, **kwargs)
    return step, step.traced_signatures[-1]


def leaf_types(tree):
    return [jax.typeof(leaf) for leaf in jax.tree.leaves(tree)]


class TestAbstractArguments:
    def test_array_leaves_become_shape_dtype_structs_with_the_traced_types(self, make_bounded):
        _step, signature = traced(make_bounded, static_argnames="mode")
        args, kwargs = signature.abstract_arguments()
        original_args, original_kwargs = everything_arguments()
        assert kwargs.pop("mode") == original_kwargs.pop("mode")  # static
        structs = jax.tree.leaves((args, kwargs))
        assert structs and all(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in structs)
        assert leaf_types((args, kwargs)) == leaf_types((original_args, original_kwargs))

    def test_tree_structure_is_rebuilt_exactly_when_it_has_custom_nodes_and_none(
        self, make_bounded
    ):
        _step, signature = traced(make_bounded, static_argnames="mode")
        args, kwargs = signature.abstract_arguments()
        original_args, original_kwargs = everything_arguments()
        assert jax.tree.structure((args, kwargs)) == jax.tree.structure(
            (original_args, original_kwargs)
        )
        assert type(args[0]["layer"]) is Layer
        assert args[0]["layer"].b is None and args[0]["layer"].n == 4

    def test_arguments_keep_how_they_were_passed_when_star_and_keywords(self, make_bounded):
        _step, signature = traced(make_bounded, static_argnames="mode")
        args, kwargs = signature.abstract_arguments()
        assert len(args) == 4  # params, batch, then the two *extra splatted back
        assert list(kwargs) == ["lr", "mode", "momentum"]
        assert kwargs["mode"] == "eval"  # static: the value traced

    def test_weak_type_is_kept_when_a_python_scalar_was_traced(self, make_bounded):
        _step, signature = traced(make_bounded, static_argnames="mode")
        args, kwargs = signature.abstract_arguments()
        assert kwargs["lr"].weak_type and args[3].weak_type
        assert not kwargs["momentum"].weak_type

    @pytest.mark.parametrize("method", ["lower", "eval_shape"])
    def test_lower_and_eval_shape_hit_the_trace_when_given_its_arguments(
        self, make_bounded, method
    ):
        step, signature = traced(make_bounded, static_argnames="mode")
        args, kwargs = signature.abstract_arguments()
        getattr(step, method)(*args, **kwargs)
        assert step.traces_used == 1

    def test_explain_reuses_the_trace_when_given_its_arguments(self, make_bounded):
        step = make_bounded(make_everything(), max_traces=3, static_argnames="mode")
        args, kwargs = everything_arguments()
        step(*args, **kwargs)
        step(*args, **{**kwargs, "mode": "train"})
        first = step.traced_signatures[0]
        explanation = step.explain(*first.abstract_arguments()[0], **first.abstract_arguments()[1])
        assert explanation.reuses is not None and explanation.reuses.number == 1

    def test_static_argument_passed_by_position_stays_positional(self, make_bounded):
        def scale(x, factor):
            return x * factor

        step, signature = traced(
            make_bounded, scale, call=((jnp.ones(2), 3), {}), static_argnames="factor"
        )
        args, kwargs = signature.abstract_arguments()
        assert args[1] == 3 and kwargs == {}
        step.lower(*args)
        assert step.traces_used == 1

    def test_arguments_are_positional_when_the_function_has_no_signature(self, make_bounded):
        class NoSignature:
            __signature__ = "not a signature"

            def __call__(self, *args, **kwargs):
                return args[0] + kwargs["y"]

        step, signature = traced(make_bounded, NoSignature(), call=((jnp.ones(2),), {"y": 1.0}))
        args, kwargs = signature.abstract_arguments()
        assert signature.arguments == ("args[0]", "y")
        assert len(args) == 1 and list(kwargs) == ["y"]
        step.lower(*args, **kwargs)
        assert step.traces_used == 1

    def test_batched_signature_gives_the_batched_arguments(self, make_batched):
        norms = make_batched(lambda v, w: (v * w).sum(), in_axes=(0, None), max_traces=1)
        norms(jnp.ones((5, 3)), jnp.ones(3))
        args, kwargs = norms.traced_signatures[-1].abstract_arguments()
        assert [leaf.shape for leaf in args] == [(5, 3), (3,)]
        norms.lower(*args, **kwargs)
        assert norms.traces_used == 1

    def test_keys_float0_and_tokens_come_back_as_their_types(self, make_bounded):
        key = jax.random.key(0)
        zeros = np.zeros(2, jax.dtypes.float0)
        token = jax.lax.create_token()
        step, signature = traced(make_bounded, lambda *a: a[0], call=((key, zeros, token), {}))
        args, _ = signature.abstract_arguments()
        assert [jax.typeof(arg) for arg in args] == [jax.typeof(v) for v in (key, zeros, token)]
        step.lower(*args)
        assert step.traces_used == 1

    def test_unrecorded_trace_is_refused_with_a_value_error(self):
        from tinax._src.diagnosis.record import unrecorded

        with pytest.raises(ValueError, match="could not be recorded"):
            unrecorded(KeyError("x")).abstract_arguments()


class TestAbstractArgumentsOnMeshes:
    def test_sharding_is_concrete_when_the_bound_mesh_matches(self, make_bounded, explicit_mesh8):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(explicit_mesh8, P("x")))
        _step, signature = traced(
            make_bounded, lambda v: v * 2, call=((x,), {}), mesh=explicit_mesh8
        )
        from tinax._src.diagnosis.record import abstract_arguments

        (struct,), _ = abstract_arguments(signature, explicit_mesh8)
        assert struct.sharding == NamedSharding(explicit_mesh8, P("x", None))

    def test_sharding_is_concrete_when_the_ambient_mesh_matches(self, make_bounded, explicit_mesh8):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(explicit_mesh8, P("x")))
        _step, signature = traced(
            make_bounded, lambda v: v * 2, call=((x,), {}), mesh=explicit_mesh8
        )
        with jax.set_mesh(explicit_mesh8):
            (struct,), _ = signature.abstract_arguments()
        assert struct.sharding.mesh is explicit_mesh8
        (abstract,), _ = signature.abstract_arguments()  # no concrete mesh known here
        assert abstract.sharding.mesh == explicit_mesh8.abstract_mesh

    def test_lower_hits_the_trace_when_the_array_was_sharded(self, make_bounded, explicit_mesh8):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(explicit_mesh8, P("x")))
        step, signature = traced(
            make_bounded, lambda v: v * 2, call=((x,), {}), mesh=explicit_mesh8
        )
        args, kwargs = signature.abstract_arguments()  # abstract sharding
        step.lower(*args, **kwargs)
        assert step.traces_used == 1

    def test_unsharded_array_gets_no_sharding(self, make_bounded):
        _step, signature = traced(make_bounded, lambda v: v, call=((jnp.ones(3),), {}))
        (struct,), _ = signature.abstract_arguments()
        assert struct.sharding is None


class TestPrecompile:
    def test_next_call_neither_traces_nor_compiles_when_precompiled_from_structs(
        self, make_bounded, jax_events
    ):
        step = make_bounded(lambda x, lr: x * lr, max_traces=1)
        step.precompile(jax.ShapeDtypeStruct((3,), jnp.float32), 0.5)
        assert step.traces_used == 1
        x = jnp.ones(3)  # made before listening: a first jnp.ones compiles
        jax_events.clear()
        out = step(x, 0.5)
        assert jax_events == []
        np.testing.assert_allclose(out, 0.5)

    def test_next_call_neither_traces_nor_compiles_when_precompiled_from_arrays(
        self, make_bounded, jax_events
    ):
        step = make_bounded(lambda x, lr: x * lr, max_traces=1)
        step.precompile(jnp.zeros(3), lr=0.5)
        x = jnp.ones(3)
        jax_events.clear()
        step(x, lr=2.0)
        assert jax_events == []
        assert step.traces_used == 1

    def test_next_call_neither_traces_nor_compiles_when_precompiled_from_a_signature(
        self, make_bounded, jax_events
    ):
        args, kwargs = everything_arguments()
        _first, signature = traced(make_bounded, static_argnames="mode")
        step = make_bounded(make_everything(), max_traces=1, static_argnames="mode")
        step.precompile(signature)
        assert step.traces_used == 1
        jax_events.clear()
        step(*args, **kwargs)
        assert jax_events == []
        assert step.traces_used == 1

    def test_precompile_traces_and_compiles_when_the_signature_is_new(
        self, make_bounded, jax_events
    ):
        step = make_bounded(lambda x: x + 1, max_traces=1)
        step.precompile(jax.ShapeDtypeStruct((3,), jnp.float32))
        assert TRACE_EVENT in jax_events and COMPILE_EVENT in jax_events

    def test_precompile_of_a_traced_signature_is_not_counted_again(self, make_bounded):
        step = make_bounded(lambda x: x + 1, max_traces=1)
        step(jnp.ones(3))
        step.precompile(step.traced_signatures[-1])
        step.precompile(jnp.zeros(3))
        assert step.traces_used == 1

    def test_precompile_is_refused_past_the_budget_like_any_trace(self, make_bounded):
        step = make_bounded(lambda x: x + 1, max_traces=1)
        step.precompile(jax.ShapeDtypeStruct((3,), jnp.float32))
        with pytest.raises(TraceBudgetError) as raised:
            step.precompile(jax.ShapeDtypeStruct((4,), jnp.float32))
        assert raised.value.traces_used == 1
        assert step.traces_used == 1

    def test_precompile_returns_the_compiled_function(self, make_bounded):
        step = make_bounded(lambda x: x + 1, max_traces=1)
        compiled = step.precompile(jax.ShapeDtypeStruct((3,), jnp.float32))
        assert isinstance(compiled, jax.stages.Compiled)
        np.testing.assert_allclose(compiled(jnp.ones(3)), 2.0)

    def test_batched_precompile_leaves_nothing_for_the_call(self, make_batched, jax_events):
        norms = make_batched(lambda v: (v * v).sum(), max_traces=1)
        norms.precompile(jax.ShapeDtypeStruct((8, 3), jnp.float32))
        x = jnp.ones((8, 3))
        jax_events.clear()
        norms(x)
        assert jax_events == [] and norms.traces_used == 1

    def test_sharded_call_on_a_bound_mesh_does_not_compile_when_precompiled_from_a_signature(
        self, make_bounded, explicit_mesh8, jax_events
    ):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(explicit_mesh8, P("x")))
        _first, signature = traced(
            make_bounded, lambda v: v * 2, call=((x,), {}), mesh=explicit_mesh8
        )
        step = make_bounded(lambda v: v * 2, max_traces=1, mesh=explicit_mesh8)
        step.precompile(signature)
        jax_events.clear()
        step(x)
        assert jax_events == [] and step.traces_used == 1

    def test_structs_with_an_abstract_sharding_are_placed_on_the_bound_mesh(
        self, make_bounded, explicit_mesh8, jax_events
    ):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(explicit_mesh8, P("x")))
        step = make_bounded(lambda v: v * 2, max_traces=1, mesh=explicit_mesh8)
        step.precompile(jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=jax.typeof(x).sharding))
        jax_events.clear()
        step(x)
        assert jax_events == [] and step.traces_used == 1

    def test_split_over_an_auto_mesh_is_kept_by_the_signature_so_the_call_makes_nothing(
        self, make_bounded, mesh8, jax_events
    ):
        # On Auto axes the type says "replicated"; the signature also keeps the call's split
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(mesh8, P("x")))
        _first, signature = traced(make_bounded, lambda v: v * 2, call=((x,), {}), mesh=mesh8)
        step = make_bounded(lambda v: v * 2, max_traces=1, mesh=mesh8)
        step.precompile(signature)
        jax_events.clear()
        step(x)
        assert jax_events == [] and step.traces_used == 1

    def test_structs_with_the_auto_mesh_split_leave_nothing_for_the_call(
        self, make_bounded, mesh8, jax_events
    ):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(mesh8, P("x")))
        step = make_bounded(lambda v: v * 2, max_traces=1, mesh=mesh8)
        step.precompile(jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding))
        jax_events.clear()
        step(x)
        assert jax_events == [] and step.traces_used == 1

    def test_signature_from_another_mesh_is_refused_with_a_value_error(
        self, make_bounded, explicit_mesh8
    ):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(explicit_mesh8, P("x")))
        _first, signature = traced(
            make_bounded, lambda v: v * 2, call=((x,), {}), mesh=explicit_mesh8
        )
        step = make_bounded(lambda v: v * 2, max_traces=1)
        with pytest.raises(ValueError, match=r"precompile: trace #1 ran under the ambient mesh"):
            step.precompile(signature)
        assert step.traces_used == 0

    def test_signature_from_an_ambient_mesh_is_accepted_inside_that_mesh(
        self, make_bounded, explicit_mesh8
    ):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(explicit_mesh8, P("x")))
        with jax.set_mesh(explicit_mesh8):
            _first, signature = traced(make_bounded, lambda v: v * 2, call=((x,), {}))
            step = make_bounded(lambda v: v * 2, max_traces=1)
            step.precompile(signature)
            step(x)
        assert step.traces_used == 1

    def test_a_single_signature_argument_is_taken_as_the_call_only_when_alone(self, make_bounded):
        step = make_bounded(lambda x, **kw: x, max_traces=2)
        step(jnp.ones(2))
        signature = step.traced_signatures[-1]
        assert isinstance(signature, TracedSignature)
        with pytest.raises(
            TypeError
        ):  # with a keyword, the signature is an argument (not an array)
            step.precompile(signature, flag=jnp.ones(1))
