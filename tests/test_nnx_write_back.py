"""flax.nnx objects whole under ``propagate_updates=True``, their updates written back as
nnx.jit's graph mode writes them: a change of structure, a bound method, ``out_shardings``,
objects inside containers, a compiled stage, a returned object, a jax.Ref (returned as nnx.jit
returns it) and a cycle, and where tinax refuses instead, with a message."""

import collections
import functools
import gc
import sys
import weakref
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from test_nnx import BATCH, assert_same_state, make, train_step
from tinax.jit import BoundedJit, batched_jit, bounded_jit

REPO_ROOT = Path(__file__).resolve().parent.parent


class Counted(nnx.Module):
    def __init__(self, seed=0):
        self.counter = nnx.Variable(jnp.zeros(()))
        self.other = nnx.Variable(jnp.ones(()))
        self.a = nnx.Linear(2, 2, rngs=nnx.Rngs(seed))
        self.b = nnx.Linear(2, 2, rngs=nnx.Rngs(seed + 1))
        self.layers = nnx.List([nnx.Linear(2, 2, rngs=nnx.Rngs(seed + 2)) for _ in range(2)])
        self.stats = nnx.data(
            {"mean": nnx.Variable(jnp.zeros(())), "var": nnx.Variable(jnp.ones(()))}
        )

    def __call__(self, x):
        self.counter[...] += 1
        return self.b(self.a(x))


def lines_fit(text):
    assert max(len(line) for line in text.splitlines()) <= 200, text


# --- 1. a change of structure inside the step ------------------------------------------------


def replace_variable(m):
    m.counter = nnx.Variable(m.counter[...] + 1)
    return 0


def swap_submodules(m):
    m.a, m.b = m.b, m.a
    return 0


def swap_variables(m):
    m.counter, m.other = m.other, m.counter
    return 0


def swap_list_items(m):
    m.layers[0], m.layers[1] = m.layers[1], m.layers[0]
    return 0


def replace_dict_entry(m):
    m.stats["mean"] = nnx.Variable(jnp.full((), 5.0))
    return 0


STRUCTURE_CHANGES = [
    pytest.param(
        replace_variable, ["m.counter: replaced by another object"], id="variable-replaced"
    ),
    pytest.param(
        swap_submodules,
        ["m.a: replaced by another object", "m.b: replaced by another object"],
        id="submodules-swapped",
    ),
    pytest.param(
        swap_variables,
        ["m.counter: replaced by another object", "m.other: replaced by another object"],
        id="variables-swapped",
    ),
    pytest.param(
        swap_list_items,
        ["m.layers[0]: replaced by another object", "m.layers[1]: replaced by another object"],
        id="nnx-list-items-swapped",
    ),
    pytest.param(
        replace_dict_entry, ["m.stats['mean']: replaced by another object"], id="dict-entry"
    ),
]


class Accumulator(nnx.Pytree):
    def __init__(self):
        self.total = nnx.data(jnp.zeros(()))


def accumulate(acc, xs):
    acc.total = acc.total + xs.sum()
    return 0


def accumulate_in_scan(acc, xs):
    @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0))
    def body(acc, x):
        acc.total = acc.total + x
        return acc, x

    body(acc, xs)
    return 0


def identities(m):
    return (m.counter, m.other, m.a, m.b, m.layers[0], m.layers[1], m.stats["mean"])


