"""Issue 19: every line tinax prints is true on the edge cases real programs hit."""

import warnings

import jax.numpy as jnp
import pytest

from tinax.jit import TraceBudgetError, batched_jit, bounded_jit


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
    def test_explain_of_a_function_leaf_says_it_would_raise_jax_s_type_error(self):
        step = bounded_jit(g, max_traces=1)
        lines = str(step.explain(jnp.ones(3), jnp.ones(3), jnp.tanh)).splitlines()
        assert lines[0].endswith(
            "JAX would reject this call before tracing; max_traces=1, traces_used=0."
        )
        assert lines[1].startswith(
            "It would raise TypeError: Error interpreting argument to <function g> as an "
            "abstract array."
        )

    def test_explain_of_an_unhashable_static_says_it_would_raise_jax_s_value_error(self):
        step = bounded_jit(lambda x, cfg: x, max_traces=1, static_argnames="cfg")
        explanation = step.explain(jnp.ones(3), cfg=[1, 2])
        assert explanation.raises is not None
        assert explanation.raises.startswith(
            "ValueError: Non-hashable static arguments are not supported."
        )
        assert not explanation.retraces
