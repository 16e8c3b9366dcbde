"""flax.nnx objects as arguments: ``propagate_updates`` (None, True, False)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from tinax.jit import TraceBudgetError, batched_jit, bounded_jit


class Net(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(3, 4, rngs=rngs)
        self.bn = nnx.BatchNorm(4, rngs=rngs)
        self.dropout = nnx.Dropout(0.5, rngs=rngs)
        self.head = nnx.Linear(4, 2, rngs=rngs)

    def __call__(self, x):
        return self.head(self.dropout(self.bn(self.linear(x))))


ADAM = optax.adam(1e-2)  # one transformation: a new one per optimizer would be a new trace


def make():
    model = Net(nnx.Rngs(0, dropout=1))
    return model, nnx.Optimizer(model, ADAM, wrt=nnx.Param)


def train_step(model, optimizer, x, y):
    def loss_fn(model):
        return ((model(x) - y) ** 2).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def functional_step(model, optimizer, x, y):
    loss = train_step(model, optimizer, x, y)
    return model, optimizer, loss


BATCH = (jax.random.normal(jax.random.key(0), (8, 3)), jnp.ones((8, 2)))


def state_leaves(*objects):
    """Every leaf of the objects' state as a NumPy array (RNG keys as their data)."""
    leaves = jax.tree.leaves(nnx.state(objects))
    return [
        np.asarray(
            jax.random.key_data(leaf) if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key) else leaf
        )
        for leaf in leaves
    ]


