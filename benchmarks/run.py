"""tinax benchmarks: each row times tinax against its contenders, side by side.

Run from the repository root:  python benchmarks/run.py [--quick] [ROW ...]

Every row runs its contenders in one process, interleaved in alternating
rounds (so a noisy neighbour slows both alike), and reports per contender the
median time and the median, min and max of its per-round ratio to the
baseline. ``--quick`` runs few rounds: it checks that the rows still execute,
not their timings.
"""

from __future__ import annotations

import argparse
import gc
import operator
import os
import pathlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import chex
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from tinax._src import private
from tinax._src.budget import counting
from tinax._src.diagnosis import record
from tinax._src.observe import compile_times, rebuilt, sites, trace_reports
from tinax._src.wrappers.jit_options import Statics
from tinax.jit import batched_jit, bounded_jit

HERE = pathlib.Path(__file__).resolve().parent

# A contender: a setup run outside the clock that returns the timed action.
Setup = Callable[[], Callable[[], object]]


@dataclass
class Row:
    """One benchmark row: a baseline and the contenders compared with it."""

    name: str
    baseline: str
    contenders: dict[str, Setup]
    target: float | None = None  # the highest acceptable median ratio for "tinax"
    rounds: int = 21
    repeat: int = 5  # per round, each contender's best of this many runs
    calls: int = 1  # calls per timed action: times are reported per call
    times: dict[str, list[float]] = field(default_factory=dict)
    notes: Callable[[Row], list[str]] | None = None  # extra lines for the report
    unit: str = "s"  # what times measure; "MiB" for the memory row
    measured: bool = False  # times filled in by the row itself (fresh processes)

    def run(self, rounds: int, repeat: int) -> None:
        self.times = {name: [] for name in self.contenders}
        order = list(self.contenders)
        for _ in range(rounds):
            # Within a round, contenders alternate run by run (A B B A A B ...) and each
            # keeps its best run: this machine's speed drifts over ~0.1 s, so only
            # neighbouring runs compare fairly.
            best = dict.fromkeys(order, float("inf"))
            gc.collect()
            gc.disable()  # as timeit does: a collection must not land in one contender's time
            try:
                for index in range(repeat):
                    for name in order if index % 2 == 0 else reversed(order):
                        best[name] = min(best[name], self._time_once(name))
            finally:
                gc.enable()
            for name in order:
                self.times[name].append(best[name] / self.calls)

    def _time_once(self, name: str) -> float:
        action = self.contenders[name]()
        start = time.perf_counter()
        action()
        return time.perf_counter() - start

    def ratios(self, name: str) -> list[float]:
        base = self.times[self.baseline]
        return [mine / theirs for mine, theirs in zip(self.times[name], base, strict=True)]


