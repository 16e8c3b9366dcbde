"""Models passed whole: equinox modules (``static_nonarrays``) and flax.nnx objects updated in
place (``propagate_updates``), against their libraries' own jit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from harness import Row, Setup, repeated

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

    def without_equinox(row: Row) -> list[str]:
        if "equinox.filter_jit" not in row.times:
            return ["  not measured: equinox (pip install -e '.[bench]')"]
        return []

    return Row(
        "static_nonarrays: cached call, equinox MLP 16-32x2-4",
        baseline="jax.jit, partitioned",
        contenders=contenders,
        target=None,
        calls=count,
        repeat=15,
        notes=without_equinox,
        against={"equinox.filter_jit": 0.5},
    )


# --- equinox steps as users run them: the model and optimizer state returned --------------

_EQUINOX_MISSING = "  not measured: equinox and optax (pip install -e '.[bench]')"


def _equinox_steps() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...], tuple[Any, ...]]]:
    """The equinox steps the rows time: ``{row key: (step, carried, batch)}``. A step is
    called ``step(*carried, *batch)`` and returns the new ``carried`` then its result (a
    training step: the model, the state, the optimizer state, then the loss); the eval
    step returns ``(predictions, state)`` and carries nothing."""
    import equinox as eqx
    import optax

    optimizer = optax.adamw(1e-3)

    def mlp_step(model: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        def loss_fn(model: Any) -> jax.Array:
            return jnp.mean((jax.vmap(model)(x) - y) ** 2)

        loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
        updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss

    class CNN(eqx.Module):
        convs: tuple[eqx.nn.Conv2d, eqx.nn.Conv2d]
        norms: tuple[eqx.nn.BatchNorm, eqx.nn.BatchNorm]
        head: eqx.nn.Linear

        def __init__(self, key: jax.Array) -> None:
            keys = jax.random.split(key, 3)
            self.convs = (
                eqx.nn.Conv2d(1, 4, 3, padding=1, key=keys[0]),
                eqx.nn.Conv2d(4, 4, 3, padding=1, key=keys[1]),
            )
            self.norms = (
                eqx.nn.BatchNorm(4, axis_name="batch", mode="batch"),
                eqx.nn.BatchNorm(4, axis_name="batch", mode="batch"),
            )
            self.head = eqx.nn.Linear(4 * 8 * 8, 10, key=keys[2])

        def __call__(self, x: jax.Array, state: Any) -> tuple[jax.Array, Any]:
            for conv, norm in zip(self.convs, self.norms, strict=True):
                x, state = norm(conv(x), state)
                x = jax.nn.relu(x)
            return self.head(x.reshape(-1)), state

    def cnn_loss(model: Any, state: Any, x: jax.Array, y: jax.Array) -> Any:
        batched = jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
        logits, state = batched(x, state)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), state

    def cnn_step(model: Any, state: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        grad = eqx.filter_value_and_grad(cnn_loss, has_aux=True)
        (loss, state), grads = grad(model, state, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), state, opt_state, loss

    def cnn_eval(model: Any, state: Any, x: jax.Array) -> Any:
        batched = jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
        return batched(x, state)

    mlp = eqx.nn.MLP(16, 4, 32, 2, key=jax.random.key(0))
    cnn, cnn_state = eqx.nn.make_with_state(CNN)(jax.random.key(0))
    keys = jax.random.split(jax.random.key(1), 3)
    images = jax.random.normal(keys[0], (8, 1, 8, 8))
    labels = jax.random.randint(keys[1], (8,), 0, 10)
    return {
        "train": (
            mlp_step,
            (mlp, optimizer.init(eqx.filter(mlp, eqx.is_array))),
            (jax.random.normal(keys[2], (8, 16)), jnp.ones((8, 4))),
        ),
        "cnn-train": (
            cnn_step,
            (cnn, cnn_state, optimizer.init(eqx.filter(cnn, eqx.is_array))),
            (images, labels),
        ),
        "eval": (cnn_eval, (), (eqx.nn.inference_mode(cnn), cnn_state, images)),
    }


_EQUINOX_ROWS = {
    "train": "equinox training step, MLP 16-32x2-4 + optax.adamw, returns model and opt state",
    "cnn-train": "equinox training step, CNN 2x(conv 4ch + BatchNorm) + adamw, eqx.nn.State",
    "eval": "equinox eval step, the CNN in inference mode with its eqx.nn.State",
}


def _partitioned(
    step: Callable[..., Any], carried: tuple[Any, ...], batch: tuple[Any, ...]
) -> tuple[Any, Callable[[Any], Any], tuple[Any, ...], tuple[Any, ...]]:
    """``jax.jit`` on the step with every model partitioned by hand (``eqx.partition``,
    the static parts closed over): the floor. Returns it, the function that puts the
    static parts back into its output, and what it is called with."""
    import equinox as eqx

    def split(values: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        parts = [eqx.partition(value, eqx.is_array) for value in values]
        return tuple(part for part, _ in parts), tuple(static for _, static in parts)

    dynamic_carried, static_carried = split(carried)
    dynamic_batch, static_batch = split(batch)
    out_static: list[Any] = []

    @jax.jit
    def by_hand(dynamic: tuple[Any, ...], batch: tuple[Any, ...]) -> Any:
        whole = [eqx.combine(d, s) for d, s in zip(dynamic, static_carried, strict=True)]
        inputs = [eqx.combine(b, s) for b, s in zip(batch, static_batch, strict=True)]
        arrays, static = eqx.partition(step(*whole, *inputs), eqx.is_array)
        out_static[:] = [static]
        return arrays

    def whole(out: Any) -> Any:
        return eqx.combine(out, out_static[0])

    return by_hand, whole, dynamic_carried, dynamic_batch


def _same(got: Any, expected: Any, what: str) -> None:
    """Raises unless ``got`` is ``expected``: the same tree, equal arrays bit for bit."""
    import numpy as np

    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    expected_leaves, expected_tree = jax.tree_util.tree_flatten(expected)
    if got_tree != expected_tree:
        raise AssertionError(f"{what}: another output structure than eqx.filter_jit's")
    for mine, theirs in zip(got_leaves, expected_leaves, strict=True):
        if isinstance(theirs, jax.Array):
            if not np.array_equal(np.asarray(mine), np.asarray(theirs)):
                raise AssertionError(f"{what}: results differ from eqx.filter_jit's")
        elif mine is not theirs and mine != theirs:
            raise AssertionError(f"{what}: a non-array leaf differs from eqx.filter_jit's")


def equinox_row(key: str, quick: bool) -> Row:
    """A cached equinox step as a training loop calls it (``model, opt_state, loss =
    step(model, opt_state, x, y)``, the returned values passed to the next call):
    tinax with static_nonarrays=True against eqx.filter_jit and jax.jit on the models
    partitioned by hand. Each is checked against eqx.filter_jit before it is timed:
    three steps from the same start, every output equal bit for bit."""
    name = _EQUINOX_ROWS[key]
    try:
        import equinox as eqx
        import optax  # noqa: F401  # the steps use it
    except ImportError:
        return Row(
            name,
            "jax.jit, partitioned",
            {"jax.jit, partitioned": lambda: lambda: None},
            notes=lambda row: [_EQUINOX_MISSING],
        )
    step, carried, batch = _equinox_steps()[key]
    count = 10 if key == "train" else 5
    by_hand, by_hand_whole, hand_carried, hand_batch = _partitioned(step, carried, batch)
    ours = bounded_jit(step, max_traces=1, static_nonarrays=True)
    filtered = eqx.filter_jit(step)
    trains = bool(carried)

    calls: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
        "jax.jit, partitioned": (lambda values: by_hand(values, hand_batch), hand_carried),
        "tinax": (lambda values: ours(*values, *batch), carried),
        "equinox.filter_jit": (lambda values: filtered(*values, *batch), carried),
    }

    # Equal results first: three steps from the same start, each output against filter_jit's.
    outs: dict[str, list[Any]] = {}
    for contender, (call, start) in calls.items():
        values, seen = start, []
        for _ in range(3):
            out = call(values)
            if contender == "jax.jit, partitioned":
                out = by_hand_whole(out)
            seen.append(out)
            if trains:
                values = tuple(out[:-1])
                if contender == "jax.jit, partitioned":
                    values = tuple(eqx.partition(value, eqx.is_array)[0] for value in values)
        outs[contender] = seen
    for contender in ("tinax", "jax.jit, partitioned"):
        for got, expected in zip(outs[contender], outs["equinox.filter_jit"], strict=True):
            _same(got, expected, f"{name}: {contender}")

    def looped(call: Callable[..., Any], start: tuple[Any, ...]) -> Setup:
        held = [start]

        def action() -> object:
            values = held[0]
            out = call(values)
            for _ in range(count - 1):
                if trains:
                    values = tuple(out[:-1])
                out = call(values)
            if trains:
                held[0] = tuple(out[:-1])
            return jax.block_until_ready(out[-1])

        return lambda: action

    contenders = {contender: looped(call, start) for contender, (call, start) in calls.items()}

    return Row(
        name,
        baseline="jax.jit, partitioned",
        contenders=contenders,
        calls=count,
        rounds=15,
        repeat=5,
        notes=lambda row: ["  results equal to eqx.filter_jit's, bit for bit"],
        against={"equinox.filter_jit": 0.5},
    )


def _nnx_mlp() -> Any:
    """A depth-5, width-32 MLP (16 -> 4) with BatchNorm and Dropout after each layer."""
    from flax import nnx

    return _nnx_mlp_class()(nnx.Rngs(0, dropout=1))


@functools.cache
def _nnx_mlp_class() -> type:
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

    return MLP


def _nnx_training(quick: bool) -> tuple[Callable[[], tuple[Any, Any]], Callable[..., Any], Any]:
    """A depth-5, width-32 MLP with BatchNorm and Dropout, nnx.Optimizer with optax adam, and
    the canonical in-place step (``optimizer.update(model, grads)``); returns ``(make,
    step, batch)``."""
    import optax
    from flax import nnx

    def make() -> tuple[Any, Any]:
        model = _nnx_mlp()
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

    return Row(
        "nnx training step, in place (propagate_updates=True)",
        "jax.jit (split)",
        contenders,
        calls=count,
        rounds=11,
        against={"nnx.jit graph=False": 0.5, "nnx.jit": 0.25, "nnx.jit_partial": None},
    )


# --- full nnx steps: the loops users run ----------------------------------------------------
# Each row: the step under tinax (propagate_updates=True), nnx.jit, nnx.jit(graph=False) and
# nnx.jit_partial, each run first from fresh objects and checked against nnx.jit for equal
# results (outputs and every leaf of the objects' state); one that differs or refuses the step
# is left out of the timing and named in the row's notes.

_NNX_STEP_CALLS = 20  # cached calls per timed action
_NNX_CHECK_STEPS = 3  # steps each contender runs before its results are compared


def _nnx_classifier() -> dict[str, Any]:
    """The parts of an nnx classification loop: the MLP of `_nnx_mlp` (BatchNorm, Dropout),
    ``nnx.Optimizer`` with optax adam, an ``nnx.MultiMetric`` (average loss, accuracy)
    updated in place, and the steps users write: train and eval in place, and train
    returning the model and optimizer."""
    import optax
    from flax import nnx

    adam = optax.adam(1e-3)  # one transformation: the same trace for every optimizer

    def make() -> tuple[Any, Any, Any]:
        model = _nnx_mlp()
        optimizer = nnx.Optimizer(model, adam, wrt=nnx.Param)
        metrics = nnx.MultiMetric(loss=nnx.metrics.Average("loss"), accuracy=nnx.metrics.Accuracy())
        return model, optimizer, metrics

    def loss_fn(model: Any, batch: Any) -> tuple[jax.Array, jax.Array]:
        logits = model(batch["x"])
        labels = batch["y"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), logits

    def train(model: Any, optimizer: Any, metrics: Any, batch: Any) -> jax.Array:
        grad_fn = nnx.value_and_grad(lambda model: loss_fn(model, batch), has_aux=True)
        (loss, logits), grads = grad_fn(model)
        metrics.update(loss=loss, logits=logits, labels=batch["y"])
        optimizer.update(model, grads)
        return loss

    def evaluate(model: Any, metrics: Any, batch: Any) -> jax.Array:
        loss, logits = loss_fn(model, batch)
        metrics.update(loss=loss, logits=logits, labels=batch["y"])
        return loss

    def train_returning(model: Any, optimizer: Any, batch: Any) -> tuple[Any, Any, jax.Array]:
        loss, grads = nnx.value_and_grad(lambda model: loss_fn(model, batch)[0])(model)
        optimizer.update(model, grads)
        return model, optimizer, loss

    def train_in_place(model: Any, optimizer: Any, batch: Any) -> jax.Array:
        return train_returning(model, optimizer, batch)[2]

    import numpy as np

    rng = np.random.default_rng(0)
    numpy_batch = {
        "x": rng.normal(size=(8, 16)).astype(np.float32),
        "y": rng.integers(0, 4, size=8).astype(np.int32),
    }
    return {
        "make": make,
        "train": train,
        "evaluate": evaluate,
        "train_returning": train_returning,
        "train_in_place": train_in_place,
        "numpy_batch": numpy_batch,
        "batch": {name: jnp.asarray(value) for name, value in numpy_batch.items()},
    }


# tinax's object per step function, built once and reused by every row (as a loop would)
_nnx_tinax: dict[Callable[..., Any], Any] = {}


def _nnx_wired(kind: str, step: Callable[..., Any], objects: tuple[Any, ...], returns: int) -> Any:
    """``step`` under contender ``kind``, called on ``objects`` (bound once for
    ``nnx.jit_partial``) and a batch: ``call(batch)`` runs one step and gives its last
    output, rebinding the ``returns`` objects the step returns first."""
    from flax import nnx

    held = list(objects)
    if kind == "nnx.jit_partial":
        bound = nnx.jit_partial(step, *objects, graph=False)

        def partial_call(batch: Any) -> Any:
            out = bound(batch)
            if returns:
                held[:returns] = out[:returns]
                return out[-1]
            return out

        return partial_call, held
    if kind == "tinax":
        jitted: Any = _nnx_tinax.get(step)
        if jitted is None:
            jitted = _nnx_tinax[step] = bounded_jit(step, max_traces=1, propagate_updates=True)
    else:
        jitted = nnx.jit(step, graph=kind != "nnx.jit graph=False")

    def call(batch: Any) -> Any:
        out = jitted(*held[: len(objects)], batch)
        if returns:
            held[:returns] = out[:returns]
            return out[-1]
        return out

    return call, held


def _nnx_state(objects: list[Any]) -> list[Any]:
    """Every leaf of the objects' state as a NumPy array (RNG keys as their data)."""
    import numpy as np
    from flax import nnx

    return [
        np.asarray(
            jax.random.key_data(leaf) if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key) else leaf
        )
        for leaf in jax.tree.leaves(nnx.state(tuple(objects)))
    ]