def assert_same_state(ours, theirs):
    mine, reference = state_leaves(*ours), state_leaves(*theirs)
    assert len(mine) == len(reference)
    for a, b in zip(mine, reference, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


LOST_PATHS = [
    "  model.bn.bias",
    "  model.bn.mean",
    "  model.bn.scale",
    "  model.bn.var",
    "  model.dropout.rngs.count",
    "  model.head.bias",
    "  model.head.kernel",
    "  model.linear.bias",
    "  model.linear.kernel",
    "  optimizer.opt_state[0].count",
    *(
        f"  optimizer.opt_state[0].{moment}['{layer}']['{name}']"
        for moment in ("mu", "nu")
        for layer, names in (
            ("bn", ("bias", "scale")),
            ("head", ("bias", "kernel")),
            ("linear", ("bias", "kernel")),
        )
        for name in names
    ),
    "  optimizer.step",
]


class TestPropagateTrue:
    def test_in_place_loop_equals_nnx_jit_after_5_steps(self):
        ours, theirs = make(), make()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        reference = nnx.jit(train_step)
        for _ in range(5):
            loss = step(*ours, *BATCH)
            expected = reference(*theirs, *BATCH)
            np.testing.assert_allclose(loss, expected, atol=1e-6, rtol=0)
        assert_same_state(ours, theirs)
        assert step.traces_used == 1

    def test_every_kind_of_state_moved_when_written_back(self):
        model, optimizer = make()
        kernel = np.asarray(model.linear.kernel[...])
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        for _ in range(5):
            step(model, optimizer, *BATCH)
        assert int(optimizer.step[...]) == 5
        assert int(optimizer.opt_state[0].count[...]) == 5
        assert not np.allclose(model.linear.kernel[...], kernel)
        assert np.abs(np.asarray(model.bn.mean[...])).sum() > 0
        assert int(model.dropout.rngs.count[...]) == 5

    def test_dropout_draws_a_new_mask_every_call(self):
        model = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=0))
        apply = bounded_jit(lambda m, x: m(x), max_traces=1, propagate_updates=True)
        first, second = apply(model, jnp.ones(64)), apply(model, jnp.ones(64))
        assert not np.array_equal(first, second)

    def test_shared_variable_stays_shared_and_is_updated_once_per_assignment(self):
        class Counter(nnx.Module):
            def __init__(self, count):
                self.count = count

        shared = nnx.Variable(jnp.zeros(()))
        a, b = Counter(shared), Counter(shared)

        def bump(a, b):
            a.count[...] += 1.0
            b.count[...] += 10.0  # the same Variable: sees a's assignment, as in eager code
            return b.count[...]

        step = bounded_jit(bump, max_traces=1, propagate_updates=True)
        assert float(step(a, b)) == 11.0
        assert float(step(a, b)) == 22.0
        assert a.count is b.count is shared
        assert float(shared[...]) == 22.0

    def test_tied_layer_in_two_modules_trains_as_under_nnx_jit(self):
        def tied():
            rngs = nnx.Rngs(0)
            encoder = nnx.Linear(3, 3, rngs=rngs)
            pair = nnx.List([encoder, encoder])
            return pair, nnx.Optimizer(pair, optax.sgd(0.1), wrt=nnx.Param)

        def step(pair, optimizer, x):
            def loss_fn(pair):
                return (pair[1](pair[0](x)) ** 2).mean()

            loss, grads = nnx.value_and_grad(loss_fn)(pair)
            optimizer.update(pair, grads)
            return loss

        ours, theirs = tied(), tied()
        wrapped = bounded_jit(step, max_traces=1, propagate_updates=True)
        for _ in range(3):
            wrapped(*ours, jnp.ones((2, 3)))
            nnx.jit(step)(*theirs, jnp.ones((2, 3)))
        assert ours[0][0] is ours[0][1]
        assert_same_state(ours, theirs)

    def test_attribute_added_inside_the_call_is_an_error(self):
        model, _ = make()

        def grow(model, x):
            model.extra = nnx.Param(jnp.zeros(()))
            return model(x)

        step = bounded_jit(grow, max_traces=1, propagate_updates=True)
        with pytest.raises(ValueError, match=r"\n  model\.extra: added\n") as info:
            step(model, BATCH[0])
        assert "propagate_updates=True writes back the values of the Variables" in str(info.value)
        assert not hasattr(model, "extra")
        assert step.traces_used == 0

    def test_object_inside_another_pytree_node_is_not_written_back_but_named(self):
        model, optimizer = make()

        @jax.tree_util.register_dataclass
        @dataclasses.dataclass
        class Objects:
            model: Net
            optimizer: nnx.Optimizer

        def step(objects, x, y):
            return train_step(objects.model, objects.optimizer, x, y)

        wrapped = bounded_jit(step, max_traces=1, propagate_updates=True)
        with pytest.raises(ValueError, match=r"objects\.optimizer\.step") as info:
            wrapped(Objects(model, optimizer), *BATCH)
        assert "inside tuple, list and dict arguments (nested up to 32 levels)" in str(info.value)
        assert int(optimizer.step[...]) == 0

    def test_replaced_variable_between_calls_is_used_without_a_retrace(self):
        model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
        apply = bounded_jit(lambda m, x: m(x), max_traces=1, propagate_updates=True)
        apply(model, jnp.ones(2))
        model.kernel = nnx.Param(jnp.eye(2))
        model.bias = nnx.Param(jnp.zeros(2))
        np.testing.assert_allclose(apply(model, jnp.array([1.0, 2.0])), [1.0, 2.0])
        assert apply.traces_used == 1

    def test_a_second_model_of_the_same_architecture_reuses_the_trace(self):
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        first, second = make(), make()
        step(*first, *BATCH)
        step(*second, *BATCH)
        step(*first, *BATCH)
        assert step.traces_used == 1
        assert int(first[1].step[...]) == 2 and int(second[1].step[...]) == 1

    def test_objects_passed_by_keyword_are_written_back(self):
        model, optimizer = make()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        step(model, optimizer=optimizer, x=BATCH[0], y=BATCH[1])
        assert int(optimizer.step[...]) == 1

    def test_donated_objects_are_written_back_whole(self):
        class Pair(nnx.Module):
            def __init__(self):
                self.a = nnx.Variable(jnp.zeros(4))
                self.b = nnx.Variable(jnp.ones(4))

        def bump(pair):
            pair.a[...] += 1
            return pair.b[...] * 2  # b is read only, and its buffer may hold the output

        pair = Pair()
        step = bounded_jit(bump, max_traces=1, propagate_updates=True, donate_argnums=0)
        step(pair)
        step(pair)
        assert pair.a[...].tolist() == [2.0] * 4
        assert pair.b[...].tolist() == [1.0] * 4

    def test_donated_training_step_keeps_training(self):
        model, optimizer = make()
        step = bounded_jit(
            train_step, max_traces=1, propagate_updates=True, donate_argnames=("model", "optimizer")
        )
        for _ in range(2):
            step(model, optimizer, *BATCH)
        assert int(optimizer.step[...]) == 2

    def test_explain_and_precompile_take_the_objects(self):
        model, optimizer = make()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        step.precompile(model, optimizer, *BATCH)
        assert not step.explain(model, optimizer, *BATCH).retraces
        step(model, optimizer, *BATCH)
        assert step.traces_used == 1
        assert int(optimizer.step[...]) == 1

    def test_eval_shape_returns_the_output_only(self):
        model, optimizer = make()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        assert step.eval_shape(model, optimizer, *BATCH).shape == ()
        assert int(optimizer.step[...]) == 0

    def test_calls_without_nnx_objects_run_as_usual(self):
        double = bounded_jit(lambda x: x * 2, max_traces=1, propagate_updates=True)
        assert double(jnp.ones(2)).tolist() == [2.0, 2.0]


