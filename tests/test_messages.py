"""What the budget error says: function, location, budget, each difference and its fix."""

import dataclasses
import functools
import inspect

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec

from helpers.statics import ByIdentity, Config
from tinax.jit import TraceBudgetError, TraceBudgetWarning, batched_jit, bounded_jit


def train_step(params, image_batch, mode="train"):
    return params["w"] * image_batch.sum()


LINE = inspect.getsourcelines(train_step)[1]
PARAMS = {"w": jnp.ones(3)}


def refusal(obj, *calls):
    """Runs every call but the last, returns the error the last one raises."""
    for args, kwargs in calls[:-1]:
        obj(*args, **kwargs)
    args, kwargs = calls[-1]
    with pytest.raises(TraceBudgetError) as info:
        obj(*args, **kwargs)
    return info.value


def lines(error):
    return str(error).splitlines()


class TestHeadline:
    def test_names_function_location_budget_and_traces_used(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1),
            ((PARAMS, jnp.ones((8, 3))), {}),
            ((PARAMS, jnp.ones((16, 3))), {}),
        )
        assert lines(error)[0] == (
            f"train_step (tests/test_messages.py:{LINE}) exceeded its trace budget: "
            "max_traces=1, traces_used=1; this call would be trace 2."
        )
        assert (error.function_name, error.max_traces, error.traces_used) == ("train_step", 1, 1)
        assert error.location == f"tests/test_messages.py:{LINE}"

    def test_whole_text_of_an_overrun(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1),
            ((PARAMS, jnp.ones((8, 3))), {}),
            ((PARAMS, jnp.ones((16, 3))), {}),
        )
        start = inspect.getsourcelines(refusal)[1]  # its earlier calls, then the refused one
        assert str(error) == (
            f"train_step (tests/test_messages.py:{LINE}) exceeded its trace budget: "
            "max_traces=1, traces_used=1; this call would be trace 2.\n"
            "JAX traces and compiles again for every new abstract signature; this call was "
            "refused before tracing, and calls that match an earlier trace still run.\n"
            "Closest earlier trace: #1 (1 difference):\n"
            "  image_batch: f32[8,3] -> f32[16,3] (shape)\n"
            "How to fix:\n"
            "  shape: every new shape is a new trace: pad or bucket inputs to a few fixed "
            "shapes (declare them with buckets= and pad with tinax.jit.pad_to_bucket; pad or "
            "drop a last, partial batch)\n"
            f"Called from tests/test_messages.py:{start + 6}; the closest earlier trace, #1, "
            f"was called from tests/test_messages.py:{start + 3}."
        )

    def test_zero_budget_shows_the_refused_call(self):
        error = refusal(bounded_jit(train_step, max_traces=0), ((PARAMS, jnp.ones((8, 3))), {}))
        assert "No earlier trace to compare with." in str(error)
        assert "image_batch: f32[8,3]" in str(error)
        assert error.closest is None

    def test_error_class_lives_in_public_module(self):
        assert TraceBudgetError.__module__ == "tinax.jit"
        assert issubclass(TraceBudgetError, AssertionError)


def assert_reports(error, line, kind, hint_start):
    """The error lists exactly this difference line, and the fix for its kind once."""
    text = lines(error)
    assert f"  {line}" in text, str(error)
    fixes = [entry for entry in text if entry.startswith(f"  {kind}: ")]
    assert len(fixes) == 1 and fixes[0].startswith(f"  {kind}: {hint_start}"), str(error)
    assert text.index("How to fix:") < text.index(fixes[0])


