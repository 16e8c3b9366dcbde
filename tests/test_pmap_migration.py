"""The pmap migration guide: its three programs agree, and the page quotes real code."""

import importlib.util
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tinax.jit import TraceBudgetError
from tinax.parallel import shard_mapped

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "pmap_migration.py"
PAGE = ROOT / "docs" / "migrating-from-pmap.md"


def load_example():
    """A fresh copy of the example module: its own objects, with unused budgets."""
    spec = importlib.util.spec_from_file_location("pmap_migration", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def guide():
    return load_example()


def test_the_three_programs_agree_and_the_page_shows_the_output(guide, capsys):
    guide.main()  # asserts pmap == batched_jit on a mesh == shard_mapped + batched_jit
    printed = capsys.readouterr().out.rstrip()
    assert printed.count("same parameters as pmap") == 2
    assert printed.count("same roots and iteration counts as pmap") == 2
    for name, count in (("lockstep", 1), ("per device", 0)):
        line = f"{name}: same roots and iteration counts as pmap; all-reduces in the compiled"
        assert f"{line} program: {count}" in printed
    assert f"```text\n{printed}\n```" in PAGE.read_text()


def test_every_code_block_of_the_page_is_quoted_from_the_example():
    # The multi-host section quotes the two-process fail_fast example.
    source = EXAMPLE.read_text() + (ROOT / "examples" / "fail_fast.py").read_text()
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 6
    lines = {line.strip() for line in source.splitlines()}
    for block in blocks:  # indentation aside: the page runs at top level what main() runs
        assert [line for line in block.splitlines() if line.strip() not in lines] == [], block


def test_parameters_off_the_mesh_retrace_as_the_page_says():
    guide = load_example()
    params, x, y, _ = guide.make_data()
    batch = NamedSharding(guide.mesh, P("batch"))
    x, y = jax.device_put(x, batch), jax.device_put(y, batch)
    step = guide.auto_train_step
    params = step(params, x, y)  # made off the mesh; returned on it
    with pytest.raises(TraceBudgetError) as info:
        step(params, x, y)
    line = next(line for line in str(info.value).splitlines() if line.startswith("  params"))
    assert f"```text\n{line}\n```" in PAGE.read_text()


def test_transliterating_the_pmap_body_would_scale_the_gradient_by_the_device_count(guide):
    """The page's warning: with check_vma, pmean after grad over-counts by 8."""
    params, x, y, _ = guide.make_data()
    batch = NamedSharding(guide.mesh, P("batch"))
    x, y = jax.device_put(x, batch), jax.device_put(y, batch)

    def gradient(mean_of_gradients):
        def body(params, x, y):
            if mean_of_gradients:  # pmap's order: grad, then pmean
                grads = jax.grad(lambda p: guide.local_losses(p, x, y).mean())(params)
                return jax.tree.map(lambda g: jax.lax.pmean(g, "batch"), grads)
            return jax.grad(lambda p: jax.lax.pmean(guide.local_losses(p, x, y).mean(), "batch"))(
                params
            )

        mapped = shard_mapped(
            body, mesh=guide.mesh, in_specs=(P(), P("batch"), P("batch")), out_specs=P()
        )
        return jax.jit(mapped)(params, x, y)

    exact = jax.grad(lambda p: jnp.mean(jax.vmap(guide.example_loss, (None, 0, 0))(p, x, y)))(
        params
    )
    right, transliterated = gradient(False), gradient(True)
    for key in exact:
        np.testing.assert_allclose(right[key], exact[key], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(transliterated[key], 8 * exact[key], rtol=1e-5, atol=1e-6)