class TestDefaultDetects:
    def test_in_place_loop_raises_on_first_call_naming_every_path(self):
        model, optimizer = make()
        before = state_leaves(model, optimizer)
        step = bounded_jit(train_step, max_traces=1)
        with pytest.raises(ValueError) as info:
            step(model, optimizer, *BATCH)
        lines = str(info.value).splitlines()
        assert lines[0].startswith("train_step (")
        assert lines[0].endswith(
            "): this trace assigns flax.nnx Variables of its arguments and does not return "
            "their new values; jax.jit would drop them silently, after every call:"
        )
        assert lines[1:-3] == LOST_PATHS
        assert lines[-3:] == [
            "Fix: return the objects from the function (return model, optimizer, loss) and use "
            "the returned ones,",
            "  or wrap with propagate_updates=True: the new values are written back into the "
            "caller's objects after every call, as nnx.jit does.",
            "  (propagate_updates=False drops them, as jax.jit does.)",
        ]
        assert step.traces_used == 0
        for a, b in zip(state_leaves(model, optimizer), before, strict=True):
            np.testing.assert_array_equal(a, b)

    def test_functional_loop_passes_and_equals_nnx_jit(self):
        ours, theirs = make(), make()
        step = bounded_jit(functional_step, max_traces=1)
        reference = nnx.jit(train_step)
        for _ in range(5):
            *ours, loss = step(*ours, *BATCH)
            expected = reference(*theirs, *BATCH)
            np.testing.assert_allclose(loss, expected, atol=1e-6, rtol=0)
        assert_same_state(ours, theirs)
        assert step.traces_used == 1

    def test_returning_the_new_value_itself_is_not_a_loss(self):
        counter = nnx.Variable(jnp.zeros(()))

        def bump(counter):
            counter[...] += 1
            return counter[...]

        assert float(bounded_jit(bump, max_traces=1)(counter)) == 1.0

    def test_reading_only_is_untouched(self):
        model, _ = make()
        model.eval()
        apply = bounded_jit(lambda model, x: model(x), max_traces=1)
        assert apply(model, BATCH[0]).shape == (8, 2)

    def test_attribute_added_and_not_returned_is_named(self):
        model, _ = make()

        def grow(model):
            model.extra = nnx.Param(jnp.zeros(()))
            return 0

        with pytest.raises(ValueError, match=r"  model\.extra: added \(a change of structure\)"):
            bounded_jit(grow, max_traces=1)(model)

    def test_a_plain_argument_changed_inside_is_not_an_nnx_update(self):
        # flax is imported, but the dict holds no nnx object: jax.jit runs it, and so must
        # tinax (no "assigns flax.nnx Variables" error about a dict).
        def stash(batch, model):
            batch["doubled"] = batch["x"] * 2
            return model(batch["x"])

        model, _ = make()
        model.eval()
        for mode in (None, True):
            step = bounded_jit(stash, max_traces=1, propagate_updates=mode)
            out = step({"x": BATCH[0]}, model)
            np.testing.assert_array_equal(out, jax.jit(stash)({"x": BATCH[0]}, model))

    def test_a_module_without_variables_is_watched(self):
        class Empty(nnx.Module):
            pass

        def grow(module):
            module.extra = nnx.Param(jnp.zeros(()))
            return 0

        with pytest.raises(ValueError, match=r"  module\.extra: added \(a change of structure\)"):
            bounded_jit(grow, max_traces=1)(Empty())

    def test_an_nnx_object_inside_a_plain_container_is_watched(self):
        counter = nnx.Variable(jnp.zeros(()))

        def bump(state):
            state["counters"][0][...] += 1
            return 0

        with pytest.raises(ValueError, match=r"  state\['counters'\]\[0\]"):
            bounded_jit(bump, max_traces=1)({"counters": [counter], "x": jnp.ones(2)})

    def test_false_drops_updates_as_jax_jit(self):
        model, optimizer = make()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=False)
        step(model, optimizer, *BATCH)
        jax.jit(train_step)(model, optimizer, *BATCH)
        assert int(optimizer.step[...]) == 0

    def test_batched_jit_names_the_per_example_assignment(self):
        counter = nnx.Variable(jnp.zeros(()))

        def bump(counter, x):
            counter[...] += x
            return x

        for mode in (None, True):
            batched = batched_jit(bump, in_axes=(None, 0), max_traces=1, propagate_updates=mode)
            with pytest.raises(ValueError, match=r"(?s)  counter\n.*out_axes for them"):
                batched(counter, jnp.ones(3))
        dropped = batched_jit(bump, in_axes=(None, 0), max_traces=1, propagate_updates=False)
        assert dropped(counter, jnp.ones(3)).tolist() == [1.0, 1.0, 1.0]