class TestOneDifferenceOfEachKind:
    """One test per kind of change: the exact line, and its fix under "How to fix:"."""

    def test_shape(self):
        error = refusal(
            bounded_jit(lambda x: x, max_traces=1),
            ((jnp.ones((8, 3)),), {}),
            ((jnp.ones((16, 3)),), {}),
        )
        assert_reports(error, "x: f32[8,3] -> f32[16,3] (shape)", "shape", "every new shape is")

    def test_dtype(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1),
            ((PARAMS, jnp.ones((8, 3))), {}),
            ((PARAMS, jnp.ones((8, 3), jnp.int32)), {}),
        )
        line = "image_batch: f32[8,3] -> i32[8,3] (dtype)"
        assert_reports(error, line, "dtype", "cast inputs to one dtype")

    @pytest.mark.parametrize(
        ("before", "after", "line"),
        [
            (
                0.1,
                jnp.float32(0.1),
                "weak-typed f32[] -> f32[] (weak type: a Python float -> a typed f32 value",
            ),
            (
                jnp.float32(0.1),
                0.1,
                "f32[] -> weak-typed f32[] (weak type: a typed f32 value (an array or a NumPy",
            ),
            (
                3,
                jnp.int32(3),
                "weak-typed i32[] -> i32[] (weak type: a Python int -> a typed i32 value",
            ),
        ],
    )
    def test_weak_type(self, before, after, line):
        error = refusal(
            bounded_jit(lambda x, lr: x * lr, max_traces=1),
            ((jnp.ones(2), before), {}),
            ((jnp.ones(2), after), {}),
        )
        [difference] = error.differences
        assert str(difference).startswith(f"lr: {line}")
        assert_reports(error, str(difference), "weak type", "pass the scalar the same way")

    def test_sharding(self, explicit_mesh8):
        with jax.set_mesh(explicit_mesh8):
            split = jax.device_put(jnp.ones((8, 3)), PartitionSpec("x"))
            whole = jax.device_put(jnp.ones((8, 3)), PartitionSpec())
            error = refusal(
                bounded_jit(lambda x: x * 2, max_traces=1), ((split,), {}), ((whole,), {})
            )
        assert_reports(error, "x: f32[8@x,3] -> f32[8,3] (sharding)", "sharding", "give inputs one")
        assert (
            "  sharding: give inputs one sharding on every call, the first included: "
            "jax.device_put(x, NamedSharding(mesh, P('x', None)))"
        ) in lines(error)  # the earlier trace's placement
        assert error.closest is not None
        [leaf] = error.closest.leaves
        assert leaf.sharding == "P('x', None)"

    def test_static_value(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1, static_argnames="mode"),
            ((PARAMS, jnp.ones((8, 3))), {"mode": "train"}),
            ((PARAMS, jnp.ones((8, 3))), {"mode": "eval"}),
        )
        line = "mode: 'train' -> 'eval' (static argument value)"
        assert_reports(error, line, "static value", "every new value of a static argument")
        assert lines(error)[-2] == (  # no array holds a string: no advice to pass one
            "  static value: every new value of a static argument is a new trace: keep it fixed, "
            "or allow a trace per value (max_traces at least the count of values)"
        )

    def test_static_number(self):
        error = refusal(
            bounded_jit(lambda x, n: x * n, max_traces=1, static_argnums=1),
            ((jnp.ones(2), 2), {}),
            ((jnp.ones(2), 3), {}),
        )
        assert_reports(error, "n: 2 -> 3 (static argument value)", "static value", "every new")
        assert lines(error)[-2] == (
            "  static value: every new value of a static argument is a new trace: keep it fixed, "
            "or, where the function only computes with it (no if, no shape), do not mark it "
            "static and pass it as an array"
        )

    def test_static_bool_is_a_mode_flag(self):
        error = refusal(
            bounded_jit(lambda x, train: x if train else -x, max_traces=1, static_argnums=1),
            ((jnp.ones(2), True), {}),
            ((jnp.ones(2), False), {}),
        )
        line = "train: True -> False (static argument value)"
        assert_reports(error, line, "static value", "a bool read by a Python if")
        assert lines(error)[-2] == (
            "  static value: a bool read by a Python if cannot be traced "
            "(TracerBoolConversionError): allow a trace per mode (max_traces=2, twice what one "
            "mode needs), or wrap the function once per mode"
        )

    def test_tree_structure(self):
        error = refusal(
            bounded_jit(lambda batch: batch[0], max_traces=1),
            (((jnp.ones(2), jnp.ones(2)),), {}),
            (((jnp.ones(2), jnp.ones(2), jnp.ones(2)),), {}),
        )
        line = "batch: tuple of 2 -> tuple of 3 (tree structure: length changed)"
        assert_reports(error, line, "tree structure", "keep the tree structure fixed")

    def test_new_keyword_argument(self):
        error = refusal(
            bounded_jit(lambda x, scale=1.0: x * scale, max_traces=1),
            ((jnp.ones(2),), {}),
            ((jnp.ones(2),), {"scale": 2.0}),
        )
        line = "scale: (not passed) -> weak-typed f32[] (new argument)"
        assert_reports(error, line, "new argument", "pass the same arguments on every call")

    def test_argument_no_longer_passed(self):
        error = refusal(
            bounded_jit(lambda x, scale=1.0: x * scale, max_traces=1),
            ((jnp.ones(2),), {"scale": 2.0}),
            ((jnp.ones(2),), {}),
        )
        line = "scale: weak-typed f32[] -> (not passed) (not passed now)"
        assert_reports(error, line, "missing argument", "pass the same arguments on every call")

    def test_passed_by_keyword_instead_of_by_position(self):
        error = refusal(
            bounded_jit(lambda x, y: x + y, max_traces=1),
            ((jnp.ones(2), jnp.ones(2)), {}),
            ((jnp.ones(2),), {"y": jnp.ones(2)}),
        )
        line = "y: by position -> by keyword (passed differently)"
        assert_reports(error, line, "passing", "pass each argument the same way")

    def test_ambient_mesh(self, mesh8):
        step = bounded_jit(lambda x: x * 2, max_traces=1)
        x = jnp.ones(8)  # made outside the mesh: on one device either way
        step(x)
        with jax.set_mesh(mesh8), pytest.raises(TraceBudgetError) as info:
            step(x)
        line = "ambient mesh: no mesh -> AbstractMesh('x': 8, axis_types=(Auto,)) (mesh)"
        assert_reports(info.value, line, "mesh", "the ambient mesh is part of JAX's cache key")
        assert len(info.value.differences) == 1  # leaves that differ only by mesh are not listed

    def test_jax_config_option(self):
        step = bounded_jit(lambda x: x @ x, max_traces=1)
        step(jnp.ones((2, 2)))
        with jax.default_matmul_precision("highest"), pytest.raises(TraceBudgetError) as info:
            step(jnp.ones((2, 2)))
        if not info.value.signature.config:  # JAX < 0.10 does not name its config options
            assert "which this call matches exactly" in str(info.value)
            assert "or a JAX config option changed" in str(info.value)
            return
        line = "jax config jax_default_matmul_precision: None -> 'highest' (config)"
        assert_reports(info.value, line, "config", "a JAX config option in the trace cache key")

    def test_several_kinds_on_one_leaf_share_a_line(self):
        error = refusal(
            bounded_jit(lambda x: x, max_traces=1),
            ((jnp.ones((8, 3)),), {}),
            ((jnp.ones((16, 3), jnp.int32),), {}),
        )
        assert "  x: f32[8,3] -> i32[16,3] (shape, dtype)" in lines(error)
        assert error.differences[0].kinds == ("shape", "dtype")


