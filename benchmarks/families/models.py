"""Models passed whole: equinox modules (``static_nonarrays``) and flax.nnx objects updated in
place (``propagate_updates``), against their libraries' own jit."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from harness import Row, Setup, ratios_of, repeated

from tinax.jit import bounded_jit


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
        ratio = statistics.median(ratios_of(row, "tinax", "equinox.filter_jit"))
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
            median = statistics.median(ratios_of(row, "tinax", name))
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