class TestChangeOfStructure:
    @pytest.mark.parametrize(("function", "lines"), STRUCTURE_CHANGES)
    def test_raises_on_every_call_naming_the_attribute(self, function, lines):
        m = Counted()
        before = identities(m)
        step = bounded_jit(function, max_traces=2, propagate_updates=True)
        for _ in range(2):  # every call, not only the first: nothing is cached
            with pytest.raises(ValueError, match="changed the structure") as info:
                step(m)
            text = str(info.value).split("\n--------------------")[0]
            assert [line.strip() for line in text.splitlines()[1 : 1 + len(lines)]] == lines
            assert text.splitlines()[1 + len(lines)].startswith("propagate_updates=True writes")
            lines_fit(text)
        assert identities(m) == before
        assert float(m.counter[...]) == 0.0
        assert step.traces_used == 0

    @pytest.mark.parametrize(("function", "lines"), STRUCTURE_CHANGES)
    def test_default_names_the_attribute_of_an_argument_not_returned(self, function, lines):
        step = bounded_jit(function, max_traces=1)
        with pytest.raises(ValueError, match="changes the structure") as info:
            step(Counted())
        text = str(info.value)
        for line in lines:
            assert f"\n  {line} (a change of structure)\n" in text

    def test_default_accepts_the_change_when_the_object_is_returned(self):
        def replace_and_return(m):
            replace_variable(m)
            return m

        m = bounded_jit(replace_and_return, max_traces=1)(Counted())
        assert float(m.counter[...]) == 1.0

    def test_a_change_inside_a_container_argument_is_named_by_its_path(self):
        step = bounded_jit(
            lambda models: swap_submodules(models["m"]), max_traces=1, propagate_updates=True
        )
        with pytest.raises(ValueError, match=r"\n  models\['m'\]\.a: replaced by another"):
            step({"m": Counted()})

    @pytest.mark.parametrize("through_scan", [False, True], ids=["directly", "in nnx.scan"])
    def test_an_array_attribute_assigned_is_named_in_the_guides_words(self, through_scan):
        step = bounded_jit(
            accumulate_in_scan if through_scan else accumulate,
            max_traces=1,
            propagate_updates=True,
        )
        acc = Accumulator()
        with pytest.raises(ValueError, match="changed the structure") as info:
            step(acc, jnp.ones(3))
        lines = str(info.value).splitlines()
        assert lines[1] == "  acc.total: a new array assigned, not held in a Variable"
        assert lines[-1] == (
            "  or hold the array in a Variable (self.total = nnx.Variable(...) where the object "
            "is built, then acc.total[...] = value in the step): only the values of Variables "
            "are written back."
        )
        assert "model.counter[...]" not in str(info.value)  # the Variable's fix is not this one
        assert float(acc.total) == 0.0
        with pytest.raises(ValueError, match="changes the structure") as info:
            bounded_jit(accumulate, max_traces=1)(acc, jnp.ones(3))
        assert "\n  acc.total: a new array assigned, not held in a Variable (a change of" in str(
            info.value
        )
        guide = " ".join((REPO_ROOT / "docs" / "models.md").read_text().split())
        assert "a new array assigned, not held in a Variable" in guide  # the guide's words
        assert "a change of structure" in guide

    def test_an_array_attribute_held_in_a_variable_is_written_back(self):
        class Held(nnx.Pytree):
            def __init__(self):
                self.total = nnx.Variable(jnp.zeros(()))

        def add(acc, xs):
            acc.total[...] = acc.total[...] + xs.sum()
            return 0

        acc = Held()
        bounded_jit(add, max_traces=1, propagate_updates=True)(acc, jnp.ones(3))
        assert float(acc.total[...]) == 3.0

    def test_value_assignments_and_nnx_transforms_are_not_a_change_of_structure(self):
        model, optimizer = make()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        step(model, optimizer, *BATCH)
        assert int(optimizer.step[...]) == 1


# --- 2. a bound method ------------------------------------------------------------------------


BOUND_METHOD_REFUSED = (
    r"^BoundedJit: function must be a function, not a bound method of a flax\.nnx object \("
)