class TestWhichArgumentAndWhichTrace:
    def test_names_argument_by_parameter_when_passed_positionally(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1),
            ((PARAMS, jnp.ones((8, 3))), {}),
            ((PARAMS, jnp.ones((16, 3))), {}),
        )
        assert [d.path for d in error.differences] == ["image_batch"]

    def test_names_leaf_by_path_when_passed_by_keyword(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1),
            ((), {"params": PARAMS, "image_batch": jnp.ones((8, 3))}),
            ((), {"params": {"w": jnp.ones(4)}, "image_batch": jnp.ones((8, 3))}),
        )
        assert "  params['w']: f32[3] -> f32[4] (shape)" in lines(error)

    def test_batched_error_names_function_and_batched_shapes(self):
        error = refusal(
            batched_jit(train_step, in_axes=(None, 0), max_traces=1),
            ((PARAMS, jnp.ones((4, 8, 3))), {}),
            ((PARAMS, jnp.ones((5, 8, 3))), {}),
        )
        assert str(error).startswith("train_step (tests/test_messages.py:")
        assert "  image_batch: f32[4,8,3] -> f32[5,8,3] (shape)" in lines(error)

    def test_diff_is_against_the_trace_with_fewest_differences(self):
        step = bounded_jit(lambda a, b, c: a + b + c, max_traces=3)
        step(jnp.ones(1), jnp.ones(1), jnp.ones(1))  # #1: 3 differences from the last call
        step(jnp.ones(5), jnp.ones(5), jnp.ones(1))  # #2: 1 difference
        step(jnp.ones(5), jnp.ones(1), jnp.ones(1))  # #3: 2 differences
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(5), jnp.ones(5), jnp.ones(5))
        assert info.value.closest is not None and info.value.closest.number == 2
        assert [d.path for d in info.value.differences] == ["c"]
        assert "Closest earlier trace: #2 (1 difference):" in lines(info.value)

    def test_ties_go_to_the_latest_trace(self):
        step = bounded_jit(lambda a: a, max_traces=2)
        step(jnp.ones(1))
        step(jnp.ones(2))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(3))
        assert info.value.closest is not None and info.value.closest.number == 2

    def test_long_diffs_are_truncated_with_a_count(self):
        step = bounded_jit(lambda tree: tree, max_traces=1)
        step({f"k{i:02}": jnp.ones(1) for i in range(20)})
        with pytest.raises(TraceBudgetError) as info:  # 20 shape changes, no two alike
            step({f"k{i:02}": jnp.ones(i + 2) for i in range(20)})
        text = lines(info.value)
        listed = [line for line in text if line.startswith("  tree['k")]
        assert len(listed) == 12
        assert "  ... and 8 more" in text
        assert len(info.value.differences) == 20  # all of them on the error
        assert (
            text.count(
                "  shape: every new shape is a new trace: pad or bucket inputs to a few "
                "fixed shapes (declare them with buckets= and pad with tinax.jit.pad_to_bucket; "
                "pad or drop a last, partial batch)"
            )
            == 1
        )

    def test_fix_for_each_kind_is_listed_once_in_order_of_appearance(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1, static_argnames="mode"),
            ((PARAMS, jnp.ones((8, 3))), {"mode": "train"}),
            (({"w": jnp.ones(4)}, jnp.ones((9, 3), jnp.int32)), {"mode": "eval"}),
        )
        text = lines(error)
        fixes = [line for line in text[text.index("How to fix:") + 1 :] if line.startswith("  ")]
        assert [fix.split(":")[0].strip() for fix in fixes] == ["shape", "dtype", "static value"]