def _tree_of_leaves(count: int) -> dict[str, dict[str, jax.Array]]:
    return {f"layer{i:03}": {"w": jnp.ones((2,)), "b": jnp.ones(())} for i in range(count // 2)}


def _fresh_function() -> Callable[[dict[str, dict[str, jax.Array]]], object]:
    """A new function object each time: JAX caches traces per function."""

    def scale(params: dict[str, dict[str, jax.Array]]) -> object:
        return jax.tree.map(lambda leaf: leaf * 2.0, params)

    return scale


@dataclass(frozen=True)
class _Config:
    """A static argument kept by value in the recorded signature."""

    name: str = "digits-mlp-baseline-experiment-2024"
    activation: str = "relu"


def _fresh_static_function() -> Callable[..., object]:
    """A new function of a tree and a static config each time."""

    def scale(params: dict[str, dict[str, jax.Array]], config: _Config) -> object:
        return jax.tree.map(lambda leaf: leaf * 2.0, params)

    return scale


def recording_row() -> Row:
    """Trace time with signature recording, on a function of 1,000 array leaves and a
    static config (kept by value)."""
    tree = _tree_of_leaves(1000)
    config = _Config()

    def raw() -> Callable[[], object]:
        jitted = jax.jit(_fresh_static_function(), static_argnames="config")
        return lambda: jitted.trace(tree, config=config)

    def tinax() -> Callable[[], object]:
        bounded = bounded_jit(_fresh_static_function(), max_traces=1, static_argnames="config")
        return lambda: bounded.trace(tree, config=config)

    def recording_alone(row: Row) -> list[str]:
        # The part of tinax's trace that is recording, timed alone (best of 50) inside a
        # trace of the same tree: a steadier figure than the side-by-side ratio.
        best = [float("inf")]

        def measure(params: object) -> object:
            for _ in range(50):
                start = time.perf_counter()
                record.record(None, Statics((), ("config",)), (params,), {"config": config})
                best[0] = min(best[0], time.perf_counter() - start)
            return params

        jax.make_jaxpr(measure)(tree)
        trace = statistics.median(row.times["jax.jit"])
        share = best[0] / trace
        return [f"  recording alone: {best[0] * 1e3:.3f} ms = {share:.1%} of a jax.jit trace"]

    return Row(
        "trace 1,000 leaves: recording cost",
        baseline="jax.jit",
        contenders={"jax.jit": raw, "tinax": tinax},
        target=1.05,
        notes=recording_alone,
    )


_ORIGINALS: dict[str, Any] = {}


def _bookkeeping(on: bool) -> None:
    """Turns the per-trace bookkeeping of issue 13 (call site, trace timing, the
    rebuilt-wrapper check, the nesting check and the compile-time listener, the
    check whether a record is wanted) on or off.

    Each contender of the row calls it before every run (four assignments either way;
    the listener moves only when the state changes, which alternating runs share).
    """
    if not _ORIGINALS:
        _ORIGINALS.update(
            call_site=sites.call_site,
            check_rebuilt=rebuilt.check_rebuilt,
            committed=trace_reports.committed,
            staged_out=private.staged_out,
            time=counting.time,
            on=True,
        )
    sites.call_site = _ORIGINALS["call_site"] if on else lambda: (None, False)
    rebuilt.check_rebuilt = _ORIGINALS["check_rebuilt"] if on else lambda *args: None
    trace_reports.committed = _ORIGINALS["committed"] if on else lambda *args: None
    private.staged_out = _ORIGINALS["staged_out"] if on else lambda: False
    counting.time = _ORIGINALS["time"] if on else _NO_CLOCK
    if _ORIGINALS["on"] != on:
        listener = compile_times._on_duration  # pyright: ignore[reportPrivateUsage]
        if on:
            jax.monitoring.register_event_duration_secs_listener(listener)
        else:
            jax.monitoring.unregister_event_duration_listener(listener)
        _ORIGINALS["on"] = on


class _NoClock:
    @staticmethod
    def perf_counter() -> float:
        return 0.0


_NO_CLOCK: Any = _NoClock()


def bookkeeping_row(tiny: bool) -> Row:
    """Trace time with and without the per-trace bookkeeping (logging off): the 200-op
    function of the first-call row, or (worst case, no target) a two-op function."""
    x = jnp.ones(3, jnp.float32)
    fresh = _fresh_tiny if tiny else _two_hundred_ops

    def contender(on: bool) -> Setup:
        def setup() -> Callable[[], object]:
            bounded = bounded_jit(fresh(), max_traces=1)

            def action() -> object:
                _bookkeeping(on)
                return bounded.trace(x)

            return action

        return setup

    def overhead(row: Row) -> list[str]:
        _bookkeeping(True)  # as it was, for the rows after this one
        on, off = (statistics.median(row.times[name]) for name in ("tinax", "bookkeeping off"))
        return [f"  bookkeeping per trace: {(on - off) * 1e6:.1f} us (difference of medians)"]

    what = "a two-op function (worst case)" if tiny else "200 ops"
    return Row(
        f"trace {what}: call site, timing, checks (logging off)",
        baseline="bookkeeping off",
        contenders={"bookkeeping off": contender(False), "tinax": contender(True)},
        target=None if tiny else 1.02,
        rounds=31 if tiny else 21,
        repeat=9 if tiny else 5,
        notes=overhead,
    )


def _fresh_tiny() -> Callable[[jax.Array], jax.Array]:
    """A new tiny function each time: JAX caches traces per function."""

    def tiny(v: jax.Array) -> jax.Array:
        return v * 2.0 + 1.0

    return tiny


def repeated(call: Callable[[], jax.Array], count: int) -> Callable[[], object]:
    """``count`` calls, then a wait for the last result: dispatch and run, as a loop does."""

    def action() -> object:
        out = call()
        for _ in range(count - 1):
            out = call()
        return out.block_until_ready()

    return action


def _mesh8() -> jax.sharding.Mesh:
    return jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))


