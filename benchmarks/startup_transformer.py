"""A realistic start-up, for the warm-start rows of `benchmarks/run.py`: a small
transformer's training and eval steps, whose tracing and lowering take longer than
the program's loading.

    python benchmarks/startup_transformer.py [--signatures PATH] [--cache DIR]

An equinox transformer (4 layers, width 64, 4 heads, vocabulary 256, context 64:
about 230k parameters), trained with ``optax.adamw``: a training step (returns the
model, the optimizer state and the loss) and an eval step (loss and accuracy), both
``bounded_jit(..., max_traces=1, static_nonarrays=True)``. Loading is building the
model and the optimizer state and making a token dataset (numpy), then 0.3 s
standing for reading it from storage. The first step is one training step and one
eval step. With ``--signatures`` it starts warm (`tinax.warm_start`); with
``--cache`` it uses JAX's persistent compilation cache in that folder.

Prints one line of phases, in seconds: ``import I loading L first_step F total T``,
where ``first_step`` is everything that is neither import nor loading (building
the steps, the first training and eval steps done); then what JAX's compile events
measured in the main thread during the first step: ``trace``, ``lower`` and
``compile`` (XLA's compile, a load from the persistent cache, or warm start's answer:
the wait for the executable compiled ahead), and the steps' ``compiles_used`` and
``cache_loads``, summed. The loading starts JAX's backend (the model's
initialisation), so warm start's compiles ahead run during it.
"""

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import tinax  # noqa: E402
from tinax.jit import bounded_jit  # noqa: E402

IMPORTED = time.perf_counter()

VOCABULARY, WIDTH, HEADS, LAYERS, CONTEXT, BATCH = 256, 64, 4, 4, 64, 16
READING_S = 0.3  # reading the dataset from storage
EVENTS = {  # JAX's own compile events, one per stage of each call's first use
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}
OPTIMIZER = optax.adamw(3e-4)  # module-level: recorded by reference


class Block(eqx.Module):
    norm1: eqx.nn.LayerNorm
    attention: eqx.nn.MultiheadAttention
    norm2: eqx.nn.LayerNorm
    up: eqx.nn.Linear
    down: eqx.nn.Linear

    def __init__(self, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.norm1 = eqx.nn.LayerNorm(WIDTH)
        self.attention = eqx.nn.MultiheadAttention(HEADS, WIDTH, key=k1)
        self.norm2 = eqx.nn.LayerNorm(WIDTH)
        self.up = eqx.nn.Linear(WIDTH, 4 * WIDTH, key=k2)
        self.down = eqx.nn.Linear(4 * WIDTH, WIDTH, key=k3)

    def __call__(self, x, mask):
        h = jax.vmap(self.norm1)(x)
        x = x + self.attention(h, h, h, mask=mask)
        h = jax.vmap(self.norm2)(x)
        return x + jax.vmap(lambda v: self.down(jax.nn.gelu(self.up(v))))(h)


class Transformer(eqx.Module):
    embed: eqx.nn.Embedding
    position: jax.Array
    blocks: list[Block]
    norm: eqx.nn.LayerNorm
    head: eqx.nn.Linear

    def __init__(self, key):
        keys = jax.random.split(key, LAYERS + 3)
        self.embed = eqx.nn.Embedding(VOCABULARY, WIDTH, key=keys[0])
        self.position = jax.random.normal(keys[1], (CONTEXT, WIDTH)) * 0.02
        self.blocks = [Block(k) for k in keys[2:-1]]
        self.norm = eqx.nn.LayerNorm(WIDTH)
        self.head = eqx.nn.Linear(WIDTH, VOCABULARY, key=keys[-1])

    def __call__(self, tokens):
        x = jax.vmap(self.embed)(tokens) + self.position
        mask = jnp.tril(jnp.ones((CONTEXT, CONTEXT), bool))
        for block in self.blocks:
            x = block(x, mask)
        return jax.vmap(lambda v: self.head(self.norm(v)))(x)


def loss_of(model, tokens, targets):
    logits = jax.vmap(model)(tokens)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def train_step(model, opt_state, tokens, targets):
    loss, grads = eqx.filter_value_and_grad(loss_of)(model, tokens, targets)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


def eval_step(model, tokens, targets):
    logits = jax.vmap(model)(tokens)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()
    return loss, (logits.argmax(-1) == targets).mean()


def _listened() -> dict[str, float]:
    """The seconds of each stage JAX's events report in the main thread while
    ``parts["on"]`` is set (the first step)."""
    parts = dict.fromkeys(EVENTS.values(), 0.0)
    parts["on"] = 0.0
    main = threading.main_thread()

    def listener(event, duration, **_):
        part = EVENTS.get(event)
        if part is not None and parts["on"] and threading.current_thread() is main:
            parts[part] += duration

    jax.monitoring.register_event_duration_secs_listener(listener)
    return parts


def main() -> None:
    parts = _listened()
    parser = argparse.ArgumentParser()
    parser.add_argument("--signatures")
    parser.add_argument("--cache")
    options = parser.parse_args()
    if options.cache:
        jax.config.update("jax_compilation_cache_dir", options.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if options.signatures:
        tinax.warm_start(options.signatures)
    train = bounded_jit(train_step, max_traces=1, static_nonarrays=True)
    evaluate = bounded_jit(eval_step, max_traces=1, static_nonarrays=True)

    loading = time.perf_counter()
    model = Transformer(jax.random.key(0))
    opt_state = OPTIMIZER.init(eqx.filter(model, eqx.is_array))
    corpus = np.random.default_rng(0).integers(0, VOCABULARY, 1 << 20, dtype=np.int32)
    windows = corpus[: (len(corpus) // (CONTEXT + 1)) * (CONTEXT + 1)].reshape(-1, CONTEXT + 1)
    time.sleep(READING_S)
    tokens, targets = jnp.asarray(windows[:BATCH, :-1]), jnp.asarray(windows[:BATCH, 1:])
    jax.block_until_ready((model, opt_state, tokens))
    loaded = time.perf_counter()

    parts["on"] = 1.0
    model, opt_state, loss = train(model, opt_state, tokens, targets)
    eval_loss, accuracy = evaluate(model, tokens, targets)
    jax.block_until_ready((model, opt_state, loss, eval_loss, accuracy))
    done = time.perf_counter()
    parts["on"] = 0.0
    total = done - STARTED
    phases = (
        IMPORTED - STARTED,
        loaded - loading,
        total - (IMPORTED - STARTED) - (loaded - loading),
    )
    print(
        "import {:.4f} loading {:.4f} first_step {:.4f} total {:.4f}".format(*phases, total)
        + " trace {trace:.4f} lower {lower:.4f} compile {compile:.4f}".format(**parts)
        + f" compiles_used {train.compiles_used + evaluate.compiles_used}"
        + f" cache_loads {train.cache_loads + evaluate.cache_loads}"
    )


if __name__ == "__main__":
    main()
