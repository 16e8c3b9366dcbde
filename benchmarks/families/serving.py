"""Serving: requests of long-tailed lengths through a small model step, each length padded
to a bucket (or not), as an inference server runs them.

10,000 requests (a seeded lognormal of token counts, clipped to 1..2048), each one call
of a small step: an embedding lookup and a dense tanh layer over ``int32[1, L]`` tokens, and
the mean of its outputs over the request's true length (a mask built from that length,
so that padding changes nothing). Three contenders serve the same requests, interleaved
request by request in a seeded random order (so that none runs right after itself more
often than another: its executable still warm in the CPU's caches):

- ``jax.jit``, each new length compiled as it comes (no padding);
- ``jax.jit`` with hand-written buckets: the user's own list of sizes, a pad to the
  smallest that holds the request, a warm-up call per bucket at start-up;
- tinax: ``bounded_jit(step, max_traces=len(sizes), buckets={"tokens": {1: sizes}})``
  with ``sizes = bucket_sizes(16, 2048, gap=256)``, ``precompile_buckets`` at start-up
  and ``pad_to_bucket`` per request.

Each request's time is split into its pad and its call. A round of the rows is a block
of 500 consecutive requests: a contender's time in it is the median of its requests (the
per-request row) or their mean (the whole-loop row, where compiles count).

Compiles are counted by JAX's own compile events (every XLA compile in the process,
whatever made it, attributed to the request that was running), beside the jitted
functions' cache sizes and tinax's ``compiles_used``.
"""

from __future__ import annotations

import bisect
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from harness import Row

from tinax.jit import Buckets, Dim, bounded_jit, bucket_sizes, pad_ragged, pad_to_bucket

FLOOR, CEILING, GAP = 16, 2048, 256
# The hand-written list a serving stack keeps beside its model: the same sizes as tinax's
# `bucket_sizes(16, 2048, gap=256)` (the row checks that they are equal).
HAND_SIZES = (16, 32, 64, 128, 256, 512, 768, 1024, 1280, 1536, 1792, 2048)
VOCAB, WIDTH, HIDDEN = 256, 32, 64
REQUESTS, BLOCK, SEED = 10_000, 500, 0
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"  # JAX's, one per XLA compile

HAND, TINAX, PER_LENGTH = "jax.jit, hand-written buckets", "tinax", "jax.jit, per length"
ONE_BY_ONE, WARM_UP = "jax.jit, lower+compile one by one", "jax.jit, warm-up call per size"

Params = dict[str, jax.Array]


def row_names(requests: int, block: int, buckets: int) -> dict[str, tuple[str, ...]]:
    """Each row's name and its contenders, baseline first: the loop's per-request row,
    its whole-loop row, and the start-up row."""
    return {
        f"serving loop: per request after start-up, {requests:,} requests of 1-{CEILING}"
        f" tokens (median per block of {block})": (HAND, TINAX),
        f"serving loop: all {requests:,} requests, compiles included"
        f" (mean per request, per block of {block})": (HAND, TINAX, PER_LENGTH),
        f"serving start-up: compile all {buckets} buckets of the step": (
            ONE_BY_ONE,
            TINAX,
            WARM_UP,
        ),
    }


def _step() -> Callable[[Params, jax.Array, jax.Array], jax.Array]:
    """A new serving step each time (a fresh function misses every JAX cache)."""

    def serve(params: Params, tokens: jax.Array, length: jax.Array) -> jax.Array:
        embedded = params["embed"][tokens]  # [1, L, WIDTH]
        hidden = jnp.tanh(embedded @ params["w"] + params["b"])  # [1, L, HIDDEN]
        mask = (jnp.arange(tokens.shape[1]) < length).astype(hidden.dtype)
        return jnp.sum(hidden * mask[None, :, None], axis=1) / length  # the true tokens' mean

    return serve


def _params() -> Params:
    keys = jax.random.split(jax.random.key(SEED))
    return {
        "embed": jax.random.normal(keys[0], (VOCAB, WIDTH)),
        "w": jax.random.normal(keys[1], (WIDTH, HIDDEN)) / WIDTH**0.5,
        "b": jnp.zeros(HIDDEN),
    }