def _per_example(w: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w).sum()


def batched_mesh_row() -> Row:
    """batched_jit on an 8-device mesh, pre-sharded batch, vs the idioms it replaces."""
    mesh, count = _mesh8(), 50
    w = jnp.ones((3, 4))
    x = jax.device_put(jnp.ones((64, 3)), NamedSharding(mesh, PartitionSpec("x")))
    x_pmap = jax.pmap(lambda v: v)(jnp.ones((8, 8, 3)))  # already laid out for pmap
    by_hand = jax.jit(jax.vmap(_per_example, in_axes=(None, 0)))
    ours = batched_jit(_per_example, in_axes=(None, 0), max_traces=1, mesh=mesh)
    pmapped = jax.pmap(jax.vmap(_per_example, in_axes=(None, 0)), in_axes=(None, 0))

    def hand_written() -> jax.Array:
        with jax.set_mesh(mesh):
            return by_hand(w, x)

    return Row(
        "batched_jit, 8-device mesh, pre-sharded batch of 64",
        baseline="set_mesh+jit(vmap)",
        contenders={
            "set_mesh+jit(vmap)": lambda: repeated(hand_written, count),
            "tinax": lambda: repeated(lambda: ours(w, x), count),
            "jax.pmap": lambda: repeated(lambda: pmapped(w, x_pmap), count),
        },
        target=1.03,
        calls=count,
    )


def _mesh_call_row(inside: bool) -> Row:
    mesh, count = _mesh8(), 50
    x = jax.device_put(jnp.ones(8), NamedSharding(mesh, PartitionSpec("x")))
    jitted = jax.jit(lambda v: v * 2.0)
    ours = bounded_jit(lambda v: v * 2.0, max_traces=1, mesh=mesh)

    def hand_written() -> jax.Array:
        with jax.set_mesh(mesh):
            return jitted(x)

    def timed(call: Callable[[], jax.Array]) -> Setup:
        loop = repeated(call, count)
        if not inside:
            return lambda: loop

        def under_ambient_mesh() -> object:
            with jax.set_mesh(mesh):
                return loop()

        return lambda: under_ambient_mesh

    where = "inside an ambient set_mesh(mesh)" if inside else "from outside any mesh"
    return Row(
        f"mesh-bound call, {where}",
        baseline="set_mesh+jit",
        contenders={"set_mesh+jit": timed(hand_written), "tinax": timed(lambda: ours(x))},
        target=1.05,
        calls=count,
    )


def _tiny(v: jax.Array) -> jax.Array:
    return v * 2.0 + 1.0


def dispatch_row(quick: bool) -> Row:
    """Per-call dispatch on a tiny f32 input, no mesh: tinax and the alternatives."""
    count = 50  # short runs, many of them: the machine's speed drifts within a second
    x = jnp.ones(3, jnp.float32)
    contenders: dict[str, Setup] = {}
    raw = jax.jit(_tiny)
    ours = bounded_jit(_tiny, max_traces=1)
    chexed = jax.jit(chex.assert_max_traces(_tiny, n=1))
    contenders["jax.jit"] = lambda: repeated(lambda: raw(x), count)
    contenders["tinax"] = lambda: repeated(lambda: ours(x), count)
    contenders["chex+jax.jit"] = lambda: repeated(lambda: chexed(x), count)
    missing: list[str] = []
    try:
        import equinox

        filtered = equinox.filter_jit(_tiny)
        contenders["equinox.filter_jit"] = lambda: repeated(lambda: filtered(x), count)
    except ImportError:
        missing.append("equinox")
    try:
        from flax import nnx

        nnx_jitted = nnx.jit(_tiny)
        contenders["flax.nnx.jit"] = lambda: repeated(lambda: nnx_jitted(x), count)
    except ImportError:
        missing.append("flax")
    notes = None
    if missing:
        text = f"  not measured: {', '.join(missing)} (pip install -e '.[bench]')"
        notes = lambda row: [text]  # noqa: E731
    return Row(
        "dispatch, tiny f32, no mesh",
        "jax.jit",
        contenders,
        target=1.03,
        calls=count,
        repeat=15,
        notes=notes,
    )


