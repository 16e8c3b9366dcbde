"""Retrace diagnostics: explain, the history table, the diff as a property of JAX, and every
line true on the edge cases real programs hit (never hiding the error JAX would raise)."""

import copy
import pickle
import warnings

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from tinax._src.diagnosis.record import signature_text
from tinax.jit import Explanation, TraceBudgetError, batched_jit, bounded_jit


def counting(function):
    """``function`` plus a list that grows by one each time it runs."""
    runs = []

    def run(*args, **kwargs):
        runs.append(1)
        return function(*args, **kwargs)

    return run, runs


class TestExplain:
    def test_matching_call_reuses_a_trace(self):
        step = bounded_jit(lambda x, lr: x * lr, max_traces=2)
        step(jnp.ones(3), 0.1)
        explanation = step.explain(jnp.zeros(3), 0.5)
        assert isinstance(explanation, Explanation)
        assert not explanation.retraces and not explanation.exceeds_budget
        assert explanation.reuses is not None and explanation.reuses.number == 1
        assert str(explanation).endswith(
            "this call would reuse trace #1; max_traces=2, traces_used=1."
        )

    def test_new_signature_within_budget_traces_again_and_says_why(self):
        step = bounded_jit(lambda x, lr: x * lr, max_traces=2)
        step(jnp.ones(3), 0.1)
        explanation = step.explain(jnp.ones(3), jnp.float32(0.1))
        assert explanation.retraces and not explanation.exceeds_budget
        text = str(explanation).splitlines()
        assert text[0].endswith(
            "this call would trace again: max_traces=2, traces_used=1; it would be trace 2."
        )
        assert (
            "  lr: weak-typed f32[] -> f32[] (weak type: a Python float -> a typed f32 value "
            "(an array or a NumPy scalar))"
        ) in text

    def test_over_budget_says_so_and_matches_the_error(self):
        step = bounded_jit(lambda x: x, max_traces=1)
        step(jnp.ones(3))
        explanation = step.explain(jnp.ones(4))
        assert explanation.retraces and explanation.exceeds_budget
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(4))
        assert explanation.differences == info.value.differences
        error = [line for line in str(info.value).splitlines() if not line.startswith("Called")]
        assert str(explanation).splitlines()[1:] == error[2:]

    def test_explain_neither_traces_nor_runs(self):
        function, runs = counting(lambda x: x + 1)
        step = bounded_jit(function, max_traces=1)
        explanation = step.explain(jnp.ones(3))
        assert explanation.retraces and explanation.closest is None
        assert "No earlier trace to compare with." in str(explanation)
        assert (runs, step.traces_used) == ([], 0)

    def test_static_arguments_are_compared_by_value(self):
        step = bounded_jit(lambda x, mode: x, max_traces=2, static_argnames="mode")
        step(jnp.ones(1), mode="train")
        assert not step.explain(jnp.ones(1), mode="train").retraces
        explanation = step.explain(jnp.ones(1), mode="eval")
        assert [str(d) for d in explanation.differences] == [
            "mode: 'train' -> 'eval' (static argument value)"
        ]

    @pytest.mark.parametrize("option", [{"static_argnames": "layers"}, {"static_argnums": 1}])
    def test_unhashable_static_is_named_with_its_value_when_jax_would_reject_it(self, option):
        """The argument is named, however it was made static."""

        def build(x, layers):
            return x

        step = bounded_jit(build, max_traces=1, **option)
        explanation = step.explain(jnp.ones(2), [16, 32])
        assert explanation.raises == (
            "ValueError: BoundedJit: the static argument layers=[16, 32] (list) must be "
            "hashable: jax.jit keys its cache on static arguments (type, hash and ==) and "
            "refuses the call (Non-hashable static arguments are not supported). Make it "
            "hashable (a tuple, not a list; @dataclass(frozen=True)), or pass it as an array "
            "and not as a static argument."
        )
        text = str(explanation).splitlines()
        assert text[0].endswith(
            "JAX would reject this call before tracing; max_traces=1, traces_used=0."
        )
        assert text[1] == "It would raise this error, and trace nothing:"
        assert " ".join(text[2:]) == explanation.raises
        with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
            step(jnp.ones(2), [16, 32])  # the call: JAX's own ValueError, from its C++ dispatch
        with pytest.raises(ValueError) as info:
            step.lower(jnp.ones(2), [16, 32])
        assert f"ValueError: {info.value}" == explanation.raises
        assert step.traces_used == 0

    @pytest.mark.parametrize(
        "how",
        [
            lambda e: pickle.loads(pickle.dumps(e)),
            copy.copy,
            copy.deepcopy,
            lambda e: attrs.evolve(e),
            lambda e: Explanation(  # the public constructor, given what explain gave
                **{
                    field.name: getattr(e, field.name)
                    for field in attrs.fields(Explanation)
                    if field.init
                }
            ),
        ],
        ids=["pickle", "copy", "deepcopy", "evolve", "constructor"],
    )
    @pytest.mark.parametrize(
        "call", [(jnp.ones(3),), (jnp.ones(3), [1, 2])], ids=["jax-words", "tinax-words"]
    )
    def test_an_explanation_of_a_rejected_call_prints_alike_however_it_is_copied(self, how, call):
        step = bounded_jit(lambda x, y: x, max_traces=1, static_argnames="y")
        explanation = step.explain(*call)
        assert explanation.raises is not None
        again = how(explanation)
        assert again.raises == explanation.raises
        assert str(again) == str(explanation)
        assert "refusal" not in repr(again)

    def test_an_explanation_equals_one_made_with_the_same_arguments(self):
        step = bounded_jit(lambda x, y: x + y, max_traces=1)
        explanation = step.explain(jnp.ones(3), jnp.tanh)
        made = Explanation(
            **{
                field.name: getattr(explanation, field.name)
                for field in attrs.fields(Explanation)
                if field.init
            }
        )
        assert made == explanation and hash(made) == hash(explanation)
        assert made != attrs.evolve(explanation, raises="TypeError: another")

    def test_a_signature_s_text_without_its_number(self, mesh8):
        step = bounded_jit(lambda x, n: x * n, max_traces=2, static_argnames="n")
        step(jnp.ones(3), 2)
        with jax.set_mesh(mesh8):
            step(jnp.ones(8), 3)
        first, second = step.traced_signatures
        assert signature_text(first) == "x: f32[3], n: 2"
        assert str(first) == "#1: x: f32[3], n: 2"
        assert signature_text(second).startswith("x: f32[8], n: 3 under AbstractMesh(")
        assert str(second) == f"#2: {signature_text(second)}"
        assert signature_text(first.numbered(7)) == signature_text(first)
        assert signature_text(bounded_jit(lambda: 1.0, max_traces=1).explain().signature) == (
            "(no arguments)"
        )

    def test_batched_object_explains_its_batched_call(self):
        losses = batched_jit(lambda w, x: w * x, in_axes=(None, 0), max_traces=1)
        losses(jnp.ones(3), jnp.ones((8, 3)))
        assert not losses.explain(jnp.ones(3), jnp.ones((8, 3))).retraces
        explanation = losses.explain(jnp.ones(3), jnp.ones((9, 3)))
        assert [str(d) for d in explanation.differences] == ["x: f32[8,3] -> f32[9,3] (shape)"]

    def test_mesh_bound_object_explains_under_its_mesh(self, mesh8):
        step = bounded_jit(lambda x: x * 2, max_traces=1, mesh=mesh8)
        step(jnp.ones(8))
        assert not step.explain(jnp.ones(8)).retraces

    def test_unbound_object_explains_under_the_ambient_mesh(self, mesh8):
        step = bounded_jit(lambda x: x * 2, max_traces=2)
        x = jnp.ones(8)  # made outside the mesh: on one device either way
        step(x)
        with jax.set_mesh(mesh8):
            explanation = step.explain(x)
            assert explanation.retraces
            assert [d.kinds for d in explanation.differences] == [("mesh",)]
            step(x)
            assert not step.explain(x).retraces
        assert step.traces_used == 2

    def test_numpy_and_python_inputs_are_abstracted_as_jax_does(self):
        step = bounded_jit(lambda x, n: x * n, max_traces=3)
        step(np.ones(3), 2)  # f64 numpy becomes f32; a Python int is weakly typed i32
        assert not step.explain(jnp.ones(3), 5).retraces
        assert step.explain(jnp.ones(3), jnp.int32(5)).retraces


