"""``precompile_buckets``: every combination of an object's buckets traced and lowered
now in the calling thread, then compiled in threads (XLA releases the GIL while it
compiles), each one logged as it ends."""

from __future__ import annotations

import logging
import os
import threading
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
    # Traced and lowered here, one after the other: tracing and lowering are Python under
    # the GIL, and threads doing them only wait on each other. Then compiled by this
    # thread and the workers from one queue: XLA releases the GIL while it compiles.
    lowered: list[Any] = [None] * total
    failed: list[BaseException | None] = [None] * total
    seconds = [0.0] * total  # each one's trace and lowering, then its compile added
    traced = 0
    with counting.collecting() as made:  # the traces of this thread: its own
        for index, call in enumerate(calls):
            started = time.perf_counter()
            try:
                lowered[index] = owner._lowered(*call)[3]
            except Exception as error:
                failed[index] = error
            seconds[index] = time.perf_counter() - started
        traced = sum(1 for ledger_of, _ in made if ledger_of is ledger)  # not a nested one's
    queue = iter([index for index in range(total) if failed[index] is None])
    lock = threading.Lock()

    def compile_some() -> None:
        nonlocal done
        while True:
            with lock:
                index = next(queue, None)
            if index is None:
                return
            started = time.perf_counter()
            try:
                owner._under_mesh(lowered[index].compile)
            except Exception as error:
                failed[index] = error
                continue
            finally:
                lowered[index] = None  # the lowered module freed as soon as it is compiled
            if logger.isEnabledFor(logging.INFO):
                took = seconds[index] + time.perf_counter() - started
                sizes = outside.combination_text(buckets, combinations[index])
                with lock:
                    done += 1
                    count = done
                logger.info(
                    "%s: bucket %d of %d compiled in %.2f s (%s)", where, count, total, took, sizes
                )

    helpers = max(0, min(total, os.cpu_count() or 1, _MAX_WORKERS) - 1)
    workers = [threading.Thread(target=compile_some, name="tinax-buckets") for _ in range(helpers)]
    for worker in workers:
        worker.start()
    compile_some()
    for worker in workers:
        worker.join()
    for error in failed:  # the first combination that failed, in order
        if error is not None:
            raise error
    return traced