def batched_row(quick: bool) -> Row:
    """batched_jit against the jax.jit(jax.vmap(f)) it stands for, on one device."""
    count = 50
    x = jnp.ones((8, 3), jnp.float32)
    raw = jax.jit(jax.vmap(_tiny))
    ours = batched_jit(_tiny, max_traces=1)
    return Row(
        "batched_jit vs jit(vmap), tiny f32",
        "jit(vmap)",
        {
            "jit(vmap)": lambda: repeated(lambda: raw(x), count),
            "tinax": lambda: repeated(lambda: ours(x), count),
        },
        target=1.03,
        calls=count,
        repeat=15,
    )


def wrap_row(quick: bool) -> Row:
    """Building the wrapper: validation, signature, attrs, the jax.jit object."""
    count = 200

    def build(make: Callable[[], object]) -> Setup:
        def action() -> object:
            for _ in range(count):
                make()
            return None

        return lambda: action

    return Row(
        "wrap cost: building the object",
        "jax.jit",
        {
            "jax.jit": build(lambda: jax.jit(_tiny)),
            "tinax": build(lambda: bounded_jit(_tiny, max_traces=1)),
        },
        target=1.3,  # issue 22 (1.5 before)
        calls=count,
    )


def _two_hundred_ops() -> Callable[[jax.Array], jax.Array]:
    """A new 200-op function each time (a fresh function misses every JAX cache)."""

    def chain(v: jax.Array) -> jax.Array:
        for i in range(50):
            v = jnp.sin(v) * (1.0 + i) + jnp.cos(v) - v
        return v

    return chain


def first_call_row(quick: bool) -> Row:
    """The first call: trace, lower and compile a 200-op function."""
    x = jnp.ones(8, jnp.float32)

    def first(make: Callable[[Callable[[jax.Array], jax.Array]], Any]) -> Setup:
        def setup() -> Callable[[], object]:
            compiled = make(_two_hundred_ops())
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
    command = [sys.executable, __file__, "--memory-worker", kind, str(objects)]
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


def _sharded_step(w: jax.Array, batch: jax.Array) -> jax.Array:
    return w - 0.01 * batch  # elementwise: no collective (8 CPU devices on 2 cores)


class _Floor:
    """The least any Python object forwarding to a `jax.jit` object can cost: its
    ``__call__`` a property returning that object, as tinax's is (no Python frame)."""

    def __init__(self, jitted: Callable[..., jax.Array]) -> None:
        self._call = jitted

    __call__ = property(operator.attrgetter("_call"))


def dispatch_options_row(quick: bool) -> Row:
    """A cached call with in/out shardings and a donated argument on the 8-device mesh,
    against jax.jit with the same options, and the floor of a forwarding object."""
    count = 50
    mesh = _mesh8()
    data = NamedSharding(mesh, PartitionSpec("x"))
    options: dict[str, Any] = {
        "in_shardings": (data, data),
        "out_shardings": data,
        "donate_argnums": 0,
    }
    batch = jax.device_put(jnp.ones((64, 16), jnp.float32), data)
    raw = jax.jit(_sharded_step, **options)
    ours = bounded_jit(_sharded_step, max_traces=1, **options)
    floor = _Floor(jax.jit(_sharded_step, **options))

    def loop(step: Callable[[jax.Array, jax.Array], jax.Array]) -> Setup:
        def setup() -> Callable[[], object]:
            w = jax.device_put(jnp.zeros((64, 16), jnp.float32), data)

            def action() -> object:
                nonlocal w
                for _ in range(count):
                    w = step(w, batch)  # w is donated: each call gets the one before's
                return w.block_until_ready()

            return action

        return setup

    return Row(
        "dispatch with in/out shardings + donate_argnums, 8-device mesh",
        "jax.jit",
        {"jax.jit": loop(raw), "tinax": loop(ours), "floor object": loop(floor)},
        target=1.03,
        calls=count,
        repeat=15,
        notes=lambda row: [
            f"  tinax / floor object: {statistics.median(_ratio(row, 'tinax', 'floor object')):.3f}"
            " (target 1.01): what remains once a forwarding object's own cost is paid"
        ],
    )


