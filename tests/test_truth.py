"""Issue 19: every line tinax prints is true on the edge cases real programs hit."""

import logging
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from tinax._src.observe.registry import Budgets
from tinax.jit import TraceBudgetError, batched_jit, bounded_jit, budgets


def g(w, x, y):
    return w + x + y


class TestRefusalsNeverHideJaxErrors:
    def test_missing_argument_raises_the_binding_type_error_when_the_budget_is_spent(self):
        step = bounded_jit(g, max_traces=1)
        step(jnp.ones(3), jnp.ones(3), jnp.ones(3))
        with pytest.raises(TypeError) as caught:
            step(jnp.ones(3), jnp.ones(3))
        assert str(caught.value) == "g() missing 1 required positional argument: 'y'"
        assert step.traces_used == 1

    def test_extra_argument_raises_the_binding_type_error_when_the_budget_is_spent(self):
        step = bounded_jit(g, max_traces=1)
        step(jnp.ones(3), jnp.ones(3), jnp.ones(3))
        with pytest.raises(TypeError, match=r"^g\(\) takes 3 positional arguments but 4"):
            step(jnp.ones(3), jnp.ones(3), jnp.ones(3), jnp.ones(3))

    def test_inconsistent_batch_sizes_raise_vmap_s_error_when_the_budget_is_spent(self):
        step = batched_jit(lambda x, y: x + y, max_traces=1)
        step(jnp.ones(8), jnp.ones(8))
        with pytest.raises(ValueError, match=r"^vmap got inconsistent sizes for array axes"):
            step(jnp.ones(8), jnp.ones(7))

    def test_rank_zero_at_in_axes_0_raises_vmap_s_error_when_the_budget_is_spent(self):
        step = batched_jit(lambda x, y: x + y, max_traces=1)
        step(jnp.ones(8), jnp.ones(8))
        with pytest.raises(
            ValueError, match=r"^vmap was requested to map its argument along axis 0"
        ):
            step(jnp.ones(8), jnp.ones(()))

    def test_a_rejected_call_over_budget_warns_nothing_under_on_exceed_warn(self):
        step = bounded_jit(g, max_traces=1, on_exceed="warn")
        step(jnp.ones(3), jnp.ones(3), jnp.ones(3))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(TypeError, match="missing 1 required positional argument"):
                step(jnp.ones(3), jnp.ones(3))
        assert step.traces_used == 1

    def test_a_call_that_would_succeed_over_budget_is_still_refused(self):
        step = bounded_jit(g, max_traces=1)
        step(jnp.ones(3), jnp.ones(3), jnp.ones(3))
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(4), jnp.ones(4), jnp.ones(4))


class TestExplainSaysWhatJaxWouldRaise:
    def test_explain_of_a_function_leaf_says_it_would_raise_a_type_error(self):
        step = bounded_jit(g, max_traces=1)
        lines = str(step.explain(jnp.ones(3), jnp.ones(3), jnp.tanh)).splitlines()
        assert lines[0].endswith(
            "JAX would refuse a leaf of this call; max_traces=1, traces_used=0."
        )
        assert lines[1] == "It would raise this error, and trace nothing:"
        assert lines[2].startswith(
            "TypeError: BoundedJit: the argument leaf y is <function tanh> (PjitFunction), not "
            "an array"
        )

    def test_explain_of_an_unhashable_static_says_it_would_raise_a_value_error_naming_it(self):
        step = bounded_jit(lambda x, cfg: x, max_traces=1, static_argnames="cfg")
        explanation = step.explain(jnp.ones(3), cfg=[1, 2])
        assert explanation.raises is not None
        assert explanation.raises.startswith(
            "ValueError: BoundedJit: the static argument cfg=[1, 2] (list) must be hashable"
        )
        assert "(Non-hashable static arguments are not supported)" in explanation.raises
        assert not explanation.retraces