def _nnx_same(ours: list[Any], theirs: list[Any]) -> bool:
    import numpy as np

    return len(ours) == len(theirs) and all(
        np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(ours, theirs, strict=True)
    )


def _nnx_step_row(
    name: str,
    run: Callable[[str], tuple[Callable[[], Any], Callable[[], list[Any]]]],
    kinds: tuple[str, ...],
    steps: int = 1,
    count: int = _NNX_STEP_CALLS,
) -> Row:
    """A row of ``kinds``: ``run(kind)`` gives ``(call, state)`` on fresh objects, where
    ``call()`` runs the step (or a loop of ``steps`` steps; ``count`` calls are timed at a
    time) and ``state()`` reads every leaf. Each is checked against nnx.jit's outputs and
    state before it is timed: tinax must match; another contender that differs or refuses
    the step is left out and named."""
    left_out: list[str] = []
    reference: tuple[list[Any], list[Any]] | None = None
    contenders: dict[str, Setup] = {}
    for kind in ("nnx.jit", *kinds):
        try:
            call, state = run(kind)
            outputs = [call() for _ in range(_NNX_CHECK_STEPS)]
            results = (outputs, state())
        except Exception as error:  # the library refuses the step: said in the notes
            if kind == "tinax":
                raise
            left_out.append(f"  {kind}: not timed, refuses the step ({type(error).__name__})")
            continue
        if reference is None:
            reference = results
        elif not (_nnx_same(results[0], reference[0]) and _nnx_same(results[1], reference[1])):
            if kind == "tinax":
                raise AssertionError(f"{name}: tinax's results differ from nnx.jit's")
            left_out.append(f"  {kind}: not timed, its results differ from nnx.jit's")
            continue
        contenders[kind] = lambda call=call: repeated(call, count)

    # against graph=False: its step where it takes it, else its in-place step
    tree_mode = [name for name in contenders if name.startswith("nnx.jit graph=False")]
    held_to: dict[str, float | None] = {name: 0.5 for name in tree_mode[:1]}
    if "nnx.jit_partial" in contenders:
        held_to["nnx.jit_partial"] = None
    checked = "  every contender timed: results equal to nnx.jit's (outputs, every leaf)"
    return Row(
        name,
        baseline="nnx.jit",
        contenders=contenders,
        calls=count * steps,
        rounds=11,
        notes=lambda row: [checked, *left_out],
        against=held_to,
    )