def _ratio(row: Row, name: str, baseline: str) -> list[float]:
    return [a / b for a, b in zip(row.times[name], row.times[baseline], strict=True)]


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
        def action() -> object:
            for _ in range(count):
                make()
            return None

        return lambda: action

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


def _model_call(model: Any, x: jax.Array) -> jax.Array:
    return model(x)


def static_nonarrays_row(quick: bool) -> Row:
    """A cached call on a whole equinox MLP (16 -> 4, width 32, depth 2; f32[16] input):
    jax.jit on the hand-partitioned model (its static part closed over: the floor),
    eqx.filter_jit, and tinax with static_nonarrays=True."""
    count = 50
    x = jnp.ones(16, jnp.float32)
    try:
        import equinox as eqx
    except ImportError:  # the bench extra is missing: a pytree with a function leaf instead
        eqx = None
    if eqx is not None:
        model: Any = eqx.nn.MLP(16, 4, 32, 2, key=jax.random.key(0))
        params, static = eqx.partition(model, eqx.is_array)
        combine = eqx.combine
    else:
        model = {"w": jnp.ones((4, 16)), "activation": jnp.tanh}
        params = {"w": model["w"], "activation": None}
        static = {"w": None, "activation": jnp.tanh}

        def combine(dynamic: Any, fixed: Any) -> Any:
            return {"w": dynamic["w"], "activation": fixed["activation"]}

    def by_hand_step(dynamic: Any, v: jax.Array) -> jax.Array:
        whole = combine(dynamic, static)
        if eqx is None:
            return whole["activation"](whole["w"] @ v)
        return whole(v)

    by_hand = jax.jit(by_hand_step)
    ours = bounded_jit(
        _model_call if eqx is not None else by_hand_step, max_traces=1, static_nonarrays=True
    )
    ours_model = model if eqx is not None else params
    contenders: dict[str, Setup] = {
        "jax.jit, partitioned": lambda: repeated(lambda: by_hand(params, x), count),
        "tinax": lambda: repeated(lambda: ours(ours_model, x), count),
    }
    if eqx is not None:
        filtered = eqx.filter_jit(_model_call)
        contenders["equinox.filter_jit"] = lambda: repeated(lambda: filtered(model, x), count)

    def against_filter_jit(row: Row) -> list[str]:
        if "equinox.filter_jit" not in row.times:
            return ["  not measured: equinox (pip install -e '.[bench]')"]
        ratio = statistics.median(_ratio(row, "tinax", "equinox.filter_jit"))
        verdict = "met" if ratio <= 0.5 else "MISSED"
        return [f"  tinax / equinox.filter_jit: {ratio:.3f} (target <= 0.50: {verdict})"]

    return Row(
        "static_nonarrays: cached call, equinox MLP 16-32x2-4",
        baseline="jax.jit, partitioned",
        contenders=contenders,
        target=None,
        calls=count,
        repeat=15,
        notes=against_filter_jit,
    )


def pytest_plugin_row(quick: bool) -> Row:
    """``pytest --co`` of an empty project, with tinax's plugin loaded and without it: the
    plugin must cost nothing measurable when ``--tinax-budgets`` is not given."""
    import tempfile

    empty = tempfile.mkdtemp(prefix="tinax-empty-project-")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # only the plugins named here
    # Cached bytecode, as an installed plugin has: without it each run compiles the plugin
    # (~2 ms, 1% of the row) where pytest's own modules come compiled from site-packages.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    base = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
    subprocess.run([*base, "-p", "_tinax_pytestplugin"], cwd=empty, env=env, capture_output=True)

    def collect(*plugin: str) -> Setup:
        def action() -> object:
            return subprocess.run([*base, *plugin], cwd=empty, env=env, capture_output=True)

        return lambda: action

    return Row(
        "pytest --co of an empty project: tinax's plugin loaded vs not",
        "no plugin",
        {"no plugin": collect(), "tinax": collect("-p", "_tinax_pytestplugin")},
        target=1.02,
        rounds=11,
        repeat=3,
    )