class TestCompilesUsed:
    def test_a_sharding_only_change_counts_a_compile_not_a_trace_and_is_logged(self, caplog):
        mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
        step = bounded_jit(lambda x: x * 2, max_traces=1, mesh=mesh)
        batch = np.ones((8, 4), np.float32)
        sharded = jax.device_put(batch, NamedSharding(mesh, P("data")))
        replicated = jax.device_put(batch, NamedSharding(mesh, P()))
        step(sharded)
        assert (step.traces_used, step.compiles_used) == (1, 1)
        explanation = step.explain(replicated)
        assert explanation.reuses is not None and explanation.reuses.number == 1
        assert str(explanation).splitlines()[1] == (
            "XLA would compile again without tracing (compiles_used counts it, the budget does "
            "not): input sharding changed: x: placed P('data',) -> placed P()."
        )
        with caplog.at_level(logging.INFO, logger="tinax"):
            step(replicated)
            step(replicated)
        assert (step.traces_used, step.compiles_used) == (1, 2)
        found = [r for r in caplog.records if "without a new trace" in r.getMessage()]
        assert len(found) == 1, [r.getMessage() for r in found]
        [record] = found
        assert record.getMessage().endswith(
            "XLA compiled again without a new trace (reusing trace #1; compile 2 of this "
            "object, traces_used=1): input sharding changed: x: placed P('data',) -> placed P()"
        )
        assert str(step.explain(replicated)).count("\n") == 0  # compiled now: nothing to add
        assert step in budgets()
        row = str(Budgets([step])).splitlines()[1]
        assert row.split()[2:4] == ["1/1", "2"]

    def test_a_precompile_counts_its_compile(self):
        step = bounded_jit(lambda x: x + 1, max_traces=1)
        step.precompile(jnp.ones(3))
        step(jnp.ones(3))
        assert (step.traces_used, step.compiles_used) == (1, 1)

    def test_the_placement_fix_never_names_a_spec_that_was_not_recorded(self):
        mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
        step = bounded_jit(lambda x: x * 2, max_traces=1, mesh=mesh)
        step(jax.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P("data"))))
        lines = str(step.explain(np.ones((8, 4), np.float32))).splitlines()
        assert lines[-1] == (
            "  sharding: give inputs one sharding on every call: jax.device_put(x, "
            "NamedSharding(mesh, spec)), with the spec x had when traced first (a trace on "
            "Auto axes does not record it)"
        )


class TestExplainLines:
    def test_a_first_call_is_not_called_a_trace_again(self):
        step = bounded_jit(lambda x: x, max_traces=1)
        head = str(step.explain(jnp.ones(3))).splitlines()[0]
        assert head.endswith(
            "this call would make the first trace: max_traces=1, traces_used=0; it would be "
            "trace 1."
        )

    def test_the_this_call_line_drops_whole_leaves_never_half_a_name(self):
        tree = {
            "model": {"layers": [{"weight_" + "x" * 40: jnp.ones((3, 4))} for _ in range(6)]},
            "activation": jnp.ones(()),
        }
        step = bounded_jit(lambda tree, cfg: 0, max_traces=1, static_argnames="cfg")
        line = str(step.explain(tree, cfg="relu")).splitlines()[1]
        assert len(line) <= 200
        assert line == (
            "No earlier trace to compare with. This call: tree['activation']: f32[], "
            "... 5 more ..., tree...[5]['weight_" + "x" * 40 + "']: f32[3,4], "
            "cfg: 'relu'"
        )


def _diff_lines(first, second):
    step = bounded_jit(lambda x: 0, max_traces=1)
    step(first)
    return str(step.explain(second)).splitlines()[1:]


class TestHintsPointTheRightWay:
    def test_a_typed_key_against_raw_key_data_gets_the_one_key_api_fix(self):
        lines = _diff_lines(jax.random.key(0), jax.random.PRNGKey(0))
        assert lines == [
            "Closest earlier trace: #1 (1 difference):",
            "  x: key<fry>[] -> u32[2] (key: a typed key -> raw key data (key<fry>[] vs u32[2]))",
            "How to fix:",
            "  key: use one key API on every call: typed keys (jax.random.key) everywhere, or raw "
            "key data everywhere (jax.random.key_data(key) where uint32 data is needed)",
        ]

    def test_a_threefry_key_against_an_rbg_key_gets_the_one_implementation_fix(self):
        lines = _diff_lines(jax.random.key(0), jax.random.key(0, impl="rbg"))
        assert (
            lines[1]
            == "  x: key<fry>[] -> key<rbg>[] (key: PRNG implementation key<fry> -> key<rbg>)"
        )
        assert lines[3].startswith("  key: make every key with one PRNG implementation")

    def test_python_int_against_python_float_says_what_it_is_not_cast(self):
        lines = _diff_lines(1, 1.0)
        assert lines[1] == (
            "  x: weak-typed i32[] -> weak-typed f32[] (dtype: a Python int -> a Python float "
            "(weak types i32, f32))"
        )
        assert lines[3] == (
            "  dtype: a Python int and a Python float are two weak types: pass one Python type "
            "on every call (1.0, not 1), or an array of one dtype"
        )

    def test_a_numpy_scalar_is_not_called_an_array_made_from_a_python_float(self):
        lines = _diff_lines(0.1, np.float64(0.1))
        assert lines[1] == (
            "  x: weak-typed f32[] -> f32[] (weak type: a Python float -> a typed f32 value "
            "(an array or a NumPy scalar))"
        )

    def test_the_passing_fix_is_a_whole_sentence(self):
        step = bounded_jit(lambda x, y: 0, max_traces=1)
        step(jnp.ones(3), y=jnp.ones(3))
        assert str(step.explain(jnp.ones(3), jnp.ones(3))).splitlines()[-1] == (
            "  passing: pass each argument the same way on every call, positionally or by "
            "keyword: JAX keys its cache on how each argument was passed, not only on its value"
        )


