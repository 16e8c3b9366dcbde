"""Serving and eval loops on shape buckets: sizes declared, compiled at start-up, padded to.

Run with:  python examples/serving.py
Its output is pasted into docs/serving.md (a test keeps the two equal, timings aside).
"""

import logging
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np

from tinax.jit import (
    Buckets,
    Dim,
    TraceBudgetError,
    batched_jit,
    bounded_jit,
    bucket_for,
    bucket_sizes,
    budgets,
    pad_ragged,
    pad_to_bucket,
)
from tinax.testing import no_new_compiles


def section(title):
    print(f"\n=== {title}")


VOCAB, WIDTH = 50, 8
weights = {
    "embed": jax.random.normal(jax.random.key(0), (VOCAB, WIDTH)),
    "out": jax.random.normal(jax.random.key(1), (WIDTH, VOCAB)),
}


def serve(weights, batch):
    """Next-token logits of each sequence, from the mean of its real tokens' embeddings."""
    mask = batch["mask"]
    embedded = weights["embed"][batch["tokens"]] * mask[..., None]
    return embedded.sum(axis=1) / mask.sum(axis=1, keepdims=True) @ weights["out"]


def padded_request(tokens, sizes):
    """A request's tokens padded to their bucket, and the mask of the real ones."""
    padded, length = pad_to_bucket(tokens, sizes, axis=1)
    mask = np.broadcast_to(np.arange(padded.shape[1]) < length, padded.shape)
    return {"tokens": padded, "mask": mask.astype(np.float32)}


def request(length, rows=4):
    return np.random.default_rng(length).integers(0, VOCAB, (rows, length), dtype=np.int32)


section("declaring the buckets")
sizes = bucket_sizes(16, 128)
step = bounded_jit(serve, max_traces=len(sizes), buckets={"batch": {1: sizes}})
print(sizes)
print(step.buckets)

section("start-up: every bucket compiled ahead")
logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(name)s: %(message)s")
logging.getLogger("tinax").setLevel(logging.INFO)
example = {  # the other dimensions: 4 rows; the length (axis 1) is the buckets'
    "tokens": jax.ShapeDtypeStruct((4, 1), jnp.int32),
    "mask": jax.ShapeDtypeStruct((4, 1), jnp.float32),
}
print(step.precompile_buckets(weights, example))
logging.getLogger("tinax").setLevel(logging.ERROR)  # the refusals below are printed
print(budgets())

section("the serving loop: any length, padded, no compile")
reference = jax.jit(serve)  # unpadded: one compile per length
lengths = [5, 23, 40, 77, 128, 17, 64]
compiled = step.compiles_used
with no_new_compiles():
    answers = [step(weights, padded_request(request(n), sizes)) for n in lengths]
print(f"compiles_used: {compiled} before the loop, {step.compiles_used} after")
expected = [
    reference(weights, {"tokens": request(n), "mask": np.ones((4, n), np.float32)}) for n in lengths
]
print(all(jnp.allclose(a, e, atol=1e-5) for a, e in zip(answers, expected, strict=True)))

section("a request longer than the largest bucket")
try:
    padded_request(request(200), sizes)
except ValueError as error:
    print(f"ValueError: {error}")

section("a call left unpadded")
unpadded = {"tokens": request(40), "mask": np.ones((4, 40), np.float32)}
try:
    step(weights, unpadded)
except TraceBudgetError as error:
    print(f"TraceBudgetError: {error}")

section("explain, before the call")
print(step.explain(weights, unpadded))

section("an eval loop: the last batch is partial")


def example_loss(weights, example):
    """One example's cross-entropy of its next token."""
    logits = serve(weights, {"tokens": example["tokens"][None], "mask": example["mask"][None]})
    return -jax.nn.log_softmax(logits[0])[example["next"]]