def _requests(count: int) -> list[np.ndarray]:
    """``count`` requests of token ids: lengths a lognormal (median 33, one in a hundred
    over 330) clipped to 1..CEILING, as host NumPy arrays, as a server receives them."""
    rng = np.random.default_rng(SEED)
    lengths = np.clip(np.rint(rng.lognormal(3.5, 1.0, count)), 1, CEILING).astype(int)
    return [rng.integers(0, VOCAB, (1, int(n)), dtype=np.int32) for n in lengths]


def _hand_pad(tokens: np.ndarray) -> tuple[np.ndarray, int]:
    """The user's own pad: the smallest hand-written size that holds the request."""
    size = tokens.shape[1]
    padded = np.zeros((1, HAND_SIZES[bisect.bisect_left(HAND_SIZES, size)]), np.int32)
    padded[:, :size] = tokens
    return padded, size


class _Compiles:
    """Counts JAX's compile events (one listener for the process; JAX has no public way
    to remove one)."""

    count = 0
    _listening = False

    @classmethod
    def listen(cls) -> None:
        if not cls._listening:
            jax.monitoring.register_event_duration_secs_listener(cls._heard)
            cls._listening = True

    @classmethod
    def _heard(cls, event: str, duration: float, **_: Any) -> None:
        if event == COMPILE_EVENT:
            cls.count += 1


def _tokens_spec(size: int) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((1, size), jnp.int32)


_LENGTH_SPEC = jax.ShapeDtypeStruct((), jnp.int32)


def serving_rows(quick: bool) -> list[Row]:
    """The serving loop (per request after start-up, and the whole loop with its compiles)
    and the start-up (every bucket compiled, in threads or one by one)."""
    return [*_loop_rows(quick), _startup_row(quick)]