class Box:
    def __init__(self, x, aux):
        self.x, self.aux = x, aux


jax.tree_util.register_pytree_node(
    Box, lambda box: ((box.x,), box.aux), lambda aux, children: Box(children[0], aux)
)


class TestPathsOfStaticParts:
    def test_a_custom_node_s_aux_data_change_never_reads_as_a_child_index(self):
        step = bounded_jit(lambda tree: 0, max_traces=2)
        step(Box(jnp.ones(3), ("a", 1)))
        lines = str(step.explain(Box(jnp.ones(3), ("a", 2)))).splitlines()
        assert lines[2] == (
            "  tree (aux data of Box): ('a', 1) -> ('a', 2) (static field: part of the tree "
            "structure)"
        )

    def test_the_history_shows_a_row_for_aux_data_that_differs_between_traces(self):
        step = bounded_jit(lambda tree: 0, max_traces=3)
        for aux in (("a", 1), ("a", 2), ("a", 2)):
            step(Box(jnp.ones(3), aux))
        step(Box(jnp.ones(3), ("b", 0)))
        table = str(step.traced_signatures).splitlines()
        assert table[2].split("  ")[0] == "* tree (aux data of Box)"
        assert [cell for cell in table[2].split("  ") if cell][1:] == [
            "('a', 1)",
            "('a', 2)",
            "('b', 0)",
        ]

    def test_the_history_shows_a_row_for_a_dataclass_static_field(self):
        import dataclasses

        @jax.tree_util.register_dataclass
        @dataclasses.dataclass
        class Layer:
            w: jax.Array
            scale: float = dataclasses.field(metadata={"static": True})

        step = bounded_jit(lambda layer: 0, max_traces=2)
        step(Layer(jnp.ones(2), 1.0))
        step(Layer(jnp.ones(2), 2.0))
        rows = str(step.traced_signatures).splitlines()
        assert "* layer.scale (static field)  1.0     2.0" in rows