class TestTracedSoFar:
    """A call outside every traced shape: beside the closest trace, what each earlier
    trace held where the call differs (the shapes a serving loop has)."""

    def serving(self, sizes, max_traces=None):
        step = bounded_jit(lambda x: x * 2, max_traces=max_traces or len(sizes))
        for size in sizes:
            step(jnp.ones((size, 3)))
        return step

    def test_the_budget_error_lists_every_traced_shape(self):
        step = self.serving((8, 16, 32))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones((24, 3)))
        assert lines(info.value)[2:7] == [
            "Closest earlier trace: #3 (1 difference):",
            "  x: f32[32,3] -> f32[24,3] (shape)",
            "Traced so far, where this call differs:",
            "  x: #1 f32[8,3], #2 f32[16,3], #3 f32[32,3]",
            "How to fix:",
        ]

    def test_explain_lists_them_too(self):
        step = self.serving((8, 16), max_traces=3)
        assert str(step.explain(jnp.ones((24, 3)))).splitlines()[3:5] == [
            "Traced so far, where this call differs:",
            "  x: #1 f32[8,3], #2 f32[16,3]",
        ]

    def test_one_earlier_trace_is_the_difference_line_alone(self):
        step = self.serving((8,))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones((24, 3)))
        assert "Traced so far, where this call differs:" not in lines(info.value)
        assert lines(info.value)[4] == "How to fix:"

    def test_many_traces_keep_the_first_and_the_latest_in_200_characters(self):
        step = self.serving(range(1, 41))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones((50, 3)))
        text = lines(info.value)
        listed = text[text.index("Traced so far, where this call differs:") + 1]
        assert len(listed) <= 200
        assert listed.startswith("  x: #1 f32[1,3], ... ")
        assert listed.endswith(", #39 f32[39,3], #40 f32[40,3]")
        dropped = int(listed.split("... ")[1].split(" more")[0])
        assert listed.count("#") + dropped == 40

    def test_a_long_static_value_is_cut_in_each_cell(self):
        step = bounded_jit(lambda x, note: x, max_traces=2, static_argnums=1)
        for word in ("first", "second"):
            step(jnp.ones(2), f"{word} " + "very long note " * 10)
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(2), "third")
        text = lines(info.value)
        assert text[text.index("Traced so far, where this call differs:") + 1] == (
            "  note: #1 'first very long note very long note very long note very ..., "
            "#2 'second very long note very long note very long note ..."  # 60 characters each
        )

    def test_each_leaf_that_differs_on_its_own_line_at_most_three(self):
        step = bounded_jit(lambda a, b, c, d: a, max_traces=2)
        step(jnp.ones(1), jnp.ones(1), jnp.ones(1), jnp.ones(1))
        step(jnp.ones(2), jnp.ones(2), jnp.ones(2), jnp.ones(2))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(3), jnp.ones(3), jnp.ones(3), jnp.ones(3))
        text = lines(info.value)
        start = text.index("Traced so far, where this call differs:")
        assert text[start + 1 : start + 6] == [
            "  a: #1 f32[1], #2 f32[2]",
            "  b: #1 f32[1], #2 f32[2]",
            "  c: #1 f32[1], #2 f32[2]",
            "  ... and 1 more",
            "How to fix:",
        ]

    def test_leaves_that_share_a_line_for_one_cause_list_nothing(self):
        step = bounded_jit(lambda tree: 0, max_traces=2)
        step({k: jnp.ones(1) for k in "abc"})
        step({k: jnp.ones(2) for k in "abc"})
        with pytest.raises(TraceBudgetError) as info:  # one cast of three leaves: one line
            step({k: jnp.ones(2, jnp.bfloat16) for k in "abc"})
        assert lines(info.value)[3] == "  tree (3 leaves): f32 -> bf16 (dtype)"
        assert lines(info.value)[4] == "How to fix:"

    def test_a_change_of_tree_structure_lists_nothing(self):
        step = bounded_jit(lambda batch: batch[0], max_traces=2)
        step((jnp.ones(2),))
        step((jnp.ones(2), jnp.ones(2)))
        with pytest.raises(TraceBudgetError) as info:
            step((jnp.ones(2), jnp.ones(2), jnp.ones(2)))
        assert "Traced so far, where this call differs:" not in lines(info.value)


def test_auto_mesh_placement_is_a_sharding_difference(mesh8):
    """On an Auto mesh the type prints alike (f32[8]) but carries the mesh: say where."""
    placed = jax.device_put(jnp.ones(8), jax.sharding.NamedSharding(mesh8, PartitionSpec("x")))
    error = refusal(
        bounded_jit(lambda x: x * 2, max_traces=1), ((placed,), {}), ((jnp.ones(8),), {})
    )
    line = "x: f32[8] -> f32[8] (sharding: AbstractMesh('x': 8, axis_types=(Auto,)) -> no mesh)"
    assert_reports(error, line, "sharding", "give inputs one sharding")