def signature_table(step):
    """The history's signature table, without the per-trace timings below it."""
    lines = str(step.traced_signatures).splitlines()
    timings = next(i for i, line in enumerate(lines) if line.strip().startswith("called from"))
    return lines[:timings]


class TestHistoryTable:
    def test_one_column_per_trace_and_a_mark_on_rows_that_differ(self):
        step = bounded_jit(lambda params, x: x, max_traces=2)
        step({"w": jnp.ones(3)}, jnp.ones((8, 3)))
        step({"w": jnp.ones(3)}, jnp.ones((16, 3)))
        assert signature_table(step) == [
            "  argument     #1        #2",
            "  params['w']  f32[3]    f32[3]",
            "* x            f32[8,3]  f32[16,3]",
            "* marks a row that differs between traces",
        ]

    def test_mesh_row_appears_when_a_trace_ran_under_a_mesh(self, mesh8):
        step = bounded_jit(lambda x: x, max_traces=1, mesh=mesh8)
        step(jnp.ones(8))
        assert signature_table(step) == [
            "argument  #1",
            "x         f32[8]",
            "(mesh)    AbstractMesh('x': 8, axis_types=(Auto,))",
        ]

    def test_wide_trees_show_only_rows_that_differ(self):
        step = bounded_jit(lambda tree: tree, max_traces=2)
        step([jnp.ones(1)] * 50)
        step([jnp.ones(1)] * 49 + [jnp.ones(2)])
        assert signature_table(step) == [
            "  argument  #1      #2",
            "* tree[49]  f32[1]  f32[2]",
            "... and 49 rows the same in every trace",
            "* marks a row that differs between traces",
        ]

    def test_signature_fields_for_a_debugger(self):
        step = bounded_jit(lambda params, lr: params, max_traces=1)
        step({"dense": {"w": jnp.ones((2, 3))}}, lr=0.1)
        [signature] = step.traced_signatures
        assert signature.arguments == ("params", "lr") and signature.keywords == ("lr",)
        assert signature.structures == (("params", "{'dense': {'w': *}}"), ("lr", "*"))
        w, lr = signature.leaves
        assert (w.path, w.shape, w.dtype, w.weak_type) == (
            "params['dense']['w']",
            (2, 3),
            "f32",
            False,
        )
        assert (lr.path, lr.text, lr.weak_type) == ("lr", "weak-typed f32[]", True)
        assert signature.mesh == "no mesh"