# --- flax.nnx: an in-place training step (propagate_updates=True) --------------------------


def _nnx_training(quick: bool) -> tuple[Callable[[], tuple[Any, Any]], Callable[..., Any], Any]:
    """A depth-5, width-32 MLP with BatchNorm and Dropout, nnx.Optimizer with optax adam, and
    the canonical in-place step (``optimizer.update(model, grads)``); returns ``(make,
    step, batch)``."""
    import optax
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.layers = nnx.List(
                [nnx.Linear(16 if i == 0 else 32, 32, rngs=rngs) for i in range(5)]
            )
            self.norms = nnx.List([nnx.BatchNorm(32, rngs=rngs) for _ in range(5)])
            self.dropout = nnx.Dropout(0.1, rngs=rngs)
            self.head = nnx.Linear(32, 4, rngs=rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            for layer, norm in zip(self.layers, self.norms, strict=True):
                x = self.dropout(jax.nn.relu(norm(layer(x))))
            return self.head(x)

    def make() -> tuple[Any, Any]:
        model = MLP(nnx.Rngs(0, dropout=1))
        return model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    def step(model: Any, optimizer: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        def loss_fn(model: Any) -> jax.Array:
            return ((model(x) - y) ** 2).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    batch = (jnp.ones((8, 16)), jnp.ones((8, 4)))
    return make, step, batch


def nnx_row(quick: bool) -> Row:
    """A cached in-place nnx training step: tinax with propagate_updates=True against
    nnx.jit (default graph mode, graph=False), nnx.jit_partial and jax.jit on the state."""
    count = 20
    try:
        from flax import nnx
    except ImportError:
        text = "  not measured: flax (pip install -e '.[bench]')"
        return Row(
            "nnx training step, in place",
            "jax.jit",
            {"jax.jit": lambda: lambda: None},
            notes=lambda row: [text],
        )
    make, step, (x, y) = _nnx_training(quick)

    def looped(call: Callable[[], jax.Array]) -> Setup:
        return lambda: repeated(call, count)

    split_model, split_optimizer = make()
    graphdef, state = nnx.split((split_model, split_optimizer))

    @jax.jit
    def functional(state: Any, x: jax.Array, y: jax.Array) -> tuple[Any, jax.Array]:
        model, optimizer = nnx.merge(graphdef, state)
        loss = step(model, optimizer, x, y)
        return nnx.state((model, optimizer)), loss

    held = [state]

    def split_call() -> jax.Array:
        held[0], loss = functional(held[0], x, y)
        return loss

    ours_model, ours_optimizer = make()
    ours = bounded_jit(step, max_traces=1, propagate_updates=True)
    graph_model, graph_optimizer = make()
    graph = nnx.jit(step)
    tree_model, tree_optimizer = make()
    tree = nnx.jit(step, graph=False)
    partial_model, partial_optimizer = make()
    partial = nnx.jit_partial(step, partial_model, partial_optimizer, graph=False)
    calls: dict[str, Callable[[], jax.Array]] = {
        "jax.jit (split)": split_call,
        "tinax": lambda: ours(ours_model, ours_optimizer, x, y),
        "nnx.jit": lambda: graph(graph_model, graph_optimizer, x, y),
        "nnx.jit graph=False": lambda: tree(tree_model, tree_optimizer, x, y),
        "nnx.jit_partial": lambda: partial(x, y),
    }
    for call in calls.values():  # compiled before the clock starts
        call().block_until_ready()
    contenders: dict[str, Setup] = {name: looped(call) for name, call in calls.items()}

    def notes(row: Row) -> list[str]:
        lines: list[str] = []
        for name, target in (("nnx.jit graph=False", 0.5), ("nnx.jit", 0.25)):
            median = statistics.median(_ratio(row, "tinax", name))
            verdict = "met" if median <= target else "MISSED"
            lines.append(f"  tinax / {name}: {median:.3f} (target <= {target:.2f}: {verdict})")
        return lines

    return Row(
        "nnx training step, in place (propagate_updates=True)",
        "jax.jit (split)",
        contenders,
        calls=count,
        rounds=11,
        notes=notes,
    )


# --- warm start: a program's start-up, each run a fresh process ---------------------------

STARTUP = HERE / "startup.py"


_AFTER_IMPORTS: dict[str, list[float]] = {}  # the same runs, from after `import jax, tinax`


def _startup_seconds(*options: str, name: str = "") -> float:
    """Seconds from the first line of `benchmarks/startup.py` to its first step done (and,
    under ``name``, from after its imports)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_FLAGS"))}
    command = [sys.executable, str(STARTUP), *options]
    result = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    from_start, after_imports = (float(part) for part in result.stdout.split()[-2:])
    if name:
        _AFTER_IMPORTS.setdefault(name, []).append(after_imports)
    return from_start


def _startup_round() -> dict[str, float]:
    """One round: each way of starting, primed where it needs a cache or signatures."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tinax-startup-") as folder:
        cache = ("--cache", os.path.join(folder, "cache"))
        warm = ("--signatures", os.path.join(folder, "signatures.json"))
        recording = ("--signatures", os.path.join(folder, "recorded.json"))
        times = {"cold": _startup_seconds(name="cold")}
        # no signatures yet: a cold run that records them
        times["cold, recording"] = _startup_seconds(*recording, name="tinax")
        _startup_seconds(*cache, *warm)  # primes the cache and the signatures
        times["cache alone"] = _startup_seconds(*cache, name="cache alone")
        times["warm start + cache"] = _startup_seconds(*cache, *warm, name="warm start + cache")
        times["warm start, no cache"] = _startup_seconds(*warm, name="warm start, no cache")
    return times


def startup_rows(quick: bool) -> list[Row]:
    """Time to the first step of a program with 8 budgeted functions and 1 s of other
    start-up work: cold, JAX's persistent cache alone, warm start with and without it;
    and what recording costs a cold run. Each run a fresh process."""
    rounds = 1 if quick else 5
    measured: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, seconds in _startup_round().items():
            measured.setdefault(name, []).append(seconds)

    def row(name: str, baseline: str, times: dict[str, list[float]], target: float) -> Row:
        made = Row(name, baseline, {n: lambda: lambda: None for n in times}, target=target)
        made.times, made.rounds, made.measured = times, rounds, True
        return made

    starts = row(
        "start to first step: 8 functions x 300 ops, 1 s of loading (tinax: warm start + cache)",
        "cache alone",
        {
            "cache alone": measured["cache alone"],
            "tinax": measured["warm start + cache"],
            "warm start, no cache": measured["warm start, no cache"],
            "cold": measured["cold"],
        },
        0.5,
    )

    def after_imports(_: Row) -> list[str]:
        names = ["cache alone", "warm start + cache", "warm start, no cache", "cold"]
        medians = {n: statistics.median(_AFTER_IMPORTS[n]) for n in names}
        shown = ", ".join(f"{n} {medians[n]:.2f} s" for n in names)
        ratio = medians["warm start + cache"] / medians["cache alone"]
        return [f"  from after the imports (1 s of it loading): {shown}; warm/cache {ratio:.2f}"]

    starts.notes = after_imports
    recording = row(
        "start to first step, cold: tinax recording its signatures vs not",
        "cold",
        {"cold": measured["cold"], "tinax": measured["cold, recording"]},
        1.01,
    )
    return [starts, recording]


ROWS: dict[str, Callable[[bool], Row | list[Row]]] = {
    "dispatch": dispatch_row,
    "batched": batched_row,
    "mesh-outside": lambda quick: _mesh_call_row(inside=False),
    "mesh-inside": lambda quick: _mesh_call_row(inside=True),
    "wrap": wrap_row,
    "dispatch-options": dispatch_options_row,
    "wrap-options": wrap_options_row,
    "first-call": first_call_row,
    "precompiled-first-call": precompiled_first_call_row,
    "memory": memory_row,
    "recording": lambda quick: recording_row(),
    "batched-mesh": lambda quick: batched_mesh_row(),
    "bookkeeping": lambda quick: bookkeeping_row(tiny=False),
    "bookkeeping-tiny": lambda quick: bookkeeping_row(tiny=True),
    "static-nonarrays": static_nonarrays_row,
    "pytest-plugin": pytest_plugin_row,
    "nnx": nnx_row,
    "warm-start": startup_rows,
}


def _shown(row: Row, value: float) -> str:
    if row.unit != "s":
        return f"{value:10.2f} {row.unit}"
    return f"{value * 1e3:10.3f} ms" if value > 1e-3 else f"{value * 1e6:10.1f} us"


def summary(row: Row, name: str) -> tuple[str, float, float, float, str]:
    """A contender's median time (shown), median/min/max ratio, and verdict on the target."""
    ratios = row.ratios(name)
    median = statistics.median(ratios)
    verdict = ""
    if name == "tinax" and row.target is not None:
        verdict = f"target <= {row.target:.2f}: {'met' if median <= row.target else 'MISSED'}"
    shown = _shown(row, statistics.median(row.times[name])).strip()
    return shown, median, min(ratios), max(ratios), verdict


def report(row: Row) -> list[str]:
    rounds = len(row.times[row.baseline])
    lines = [f"{row.name}  (baseline: {row.baseline}, {rounds} rounds)"]
    for name in row.contenders:
        shown, median, low, high, verdict = summary(row, name)
        lines.append(
            f"  {name:<20} {shown:>12}   ratio {median:.3f} (min {low:.3f}, max {high:.3f})"
            f"  {verdict}".rstrip()
        )
    if row.notes is not None:
        lines.extend(row.notes(row))
    return lines


def markdown_table(rows: list[Row]) -> str:
    lines = [
        "| row | contender | median | ratio (median) | min | max | target |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        for name in row.contenders:
            shown, median, low, high, verdict = summary(row, name)
            target = verdict.removeprefix("target ").replace("MISSED", "missed")
            lines.append(
                f"| {row.name} | {name} | {shown} | {median:.3f} | {low:.3f} | {high:.3f}"
                f" | {target} |"
            )
    return "\n".join(lines)


def chart(rows: list[Row], path: pathlib.Path) -> None:
    """A bar per contender (ratio to the row's baseline), whiskers from min to max."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels: list[str] = []
    medians: list[float] = []
    spans: list[tuple[float, float]] = []
    colors: list[str] = []
    for row in rows:
        for name in row.contenders:
            if name == row.baseline:
                continue
            ratios = row.ratios(name)
            median = statistics.median(ratios)
            labels.append(f"{row.name}\n{name} vs {row.baseline}")
            medians.append(median)
            spans.append((median - min(ratios), max(ratios) - median))
            colors.append("tab:blue" if name == "tinax" else "tab:gray")
    height = 0.45 * len(labels) + 1.5
    figure, axes = plt.subplots(figsize=(10, height))
    positions = list(range(len(labels)))[::-1]
    error = [[low for low, _ in spans], [high for _, high in spans]]
    axes.barh(positions, medians, xerr=error, color=colors, capsize=3)
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_yticks(positions, labels, fontsize=7)
    axes.set_xscale("log")
    axes.set_xlabel("time (memory) relative to the row's baseline; median, whiskers min to max")
    axes.set_title("tinax benchmarks (blue: tinax; grey: other contenders)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--memory-worker"]:
        memory_worker(argv[1], int(argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", help=f"rows to run, of {', '.join(ROWS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="few rounds: check rows execute")
    parser.add_argument(
        "--out", type=pathlib.Path, default=HERE / "out", help="where results.md and the chart go"
    )
    options = parser.parse_args(argv)
    unknown = [key for key in options.rows if key not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {list(ROWS)}")
    done: list[Row] = []
    for key in options.rows or list(ROWS):
        made = ROWS[key](options.quick)
        for row in made if isinstance(made, list) else [made]:
            if row.unit == "s" and not row.measured:
                row.run(2 if options.quick else row.rounds, 1 if options.quick else row.repeat)
            print("\n".join(report(row)), flush=True)
            done.append(row)
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "results.md").write_text(markdown_table(done) + "\n")
    chart(done, options.out / "benchmarks.png")
    print(f"wrote {options.out / 'results.md'} and {options.out / 'benchmarks.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