# --- real model code: the lines each new kind of difference prints ------------------------


@functools.partial(jax.tree_util.register_dataclass, data_fields=["w"], meta_fields=["scale"])
@dataclasses.dataclass
class Layer:
    w: jax.Array
    scale: float


def scaled(x, config):
    return x * config.hidden


@dataclasses.dataclass(frozen=True)
class Rate:
    rate: float


@dataclasses.dataclass(frozen=True, eq=False)
class Unequal:
    n: int


@dataclasses.dataclass(frozen=True)
class Holder:
    part: object


class OwnEq:
    """Equal by its own == on a field its repr does not show."""

    def __init__(self, n):
        self.n = n
        self.token = object()

    def __eq__(self, other):
        return isinstance(other, OwnEq) and (self.n, self.token) == (other.n, other.token)

    def __hash__(self):
        return 0

    def __repr__(self):
        return f"OwnEq({self.n})"


class Measured:
    """Equal by value, as its own == compares floats (a NaN is unequal to itself)."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Measured) and self.value == other.value

    def __hash__(self):
        return 0

    def __repr__(self):
        return f"Measured({self.value})"


class EqualButHashedByIdentity:
    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, EqualButHashedByIdentity) and self.n == other.n

    def __hash__(self):
        return id(self)

    def __repr__(self):
        return f"EqualButHashedByIdentity({self.n})"


class TestLocatedDifferences:
    """Each new kind of line, exact; every one of them keeps JAX's verdict (retraces)."""

    def explained(self, obj, first, second):
        obj(*first[0], **first[1])
        explanation = obj.explain(*second[0], **second[1])
        assert explanation.retraces
        return [str(line).strip() for line in str(explanation).splitlines()]

    def test_static_dataclass_differing_after_60_characters_names_the_field(self):
        step = bounded_jit(scaled, max_traces=1, static_argnames="config")
        assert len(repr(Config())) > 60
        text = self.explained(
            step,
            ((jnp.ones(3),), {"config": Config()}),
            ((jnp.ones(3),), {"config": Config(activation="gelu")}),
        )
        assert "config.activation: 'relu' -> 'gelu' (static argument value)" in text

    def test_static_dict_and_tuple_are_searched_to_the_entry(self):
        step = bounded_jit(lambda x, options: x, max_traces=1, static_argnames="options")
        text = self.explained(
            step,
            ((jnp.ones(3),), {"options": (("depth", 2), ("heads", 4))}),
            ((jnp.ones(3),), {"options": (("depth", 2), ("heads", 8))}),
        )
        assert "options[1][1]: 4 -> 8 (static argument value)" in text

    def test_static_value_equal_by_repr_but_not_by_eq_says_so_and_how_to_fix(self):
        step = bounded_jit(lambda x, c: x * c.n, max_traces=1, static_argnames="c")
        text = self.explained(
            step, ((jnp.ones(3),), {"c": ByIdentity(2)}), ((jnp.ones(3),), {"c": ByIdentity(2)})
        )
        assert (
            "c: ByIdentity(n=2) -> ByIdentity(n=2) "
            "(ByIdentity is equal by repr but not by ==)" in text
        )
        assert (
            "static equality: JAX finds static arguments by ==: define __eq__ (and __hash__) "
            "by value (e.g. @dataclass(frozen=True)), or pass the same object on every call"
        ) in text

    def retraced_line(self, first, second):
        """The difference line and the fix of a static ``c`` traced with ``first`` then
        called with ``second``; JAX traces again (checked by the count)."""
        step = bounded_jit(lambda x, c: x, max_traces=2, static_argnames="c")
        text = self.explained(step, ((jnp.ones(3),), {"c": first}), ((jnp.ones(3),), {"c": second}))
        step(jnp.ones(3), c=second)
        assert step.traces_used == 2
        return text[2], text[4]

    def test_nan_in_a_frozen_dataclass_says_nan_is_never_equal_to_itself(self):
        line, fix = self.retraced_line(Rate(float("nan")), Rate(float("nan")))
        assert line == "c.rate: nan -> nan (float is NaN, and NaN is never equal to itself)"
        assert fix == (
            "static equality: NaN is never equal to itself, so every new NaN is a new trace: "
            "mark a missing value with None or a flag, or pass the number as an array "
            "(jnp.asarray) to trace it"
        )

    @pytest.mark.parametrize(
        "make",
        [lambda: np.float32("nan"), lambda: complex("nan"), lambda: (1, float("nan"))],
        ids=["numpy-float32", "complex", "in-a-tuple"],
    )
    def test_nan_anywhere_gets_the_nan_fix_not_the_dataclass_one(self, make):
        line, fix = self.retraced_line(make(), make())
        assert "is NaN, and NaN is never equal to itself" in line
        assert fix.startswith("static equality: NaN is never equal to itself")

    def test_a_dataclass_with_eq_false_is_told_to_drop_eq_false(self):
        line, fix = self.retraced_line(Unequal(1), Unequal(1))
        assert line == "c: Unequal(n=1) -> Unequal(n=1) (Unequal is equal by repr but not by ==)"
        assert fix == (
            "static equality: Unequal has eq=False, so == is identity: drop eq=False "
            "(frozen=True then also hashes by value), or pass the same object on every call"
        )

    def test_a_class_with_its_own_eq_is_not_told_to_define_eq(self):
        line, fix = self.retraced_line(OwnEq(1), OwnEq(1))
        assert line == "c: OwnEq(1) -> OwnEq(1) (OwnEq is equal by repr but not by ==)"
        assert fix == (
            "static equality: OwnEq's own == tells these apart: make it compare what repr "
            "shows (a NaN inside is never equal to itself), or pass the same object on every call"
        )
        assert "@dataclass" not in fix

    def test_a_value_unequal_to_itself_says_so(self):
        line, fix = self.retraced_line(Measured(float("nan")), Measured(float("nan")))
        assert line == "c: Measured(nan) -> Measured(nan) (Measured is not equal even to itself)"
        assert fix.startswith("static equality: Measured's own == is False even for one value: ")

    def test_long_values_cut_alike_are_a_new_value_not_an_equality_problem(self):
        line, fix = self.retraced_line("x" * 5000 + "a", "x" * 5000 + "b")
        assert line.endswith("(static argument value)")
        assert fix.startswith("static value: ")

    def test_a_hash_that_disagrees_with_eq_is_found_in_the_dataclass_field(self, monkeypatch):
        from tinax._src import private
        from tinax._src.diagnosis import static_values

        monkeypatch.setattr(private, "STATIC_HASH_DECIDES", True)  # jax 0.11 and later
        [found] = static_values.static_differences(
            "c",
            Holder(EqualButHashedByIdentity(1)),
            Holder(EqualButHashedByIdentity(1)),
            detail="static argument value",
            kind="static value",
        )
        assert found.path == "c.part"
        assert found.before == found.after == "EqualButHashedByIdentity(1)"
        assert "hashes differently" in found.detail

    def test_static_value_of_another_type_retraces_and_says_so(self):
        step = bounded_jit(lambda x, n: x * n, max_traces=1, static_argnames="n")
        text = self.explained(step, ((jnp.ones(3),), {"n": 1}), ((jnp.ones(3),), {"n": 1.0}))
        assert "n: 1 -> 1.0 (static argument value, type: int -> float)" in text

    def test_dict_key_added_and_removed(self):
        step = bounded_jit(lambda params: 0.0, max_traces=1)
        text = self.explained(
            step,
            (({"a": jnp.ones(3), "b": jnp.ones(2)},), {}),
            (({"a": jnp.ones(3), "c": jnp.ones((2, 2))},), {}),
        )
        assert text[2:4] == ["params['b']: removed (f32[2])", "params['c']: added (f32[2,2])"]

    def test_none_becoming_an_array_and_a_leaf_change_beside_it(self):
        step = bounded_jit(lambda params: 0.0, max_traces=1)
        text = self.explained(
            step,
            (({"a": jnp.ones(3), "b": None},), {}),
            (({"a": jnp.ones(4), "b": jnp.ones(2)},), {}),
        )
        assert text[1:4] == [
            "Closest earlier trace: #1 (2 differences):",
            "params['a']: f32[3] -> f32[4] (shape)",
            "params['b']: None -> f32[2] (tree structure: None became an array)",
        ]

    def test_list_length_change_then_the_items_that_still_match(self):
        step = bounded_jit(lambda layers: 0.0, max_traces=1)
        text = self.explained(
            step,
            (([jnp.ones(2), jnp.ones(2)],), {}),
            (([jnp.ones(2), jnp.ones(3), jnp.ones(2)],), {}),
        )
        assert text[2:4] == [
            "layers: list of 2 -> list of 3 (tree structure: length changed)",
            "layers[1]: f32[2] -> f32[3] (shape)",
        ]

    def test_node_type_change(self):
        step = bounded_jit(lambda state: 0.0, max_traces=1)
        text = self.explained(step, (((jnp.ones(2),),), {}), (([jnp.ones(2)],), {}))
        assert "state: (*,) -> [*] (tree structure: tuple became list)" in text

    def test_registered_dataclass_meta_field_and_the_leaf_beside_it(self):
        step = bounded_jit(lambda layer: layer.w * layer.scale, max_traces=1)
        text = self.explained(
            step, ((Layer(jnp.ones(3), 1.0),), {}), ((Layer(jnp.ones(4), 2.0),), {})
        )
        assert text[2:4] == [
            "layer.scale: 1.0 -> 2.0 (static field of Layer)",
            "layer.w: f32[3] -> f32[4] (shape)",
        ]
        assert any(
            line.startswith("static field: a pytree node's static (metadata) field")
            for line in text
        )

    def test_many_leaves_with_one_cause_share_a_line_with_a_count(self):
        step = bounded_jit(lambda params, x: x, max_traces=1)
        params = {"dense": {f"w{i:02}": jnp.ones(4) for i in range(13)}}
        cast = jax.tree.map(lambda leaf: leaf.astype(jnp.bfloat16), params)
        text = self.explained(step, ((params, jnp.ones(2)), {}), ((cast, jnp.ones(3)), {}))
        assert text[1:4] == [
            "Closest earlier trace: #1 (14 differences):",
            "params['dense'] (13 leaves): f32 -> bf16 (dtype)",
            "x: f32[2] -> f32[3] (shape)",
        ]

    def test_placement_onto_a_mesh_is_one_line_and_the_fix_names_device_put(self, mesh8):
        step = bounded_jit(lambda params: 0.0, max_traces=1)
        params = {f"w{i:02}": jnp.ones(8) for i in range(13)}
        placed = jax.device_put(params, jax.sharding.NamedSharding(mesh8, PartitionSpec()))
        text = self.explained(step, ((params,), {}), ((placed,), {}))
        mesh = "AbstractMesh('x': 8, axis_types=(Auto,))"
        assert text[2] == f"params (13 leaves): no mesh -> {mesh} (sharding)"
        assert text[3:] == [
            "How to fix:",
            "sharding: give inputs one sharding on every call: jax.device_put(x, "
            "NamedSharding(mesh, spec)), with the spec this call's x has (a trace on Auto axes "
            "does not record it)",
        ]

    def test_explain_of_a_call_that_does_not_bind_gives_the_type_error(self):
        step = bounded_jit(lambda x, y: x + y, max_traces=1)
        step(jnp.ones(3), jnp.ones(3))
        explanation = step.explain(jnp.ones(3))
        assert (explanation.retraces, explanation.reuses, explanation.differences) == (
            False,
            None,
            (),
        )
        assert explanation.raises is not None
        assert explanation.raises.startswith("TypeError: ")
        assert explanation.raises.endswith("<lambda>() missing 1 required positional argument: 'y'")
        head, reason, outcome = str(explanation).splitlines()
        assert head.endswith(
            "JAX would reject this call before tracing; max_traces=1, traces_used=1."
        )
        assert reason == f"It would raise {explanation.raises}"
        assert outcome == "Nothing is traced or counted, with the budget spent or not."
        with pytest.raises(TypeError, match="missing a required argument"):
            inspect.signature(step).bind(jnp.ones(3))

    def test_long_values_are_elided_around_the_part_that_differs(self):
        step = bounded_jit(lambda x, tag: x, max_traces=1, static_argnames="tag")
        before, after = "a" * 300 + "-before-" + "z" * 300, "a" * 300 + "-after-" + "z" * 300
        text = self.explained(
            step, ((jnp.ones(1),), {"tag": before}), ((jnp.ones(1),), {"tag": after})
        )
        [line] = [line for line in text if line.startswith("tag:")]
        assert len(line) <= 200 and "-before-" in line and "-after-" in line