def nnx_step_rows(quick: bool) -> list[Row]:
    """Cached calls of the nnx steps users run, on the MLP of `_nnx_mlp` (BatchNorm and
    Dropout, a batch of 8): train with ``nnx.Optimizer`` and an ``nnx.MultiMetric``
    updated in place (jax arrays, then NumPy batches as a data loader yields them); eval
    mode with the metrics; train returning the model and optimizer; and an epoch
    (``model.train()``, 40 train steps, ``model.eval()``, 10 eval steps: flax's two
    switches, about 4 ms each here, are in every contender's time)."""
    try:
        from flax import nnx  # noqa: F401
    except ImportError:
        text = "  not measured: flax (pip install -e '.[bench]')"
        return [
            Row(
                "nnx full steps",
                "jax.jit",
                {"jax.jit": lambda: lambda: None},
                notes=lambda row: [text],
            )
        ]
    parts = _nnx_classifier()
    make = parts["make"]
    every = ("tinax", "nnx.jit graph=False", "nnx.jit_partial")

    def in_place(step: Callable[..., Any], batch: Any, eval_mode: bool, objects: Any) -> Any:
        def run(kind: str) -> tuple[Callable[[], Any], Callable[[], list[Any]]]:
            everything = make()
            if eval_mode:
                everything[0].eval()
            call, held = _nnx_wired(kind, step, objects(everything), 0)
            return (lambda: call(batch)), (lambda: _nnx_state([*held, *everything]))

        return run

    def returning(kind: str) -> tuple[Callable[[], Any], Callable[[], list[Any]]]:
        everything = make()
        if kind == "nnx.jit graph=False, in place":  # what graph=False takes instead
            call, held = _nnx_wired(
                "nnx.jit graph=False", parts["train_in_place"], everything[:2], 0
            )
        else:
            call, held = _nnx_wired(kind, parts["train_returning"], everything[:2], 2)
        return (lambda: call(parts["batch"])), (lambda: _nnx_state(held))

    def epoch(kind: str) -> tuple[Callable[[], Any], Callable[[], list[Any]]]:
        everything = make()
        model = everything[0]
        train, _ = _nnx_wired(kind, parts["train"], everything, 0)
        evaluate, _ = _nnx_wired(kind, parts["evaluate"], (model, everything[2]), 0)
        batch = parts["batch"]

        def run_epoch() -> Any:
            model.train()
            for _ in range(40):
                train(batch)
            model.eval()
            for _ in range(9):
                evaluate(batch)
            return evaluate(batch)

        return run_epoch, lambda: _nnx_state(list(everything))

    all_three = lambda everything: everything  # noqa: E731
    return [
        _nnx_step_row(
            "nnx train step: Optimizer + MultiMetric in place",
            in_place(parts["train"], parts["batch"], False, all_three),
            every,
        ),
        _nnx_step_row(
            "nnx train step: Optimizer + MultiMetric in place, NumPy batch",
            in_place(parts["train"], parts["numpy_batch"], False, all_three),
            every,
        ),
        _nnx_step_row(
            "nnx eval step (eval mode): MultiMetric in place",
            in_place(parts["evaluate"], parts["batch"], True, lambda e: (e[0], e[2])),
            every,
        ),
        _nnx_step_row(
            "nnx train step returning model and optimizer",
            returning,
            ("tinax", "nnx.jit graph=False", "nnx.jit graph=False, in place", "nnx.jit_partial"),
        ),
        _nnx_step_row(
            "nnx epoch: model.train(), 40 train steps, model.eval(), 10 eval steps",
            epoch,
            every,
            steps=50,
            count=1,
        ),
    ]
