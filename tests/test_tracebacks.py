"""A TraceBudgetError's traceback ends at the user's call, as JAX's own errors do."""

import os
import textwrap
import traceback

import jax.numpy as jnp
import pytest

from helpers.processes import run_program
from tinax.jit import TraceBudgetError, bounded_jit


def frames(error):
    return traceback.extract_tb(error.__traceback__)


def test_last_frame_of_the_budget_error_is_the_users_call():
    step = bounded_jit(lambda x: x, max_traces=1)
    step(jnp.ones(3))
    with pytest.raises(TraceBudgetError) as info:
        step(jnp.ones(4))  # the last frame
    last = frames(info.value)[-1]
    assert (last.filename, last.name) == (__file__, last.name)
    assert last.line == "step(jnp.ones(4))  # the last frame"
    assert all("tinax" not in frame.filename for frame in frames(info.value))


def test_mesh_bound_call_and_lower_also_end_at_the_users_line(mesh8):
    step = bounded_jit(lambda x: x, max_traces=1, mesh=mesh8)
    step(jnp.ones(8))
    with pytest.raises(TraceBudgetError) as info:
        step(jnp.ones(16))
    assert frames(info.value)[-1].line == "step(jnp.ones(16))"
    with pytest.raises(TraceBudgetError) as info:
        step.lower(jnp.ones(24))
    assert frames(info.value)[-1].line == "step.lower(jnp.ones(24))"
    assert all("tinax" not in frame.filename for frame in frames(info.value))


def test_filtering_off_shows_tinax_frames():
    script = textwrap.dedent(
        """
        import traceback
        import jax.numpy as jnp
        from tinax.jit import TraceBudgetError, bounded_jit
        step = bounded_jit(lambda x: x, max_traces=0)
        try:
            step(jnp.ones(3))
        except TraceBudgetError as error:
            print("\\n".join(f.filename for f in traceback.extract_tb(error.__traceback__)))
        """
    )
    result = run_program(script, env={"JAX_TRACEBACK_FILTERING": "off"})
    files = result.stdout.split()
    counting = os.path.join("tinax", "_src", "budget", "counting.py")
    assert any(name.endswith(counting) for name in files), files