# --- the diff as a property: JAX retraces exactly when the diff is non-empty ---------------

LEAF_KINDS = ("f32", "i32", "bf16", "bool", "python float", "python int")
DTYPES = {"f32": jnp.float32, "i32": jnp.int32, "bf16": jnp.bfloat16, "bool": jnp.bool_}

leaf_specs = st.tuples(
    st.sampled_from(LEAF_KINDS), st.lists(st.integers(1, 3), max_size=2).map(tuple)
)


def normalize(spec):
    """Python scalars have no shape."""
    kind, shape = spec
    return (kind, ()) if kind.startswith("python") else (kind, shape)


def build(spec):
    kind, shape = spec
    if kind == "python float":
        return 1.5
    if kind == "python int":
        return 3
    return jnp.zeros(shape, DTYPES[kind])


def expected_aval(spec):
    """The abstract value JAX keys on, worked out without JAX: (shape, dtype, weak)."""
    kind, shape = spec
    if kind == "python float":
        return ((), "f32", True)
    if kind == "python int":
        return ((), "i32", True)
    return (shape, kind, False)


@st.composite
def argument_trees(draw):
    """An argument: a dict or a list of leaf specs (up to 16, to reach truncation)."""
    specs = draw(st.lists(st.builds(normalize, leaf_specs), min_size=1, max_size=16))
    if draw(st.booleans()):
        return {f"k{i:02}": spec for i, spec in enumerate(specs)}
    return list(specs)


@st.composite
def mutated(draw, tree):
    """``tree`` with each leaf kept or redrawn, and sometimes one entry more or fewer."""
    items = list(tree.items()) if isinstance(tree, dict) else list(enumerate(tree))
    new = [
        (key, spec if draw(st.booleans()) else draw(st.builds(normalize, leaf_specs)))
        for key, spec in items
    ]
    change = draw(st.sampled_from(["same", "same", "same", "grow", "shrink"]))
    if change == "grow":
        new.append((f"k{len(new):02}" if isinstance(tree, dict) else len(new), new[0][1]))
    elif change == "shrink" and len(new) > 1:
        new.pop()
    return dict(new) if isinstance(tree, dict) else [spec for _, spec in new]


def materialize(tree):
    return jax.tree.map(build, tree, is_leaf=lambda node: isinstance(node, tuple))