BATCH = 32
data = {  # 100 examples: three batches of 32 and one of 4
    "tokens": request(16, rows=100),
    "mask": np.ones((100, 16), np.float32),
    "next": np.arange(100, dtype=np.int32) % VOCAB,
}
evaluate = batched_jit(
    example_loss, in_axes=(None, 0), max_traces=1, buckets={"example": {0: (BATCH,)}}
)
total = 0.0
for start in range(0, 100, BATCH):
    batch = {name: column[start : start + BATCH] for name, column in data.items()}
    # The padded rows get a mask of ones, so that their (unused) losses stay finite.
    fills = {"tokens": 0, "mask": 1.0, "next": 0}
    padded = {
        name: pad_to_bucket(batch[name], (BATCH,), fill=fill)[0] for name, fill in fills.items()
    }
    losses = evaluate(weights, padded)
    total += float(losses[: len(batch["next"])].sum())  # the padded rows' losses dropped
unpadded = jax.vmap(example_loss, in_axes=(None, 0))(weights, data)
print(f"mean loss {total / 100:.4f}, unpadded {float(unpadded.mean()):.4f}")
print(f"traces_used={evaluate.traces_used}, compiles_used={evaluate.compiles_used}")

section("a decode loop: the sequence grows by one token a step")
decode = bounded_jit(serve, max_traces=len(sizes), buckets={"batch": {1: sizes}})
sequence = request(3, rows=1)  # the prompt
for _ in range(100):
    logits = decode(weights, padded_request(sequence, sizes))
    next_token = np.asarray(jnp.argmax(logits, axis=-1), np.int32)
    sequence = np.concatenate([sequence, next_token[:, None]], axis=1)
print(f"{sequence.shape[1] - 3} tokens decoded, to length {sequence.shape[1]}")
print(f"traces_used={decode.traces_used}, compiles_used={decode.compiles_used}")

section("ragged batches: rows of different lengths, a token budget")
logging.getLogger("tinax").setLevel(logging.ERROR)  # its compiles and refusal not logged
# The page's code, as pasted there (its imports are this file's).
rows, length = Dim("rows", (1, 2, 4, 8)), Dim("length", (16, 32, 64, 128))
buckets = Buckets(
    {"tokens": {0: rows, 1: length}, "lengths": {0: rows}},
    where=lambda rows, length: rows * length <= 256,  # at most 256 tokens a batch
)


def prefill(embed, tokens, lengths):
    """Each row's mean embedding over its own real tokens (lengths: one per row)."""
    mask = jnp.arange(tokens.shape[1]) < lengths[:, None]
    summed = (embed[tokens] * mask[..., None]).sum(axis=1)
    return summed / jnp.maximum(lengths, 1)[:, None]  # an added row (length 0) stays finite


step = bounded_jit(prefill, max_traces=buckets.combinations, buckets=buckets)
embed = jax.random.normal(jax.random.key(0), (50, 8))
example = (jax.ShapeDtypeStruct((1, 1), jnp.int32), jax.ShapeDtypeStruct((1,), jnp.int32))
print(f"{buckets.combinations} of 16 combinations can occur;", end=" ")
print(f"{step.precompile_buckets(embed, *example)} compiled")

reference = jax.jit(prefill)  # unpadded: one compile per shape
rng = np.random.default_rng(0)
for batch in ([5, 23, 9], [70], [3, 1, 16, 2, 8, 11, 4]):
    requests = [rng.integers(0, 50, n, dtype=np.int32) for n in batch]
    tokens, lengths = pad_ragged(requests, length, batch_sizes=rows)
    answers = step(embed, tokens, lengths)[: len(requests)]  # the added rows dropped
    expected = [reference(embed, r[None], np.array([len(r)], np.int32))[0] for r in requests]
    same = bool(jnp.allclose(answers, jnp.stack(expected), atol=1e-5))
    print(f"{batch} -> tokens {tokens.shape}, lengths {lengths.tolist()}: same answers {same}")
print(f"traces_used={step.traces_used}; 70 tokens go in the bucket {bucket_for(70, length)}")

tokens, lengths = pad_ragged([np.ones(100, np.int32)] * 3, length, batch_sizes=rows)
try:  # 4 rows x 128: 512 tokens, a combination where rules out
    step(embed, tokens, lengths)
except TraceBudgetError as error:
    print(str(error).splitlines()[3])