class TestBoundMethod:
    @pytest.mark.parametrize("propagate", [None, True, False])
    @pytest.mark.parametrize("factory", [bounded_jit, batched_jit])
    def test_a_method_bound_to_a_module_is_refused_at_wrap_time(self, factory, propagate):
        model = Counted()
        with pytest.raises(ValueError) as info:
            factory(model.__call__, max_traces=1, propagate_updates=propagate)
        text = str(info.value)
        assert text.startswith(
            f"{factory.__name__.title().replace('_', '')}: function must be a function, not a "
            "bound method of a flax.nnx object (Counted.__call__); got <bound method "
        )
        assert f"step = {factory.__name__}(Counted.__call__, ...), called as step(model, x)" in text
        lines_fit(text)

    def test_the_decorator_form_and_a_partial_are_refused_too(self):
        model = Counted()
        with pytest.raises(ValueError, match=BOUND_METHOD_REFUSED):
            bounded_jit(max_traces=1)(model.__call__)
        with pytest.raises(ValueError, match=BOUND_METHOD_REFUSED):
            bounded_jit(functools.partial(model.__call__, jnp.ones(2)), max_traces=1)
        with pytest.raises(ValueError, match=BOUND_METHOD_REFUSED):
            BoundedJit(nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param).update, max_traces=1)

    def test_the_unbound_method_trains_the_module_passed(self):
        model = Counted()
        step = bounded_jit(Counted.__call__, max_traces=1, propagate_updates=True)
        step(model, jnp.ones(2))
        step(model, jnp.ones(2))
        assert float(model.counter[...]) == 2.0

    def test_a_method_decorated_in_the_class_body_writes_back(self):
        class Stepper(nnx.Module):
            def __init__(self):
                self.count = nnx.Variable(jnp.zeros(()))

            @bounded_jit(max_traces=1, propagate_updates=True)
            def bump(self, x):
                self.count[...] += x
                return self.count[...]

        stepper = Stepper()
        stepper.bump(1.0)
        assert float(stepper.bump(2.0)) == 3.0
        assert float(stepper.count[...]) == 3.0

    def test_a_method_bound_to_another_object_is_accepted(self):
        class Scale:
            def apply(self, x):
                return x * 2

        assert bounded_jit(Scale().apply, max_traces=1)(jnp.ones(2)).tolist() == [2.0, 2.0]


# --- 3. out_shardings --------------------------------------------------------------------------


class TestOutShardings:
    def test_a_tuple_applies_to_the_function_output_as_under_jax_jit(self, mesh8):
        sharded = NamedSharding(mesh8, PartitionSpec("x"))
        replicated = NamedSharding(mesh8, PartitionSpec())
        m = Counted()

        def step(m, x):
            m.counter[...] += 1
            return x * 2, x + 1

        wrapped = bounded_jit(
            step, max_traces=1, propagate_updates=True, out_shardings=(sharded, replicated)
        )
        first, second = wrapped(m, jnp.ones(8))
        reference = jax.jit(lambda x: (x * 2, x + 1), out_shardings=(sharded, replicated))
        expected = reference(jnp.ones(8))
        assert first.sharding == expected[0].sharding == sharded
        assert second.sharding == expected[1].sharding == replicated
        assert float(m.counter[...]) == 1.0

    def test_a_prefix_tree_of_the_output_is_taken(self, mesh8):
        sharded = NamedSharding(mesh8, PartitionSpec("x"))
        replicated = NamedSharding(mesh8, PartitionSpec())

        def step(m, x):
            m.counter[...] += 1
            return {"loss": x.sum(), "preds": {"a": x, "b": x * 2}}

        wrapped = bounded_jit(
            step,
            max_traces=1,
            propagate_updates=True,
            out_shardings={"loss": replicated, "preds": sharded},
        )
        out = wrapped(Counted(), jnp.ones(8))
        assert out["loss"].sharding == replicated
        assert out["preds"]["a"].sharding == out["preds"]["b"].sharding == sharded

    def test_one_sharding_applies_to_every_output(self, mesh8):
        sharded = NamedSharding(mesh8, PartitionSpec("x"))
        m = Counted()
        wrapped = bounded_jit(
            lambda m, x: (x, x * 2), max_traces=1, propagate_updates=True, out_shardings=sharded
        )
        assert all(out.sharding == sharded for out in wrapped(m, jnp.ones(8)))

    def test_a_sharding_for_a_returned_object_of_the_arguments_is_accepted(self, mesh8):
        replicated = NamedSharding(mesh8, PartitionSpec())
        m = Counted()
        wrapped = bounded_jit(
            lambda m, x: (m, x * 2),
            max_traces=1,
            propagate_updates=True,
            out_shardings=(None, replicated),
        )
        back, doubled = wrapped(m, jnp.ones(8))
        assert back is m
        assert doubled.sharding == replicated


# --- 4. nnx objects inside containers -----------------------------------------------------------


def tuple_step(objects, x, y):
    return train_step(*objects, x, y)


def dict_step(objects, x, y):
    return train_step(objects["model"], objects["optimizer"], x, y)


def nested_step(batch, objects):
    (model,), extra = objects
    return train_step(model, extra["optimizer"], *batch)


Holder = collections.namedtuple("Holder", "m")


