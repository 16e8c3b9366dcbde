"""Wrapping and first calls: building an object (one function wrapped again and again, as a
benchmark loop does; a fresh function per wrap, as a program builds its objects), a first
call, a precompiled first call, and the memory of objects built and dropped."""

from __future__ import annotations

import gc
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from harness import HERE, Row, Setup, tiny_step, two_hundred_ops

from tinax.jit import bounded_jit


def _built_repeatedly(make: Callable[[], object], count: int) -> Setup:
    """A contender that builds an object ``count`` times, from one function."""

    def action() -> object:
        for _ in range(count):
            make()
        return None

    return lambda: action


def wrap_row(quick: bool) -> Row:
    """Building the wrapper: validation, signature, attrs, the jax.jit object."""
    count = 200

    def build(make: Callable[[], object]) -> Setup:
        return _built_repeatedly(make, count)

    return Row(
        "wrap cost: building the object, one function wrapped again and again",
        "jax.jit",
        {
            "jax.jit": build(lambda: jax.jit(tiny_step)),
            "tinax": build(lambda: bounded_jit(tiny_step, max_traces=1)),
        },
        target=1.3,  # 1.5 until validation and the signature were made cheaper
        calls=count,
    )


def _fresh_functions(count: int) -> list[Callable[[jax.Array], jax.Array]]:
    """``count`` new functions of two parameters, as a program defines its steps: each
    wrapped once, so that nothing learned of one function serves the next."""
    made: list[Callable[[jax.Array], jax.Array]] = []
    for index in range(count):

        def step(x: jax.Array, scale: float = 1.0, index: int = index) -> jax.Array:
            return x * scale + index

        made.append(step)
    return made


def wrap_fresh_row(quick: bool) -> Row:
    """Building the wrapper of a function wrapped for the first time (as a program builds
    its objects): the signature and every check are read anew."""
    count = 200

    def build(make: Callable[[Callable[..., object]], object]) -> Setup:
        def setup() -> Callable[[], object]:
            functions = _fresh_functions(count)

            def action() -> object:
                for function in functions:
                    make(function)
                return None

            return action

        return setup

    def with_first_call(row: Row) -> list[str]:
        # tinax builds its jax.jit object at the first use: the wrap, then the first call
        # (trace and compile) of each fresh function, for what the move costs there.
        x = jnp.ones(8, jnp.float32)
        makers = {"jax.jit": jax.jit, "tinax": lambda f: bounded_jit(f, max_traces=1)}
        times: dict[str, list[float]] = {name: [] for name in makers}
        for _ in range(3 if quick else 7):
            for name, make in makers.items():
                functions = _fresh_functions(10)
                start = time.perf_counter()
                for function in functions:
                    jax.block_until_ready(make(function)(x))
                times[name].append((time.perf_counter() - start) / len(functions))
        pairs = zip(times["tinax"], times["jax.jit"], strict=True)
        ratios = [mine / theirs for mine, theirs in pairs]
        return [
            f"  wrap and first call (trace, compile, run) of each fresh function: tinax "
            f"{statistics.median(times['tinax']) * 1e3:.2f} ms, jax.jit "
            f"{statistics.median(times['jax.jit']) * 1e3:.2f} ms, ratio "
            f"{statistics.median(ratios):.3f} (median of {len(ratios)} rounds)"
        ]

    return Row(
        "wrap cost: building the object, a fresh function per wrap",
        "jax.jit",
        {
            "jax.jit": build(lambda f: jax.jit(f)),
            "tinax": build(lambda f: bounded_jit(f, max_traces=1)),
        },
        target=1.3,  # the jax.jit object is built at first use, not at the wrap
        calls=count,
        notes=with_first_call,
    )


def first_call_row(quick: bool) -> Row:
    """The first call: trace, lower and compile a 200-op function."""
    x = jnp.ones(8, jnp.float32)

    def first(make: Callable[[Callable[[jax.Array], jax.Array]], Any]) -> Setup:
        def setup() -> Callable[[], object]:
            compiled = make(two_hundred_ops())
            return lambda: compiled(x).block_until_ready()

        return setup

    return Row(
        "first call: trace + compile, 200 ops",
        "jax.jit",
        {
            "jax.jit": first(jax.jit),
            "tinax": first(lambda f: bounded_jit(f, max_traces=1)),
        },
        target=1.05,
        rounds=11,
        repeat=3,
    )


Params = dict[str, jax.Array]