def run_model(model, x):
    return model(x)


class TestModeSwitch:
    def test_eval_after_train_is_diagnosed_with_the_exact_line(self):
        model, _ = make()
        step = bounded_jit(lambda model, x: model(x), max_traces=1, propagate_updates=True)
        step(model, BATCH[0])
        model.eval()
        with pytest.raises(TraceBudgetError) as info:
            step(model, BATCH[0])
        lines = [line.strip() for line in str(info.value).splitlines()]
        assert lines[2:6] == [
            "Closest earlier trace: #1 (2 differences):",
            "model.bn.use_running_average: False -> True (static field of BatchNorm)",
            "model.dropout.deterministic: False -> True (static field of Dropout)",
            "How to fix:",
        ]

    def test_the_mode_fix_followed_either_way_runs_as_nnx_jit(self):
        """model.eval() flips the bools BatchNorm and Dropout read with a Python if: the fix
        is a trace per mode or an object per mode (never an array), and each, followed
        literally, runs as nnx.jit: outputs and every Variable after train, eval, train, eval."""
        model, _ = make()
        step = bounded_jit(run_model, max_traces=1, propagate_updates=True)
        step(model, BATCH[0])
        model.eval()
        with pytest.raises(TraceBudgetError) as info:
            step(model, BATCH[0])
        assert str(info.value).splitlines()[-2] == (
            "  static field: a bool read by a Python if cannot be traced "
            "(TracerBoolConversionError): allow a trace per mode (max_traces=2, twice what one "
            "mode needs), or wrap the function once per mode"
        )
        reference = nnx.jit(run_model)
        per_mode = bounded_jit(run_model, max_traces=2, propagate_updates=True)
        by_mode = {
            mode: bounded_jit(run_model, max_traces=1, propagate_updates=True)
            for mode in ("train", "eval")
        }
        for pick in (lambda mode: per_mode, by_mode.__getitem__):
            ours, theirs = make()[0], make()[0]
            for mode in ("train", "eval") * 2:
                for each in (ours, theirs):
                    getattr(each, mode)()
                np.testing.assert_allclose(
                    pick(mode)(ours, BATCH[0]), reference(theirs, BATCH[0]), atol=1e-6, rtol=0
                )
            assert_same_state((ours,), (theirs,))
        assert per_mode.traces_used == 2
        assert [each.traces_used for each in by_mode.values()] == [1, 1]

    def test_switching_back_to_train_reuses_the_first_trace(self):
        model, _ = make()
        step = bounded_jit(lambda model, x: model(x), max_traces=2, propagate_updates=True)
        step(model, BATCH[0])
        model.eval()
        step(model, BATCH[0])
        model.train()
        step(model, BATCH[0])
        assert step.traces_used == 2

    def test_an_epoch_with_metrics_and_numpy_batches_equals_nnx_jit(self):
        """The loop users run: nnx.Optimizer and an nnx.MultiMetric updated in place,
        NumPy batches as a data loader yields them, train mode, then eval mode, then
        train again: every leaf and the metrics equal nnx.jit's; each step traces once."""

        def metrics_of():
            return nnx.MultiMetric(
                loss=nnx.metrics.Average("loss"), accuracy=nnx.metrics.Accuracy()
            )

        def loss_fn(model, batch):
            logits = model(batch["x"])
            labels = batch["y"]
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), logits

        def train(model, optimizer, metrics, batch):
            grad_fn = nnx.value_and_grad(lambda model: loss_fn(model, batch), has_aux=True)
            (loss, logits), grads = grad_fn(model)
            metrics.update(loss=loss, logits=logits, labels=batch["y"])
            optimizer.update(model, grads)
            return loss

        def evaluate(model, metrics, batch):
            loss, logits = loss_fn(model, batch)
            metrics.update(loss=loss, logits=logits, labels=batch["y"])

        rng = np.random.default_rng(0)
        batches = [
            {
                "x": rng.normal(size=(8, 3)).astype(np.float32),
                "y": rng.integers(0, 2, size=8).astype(np.int32),
            }
            for _ in range(3)
        ]
        ours, theirs = (*make(), metrics_of()), (*make(), metrics_of())
        our_train = bounded_jit(train, max_traces=1, propagate_updates=True)
        our_eval = bounded_jit(evaluate, max_traces=1, propagate_updates=True)
        for (model, optimizer, metrics), step, check in (
            (ours, our_train, our_eval),
            (theirs, nnx.jit(train), nnx.jit(evaluate)),
        ):
            for _ in range(2):  # two epochs: train, then evaluate
                model.train()
                for batch in batches:
                    step(model, optimizer, metrics, batch)
                model.eval()
                for batch in batches[:2]:
                    check(model, metrics, batch)
        assert_same_state(ours, theirs)
        mine, reference = ours[2].compute(), theirs[2].compute()
        for name in ("loss", "accuracy"):
            np.testing.assert_allclose(mine[name], reference[name], atol=1e-6, rtol=0)
        assert int(ours[1].step[...]) == 6
        assert (our_train.traces_used, our_eval.traces_used) == (1, 1)