def bump_every_module(tree):
    """Bumps the counter of every `Counted` in ``tree``, wherever it is."""
    for leaf in jax.tree.leaves(tree, is_leaf=lambda node: isinstance(node, Counted)):
        if isinstance(leaf, Counted):
            leaf.counter[...] += 1
    return 0


class TestContainers:
    @pytest.mark.parametrize(
        ("step", "pack"),
        [
            pytest.param(tuple_step, lambda m, o: (m, o), id="tuple"),
            pytest.param(tuple_step, lambda m, o: [m, o], id="list"),
            pytest.param(dict_step, lambda m, o: {"optimizer": o, "model": m}, id="dict"),
        ],
    )
    def test_objects_in_a_container_train_as_under_nnx_jit(self, step, pack):
        ours, theirs = make(), make()
        wrapped = bounded_jit(step, max_traces=1, propagate_updates=True)
        reference = nnx.jit(step)
        for _ in range(3):
            loss = wrapped(pack(*ours), *BATCH)
            expected = reference(pack(*theirs), *BATCH)
            np.testing.assert_allclose(loss, expected, atol=1e-6, rtol=0)
        assert_same_state(ours, theirs)
        assert int(ours[1].step[...]) == 3
        assert wrapped.traces_used == 1

    @pytest.mark.parametrize(
        "pack",
        [
            pytest.param(lambda m: (m,), id="tuple"),
            pytest.param(lambda m: ({"a": [0, (m,)]},), id="list-in-dict-in-tuple"),
            pytest.param(lambda m: functools.reduce(lambda t, _: [t], range(32), m), id="32-deep"),
        ],
    )
    def test_an_object_nested_in_tuples_lists_and_dicts_is_written_back(self, pack):
        ours, theirs = Counted(), Counted()
        wrapped = bounded_jit(bump_every_module, max_traces=1, propagate_updates=True)
        for _ in range(2):
            wrapped(pack(ours))
            nnx.jit(bump_every_module)(pack(theirs))
        assert float(ours.counter[...]) == float(theirs.counter[...]) == 2.0

    @pytest.mark.parametrize(
        ("pack", "path"),
        [
            pytest.param(lambda m: Holder(m), "tree.m.counter", id="namedtuple"),
            pytest.param(
                lambda m: functools.reduce(lambda t, _: [t], range(33), m),
                "tree" + "[0]" * 33 + ".counter",
                id="33-deep",
            ),
        ],
    )
    def test_an_object_in_another_node_or_deeper_raises_naming_it(self, pack, path):
        m = Counted()
        wrapped = bounded_jit(bump_every_module, max_traces=1, propagate_updates=True)
        with pytest.raises(ValueError, match="does not return their new values") as info:
            wrapped(pack(m))
        assert f"\n  {path}\n" in str(info.value)
        assert (
            "inside tuple, list and dict arguments (nested up to 32 levels): only those are "
            "written back (not one inside another pytree node)."
        ) in str(info.value)
        assert float(m.counter[...]) == 0.0

    def test_nested_containers_and_keywords_are_written_back(self):
        model, optimizer = make()
        wrapped = bounded_jit(nested_step, max_traces=1, propagate_updates=True)
        for _ in range(2):
            wrapped(BATCH, objects=([model], {"optimizer": optimizer}))
        assert int(optimizer.step[...]) == 2
        assert int(model.dropout.rngs.count[...]) == 2

    def test_a_dict_built_in_another_order_is_the_same_call(self):
        model, optimizer = make()
        wrapped = bounded_jit(dict_step, max_traces=1, propagate_updates=True)
        wrapped({"model": model, "optimizer": optimizer}, *BATCH)
        wrapped({"optimizer": optimizer, "model": model}, *BATCH)
        assert wrapped.traces_used == 1
        assert int(optimizer.step[...]) == 2

    def test_the_same_object_in_a_container_and_an_argument_is_one_object(self):
        model = Counted()

        def step(m, pair):
            m(jnp.ones(2))
            pair[0](jnp.ones(2))
            return m.counter[...]

        wrapped = bounded_jit(step, max_traces=1, propagate_updates=True)
        assert float(wrapped(model, (model, 1.0))) == 2.0
        assert float(model.counter[...]) == 2.0


# --- 5. lower(...).compile() -------------------------------------------------------------------


