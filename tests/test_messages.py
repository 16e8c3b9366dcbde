"""What the budget error says: function, location, budget, and what changed."""

import inspect

import jax.numpy as jnp
import pytest

from tinax.jit import TraceBudgetError, batched_jit, bounded_jit


def train_step(params, image_batch, mode="train"):
    return params["w"] * image_batch.sum()


LINE = inspect.getsourcelines(train_step)[1]


def refusal(obj, *calls):
    """Runs every call but the last, returns the error the last one raises."""
    for args, kwargs in calls[:-1]:
        obj(*args, **kwargs)
    args, kwargs = calls[-1]
    with pytest.raises(TraceBudgetError) as info:
        obj(*args, **kwargs)
    return info.value


PARAMS = {"w": jnp.ones(3)}


class TestHeadline:
    def test_names_function_location_and_budget(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1),
            ((PARAMS, jnp.ones((8, 3))), {}),
            ((PARAMS, jnp.ones((16, 3))), {}),
        )
        first = str(error).splitlines()[0]
        assert first == (
            f"train_step (tests/test_messages.py:{LINE}) exceeded its trace budget: "
            "max_traces=1, this call would be trace 2."
        )
        assert (error.function_name, error.max_traces) == ("train_step", 1)
        assert error.location == f"tests/test_messages.py:{LINE}"

    def test_zero_budget_shows_the_refused_call(self):
        error = refusal(bounded_jit(train_step, max_traces=0), ((PARAMS, jnp.ones((8, 3))), {}))
        assert "No earlier trace to compare with." in str(error)
        assert "image_batch: f32[8,3]" in str(error)
        assert error.closest is None

    def test_error_class_lives_in_public_module(self):
        assert TraceBudgetError.__module__ == "tinax.jit"
        assert issubclass(TraceBudgetError, AssertionError)


class TestDifferences:
    def test_names_argument_by_parameter_when_passed_positionally(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1),
            ((PARAMS, jnp.ones((8, 3))), {}),
            ((PARAMS, jnp.ones((16, 3))), {}),
        )
        assert "  image_batch: f32[8,3] -> f32[16,3] (shape: " in str(error)
        assert [d.path for d in error.differences] == ["image_batch"]

    def test_names_argument_by_parameter_when_passed_by_keyword(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1),
            ((), {"params": PARAMS, "image_batch": jnp.ones((8, 3))}),
            ((), {"params": {"w": jnp.ones(4)}, "image_batch": jnp.ones((8, 3))}),
        )
        assert "  params['w']: f32[3] -> f32[4] (shape: " in str(error)

    def test_reports_dtype_and_static_value(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1, static_argnames="mode"),
            ((PARAMS, jnp.ones((8, 3))), {"mode": "train"}),
            ((PARAMS, jnp.ones((8, 3), jnp.int32)), {"mode": "eval"}),
        )
        text = str(error)
        assert "  image_batch: f32[8,3] -> i32[8,3] (dtype: " in text
        assert "  mode: 'train' -> 'eval' (static value: " in text

    def test_reports_weak_type(self):
        error = refusal(
            bounded_jit(lambda x, lr: x * lr, max_traces=1),
            ((jnp.ones(2), 0.1), {}),
            ((jnp.ones(2), jnp.float32(0.1)), {}),
        )
        assert "  lr: weak-typed f32[] -> f32[] (weak type: " in str(error)

    def test_reports_tree_structure(self):
        error = refusal(
            bounded_jit(train_step, max_traces=1),
            ((PARAMS, jnp.ones((8, 3))), {}),
            (({"w": jnp.ones(3), "b": jnp.ones(3)}, jnp.ones((8, 3))), {}),
        )
        assert "  params: {'w': *} -> {'b': *, 'w': *} (tree structure: " in str(error)

    def test_batched_error_names_function_and_batched_shapes(self):
        error = refusal(
            batched_jit(train_step, in_axes=(None, 0), max_traces=1),
            ((PARAMS, jnp.ones((4, 8, 3))), {}),
            ((PARAMS, jnp.ones((5, 8, 3))), {}),
        )
        assert str(error).startswith("train_step (tests/test_messages.py:")
        assert "  image_batch: f32[4,8,3] -> f32[5,8,3] (shape: " in str(error)

    def test_diff_is_against_closest_earlier_trace(self):
        error = refusal(
            bounded_jit(lambda a, b: a + b, max_traces=2),
            ((jnp.ones(1), jnp.ones(1)), {}),
            ((jnp.ones(5), jnp.ones(5)), {}),
            ((jnp.ones(5), jnp.ones(1)), {}),
        )
        assert error.closest is not None
        assert len(error.differences) == 1
        assert error.differences[0].path == "b"