def _mlp_step() -> Callable[[Params, Params, float], tuple[Params, jax.Array]]:
    """A new two-layer MLP training step each time (a fresh function misses every cache)."""

    def loss_fn(params: Params, batch: Params) -> jax.Array:
        hidden = jnp.tanh(batch["x"] @ params["w1"] + params["b1"])
        hidden = jnp.tanh(hidden @ params["w2"] + params["b2"])
        return jnp.mean((hidden @ params["w3"] - batch["y"]) ** 2)

    def train_step(params: Params, batch: Params, lr: float) -> tuple[Params, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss

    return train_step


def _mlp_arguments(width: int, rows: int) -> tuple[Params, Params]:
    params = {
        "w1": jnp.full((width, width), 1.0 / width),
        "b1": jnp.zeros(width),
        "w2": jnp.full((width, width), 1.0 / width),
        "b2": jnp.zeros(width),
        "w3": jnp.ones((width, 1)),
    }
    return params, {"x": jnp.ones((rows, width)), "y": jnp.ones((rows, 1))}


def precompiled_first_call_row(quick: bool) -> Row:
    """The first call after ``precompile`` (no trace, no compile left) against a cached
    call of the same step: what a property test's first example, or a timed first
    step, pays once the step is precompiled."""
    width, rows = (128, 256) if quick else (512, 2048)
    params, batch = _mlp_arguments(width, rows)
    warm = bounded_jit(_mlp_step(), max_traces=1)
    warm(params, batch, 0.1)

    def cached() -> Callable[[], object]:
        return lambda: jax.block_until_ready(warm(params, batch, 0.1))

    def first_after_precompile() -> Callable[[], object]:
        step = bounded_jit(_mlp_step(), max_traces=1)
        step.precompile(params, batch, 0.1)
        return lambda: jax.block_until_ready(step(params, batch, 0.1))

    def jax_aot() -> Callable[[], object]:
        jitted = jax.jit(_mlp_step())
        jitted.lower(params, batch, 0.1).compile()
        return lambda: jax.block_until_ready(jitted(params, batch, 0.1))

    def small_step(row: Row) -> list[str]:
        # The same, on a step too small to hide the first execution's fixed cost, with
        # the first call of a step not precompiled, or only lowered, for scale.
        small_params, small_batch = _mlp_arguments(8, 64)

        def first_call(prepare: str) -> float:
            best = float("inf")
            for _ in range(3):
                step = bounded_jit(_mlp_step(), max_traces=1)
                if prepare == "precompile":
                    step.precompile(small_params, small_batch, 0.1)
                elif prepare == "lower":
                    step.lower(small_params, small_batch, 0.1)
                start = time.perf_counter()
                jax.block_until_ready(step(small_params, small_batch, 0.1))
                best = min(best, time.perf_counter() - start)
            return best

        small_warm = bounded_jit(_mlp_step(), max_traces=1)
        small_warm(small_params, small_batch, 0.1)
        cached_small = float("inf")
        for _ in range(20):
            start = time.perf_counter()
            jax.block_until_ready(small_warm(small_params, small_batch, 0.1))
            cached_small = min(cached_small, time.perf_counter() - start)
        figures = {name: first_call(name) for name in ("precompile", "lower", "nothing")}
        gap = statistics.median(row.times["tinax"]) - statistics.median(row.times["cached call"])
        return [
            f"  first run of a new executable: {gap * 1e3:.1f} ms more than a cached call "
            "(difference of medians; XLA's, paid by jax.jit's lower().compile() too)",
            f"  8x64 step, first call: after precompile {figures['precompile'] * 1e3:.2f} ms, "
            f"after lower() only {figures['lower'] * 1e3:.0f} ms, not prepared "
            f"{figures['nothing'] * 1e3:.0f} ms; a cached call {cached_small * 1e3:.3f} ms",
        ]

    return Row(
        f"first call after precompile, MLP step {width}x{rows}",
        "cached call",
        {
            "cached call": cached,
            "tinax": first_after_precompile,
            "jax.jit AOT compile": jax_aot,
        },
        target=1.5,
        rounds=11,
        repeat=3,
        notes=small_step,
    )


def memory_row(quick: bool) -> Row:
    """Objects created, called once and dropped: memory growth, each in a fresh process."""
    objects = 200 if quick else 2000
    samples = 1 if quick else 3  # resident memory moves by pages: a few fresh processes each
    growth: dict[str, list[float]] = {"jax.jit": [], "tinax": []}
    for _ in range(samples):
        for name in growth:
            growth[name].append(_memory_growth(name, objects))
    row = Row(
        f"memory: {objects:,} objects built, called once, dropped (MiB growth)",
        "jax.jit",
        {name: lambda: lambda: None for name in growth},
        target=1.2,
        rounds=samples,
        repeat=1,
    )
    row.times = growth
    row.unit = "MiB"
    return row


def _memory_growth(kind: str, objects: int) -> float:
    command = [sys.executable, str(HERE / "run.py"), "--memory-worker", kind, str(objects)]
    result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=1800)
    return float(result.stdout.strip().splitlines()[-1])


def memory_worker(kind: str, objects: int) -> None:
    """Prints the resident-memory growth (MiB) of building, calling, dropping objects."""

    def resident() -> float:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    x = jnp.ones(3, jnp.float32)
    build = jax.jit if kind == "jax.jit" else lambda f: bounded_jit(f, max_traces=1)
    for _ in range(50):  # warm JAX's own caches first: they are bounded, not ours
        build(lambda v: v + 1.0)(x)
    gc.collect()
    before = resident()
    for _ in range(objects):
        build(lambda v: v + 1.0)(x)  # a new function each time: one compile per object
    gc.collect()
    print(resident() - before)


def wrap_options_row(quick: bool) -> Row:
    """Building the wrapper with several jax.jit options, against jax.jit with the same."""
    count = 200
    options: dict[str, Any] = {
        "static_argnums": (1,),
        "donate_argnums": (0,),
        "keep_unused": True,
        "compiler_options": {"xla_embed_ir_in_executable": False},
    }

    def function(x: jax.Array, n: int) -> jax.Array:
        return x * n

    def build(make: Callable[[], object]) -> Setup:
        return _built_repeatedly(make, count)

    return Row(
        "wrap cost with static/donate argnums, keep_unused, compiler_options",
        "jax.jit",
        {
            "jax.jit": build(lambda: jax.jit(function, **options)),
            "tinax": build(lambda: bounded_jit(function, max_traces=1, **options)),
        },
        target=1.5,
        calls=count,
    )