class TestCompiled:
    def test_the_compiled_stage_takes_the_objects_and_writes_back(self):
        ours, theirs = make(), make()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        compiled = step.lower(*ours, *BATCH).compile()
        reference = nnx.jit(train_step).lower(*theirs, *BATCH).compile()
        for _ in range(2):
            np.testing.assert_allclose(
                compiled(*ours, *BATCH), reference(*theirs, *BATCH), atol=1e-6, rtol=0
            )
        assert int(ours[1].step[...]) == 2
        assert_same_state(ours, theirs)
        assert step.traces_used == 1

    def test_precompile_and_trace_give_the_same_callable_stage(self):
        model, optimizer = make()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        step.precompile(model, optimizer, *BATCH)(model, optimizer, *BATCH)
        step.trace(model, optimizer, *BATCH).lower().compile()(model, optimizer, *BATCH)
        assert int(optimizer.step[...]) == 2
        assert step.traces_used == 1

    def test_the_stage_describes_the_function_output(self):
        model, optimizer = make()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        lowered = step.lower(model, optimizer, *BATCH)
        assert lowered.out_info.shape == ()
        assert lowered.out_tree == jax.tree.structure(0.0)
        compiled = lowered.compile()
        assert compiled.out_tree == jax.tree.structure(0.0)
        assert compiled.output_shardings.is_fully_replicated
        assert "HloModule" in compiled.as_text() or compiled.as_text()

    def test_a_lowered_stage_is_not_callable(self):
        model, optimizer = make()
        lowered = bounded_jit(train_step, max_traces=1, propagate_updates=True).lower(
            model, optimizer, *BATCH
        )
        with pytest.raises(TypeError, match="compile"):
            lowered(model, optimizer, *BATCH)


# --- 6. a returned object, jax.Ref, a cycle -------------------------------------------------------


class TestReturnedObjects:
    def test_a_returned_variable_is_the_callers_own(self):
        m = Counted()

        def bump(m):
            m.counter[...] += 1
            return m.counter

        step = bounded_jit(bump, max_traces=1, propagate_updates=True)
        reference = nnx.jit(bump)(Counted())
        out = step(m)
        assert out is m.counter
        assert float(out[...]) == float(reference[...]) == 1.0
        assert step(m) is m.counter and float(m.counter[...]) == 2.0

    def test_a_returned_module_and_submodule_are_the_callers_own(self):
        m = Counted()

        def step(m, x):
            y = m(x)
            return m, m.layers[1], {"y": y, "kernel": m.a.kernel}

        wrapped = bounded_jit(step, max_traces=1, propagate_updates=True)
        back, layer, rest = wrapped(m, jnp.ones(2))
        assert back is m and layer is m.layers[1] and rest["kernel"] is m.a.kernel
        assert float(m.counter[...]) == 1.0
        second = Counted(seed=5)  # the same structure: the trace is reused, for its objects
        back, layer, rest = wrapped(second, jnp.ones(2))
        assert back is second and layer is second.layers[1] and rest["kernel"] is second.a.kernel
        assert wrapped.traces_used == 1

    def test_the_functional_step_keeps_the_callers_objects(self):
        model, optimizer = make()

        def functional(model, optimizer, x, y):
            return model, optimizer, train_step(model, optimizer, x, y)

        step = bounded_jit(functional, max_traces=1, propagate_updates=True)
        for _ in range(3):
            model, optimizer, _ = step(model, optimizer, *BATCH)
        assert int(optimizer.step[...]) == 3
        assert len(step._jitted._entries) == 1  # the same objects: flattened once

    def test_eval_shape_gives_the_callers_object_back(self):
        m = Counted()
        out = bounded_jit(lambda m: m.counter, max_traces=1, propagate_updates=True).eval_shape(m)
        assert out is m.counter


def bump(m, x):
    m.counter[...] += 1
    return m.a(x)