class Tempered(nnx.Module):
    def __init__(self, temperature, rngs):
        self.linear = nnx.Linear(2, 2, rngs=rngs)
        self.layers = nnx.List([nnx.Linear(2, 2, rngs=rngs)])
        self.temperature = temperature

    def __call__(self, x):
        return self.layers[0](self.linear(x)) / self.temperature


def first_difference(error_or_explanation):
    lines = [line.strip() for line in str(error_or_explanation).splitlines()]
    start = next(index for index, line in enumerate(lines) if line.startswith("Closest"))
    return lines[start + 1 : start + 2]


class TestGraphDefDiagnosis:
    def test_static_graphdef_names_the_attribute_path(self):
        step = bounded_jit(
            lambda graphdef, state, x: nnx.merge(graphdef, state)(x),
            max_traces=1,
            static_argnames="graphdef",
        )
        graphdef, state = nnx.split(Tempered(1.0, nnx.Rngs(0)))
        step(graphdef, state, jnp.ones(2))
        hotter, state = nnx.split(Tempered(2.0, nnx.Rngs(0)))
        with pytest.raises(TraceBudgetError) as info:
            step(hotter, state, jnp.ones(2))
        assert first_difference(info.value) == [
            "graphdef.temperature: 1.0 -> 2.0 (static argument value: an nnx GraphDef, "
            "compared attribute by attribute)"
        ]

    def test_graphdef_inside_a_tree_names_the_attribute_path(self):
        step = bounded_jit(lambda split, x: nnx.merge(*split)(x), max_traces=1)
        step(nnx.split(Tempered(1.0, nnx.Rngs(0))), jnp.ones(2))
        explanation = step.explain(nnx.split(Tempered(2.0, nnx.Rngs(0))), jnp.ones(2))
        assert first_difference(explanation) == [
            "split[0].temperature: 1.0 -> 2.0 (static field of GraphDef: an nnx GraphDef, "
            "compared attribute by attribute)"
        ]

    def test_nested_change_and_added_attribute_are_named(self):
        step = bounded_jit(lambda graphdef: 0, max_traces=1, static_argnames="graphdef")
        model = Tempered(1.0, nnx.Rngs(0))
        step(nnx.graphdef(model))
        model.layers[0].use_bias = False
        model.extra = "new"
        lines = [line.strip() for line in str(step.explain(nnx.graphdef(model))).splitlines()]
        detail = "(static argument value: an nnx GraphDef, compared attribute by attribute)"
        assert f"graphdef.layers[0].use_bias: True -> False {detail}" in lines
        assert "graphdef.extra: added ('new')" in lines

    def test_same_graphdef_rebuilt_reuses_the_trace(self):
        step = bounded_jit(lambda graphdef: 0, max_traces=1, static_argnames="graphdef")
        step(nnx.graphdef(Tempered(1.0, nnx.Rngs(0))))
        step(nnx.graphdef(Tempered(1.0, nnx.Rngs(1))))
        assert step.traces_used == 1