def add(x, y):
    return x + y


ADD_LINE = inspect.getsourcelines(add)[1]
ADD = f"add (tests/test_messages.py:{ADD_LINE})"


def called_here(below=0):
    """The caller's line (or the one ``below`` it), as a call site is shown."""
    return f"tests/test_messages.py:{inspect.currentframe().f_back.f_lineno + below}"


class TestWholeTexts:
    """Whole messages, byte for byte: a trace over budget that runs anyway (warning and
    record), and ``explain`` of a call JAX rejects, in tinax's words or in JAX's."""

    SHAPE_FIX = (
        "  shape: every new shape is a new trace: pad or bucket inputs to a few fixed shapes "
        "(declare them with buckets= and pad with tinax.jit.pad_to_bucket; pad or drop a last, "
        "partial batch)"
    )

    def overrun(self, policy):
        step = bounded_jit(add, max_traces=1, on_exceed=policy)
        _, first = step(jnp.ones(3), jnp.ones(3)), called_here()
        return step, first

    def expected(self, outcome, first, second):
        return "\n".join(
            (
                f"{ADD} exceeded its trace budget: max_traces=1, traces_used=1; this call would "
                "be trace 2.",
                outcome,
                "Closest earlier trace: #1 (2 differences):",
                "  x: f32[3] -> f32[4] (shape)",
                "  y: f32[3] -> f32[4] (shape)",
                "How to fix:",
                self.SHAPE_FIX,
                f"Called from {second}; the closest earlier trace, #1, was called from {first}.",
            )
        )

    def test_the_warning_of_a_trace_that_runs_says_so_in_place_of_the_refusal(self, caplog):
        caplog.set_level("WARNING", logger="tinax")  # whatever the session's logging
        step, first = self.overrun("warn")
        with pytest.warns(TraceBudgetWarning) as caught:
            _, second = step(jnp.ones(4), jnp.ones(4)), called_here()
        assert str(caught[0].message) == self.expected(
            "on_exceed='warn': this trace runs and is counted.", first, second
        )
        assert caplog.messages == [
            f"{ADD}: trace 2 is over max_traces=1 and runs (on_exceed='warn'); "
            "x: f32[3] -> f32[4] (shape) (+1 more); the TraceBudgetWarning emitted now has the "
            "diagnosis."
        ]

    def test_the_record_of_a_trace_that_runs_is_the_warning_s_text(self, caplog):
        caplog.set_level("WARNING", logger="tinax")  # whatever the session's logging
        step, first = self.overrun("log")
        _, second = step(jnp.ones(4), jnp.ones(4)), called_here()
        assert caplog.messages == [
            self.expected("on_exceed='log': this trace runs and is counted.", first, second)
        ]

    def test_the_record_of_a_trace_run_with_chex_assertions_disabled_says_why(self, caplog):
        caplog.set_level("WARNING", logger="tinax")  # whatever the session's logging
        step, first = self.overrun("warn")
        chex.disable_asserts()
        try:
            _, second = step(jnp.ones(4), jnp.ones(4)), called_here()  # no warning either
        finally:
            chex.enable_asserts()
        assert caplog.messages == [
            self.expected(
                "chex assertions are disabled: this trace runs and is counted.", first, second
            )
        ]

    def test_the_error_of_a_refused_trace_says_it_was_refused(self):
        step, first = self.overrun("raise")
        second = called_here(below=2)
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(4), jnp.ones(4))
        assert str(info.value) == self.expected(
            "JAX traces and compiles again for every new abstract signature; this call was "
            "refused before tracing, and calls that match an earlier trace still run.",
            first,
            second,
        )

    def test_explain_of_a_call_that_does_not_bind_quotes_python(self):
        step = bounded_jit(add, max_traces=1)
        step(jnp.ones(3), jnp.ones(3))
        assert str(step.explain(jnp.ones(3))) == (
            f"{ADD}: JAX would reject this call before tracing; max_traces=1, traces_used=1.\n"
            "It would raise TypeError: add() missing 1 required positional argument: 'y'\n"
            "Nothing is traced or counted, with the budget spent or not."
        )

    def test_explain_of_a_long_rejection_in_jax_s_words_wraps_it_indented(self):
        step = batched_jit(add, max_traces=1)
        assert str(step.explain(jnp.ones((8, 3)), jnp.ones((4, 3)))) == (
            f"{ADD}: JAX would reject this call before tracing; max_traces=1, traces_used=0.\n"
            "It would raise ValueError: vmap got inconsistent sizes for array axes to be mapped: "
            "* one axis had\n"
            "  size 8: axis 0 of argument x of type float32[8,3]; * one axis had size 4: axis 0 "
            "of argument y of\n"
            "  type float32[4,3]\n"
            "Nothing is traced or counted, with the budget spent or not."
        )

    def test_explain_of_a_leaf_refused_in_tinax_s_words_wraps_the_type_error_whole(self):
        step = bounded_jit(add, max_traces=1)
        step(jnp.ones(3), jnp.ones(3))
        explanation = step.explain(jnp.ones(3), jnp.tanh)
        assert str(explanation) == (
            f"{ADD}: JAX would refuse a leaf of this call; max_traces=1, traces_used=1.\n"
            "It would raise this error, and trace nothing:\n"
            "TypeError: BoundedJit: the argument leaf y is <function tanh> (PjitFunction), not "
            "an array, and\n"
            "jax.jit traces arrays only. Pass static_nonarrays=True to hold every leaf that is "
            "not an array\n"
            "static (as eqx.filter_jit does), or split the model with eqx.partition(model, "
            "eqx.is_array) and pass\n"
            "its static part by static_argnames."
        )

    def test_explain_of_an_unhashable_static_in_tinax_s_words_wraps_the_value_error_whole(self):
        step = bounded_jit(add, max_traces=1, static_argnames="y")
        assert str(step.explain(jnp.ones(3), [1, 2])) == (
            f"{ADD}: JAX would reject this call before tracing; max_traces=1, traces_used=0.\n"
            "It would raise this error, and trace nothing:\n"
            "ValueError: BoundedJit: the static argument y=[1, 2] (list) must be hashable: "
            "jax.jit keys its cache\n"
            "on static arguments (type, hash and ==) and refuses the call (Non-hashable static "
            "arguments are not\n"
            "supported). Make it hashable (a tuple, not a list; @dataclass(frozen=True)), or pass "
            "it as an array\n"
            "and not as a static argument."
        )