class TestWhatTheWrapperHolds:
    """The wrapper holds the caller's objects weakly: one the caller drops is freed, as
    under nnx.jit, and the objects still alive keep their flattening (no new trace)."""

    def test_a_model_the_caller_drops_is_freed(self):
        step = bounded_jit(bump, max_traces=1, propagate_updates=True)
        dropped = []
        for seed in range(4):
            m = Counted(seed)
            step(m, jnp.ones(2))
            assert float(m.counter[...]) == 1.0  # written back
            dropped.append(weakref.ref(m))
            del m
        gc.collect()
        assert [ref() for ref in dropped] == [None] * 4
        assert step._jitted._entries == {}
        assert step.traces_used == 1

    def test_models_alive_are_still_written_back_when_others_are_dropped(self):
        step = bounded_jit(bump, max_traces=1, propagate_updates=True)
        train, evaluate = Counted(0), Counted(1)
        step(train, jnp.ones(2))
        dropped = Counted(2)
        step(dropped, jnp.ones(2))
        gone = weakref.ref(dropped)
        del dropped
        gc.collect()
        for _ in range(3):
            step(train, jnp.ones(2))
            step(evaluate, jnp.ones(2))
        assert gone() is None
        assert (float(train.counter[...]), float(evaluate.counter[...])) == (4.0, 3.0)
        assert len(step._jitted._entries) == 2  # one flattening per live model, kept
        assert step.traces_used == 1

    def test_the_arrays_of_a_dropped_model_are_freed_with_it(self):
        step = bounded_jit(bump, max_traces=1, propagate_updates=True)
        m = Counted()
        step(m, jnp.ones(2))
        kernel = weakref.ref(m.a.kernel[...])
        del m
        gc.collect()
        assert kernel() is None

    def test_a_variable_passed_on_its_own_is_held_only_while_it_is_the_last(self):
        # A Variable takes no weak reference: its call's flattening is the last one kept.
        def add(m, v, x):
            m.counter[...] += v[...]
            return x

        step = bounded_jit(add, max_traces=1, propagate_updates=True)
        m, v = Counted(), nnx.Variable(jnp.full((), 2.0))
        held = weakref.ref(v[...])
        step(m, v, 1.0)
        step(m, v, 1.0)
        assert float(m.counter[...]) == 4.0
        assert len(step._jitted._entries) == 1
        del v
        gc.collect()
        assert held() is not None  # the last set passed
        step(m, nnx.Variable(jnp.full((), 1.0)), 1.0)
        gc.collect()
        assert held() is None
        assert float(m.counter[...]) == 5.0


class TestRefs:
    def test_a_ref_argument_is_written_through_as_under_jax_jit(self):
        ref = jax.new_ref(jnp.zeros(()))

        def bump(m, r):
            r[...] += 1
            m.counter[...] += 1
            return r[...]

        step = bounded_jit(bump, max_traces=1, propagate_updates=True)
        m = Counted()
        step(m, ref)
        assert float(step(m, ref)) == 2.0
        assert float(ref[...]) == 2.0 and float(m.counter[...]) == 2.0

    def test_a_returned_ref_variable_is_the_callers_own(self):
        class Held(nnx.Module):
            def __init__(self):
                self.count = nnx.Variable(jnp.zeros(()), ref=True)

        def bump(m):
            m.count[...] += 1
            return m.count

        held = Held()
        out = bounded_jit(bump, max_traces=1, propagate_updates=True)(held)
        assert out is held.count and float(held.count[...]) == 1.0
        nnx_out = nnx.jit(bump)(other := Held())
        assert nnx_out is other.count

    @pytest.mark.parametrize("with_module", [True, False], ids=["with a module", "alone"])
    def test_a_returned_ref_argument_is_the_callers_own_as_under_nnx_jit(self, with_module):
        def bump(m, r, x):
            r[...] += x
            return {"ref": r, "again": (r,), "x": x}

        for wrap in (nnx.jit, functools.partial(bounded_jit, max_traces=1, propagate_updates=True)):
            step = wrap(bump)
            m = Counted() if with_module else None
            ref = jax.new_ref(jnp.zeros(2))
            step(m, ref, jnp.ones(2))
            out = step(m, ref, jnp.ones(2))  # a cached call too
            assert out["ref"] is ref and out["again"][0] is ref
            assert ref[...].tolist() == [2.0, 2.0] and out["x"].tolist() == [1.0, 1.0]

    def test_a_ref_created_and_returned_is_a_new_ref_as_under_nnx_jit(self):
        def make_ref(m, x):
            m.counter[...] += 1
            ref = jax.new_ref(x)
            ref[...] += 5.0
            return ref, [ref], x

        outs = []
        for wrap in (nnx.jit, functools.partial(bounded_jit, max_traces=1, propagate_updates=True)):
            step, m = wrap(make_ref), Counted()
            first = step(m, jnp.zeros(2))
            out = step(m, jnp.ones(2))
            assert isinstance(out[0], jax.Ref) and out[1][0] is out[0]  # one Ref, twice
            assert out[0] is not first[0]  # each call its own
            assert float(m.counter[...]) == 2.0
            outs.append(out)
        (nnx_ref, _, nnx_x), (ref, _, x) = outs
        assert ref[...].tolist() == nnx_ref[...].tolist() == [6.0, 6.0]
        assert x.tolist() == nnx_x.tolist()
        step = bounded_jit(make_ref, max_traces=1, propagate_updates=True)
        shape = step.eval_shape(Counted(), jnp.zeros(2))[0]
        assert (shape.shape, shape.dtype) == ((2,), jnp.float32)

    def test_a_new_ref_is_returned_without_nnx_objects_too(self):
        out = bounded_jit(lambda x: jax.new_ref(x + 1), max_traces=1, propagate_updates=True)(
            jnp.zeros(2)
        )
        assert isinstance(out, jax.Ref) and out[...].tolist() == [1.0, 1.0]

    @pytest.mark.parametrize("propagate", [None, False])
    def test_without_propagate_updates_a_returned_ref_is_jax_jits_error(self, propagate):
        def make_ref(m, x):
            return jax.new_ref(x)

        def give_back(m, r):
            return r

        for function, ref in [(make_ref, jnp.zeros(())), (give_back, jax.new_ref(jnp.zeros(())))]:
            step = bounded_jit(function, max_traces=1, propagate_updates=propagate)
            for call in (step, jax.jit(function)):
                with pytest.raises(ValueError, match="mutable array references cannot be returned"):
                    call(None, ref)