def _loop_rows(quick: bool) -> list[Row]:
    sizes = bucket_sizes(FLOOR, CEILING, gap=GAP)
    if tuple(sizes) != HAND_SIZES:
        raise AssertionError(f"bucket_sizes gave {sizes}, the hand-written list {HAND_SIZES}")
    requests = _requests(REQUESTS // 50 if quick else REQUESTS)  # quick: does it run
    block = BLOCK // 50 if quick else BLOCK
    params = _params()
    _Compiles.listen()

    # Start-up. The hand-written buckets: a warm-up call per size, as serving stacks do.
    by_length = jax.jit(_step())
    by_hand = jax.jit(_step())
    start = time.perf_counter()
    for size in HAND_SIZES:
        by_hand(params, np.zeros((1, size), np.int32), np.int32(1)).block_until_ready()
    hand_startup = time.perf_counter() - start
    ours = bounded_jit(_step(), max_traces=len(sizes), buckets={"tokens": {1: sizes}})
    start = time.perf_counter()
    compiled = ours.precompile_buckets(params, _tokens_spec(CEILING), _LENGTH_SPEC)
    tinax_startup = time.perf_counter() - start
    hand_cache, ours_compiles = by_hand._cache_size(), ours.compiles_used  # pyright: ignore

    def unpadded(tokens: np.ndarray) -> tuple[np.ndarray, int]:
        return tokens, tokens.shape[1]

    def tinax_pad(tokens: np.ndarray) -> tuple[np.ndarray, int]:
        """The call a loop makes, in a function as the hand-written pad is: a partial
        with keywords cost ~2 us more per request in the loop (its keywords merged)."""
        return pad_to_bucket(tokens, sizes, axis=1)

    # Each contender: its pad (none for the first), and its call of the padded tokens.
    serve: dict[str, tuple[Callable[[np.ndarray], tuple[np.ndarray, int]], Callable[..., Any]]]
    serve = {
        HAND: (_hand_pad, by_hand),
        TINAX: (tinax_pad, ours),
        PER_LENGTH: (unpadded, by_length),
    }

    times: dict[str, list[float]] = {name: [] for name in serve}
    pads: dict[str, list[float]] = {name: [] for name in serve}
    compiles = dict.fromkeys(serve, 0)
    # A seeded order per request: "A B C, then C B A" ran the first contender twice in a
    # row every other request (its executable warm), and the middle one never.
    orders = np.random.default_rng(SEED + 1).permuted(
        np.tile(np.arange(len(serve)), (len(requests), 1)), axis=1
    )
    names = list(serve)
    gc.collect()
    gc.disable()  # as the harness does: a collection must not land in one contender's time
    try:
        for index, tokens in enumerate(requests):
            for name in [names[i] for i in orders[index]]:
                pad, call = serve[name]
                before = _Compiles.count
                start = time.perf_counter()
                padded, size = pad(tokens)
                padded_at = time.perf_counter()
                call(params, padded, np.int32(size)).block_until_ready()
                times[name].append(time.perf_counter() - start)
                pads[name].append(padded_at - start)
                compiles[name] += _Compiles.count - before
    finally:
        gc.enable()
    # The same answers (padding masked out), after the loop so that its compiles are all
    # counted there: the shortest request, a middling one, the longest.
    by_size = sorted(requests, key=lambda tokens: tokens.shape[1])
    for tokens in (by_size[0], by_size[len(by_size) // 2], by_size[-1]):
        answers = []
        for pad, call in serve.values():
            padded, size = pad(tokens)
            answers.append(np.asarray(call(params, padded, np.int32(size))))
        for answer in answers[:-1]:
            np.testing.assert_allclose(answer, answers[-1], rtol=1e-5, atol=1e-6)

    calls = {n: [t - p for t, p in zip(times[n], pads[n], strict=True)] for n in serve}
    true = sum(tokens.shape[1] for tokens in requests)
    processed = sum(HAND_SIZES[bisect.bisect_left(HAND_SIZES, t.shape[1])] for t in requests)
    blocks = range(0, len(requests), block)
    medians = {n: [statistics.median(t[i : i + block]) for i in blocks] for n, t in times.items()}
    means = {n: [statistics.fmean(t[i : i + block]) for i in blocks] for n, t in times.items()}
    counted = {
        HAND: f"{by_hand._cache_size() - hand_cache} new executables",  # pyright: ignore
        TINAX: f"compiles_used {ours.compiles_used - ours_compiles} more",
        PER_LENGTH: f"{by_length._cache_size()} executables",  # pyright: ignore
    }

    def notes(row: Row) -> list[str]:
        return [
            f"  {len(requests):,} requests, {len(set(t.shape[1] for t in requests))} distinct"
            f" lengths; {len(sizes)} buckets {sizes[0]}..{sizes[-1]}, gap {GAP}",
            "  compiles after start-up (JAX's compile events): "
            + "; ".join(f"{n} {compiles[n]} ({counted[n]})" for n in serve),
            f"  padding: {processed - true:,} of {processed:,} tokens processed"
            f" ({(processed - true) / processed:.1%}); unpadded {true:,}",
            f"  start-up: hand-written warm-up calls {hand_startup:.2f} s,"
            f" tinax precompile_buckets {tinax_startup:.2f} s ({compiled} compiled,"
            f" compiles_used {ours_compiles})",
            "  whole loop: "
            + ", ".join(f"{n} {sum(times[n]):.2f} s" for n in serve)
            + "; per request (median of all): "
            + ", ".join(f"{n} {statistics.median(times[n]) * 1e6:.1f} us" for n in serve),
            "  of which the pad (median): "
            + ", ".join(f"{n} {statistics.median(pads[n]) * 1e6:.1f} us" for n in serve)
            + "; the call (median of the rest): "
            + ", ".join(f"{n} {statistics.median(calls[n]) * 1e6:.1f} us" for n in serve),
        ]

    (per_request, first), (whole, every), _ = row_names(len(requests), block, len(sizes)).items()
    return [
        _measured(per_request, {n: medians[n] for n in first}, notes),
        _measured(whole, {n: means[n] for n in every}, None),
    ]


def _measured(
    name: str, times: dict[str, list[float]], notes: Callable[[Row], list[str]] | None
) -> Row:
    """A row whose times the loop measured (one round per block of requests)."""
    row = Row(name, HAND, {n: lambda: lambda: None for n in times})
    row.times, row.rounds, row.measured, row.notes = times, len(times[TINAX]), True, notes
    return row


def _startup_row(quick: bool) -> Row:
    """Every bucket compiled at start-up: tinax's ``precompile_buckets`` (threads) against
    ``jax.jit``'s ``lower(...).compile()`` one size after the other, and against a warm-up
    call per size. A fresh step each round (nothing cached)."""
    sizes = bucket_sizes(FLOOR, CEILING, gap=GAP)
    params = _params()

    def one_by_one() -> Callable[[], object]:
        jitted = jax.jit(_step())

        def action() -> object:
            for size in sizes:
                jitted.lower(params, _tokens_spec(size), _LENGTH_SPEC).compile()
            return None

        return action

    def warm_up_calls() -> Callable[[], object]:
        jitted = jax.jit(_step())

        def action() -> object:
            for size in sizes:
                jitted(params, np.zeros((1, size), np.int32), np.int32(1)).block_until_ready()
            return None

        return action

    def precompiled() -> Callable[[], object]:
        step = bounded_jit(_step(), max_traces=len(sizes), buckets={"tokens": {1: sizes}})
        return lambda: step.precompile_buckets(params, _tokens_spec(CEILING), _LENGTH_SPEC)

    name, contenders = list(row_names(0, 0, len(sizes)).items())[2]  # the start-up row
    made = {ONE_BY_ONE: one_by_one, TINAX: precompiled, WARM_UP: warm_up_calls}
    return Row(name, ONE_BY_ONE, {n: made[n] for n in contenders}, rounds=5, repeat=1)


# --- a ragged batch padded on the host -------------------------------------------------------

HAND_BATCH = (1, 2, 4, 8)  # the hand-written batch buckets beside HAND_SIZES
TOKEN_BUDGET = 4096  # a batch's rows x its length bucket at most this


def _ragged_batches(count: int) -> list[list[np.ndarray]]:
    """``count`` batches of requests (the serving loop's lognormal lengths), each filled
    greedily up to 8 rows while rows x the length bucket stays within the token budget."""
    requests = [tokens[0] for tokens in _requests(count * 8)]
    batches: list[list[np.ndarray]] = []
    current: list[np.ndarray] = []
    for row in requests:
        longest = max([len(row), *(len(r) for r in current)])
        bucket = HAND_SIZES[bisect.bisect_left(HAND_SIZES, longest)]
        if current and (len(current) == 8 or (len(current) + 1) * bucket > TOKEN_BUDGET):
            batches.append(current)
            current = []
        current.append(row)
        if len(batches) == count:
            break
    return batches or [current]


def _hand_ragged(
    widths: tuple[int, ...], heights: tuple[int, ...]
) -> Callable[[list[np.ndarray]], tuple[np.ndarray, np.ndarray]]:
    """The pad a serving engineer writes, for these length and batch buckets: the
    buckets of the longest row and of the row count by bisect, np.zeros, then each row
    slice-assigned, and the true lengths beside it."""

    def pad(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        longest = max(len(row) for row in rows)
        width = widths[bisect.bisect_left(widths, longest)]
        height = heights[bisect.bisect_left(heights, len(rows))]
        padded = np.zeros((height, width), np.int32)
        lengths = np.zeros(height, np.int32)
        for index, row in enumerate(rows):
            padded[index, : len(row)] = row
            lengths[index] = len(row)
        return padded, lengths

    return pad


_hand_pad_ragged = _hand_ragged(HAND_SIZES, HAND_BATCH)


def ragged_pad_row(quick: bool) -> Row:
    """A ragged batch padded on the host: tinax's ``pad_ragged`` against the hand-written
    pad (np.zeros, then each row slice-assigned), over the same batches."""
    batches = _ragged_batches(20 if quick else 400)
    length, rows = Dim("length", bucket_sizes(FLOOR, CEILING, gap=GAP)), Dim("rows", HAND_BATCH)
    for batch in batches[:50]:  # the same arrays and lengths
        ours, theirs = pad_ragged(batch, length, batch_sizes=rows), _hand_pad_ragged(batch)
        np.testing.assert_array_equal(ours[0], theirs[0])
        np.testing.assert_array_equal(ours[1], theirs[1])

    def hand() -> Callable[[], object]:
        def action() -> object:
            for batch in batches:
                _hand_pad_ragged(batch)
            return None

        return action

    def tinax() -> Callable[[], object]:
        def action() -> object:
            for batch in batches:
                pad_ragged(batch, length, batch_sizes=rows)
            return None

        return action

    sizes = [len(batch) for batch in batches]
    longest = [max(len(row) for row in batch) for batch in batches]

    def notes(row: Row) -> list[str]:
        return [
            f"  {len(batches)} batches of 1-8 rows (mean {statistics.fmean(sizes):.1f}), longest"
            f" row median {statistics.median(longest):.0f} tokens; token budget {TOKEN_BUDGET}",
        ]

    return Row(
        f"ragged batch padded on the host: {len(batches)} batches of 1-8 rows (per batch)",
        "hand-written pad",
        {"hand-written pad": hand, TINAX: tinax},
        target=1.1,
        calls=len(batches),
        notes=notes,
    )


# --- a 2-D prefill: ragged batches under a token budget --------------------------------------

PREFILL_BATCH, PREFILL_BUDGET = (1, 2, 4, 8), 2048  # rows x length bucket at most the budget
PREFILL_SIZES = bucket_sizes(16, 512)  # (16, 32, 64, 128, 256, 512)
UNPADDED = "jax.jit, unpadded batches"


def _prefill_step() -> Callable[[Params, jax.Array, jax.Array], jax.Array]:
    """A new decoder-like prefill step each time: embedding, one causal self-attention
    masked by each row's own length, a tanh layer, each row's mean over its real tokens."""

    def prefill(params: Params, tokens: jax.Array, lengths: jax.Array) -> jax.Array:
        x = params["embed"][tokens]  # [B, L, WIDTH]
        positions = jnp.arange(tokens.shape[1])
        real = positions[None, :] < lengths[:, None]  # [B, L]
        scores = jnp.einsum("bqd,bkd->bqk", x, x) / WIDTH**0.5
        allowed = (positions[:, None] >= positions[None, :])[None] & real[:, None, :]
        attended = jax.nn.softmax(jnp.where(allowed, scores, -1e9), axis=-1) @ x
        hidden = jnp.tanh(attended @ params["w"] + params["b"])  # [B, L, HIDDEN]
        summed = jnp.sum(hidden * real[..., None], axis=1)
        return summed / jnp.maximum(lengths, 1)[:, None]  # an added row stays finite

    return prefill


def _prefill_batches(count: int) -> list[list[np.ndarray]]:
    """``count`` batches of lognormal requests (clipped to 1..512), filled greedily while
    the rows (their batch bucket) x the length bucket of the longest stay within budget."""
    rng = np.random.default_rng(SEED + 2)
    lengths = np.clip(np.rint(rng.lognormal(3.5, 1.0, count * 8)), 1, PREFILL_SIZES[-1])
    batches: list[list[np.ndarray]] = []
    current: list[np.ndarray] = []
    for n in lengths.astype(int):
        row = rng.integers(0, VOCAB, int(n), dtype=np.int32)
        longest = max([len(row), *(len(r) for r in current)])
        width = PREFILL_SIZES[bisect.bisect_left(PREFILL_SIZES, longest)]
        height = PREFILL_BATCH[bisect.bisect_left(PREFILL_BATCH, min(len(current) + 1, 8))]
        if current and (len(current) == 8 or height * width > PREFILL_BUDGET):
            batches.append(current)
            current = []
            if len(batches) == count:
                break
        current.append(row)
    return batches or [current]


_hand_prefill_pad = _hand_ragged(PREFILL_SIZES, PREFILL_BATCH)


def _unpadded(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """No buckets: the rows padded to the longest of them, as many rows as requests."""
    longest = max(len(row) for row in rows)
    padded = np.zeros((len(rows), longest), np.int32)
    for index, row in enumerate(rows):
        padded[index, : len(row)] = row
    return padded, np.array([len(row) for row in rows], np.int32)


def _prefill_buckets() -> tuple[Buckets, Dim, Dim]:
    batch, length = Dim("batch", PREFILL_BATCH), Dim("length", PREFILL_SIZES)
    buckets = Buckets(
        {"tokens": {0: batch, 1: length}, "lengths": {0: batch}},
        where=lambda batch, length: batch * length <= PREFILL_BUDGET,
    )
    return buckets, batch, length


_PREFILL_EXAMPLE = (
    jax.ShapeDtypeStruct((1, 16), jnp.int32),
    jax.ShapeDtypeStruct((1,), jnp.int32),
)


def _hand_combinations() -> list[tuple[int, int]]:
    return [(b, n) for b in PREFILL_BATCH for n in PREFILL_SIZES if b * n <= PREFILL_BUDGET]


def prefill_rows(quick: bool) -> list[Row]:
    """The 2-D prefill: per batch after start-up (tinax against a dict of hand-compiled
    executables and against plain jax.jit unpadded), the host pad alone, and the start-up
    (precompile_buckets against lower+compile one by one)."""
    buckets, batch, length = _prefill_buckets()
    batches = _prefill_batches(40 if quick else 2000)
    params = _params()
    _Compiles.listen()
    combinations = _hand_combinations()
    hand = {
        (b, n): jax.jit(_prefill_step())
        .lower(
            params, jax.ShapeDtypeStruct((b, n), jnp.int32), jax.ShapeDtypeStruct((b,), jnp.int32)
        )
        .compile()
        for b, n in combinations
    }
    step = bounded_jit(_prefill_step(), max_traces=buckets.combinations, buckets=buckets)
    step.precompile_buckets(params, *_PREFILL_EXAMPLE)
    unpadded = jax.jit(_prefill_step())

    def by_hand(tokens: np.ndarray, lengths: np.ndarray) -> jax.Array:
        return hand[tokens.shape](params, tokens, lengths)

    def tinax_pad(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return pad_ragged(rows, length, batch_sizes=batch)

    serve: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
        HAND: (_hand_prefill_pad, by_hand),
        TINAX: (tinax_pad, lambda tokens, lengths: step(params, tokens, lengths)),
        UNPADDED: (_unpadded, lambda tokens, lengths: unpadded(params, tokens, lengths)),
    }
    times: dict[str, list[float]] = {name: [] for name in serve}
    compiles = dict.fromkeys(serve, 0)
    orders = np.random.default_rng(SEED + 3).permuted(
        np.tile(np.arange(len(serve)), (len(batches), 1)), axis=1
    )
    names = list(serve)
    gc.collect()
    gc.disable()
    try:
        for index, rows in enumerate(batches):
            for name in [names[i] for i in orders[index]]:
                pad, call = serve[name]
                before = _Compiles.count
                start = time.perf_counter()
                tokens, lengths = pad(rows)
                call(tokens, lengths).block_until_ready()
                times[name].append((time.perf_counter() - start) / len(rows))  # per request
                compiles[name] += _Compiles.count - before
    finally:
        gc.enable()
    for rows in batches[:5]:  # the same answers, the added rows dropped
        answers = [np.asarray(call(*pad(rows)))[: len(rows)] for pad, call in serve.values()]
        for answer in answers[1:]:
            np.testing.assert_allclose(answer, answers[0], rtol=1e-4, atol=1e-5)

    block = max(1, len(batches) // 20)
    blocks = range(0, len(batches), block)
    medians = {n: [statistics.median(t[i : i + block]) for i in blocks] for n, t in times.items()}
    sizes = [len(rows) for rows in batches]

    def notes(row: Row) -> list[str]:
        return [
            f"  {len(batches)} batches of 1-8 requests (mean {statistics.fmean(sizes):.1f}),"
            f" lengths 1-{PREFILL_SIZES[-1]}; {len(combinations)} (B, L) buckets under"
            f" {PREFILL_BUDGET} tokens",
            "  JAX compiles after start-up: "
            + "; ".join(f"{n} {compiles[n]}" for n in serve)
            + " (target: tinax 0)",
        ]

    loop = Row(
        f"prefill, 2-D buckets: per request after start-up ({len(batches)} ragged batches,"
        f" median per block of {block})",
        HAND,
        {n: lambda: lambda: None for n in serve},
        target=1.02,
    )
    loop.times, loop.rounds, loop.measured, loop.notes = medians, len(medians[TINAX]), True, notes

    def hand_pads() -> Callable[[], object]:
        return lambda: [_hand_prefill_pad(rows) for rows in batches]

    def tinax_pads() -> Callable[[], object]:
        return lambda: [pad_ragged(rows, length, batch_sizes=batch) for rows in batches]

    pads = Row(
        f"prefill, 2-D buckets: host pad of {len(batches)} ragged batches (per batch)",
        "hand-written pad",
        {"hand-written pad": hand_pads, TINAX: tinax_pads},
        target=1.1,
        calls=len(batches),
    )

    def one_by_one() -> Callable[[], object]:
        jitted = jax.jit(_prefill_step())

        def action() -> object:
            for b, n in combinations:
                spec = jax.ShapeDtypeStruct((b, n), jnp.int32)
                jitted.lower(params, spec, jax.ShapeDtypeStruct((b,), jnp.int32)).compile()
            return None

        return action

    def precompiled() -> Callable[[], object]:
        fresh = bounded_jit(_prefill_step(), max_traces=buckets.combinations, buckets=buckets)
        return lambda: fresh.precompile_buckets(params, *_PREFILL_EXAMPLE)

    startup = Row(
        f"prefill start-up: compile all {len(combinations)} (B, L) buckets",
        ONE_BY_ONE,
        {ONE_BY_ONE: one_by_one, TINAX: precompiled},
        target=0.8,
        rounds=5,
        repeat=1,
    )
    return [loop, pads, startup]