class TestEager:
    def test_default_checks_nothing_under_disable_jit(self):
        counter = nnx.Variable(jnp.zeros(()))

        def bump(counter):
            counter[...] += 1
            return 0

        with jax.disable_jit():
            bounded_jit(bump, max_traces=1)(counter)
        assert float(counter[...]) == 1.0

    def test_true_writes_back_under_disable_jit_without_counting(self):
        model, optimizer = make()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        with jax.disable_jit():
            step(model, optimizer, *BATCH)
        assert int(optimizer.step[...]) == 1
        assert step.traces_used == 0


class TestHotPath:
    @pytest.mark.parametrize("mode", [None, False])
    def test_a_cached_call_is_the_jax_jit_object_itself(self, mode):
        step = bounded_jit(train_step, max_traces=1, propagate_updates=mode)
        assert type(step).__call__.fget(step) is step._jitted
        assert type(step._jitted).__name__ == "PjitFunction"

    def test_true_wraps_the_call_to_write_back(self):
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True)
        assert type(step._jitted).__name__ == "Propagating"


class TestPerObjectOptions:
    def test_donating_the_model_leaves_the_optimizer_buffers_alone(self):
        model, optimizer = make()
        kernel = model.linear.kernel.get_raw_value()
        count = optimizer.step.get_raw_value()
        step = bounded_jit(train_step, max_traces=1, propagate_updates=True, donate_argnums=0)
        step(model, optimizer, *BATCH)
        assert kernel.is_deleted()
        assert not count.is_deleted()
        assert int(optimizer.step[...]) == 1

    def test_a_sharding_given_per_object_applies_to_its_variables(self, mesh8):
        from jax.sharding import NamedSharding, PartitionSpec

        replicated = NamedSharding(mesh8, PartitionSpec())
        model, optimizer = make()
        step = bounded_jit(
            train_step,
            max_traces=1,
            propagate_updates=True,
            in_shardings=(replicated, None, None, None),
        )
        step(model, optimizer, *BATCH)
        assert model.linear.kernel.get_raw_value().sharding == replicated
        assert int(optimizer.step[...]) == 1


@pytest.mark.parametrize("factory", [bounded_jit, batched_jit])
def test_propagate_updates_true_is_refused_next_to_static_nonarrays(factory):
    with pytest.raises(ValueError, match=r"propagate_updates must not be True when static_nonarr"):
        factory(lambda x: x, max_traces=1, static_nonarrays=True, propagate_updates=True)
    factory(lambda x: x, max_traces=1, static_nonarrays=True, propagate_updates=None)
    factory(lambda x: x, max_traces=1, static_nonarrays=False, propagate_updates=True)