def free_depth():
    """How deep Python code, and C code that guards its own recursion (``repr`` of
    nested lists), can still recurse here: what a failed flatten would have used up."""

    def down(depth):
        try:
            return down(depth + 1)
        except RecursionError:
            return depth

    nested = []
    for _ in range(sys.getrecursionlimit() // 2):
        nested = [nested]
    try:
        repr(nested)
    except RecursionError:
        return 0
    return down(0)


class SelfReferencing(nnx.Module):
    def __init__(self):
        self.counter = nnx.Variable(jnp.zeros(()))
        self.inner = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
        self.inner.parent = self


def bump_counter(m):
    m.counter[...] += 1
    return m.counter[...]


class TestCycles:
    @pytest.mark.parametrize("method", ["__call__", "lower", "eval_shape", "explain"])
    def test_a_cycle_is_refused_and_the_interpreter_is_left_as_it_was(self, method):
        depth = free_depth()
        m = SelfReferencing()
        step = bounded_jit(bump_counter, max_traces=1, propagate_updates=True)
        with pytest.raises(ValueError, match=r"holds a cycle: m\.inner\.parent is m, ") as info:
            getattr(step, method)(m)
        lines_fit(str(info.value))
        assert free_depth() >= depth - 5
        assert float(m.counter[...]) == 0.0
        assert step.traces_used == 0

    def test_explain_refuses_a_cycle_under_the_default_too(self):
        depth = free_depth()
        m = SelfReferencing()
        with pytest.raises(ValueError, match="holds a cycle"):
            bounded_jit(bump_counter, max_traces=1).explain(m)
        assert free_depth() >= depth - 5

    def test_a_cycle_inside_a_container_is_named_by_its_path(self):
        m = Counted()
        m.a.back = nnx.List([m])
        step = bounded_jit(lambda objects: 0, max_traces=1, propagate_updates=True)
        with pytest.raises(ValueError, match=r"objects\[1\]\.a\.back\[0\] is objects\[1\]"):
            step((1.0, m))

    def test_a_tied_layer_is_shared_not_a_cycle(self):
        layer = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
        pair = nnx.List([layer, layer])

        def step(pair, x):
            pair[0].bias[...] += 1
            return pair[1](x)

        wrapped = bounded_jit(step, max_traces=1, propagate_updates=True)
        wrapped(pair, jnp.ones(2))
        wrapped(pair, jnp.ones(2))
        assert pair[0] is pair[1] is layer
        np.testing.assert_allclose(layer.bias[...], [2.0, 2.0])
