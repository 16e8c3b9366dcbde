"""Retrace diagnostics: explain, the history table, and the diff as a property of JAX."""

import copy
import pickle

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
        """Issue 29, item 8: the argument is named, however it was made static."""

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