def expected_paths(name, before, after):
    """Paths the diff must report for one argument, computed from the specs alone: a dict
    key removed or added, a list's length, then each leaf whose abstract value changed."""
    if isinstance(before, dict) != isinstance(after, dict):
        return [name]
    if isinstance(before, dict):
        removed = [f"{name}[{key!r}]" for key in before if key not in after]
        changed = [
            f"{name}[{key!r}]"
            for key in after
            if key not in before or expected_aval(before[key]) != expected_aval(after[key])
        ]
        return removed + changed
    length = [name] if len(before) != len(after) else []
    common = range(min(len(before), len(after)))
    return length + [
        f"{name}[{i}]" for i in common if expected_aval(before[i]) != expected_aval(after[i])
    ]


def listed_count(line):
    """How many differences one printed line stands for: ``x (13 leaves): ...`` is 13."""
    head = line.split(":")[0]
    return int(head.rsplit("(", 1)[1].split()[0]) if head.endswith("leaves)") else 1


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_diff_names_every_changed_leaf_and_node_exactly_when_jax_retraces(data):
    first = {"a": data.draw(argument_trees()), "b": data.draw(argument_trees())}
    second = {name: data.draw(mutated(tree)) for name, tree in first.items()}
    expected = [path for name in first for path in expected_paths(name, first[name], second[name])]

    step = bounded_jit(lambda a, b: jnp.zeros(()), max_traces=1)
    step.trace(*map(materialize, first.values()))
    explanation = step.explain(*map(materialize, second.values()))
    assert [d.path for d in explanation.differences] == expected
    assert explanation.retraces == bool(expected)
    if not expected:
        step.trace(*map(materialize, second.values()))  # JAX agrees: no new trace
        assert step.traces_used == 1
        return
    with pytest.raises(TraceBudgetError) as info:  # JAX agrees: a new trace
        step.trace(*map(materialize, second.values()))
    assert [d.path for d in info.value.differences] == expected
    text = str(info.value).splitlines()
    listed = text[text.index(next(line for line in text if line.startswith("Closest"))) + 1 :]
    listed = listed[: listed.index("How to fix:")]
    more = [line for line in listed if line.startswith("  ... and ")]
    shown = [line for line in listed if not line.startswith("  ... and ")]
    assert len(shown) <= 12
    hidden = int(more[0].split()[2]) if more else 0
    assert sum(listed_count(line.strip()) for line in shown) + hidden == len(expected)
    assert max(map(len, text)) <= 200


@settings(max_examples=30, deadline=None)
@given(
    calls=st.lists(st.tuples(st.sampled_from(LEAF_KINDS), st.booleans()), min_size=1, max_size=6)
)
def test_explain_predicts_every_call(calls):
    """Before each call, ``explain`` says whether it will trace; the count agrees."""
    step = bounded_jit(lambda x, y=None: x, max_traces=len(calls))
    for kind, by_keyword in calls:
        x = build(normalize((kind, (2,))))
        args, kwargs = ((), {"x": x}) if by_keyword else ((x,), {})
        before = step.traces_used
        retraces = step.explain(*args, **kwargs).retraces
        step(*args, **kwargs)
        assert step.traces_used == before + retraces


def test_history_table_shows_the_mesh_an_auto_placed_array_lives_on(mesh8):
    step = bounded_jit(lambda x: x, max_traces=2)
    step(jnp.ones(8))
    step(
        jax.device_put(
            jnp.ones(8), jax.sharding.NamedSharding(mesh8, jax.sharding.PartitionSpec("x"))
        )
    )
    assert str(step.traced_signatures).splitlines()[1] == (
        "* x         f32[8]  f32[8] on AbstractMesh('x': 8, axis_types=(Auto,))"
    )


