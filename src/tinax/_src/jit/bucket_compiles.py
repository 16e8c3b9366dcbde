"""``precompile_buckets``: every combination of an object's buckets traced and compiled
now, in threads (XLA releases the GIL while it compiles), each one logged as it ends."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import time
from typing import Any

from tinax._src.buckets import declared, outside
from tinax._src.budget import counting
from tinax._src.diagnosis import names
from tinax._src.observe.log import logger

# At most this many compiles at once: XLA's CPU and GPU compilers run threads of their own.
_MAX_WORKERS = 8


def precompile_buckets(owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Traces and compiles ``owner`` for every combination of its buckets, with the
    other dimensions of ``args``/``kwargs``; returns how many signatures it traced: each
    combination counted where this call traced it, not where another thread (a warm
    start, a concurrent call) traced one meanwhile."""
    api = type(owner).__name__
    buckets: declared.Declared | None = owner._plan.buckets
    if buckets is None:
        raise ValueError(
            f"{api}: precompile_buckets compiles the buckets an object declares; this one "
            "declares none (buckets=None)."
        )
    signature = owner._signature.get()
    combinations = list(declared.combinations(buckets))
    calls = [
        declared.example_arguments(buckets, signature, taken, args, kwargs)
        for taken in combinations
    ]
    _, _, where = names.where(owner.function)
    total = len(calls)
    done = 0

    ledger = owner._ledger

    def compile_one(index: int) -> int:
        nonlocal done
        started = time.perf_counter()
        with counting.collecting() as made:  # the traces of this thread: its own
            owner._precompiled(*calls[index])
        seconds = time.perf_counter() - started
        if logger.isEnabledFor(logging.INFO):
            sizes = outside.combination_text(buckets, combinations[index])
            done += 1  # under the GIL: a progress count, not an order
            logger.info(
                "%s: bucket %d of %d compiled in %.2f s (%s)", where, done, total, seconds, sizes
            )
        return sum(1 for traced, _ in made if traced is ledger)  # not a nested object's

    workers = max(1, min(total, os.cpu_count() or 1, _MAX_WORKERS))
    with concurrent.futures.ThreadPoolExecutor(workers, "tinax-buckets") as pool:
        futures = [pool.submit(compile_one, index) for index in range(total)]
        concurrent.futures.wait(futures)
    for future in futures:  # the first combination that failed, in order
        error = future.exception()
        if error is not None:
            raise error
    return sum(future.result() for future in futures)