class TestLongRuns:
    def test_under_warn_with_logging_on_an_overrun_is_printed_once_in_full(self, caplog):
        step = bounded_jit(lambda x: x, max_traces=1, on_exceed="warn")
        step(jnp.ones(3))
        with caplog.at_level(logging.WARNING, logger="tinax"), pytest.warns(Warning) as caught:
            step(jnp.ones(4))
        [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
        message = record.getMessage()
        assert "\n" not in message
        assert message.endswith(
            "trace 2 is over max_traces=1 and runs (on_exceed='warn'); x: f32[3] -> f32[4] "
            "(shape); the TraceBudgetWarning emitted now has the diagnosis."
        )
        [warning] = caught
        assert "How to fix:" in str(warning.message)

    def test_budgets_merges_objects_for_one_function_built_at_one_place(self):
        def train_step(x):
            return x

        steps = [bounded_jit(train_step, max_traces=1) for _ in range(2)]
        for step in steps:
            step(jnp.ones(3))
        header, *rows = str(Budgets(steps)).splitlines()
        assert header.split()[:4] == ["function", "location", "traces", "compiles"]
        [row] = rows
        assert row.startswith("...<locals>.train_step (x2)  ")
        assert row.split()[3:5] == ["2/2", "2"]

    def test_budgets_shows_where_objects_were_built_when_rows_would_read_alike(self):
        def train_step(x):
            return x

        first = bounded_jit(train_step, max_traces=1)
        second = bounded_jit(train_step, max_traces=1)
        header, one, two = str(Budgets([first, second])).splitlines()
        assert header.split()[:4] == ["function", "location", "built", "at"]
        assert one.split()[2] != two.split()[2]

    def test_a_long_nested_name_keeps_its_tail(self):
        def a_step_function_with_a_rather_long_name(x):
            return x

        step = bounded_jit(a_step_function_with_a_rather_long_name, max_traces=1)
        name = str(Budgets([step])).splitlines()[1].split()[0]
        assert name == "...<locals>.a_step_function_with_a_rather_long_name"

    def test_the_last_retrace_column_cuts_a_value_too_long_for_it_in_the_middle(self):
        step = bounded_jit(lambda x, tag: x, max_traces=2, static_argnames="tag")
        step(jnp.ones(3), tag="a" * 30)
        step(jnp.ones(3), tag="a b c d e f g h " * 20)
        row = str(Budgets([step])).splitlines()[1]
        assert len(row) <= 200
        cause = row[row.index("#2: ") :]
        assert cause.startswith("#2: tag: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' -> 'a b c d e f g h")
        assert "..." in cause
        assert cause.endswith("d e f g h '")  # the new value's start and end both show

    def test_the_last_retrace_column_cuts_the_path_and_keeps_both_values_beside_wide_rows(
        self,
    ):
        def a_training_step_function_with_a_long_descriptive_name_that_widens_its_column(x, params):
            return x

        def params(rows):
            weights = jnp.ones((rows, 64), jnp.bfloat16)
            return {"model": {"encoder_block_0": {"attention": {"query_projection": weights}}}}

        step = bounded_jit(
            a_training_step_function_with_a_long_descriptive_name_that_widens_its_column,
            max_traces=2,
        )
        step(jnp.ones(3), params(1024))
        step(jnp.ones(3), params(2048))
        row = str(Budgets([step])).splitlines()[1]
        assert len(row) <= 200
        cause = row[row.index("#2: ") :]
        assert cause.endswith(": bf16[1024,64] -> bf16[2048,64]"), cause  # both values whole
        assert "..." in cause  # the path (and the description) gave way
        assert "['query_projection']" in cause  # the path keeps its last segment


class TestEdgeInputs:
    def test_explain_of_a_donated_buffer_says_the_call_would_raise(self):
        step = bounded_jit(lambda x: x + 1, max_traces=1, donate_argnums=0)
        x = jnp.ones(3)
        step(x)
        explanation = step.explain(x)
        assert explanation.raises == (
            "RuntimeError or ValueError: x is a deleted array (donated to an earlier call, or "
            "deleted); pass a live array"
        )
        assert explanation.reuses is None

    def test_a_python_bool_against_a_python_int_is_not_a_cast(self):
        lines = _diff_lines(True, 1)
        assert lines[1] == (
            "  x: bool[] -> weak-typed i32[] (dtype: a bool (True/False or a bool array) -> a "
            "Python int)"
        )
        assert lines[3].startswith("  dtype: a bool is typed bool[] (never weak)")

    def test_a_typed_number_against_a_python_number_keeps_the_weak_type_hint(self):
        lines = _diff_lines(np.int32(1), 1)
        assert lines[1] == (
            "  x: i32[] -> weak-typed i32[] (weak type: a typed i32 value (an array or a NumPy "
            "scalar) -> a Python int)"
        )

    def test_a_reused_trace_on_a_2x4_auto_mesh_with_another_spec_would_compile_again(self):
        mesh = jax.make_mesh((2, 4), ("a", "b"), axis_types=(AxisType.Auto, AxisType.Auto))
        step = batched_jit(lambda x: x * 2, max_traces=1, mesh=mesh)
        batch = np.ones((8, 8), np.float32)
        step(jax.device_put(batch, NamedSharding(mesh, P("a"))))
        by_b = jax.device_put(batch, NamedSharding(mesh, P("b")))
        assert (
            str(step.explain(by_b))
            .splitlines()[1]
            .endswith("input sharding changed: x: placed P('a',) -> placed P('b',).")
        )
        step(by_b)
        assert (step.traces_used, step.compiles_used) == (1, 2)

    def test_an_object_staged_into_an_outer_jit_compiles_nothing_itself(self):
        inner = bounded_jit(lambda x: x * 2, max_traces=1)
        jax.jit(lambda x: inner(x) + 1)(jnp.ones(3))
        assert (inner.traces_used, inner.compiles_used) == (1, 0)


def test_the_this_call_line_fits_with_a_name_and_a_value_longer_than_the_limit():
    step = bounded_jit(lambda tree, cfg: 0, max_traces=1, static_argnames="cfg")
    tree = {"k" * 250: {"leaf": jnp.ones(2)}, "short": jnp.ones(3)}
    line = str(step.explain(tree, cfg="v " * 150)).splitlines()[1]
    assert len(line) <= 200
    assert "tree['short']: f32[3]" in line
    assert line.endswith(" ...")  # the value cut at a word, never the name
    assert "cfg: 'v v v" in line


@pytest.mark.parametrize("budget", [1, 2], ids=["spent", "to-spare"])
def test_a_deleted_array_with_a_new_shape_raises_jax_s_runtime_error(budget):
    step = bounded_jit(lambda x: x + 1, max_traces=budget)
    step(jnp.ones(3))
    gone = jnp.ones(5)
    gone.delete()
    with pytest.raises(RuntimeError, match=r"^Array has been deleted with shape=float32\[5\]\."):
        step(gone)


def test_compiles_are_counted_for_an_object_that_propagates_nnx_updates():
    nnx = pytest.importorskip("flax.nnx")

    class Counter(nnx.Module):
        def __init__(self):
            self.count = nnx.Variable(jnp.zeros(()))

    def step(model, x):
        model.count[...] = model.count[...] + 1
        return x * 2

    counted = bounded_jit(step, max_traces=1, propagate_updates=True)
    model = Counter()
    counted(model, jnp.ones(3))
    counted(model, jnp.ones(3))
    assert (counted.traces_used, counted.compiles_used) == (1, 1)


# --- every fix, followed literally, runs -----------------------------------------------------


def fix_for(step, calls, kind):
    """Runs every call but the last through ``step``: the one line under "How to fix:"
    for ``kind`` of the budget error the last call raises."""
    *earlier, last = calls
    for args in earlier:
        step(*args)
    with pytest.raises(TraceBudgetError) as info:
        step(*last)
    text = str(info.value).splitlines()
    fixes = text[text.index("How to fix:") + 1 :]
    found = [line for line in fixes if line.startswith(f"  {kind}: ")]
    assert len(found) == 1, "\n".join(text)
    return found[0]


def runs_as_jax_jit(step, reference, calls, *, traces=1):
    """The program after the fix: every call runs and gives ``reference``'s result (a
    `jax.jit` of the same function), in ``traces`` traces."""
    for args in calls:
        np.testing.assert_array_equal(step(*args), reference(*args))
    assert step.traces_used == traces


def scale(x, n):
    return x * n


def pick(x, train):
    return x * 2 if train else x - 1  # a mode flag read by a Python if


class TestFixesFollowedLiterallyRun:
    """Each fix the diagnosis gives names a change; made, the program runs as under
    `jax.jit` and the retrace is gone (or the budget the fix names covers it)."""

    def test_shape_pad_to_one_shape(self):
        def total(x):
            return x.sum(0)

        fix = fix_for(
            bounded_jit(total, max_traces=1), [(jnp.ones((8, 3)),), (jnp.ones((5, 3)),)], "shape"
        )
        assert (
            "pad or bucket inputs to a few fixed shapes (pad or drop a last, partial batch)" in fix
        )
        padded = [(jnp.ones((8, 3)),), (jnp.pad(jnp.ones((5, 3)), ((0, 3), (0, 0))),)]
        runs_as_jax_jit(bounded_jit(total, max_traces=1), jax.jit(total), padded)
        assert (
            float(jax.jit(total)(jnp.ones((5, 3)))[0])
            == 5.0
            == float(bounded_jit(total, max_traces=1)(padded[1][0])[0])
        )  # zero padding leaves the sum as it was

    def test_dtype_cast_before_the_call(self):
        fix = fix_for(
            bounded_jit(jnp.sin, max_traces=1), [(jnp.ones(3),), (jnp.arange(3),)], "dtype"
        )
        assert fix == "  dtype: cast inputs to one dtype before the call"
        cast = [(jnp.ones(3),), (jnp.arange(3).astype(jnp.float32),)]
        runs_as_jax_jit(bounded_jit(jnp.sin, max_traces=1), jax.jit(jnp.sin), cast)

    def test_weak_type_one_way_of_passing_the_scalar(self):
        calls = [(jnp.ones(2), 0.1), (jnp.ones(2), jnp.float32(0.2))]
        fix = fix_for(bounded_jit(scale, max_traces=1), calls, "weak type")
        assert "always a Python number, or always an array of one dtype (jnp.float32(lr), " in fix
        for one_way in ([0.1, 0.2], [jnp.float32(0.1), jnp.float32(0.2)]):
            calls = [(jnp.ones(2), lr) for lr in one_way]
            runs_as_jax_jit(bounded_jit(scale, max_traces=1), jax.jit(scale), calls)
        step = bounded_jit(scale, max_traces=1)  # "not jnp.asarray(lr)": that one is weak
        step(jnp.ones(2), jnp.asarray(0.1))
        assert step.explain(jnp.ones(2), jnp.float32(0.2)).retraces

    def test_two_python_number_types_one_python_type(self):
        fix = fix_for(
            bounded_jit(scale, max_traces=1), [(jnp.ones(2), 1), (jnp.ones(2), 2.0)], "dtype"
        )
        assert "pass one Python type on every call (1.0, not 1), or an array of one dtype" in fix
        for one_type in ([1.0, 2.0], [jnp.float32(1), jnp.float32(2)]):
            calls = [(jnp.ones(2), n) for n in one_type]
            runs_as_jax_jit(bounded_jit(scale, max_traces=1), jax.jit(scale), calls)

    def test_sharding_device_put_the_named_spec(self, explicit_mesh8):
        double = lambda x: x * 2  # noqa: E731
        with jax.set_mesh(explicit_mesh8):
            split = jax.device_put(jnp.ones((8, 3)), P("x"))
            whole = jax.device_put(jnp.ones((8, 3)), P())
            fix = fix_for(bounded_jit(double, max_traces=1), [(split,), (whole,)], "sharding")
            assert fix.endswith("jax.device_put(x, NamedSharding(mesh, P('x', None)))")
            placed = jax.device_put(whole, NamedSharding(explicit_mesh8, P("x", None)))
            runs_as_jax_jit(
                bounded_jit(double, max_traces=1), jax.jit(double), [(split,), (placed,)]
            )

    def test_mesh_one_mesh_or_bound_with_mesh(self, mesh8):
        double = lambda x: x * 2  # noqa: E731
        x, y = jnp.ones(8), jnp.arange(8.0)  # made outside the mesh: on one device either way
        step = bounded_jit(double, max_traces=1)
        step(x)
        with jax.set_mesh(mesh8), pytest.raises(TraceBudgetError) as info:
            step(x)
        assert (
            "  mesh: the ambient mesh is part of JAX's cache key: call under one mesh, or bind "
            "one with mesh="
        ) in str(info.value).splitlines()
        step = bounded_jit(double, max_traces=1)
        with jax.set_mesh(mesh8):
            runs_as_jax_jit(step, jax.jit(double), [(x,), (y,)])
        bound = bounded_jit(double, max_traces=1, mesh=mesh8)
        runs_as_jax_jit(bound, jax.jit(double), [(x,)])
        with jax.set_mesh(mesh8):
            runs_as_jax_jit(bound, jax.jit(double), [(y,)])

    def test_config_set_once_around_every_call(self):
        square = lambda x: x @ x  # noqa: E731
        step = bounded_jit(square, max_traces=1)
        step(jnp.ones((2, 2)))
        with jax.default_matmul_precision("highest"), pytest.raises(TraceBudgetError) as info:
            step(jnp.ones((2, 2)))
        if not info.value.signature.config:  # JAX < 0.10 does not name its config options
            return
        assert "set it once, around every call" in str(info.value)
        with jax.default_matmul_precision("highest"):
            calls = [(jnp.ones((2, 2)),), (jnp.eye(2),)]
            runs_as_jax_jit(bounded_jit(square, max_traces=1), jax.jit(square), calls)

    def test_static_number_passed_as_an_array(self):
        static = bounded_jit(scale, max_traces=1, static_argnums=1)
        fix = fix_for(static, [(jnp.ones(2), 2), (jnp.ones(2), 3)], "static value")
        assert fix.endswith("do not mark it static and pass it as an array")
        calls = [(jnp.ones(2), jnp.asarray(2)), (jnp.ones(2), jnp.asarray(3))]
        runs_as_jax_jit(bounded_jit(scale, max_traces=1), jax.jit(scale), calls)

    def test_static_string_a_trace_per_value(self):
        def act(x, name):
            return jnp.tanh(x) if name == "tanh" else jax.nn.relu(x)

        calls = [(jnp.ones(2), "tanh"), (jnp.ones(2), "relu")]
        fix = fix_for(bounded_jit(act, max_traces=1, static_argnums=1), calls, "static value")
        assert fix.endswith("or allow a trace per value (max_traces at least the count of values)")
        assert "array" not in fix  # jnp.asarray("relu") raises: no such advice
        step = bounded_jit(act, max_traces=2, static_argnums=1)
        runs_as_jax_jit(step, jax.jit(act, static_argnums=1), calls * 2, traces=2)

    def test_static_bool_a_trace_per_mode_or_an_object_per_mode(self):
        calls = [(jnp.ones(2), True), (jnp.ones(2), False)]
        fix = fix_for(bounded_jit(pick, max_traces=1, static_argnums=1), calls, "static value")
        assert fix == (
            "  static value: a bool read by a Python if cannot be traced "
            "(TracerBoolConversionError): allow a trace per mode (max_traces=2, twice what one "
            "mode needs), or wrap the function once per mode"
        )
        reference = jax.jit(pick, static_argnums=1)
        step = bounded_jit(pick, max_traces=2, static_argnums=1)
        runs_as_jax_jit(step, reference, calls * 2, traces=2)
        for call in calls:  # one object per mode, each with the budget one mode needs
            runs_as_jax_jit(
                bounded_jit(pick, max_traces=1, static_argnums=1), reference, [call] * 2
            )
        with pytest.raises(jax.errors.TracerBoolConversionError):  # why not as an array
            bounded_jit(pick, max_traces=1)(jnp.ones(2), jnp.asarray(True))

    def test_static_field_number_made_an_array_data_field(self):
        import dataclasses

        @jax.tree_util.register_dataclass
        @dataclasses.dataclass
        class Meta:
            w: jax.Array
            scale: float = dataclasses.field(metadata={"static": True})

        @jax.tree_util.register_dataclass
        @dataclasses.dataclass
        class Data:
            w: jax.Array
            scale: jax.Array

        apply = lambda layer: layer.w * layer.scale  # noqa: E731
        fix = fix_for(
            bounded_jit(apply, max_traces=1),
            [(Meta(jnp.ones(2), 1.0),), (Meta(jnp.ones(2), 2.0),)],
            "static field",
        )
        assert fix.endswith("make it an array data field")
        calls = [(Data(jnp.ones(2), jnp.asarray(1.0)),), (Data(jnp.ones(2), jnp.asarray(2.0)),)]
        runs_as_jax_jit(bounded_jit(apply, max_traces=1), jax.jit(apply), calls)

    def test_static_equality_by_value_or_the_same_object(self):
        import dataclasses

        from statics import ByIdentity

        @dataclasses.dataclass(frozen=True)
        class ByValue:
            n: int

        times = lambda x, c: x * c.n  # noqa: E731
        calls = [(jnp.ones(2), ByIdentity(2)), (jnp.ones(2), ByIdentity(2))]
        fix = fix_for(bounded_jit(times, max_traces=1, static_argnums=1), calls, "static equality")
        assert "(e.g. @dataclass(frozen=True)), or pass the same object on every call" in fix
        reference = jax.jit(times, static_argnums=1)
        by_value = [(jnp.ones(2), ByValue(2)), (jnp.arange(2.0), ByValue(2))]
        runs_as_jax_jit(bounded_jit(times, max_traces=1, static_argnums=1), reference, by_value)
        one = ByIdentity(2)
        same = [(jnp.ones(2), one), (jnp.arange(2.0), one)]
        runs_as_jax_jit(bounded_jit(times, max_traces=1, static_argnums=1), reference, same)

    def test_a_dataclass_with_eq_false_drops_it(self):
        import dataclasses

        @dataclasses.dataclass(frozen=True, eq=False)
        class Opaque:
            n: int

        @dataclasses.dataclass(frozen=True)
        class Plain:
            n: int

        times = lambda x, c: x * c.n  # noqa: E731
        calls = [(jnp.ones(2), Opaque(2)), (jnp.ones(2), Opaque(2))]
        fix = fix_for(bounded_jit(times, max_traces=1, static_argnums=1), calls, "static equality")
        assert "drop eq=False (frozen=True then also hashes by value)" in fix
        plain = [(jnp.ones(2), Plain(2)), (jnp.arange(2.0), Plain(2))]
        step = bounded_jit(times, max_traces=1, static_argnums=1)
        runs_as_jax_jit(step, jax.jit(times, static_argnums=1), plain)

    def test_a_rebuilt_function_built_once(self):
        apply = lambda x, f: f(x)  # noqa: E731
        calls = [(jnp.ones(2), lambda v: v + 1), (jnp.ones(2), lambda v: v + 1)]
        fix = fix_for(bounded_jit(apply, max_traces=1, static_argnums=1), calls, "static equality")
        assert "build it (the optax transformation, the lambda) once, outside the step" in fix
        once = lambda v: v + 1  # noqa: E731
        built = [(jnp.ones(2), once), (jnp.arange(2.0), once)]
        step = bounded_jit(apply, max_traces=1, static_argnums=1)
        runs_as_jax_jit(step, jax.jit(apply, static_argnums=1), built)

    def test_a_static_nan_passed_as_an_array(self):
        nan = float("nan")
        calls = [(jnp.ones(2), nan), (jnp.ones(2), float("nan"))]
        fix = fix_for(bounded_jit(scale, max_traces=1, static_argnums=1), calls, "static equality")
        assert "or pass the number as an array (jnp.asarray) to trace it" in fix
        arrays = [(jnp.ones(2), jnp.asarray(nan)), (jnp.ones(2), jnp.asarray(2.0))]
        runs_as_jax_jit(bounded_jit(scale, max_traces=1), jax.jit(scale), arrays)

    def test_tree_structure_kept_fixed(self):
        masked = lambda x, mask: x if mask is None else x * mask  # noqa: E731
        calls = [(jnp.ones(2), None), (jnp.ones(2), jnp.zeros(2))]
        fix = fix_for(bounded_jit(masked, max_traces=1), calls, "tree structure")
        assert "keep the tree structure fixed between calls" in fix
        fixed = [(jnp.ones(2), jnp.ones(2)), (jnp.ones(2), jnp.zeros(2))]
        runs_as_jax_jit(bounded_jit(masked, max_traces=1), jax.jit(masked), fixed)

    def test_passing_one_way(self):
        add = lambda x, y: x + y  # noqa: E731
        step = bounded_jit(add, max_traces=1)
        step(jnp.ones(2), jnp.ones(2))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(2), y=jnp.ones(2))
        assert "  passing: pass each argument the same way on every call, positionally" in str(
            info.value
        )
        calls = [(jnp.ones(2), jnp.ones(2)), (jnp.ones(2), jnp.zeros(2))]
        runs_as_jax_jit(bounded_jit(add, max_traces=1), jax.jit(add), calls)

    def test_a_default_passed_on_every_call(self):
        def shift(x, by=1.0):
            return x + by

        step = bounded_jit(shift, max_traces=1)
        step(jnp.ones(2))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(2), by=2.0)
        assert "a default passed explicitly is a new argument" in str(info.value)
        step = bounded_jit(shift, max_traces=1)
        for by in (1.0, 2.0):
            np.testing.assert_array_equal(
                step(jnp.ones(2), by=by), jax.jit(shift)(jnp.ones(2), by=by)
            )
        assert step.traces_used == 1

    def test_keys_one_api_and_one_implementation(self):
        draw = lambda key: jax.random.uniform(key, (2,))  # noqa: E731
        calls = [(jax.random.key(0),), (jax.random.PRNGKey(1),)]
        fix = fix_for(bounded_jit(draw, max_traces=1), calls, "key")
        assert "typed keys (jax.random.key) everywhere" in fix
        typed = [(jax.random.key(0),), (jax.random.key(1),)]
        runs_as_jax_jit(bounded_jit(draw, max_traces=1), jax.jit(draw), typed)
        calls = [(jax.random.key(0),), (jax.random.key(1, impl="rbg"),)]
        fix = fix_for(bounded_jit(draw, max_traces=1), calls, "key")
        assert "jax.random.key(seed, impl=...) with the same impl" in fix
        one_impl = [(jax.random.key(0, impl="rbg"),), (jax.random.key(1, impl="rbg"),)]
        runs_as_jax_jit(bounded_jit(draw, max_traces=1), jax.jit(draw), one_impl)

    def test_a_bool_and_an_int_one_type(self):
        calls = [(jnp.ones(2), True), (jnp.ones(2), 1)]
        fix = fix_for(bounded_jit(scale, max_traces=1), calls, "dtype")
        assert "pass one type on every call (True/False or 0/1), or an array of one dtype" in fix
        for one_type in ([True, False], [0, 1], [jnp.int32(0), jnp.int32(1)]):
            calls = [(jnp.ones(2), n) for n in one_type]
            runs_as_jax_jit(bounded_jit(scale, max_traces=1), jax.jit(scale), calls)

    def test_a_placement_on_auto_axes_the_first_spec(self):
        mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
        double = lambda x: x * 2  # noqa: E731
        placed = jax.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P("data")))
        calls = [(placed,), (np.ones((8, 4), np.float32),)]
        fix = fix_for(bounded_jit(double, max_traces=1), calls, "sharding")
        assert "NamedSharding(mesh, spec)), with the spec x had when traced first" in fix
        again = jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), placed.sharding)
        runs_as_jax_jit(bounded_jit(double, max_traces=1), jax.jit(double), [(placed,), (again,)])

    def test_a_class_whose_own_eq_is_false_passes_the_same_object(self):
        class Never:
            def __eq__(self, other):
                return False

            def __hash__(self):
                return 1

            def __repr__(self):
                return "Never()"

        plus = lambda x, c: x + 1  # noqa: E731
        calls = [(jnp.ones(2), Never()), (jnp.ones(2), Never())]
        fix = fix_for(bounded_jit(plus, max_traces=1, static_argnums=1), calls, "static equality")
        assert fix.endswith("or pass the same object on every call")
        one = Never()  # found by identity first, as JAX's cache does
        same = [(jnp.ones(2), one), (jnp.arange(2.0), one)]
        runs_as_jax_jit(
            bounded_jit(plus, max_traces=1, static_argnums=1), jax.jit(plus, static_argnums=1), same
        )

    def test_a_method_wrapped_per_instance_has_a_budget_per_instance(self):
        import functools

        class Shared:
            def __init__(self, bias):
                self.bias = bias

            @functools.partial(bounded_jit, max_traces=1, static_argnames="self")
            def step(self, x):
                return x + self.bias

        Shared(1.0).step(jnp.ones(2))
        with pytest.raises(TraceBudgetError) as info:
            Shared(2.0).step(jnp.ones(2))
        assert "wrap the bound method in __init__: self.step = bounded_jit(self._step, ...)" in str(
            info.value
        )

        class Own:
            def __init__(self, bias):
                self.bias = bias
                self.step = bounded_jit(self._step, max_traces=1)

            def _step(self, x):
                return x + self.bias

        for bias in (1.0, 2.0):
            model = Own(bias)
            runs_as_jax_jit(model.step, jax.jit(model._step), [(jnp.ones(2),), (jnp.zeros(2),)])