class TestPlacementInTheHistory:
    """A retrace caused only by where an array lives marks its row, as the budget error
    names it (parameters restored as NumPy arrays, on an Explicit mesh)."""

    @staticmethod
    def restored(explicit_mesh8, runs):
        def apply(params, x):
            runs.append(1)
            return params["w"] * x

        step = bounded_jit(apply, max_traces=3, mesh=explicit_mesh8)
        replicated = jax.sharding.NamedSharding(explicit_mesh8, jax.sharding.PartitionSpec())
        params = {"w": jax.device_put(jnp.ones(8), replicated)}
        x = jax.device_put(jnp.ones(8), replicated)
        step(params, x)
        step(jax.tree.map(np.asarray, params), x)  # restored from a checkpoint as NumPy
        return step

    def test_a_placement_only_retrace_marks_its_row(self, explicit_mesh8):
        theirs, runs = [], []
        self.restored(explicit_mesh8, runs)  # jax.jit's count: the function runs twice
        step = self.restored(explicit_mesh8, theirs)
        assert step.traces_used == len(runs) == 2
        table = signature_table(step)
        assert table[:3] == [
            "  argument     #1                                                         #2",
            "* params['w']  f32[8] (P(None,) on AbstractMesh('x': 8, axis_types=(E...  "
            "f32[8] (no mesh)",
            "  x            f32[8]                                                     f32[8]",
        ]
        assert table[-1] == "* marks a row that differs between traces"

    def test_the_budget_error_names_the_row_the_table_marks(self, explicit_mesh8):
        replicated = jax.sharding.NamedSharding(explicit_mesh8, jax.sharding.PartitionSpec())
        step = bounded_jit(lambda params, x: params["w"] * x, max_traces=1, mesh=explicit_mesh8)
        params = {"w": jax.device_put(jnp.ones(8), replicated)}
        x = jax.device_put(jnp.ones(8), replicated)
        step(params, x)
        with pytest.raises(TraceBudgetError) as caught:
            step(jax.tree.map(np.asarray, params), x)
        [difference] = caught.value.differences
        assert (difference.path, difference.kinds) == ("params['w']", ("sharding",))
        mesh = "AbstractMesh('x': 8, axis_types=(Explicit,))"
        assert difference.detail == f"sharding: P(None,) on {mesh} -> no mesh"

    def test_rows_whose_text_shows_the_placement_are_unchanged(self, explicit_mesh8):
        step = bounded_jit(lambda x: x, max_traces=2)
        sharded = jax.sharding.NamedSharding(explicit_mesh8, jax.sharding.PartitionSpec("x"))
        step(jax.device_put(jnp.ones(8), sharded))
        step(jnp.ones(8))
        assert signature_table(step)[1] == "* x         f32[8@x]  f32[8]"


class TestWideHistories:
    def test_many_traces_of_long_static_values_fit_in_200_characters(self):
        step = bounded_jit(lambda x, tag: x, max_traces=12, static_argnames="tag")
        for i in range(12):
            step(jnp.ones(i + 1), tag="config-" * 20 + f"{i:02}")
        lines = str(step.traced_signatures).splitlines()
        assert max(map(len, lines)) <= 200
        assert lines[0].split() == ["argument", "#1", "#11", "#12"]
        assert "... and 9 traces not shown (#2, #3, #4, #5, #6, #7, #8, #9, #10)" in lines
        [tag] = [line for line in lines if line.startswith("* tag")]
        assert tag.endswith("-10'  ...g-config-config-config-config-config-config-config-11'")


class TestClearedCache:
    def test_explain_after_clear_cache_says_the_call_traces_again(self):
        step = bounded_jit(lambda x: x, max_traces=2)
        step(jnp.ones(3))
        assert not step.explain(jnp.ones(3)).retraces
        step.clear_cache()
        explanation = step.explain(jnp.ones(3))
        assert explanation.retraces and explanation.reuses is None
        assert "which this call matches exactly" in str(explanation)
        step(jnp.ones(3))
        assert step.traces_used == 2  # JAX agrees
        assert not step.explain(jnp.ones(3)).retraces  # trace #2 is cached again

    def test_refusal_after_clear_cache_says_the_call_matches_and_why_jax_traced(self):
        step = bounded_jit(lambda x: x, max_traces=1)
        step(jnp.ones(3))
        step.clear_cache()
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(3))
        lines = str(info.value).splitlines()
        assert lines[2] == "Closest earlier trace: #1, which this call matches exactly."
        assert lines[3].startswith("JAX traced again because its cache was emptied")


def test_an_abstract_value_without_a_short_form_prints_as_str():
    """Whatever JAX adds: an abstract value with no shape, dtype or str_short still prints."""
    from tinax._src.diagnosis.record import array_leaf

    class Opaque(jax.core.AbstractValue):
        def str_short(self, short_dtypes=False):
            raise NotImplementedError

        def __str__(self):
            return "Opaque()"

    leaf = array_leaf("t", "t", Opaque())
    assert (leaf.text, leaf.shape, leaf.dtype, leaf.weak_type) == ("Opaque()", None, None, False)


# --- every line is true on the edge cases real programs hit --------------------------------


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
