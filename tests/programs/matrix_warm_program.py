"""The warm-restart column of `tests/test_feature_matrix.py`: one object of every mode, in a
fresh process, run twice by the test with one manifest and one persistent cache.

    python matrix_warm_program.py FOLDER

Builds every object, waits until warm start's compiles ahead (if any) are done, then
calls. Prints one JSON line: per mode, the result compared with the reference jit's,
tinax's counts and JAX's (from its events, in every thread: `matrix_cases.jax_counts`
with the cache on), the compiles of the calling thread that JAX's own compile never ran
(answered by an executable compiled ahead), JAX's log of its cache for the mode's module
in other threads (the compiles ahead), the traces JAX made in the calling thread during
the first call, and whether every message was true. A mode with shape buckets
(`matrix_cases.BUCKETED`) calls ``precompile_buckets`` and then one call per bucket;
its line also says what ``precompile_buckets`` returned, and the traces and compiles JAX
made in the calls.
"""

import json
import logging
import sys
from contextlib import ExitStack

import jax

import tinax
from helpers import matrix_cases as cases
from programs.warm_start_program import await_compiles_ahead
from tinax.jit import Budgets


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.texts = []

    def emit(self, record):
        self.texts.append(record.getMessage())


def main(folder):
    # Set here, never at import: pytest's --doctest-modules imports this file in the test
    # session, where a cache folder set at import would turn every later compile into a
    # persistent-cache write and load.
    jax.config.update("jax_compilation_cache_dir", f"{folder}/cache")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    records = Records()
    logging.getLogger("tinax").addHandler(records)
    logging.getLogger("tinax").setLevel(logging.DEBUG)
    expected = {name: mode.expected(cases.SMALL) for name, mode in cases.MODES.items()}
    arguments = {name: mode.arguments(cases.SMALL) for name, mode in cases.MODES.items()}
    sizes = cases.BUCKET_SIZES
    bucket_calls = {
        name: [(mode.arguments(size), mode.expected(size)) for size in sizes]
        for name, mode in cases.BUCKETED.items()
    }
    tinax.warm_start(f"{folder}/signatures.json")
    with ExitStack() as stack:
        counts = {
            name: stack.enter_context(cases.jax_counts(mode.jax_name, cache=True))
            for name, mode in {**cases.MODES, **cases.BUCKETED}.items()
        }
        objects = {name: mode.build(1) for name, mode in cases.MODES.items()}
        objects.update({name: mode.build(len(sizes)) for name, mode in cases.BUCKETED.items()})
        await_compiles_ahead()
        out = {}
        for name, mode in cases.BUCKETED.items():
            example, _ = bucket_calls[name][0]
            made = counts[name].traces, counts[name].compiles
            new = objects[name].precompile_buckets(*example[0], **example[1])
            out[name] = {"precompile_buckets": new}
            before = counts[name].traces_here, counts[name].traces, counts[name].compiles
            try:
                for call, want in bucket_calls[name]:
                    cases.assert_same(mode.call(objects[name], call), want)
                same = True
            except AssertionError as error:
                same = repr(error)
            after = counts[name].traces_here, counts[name].traces, counts[name].compiles
            out[name].update(
                {
                    "same result": same,
                    "made by precompile_buckets": [before[1] - made[0], before[2] - made[1]],
                    "made in the calls": [
                        now - then for now, then in zip(after, before, strict=True)
                    ],
                }
            )
        for name, mode in cases.MODES.items():
            before = counts[name].traces_here
            result = mode.call(objects[name], arguments[name])
            try:
                cases.assert_same(result, expected[name])
                same = True
            except AssertionError as error:
                same = repr(error)
            out[name] = {
                "same result": same,
                "body runs in the call": counts[name].traces_here - before,
            }
    tinax.save_signatures(f"{folder}/signatures.json")
    for name, obj in objects.items():
        out[name]["tinax"] = list(cases.facts(obj))
        out[name]["jax"] = list(counts[name].facts())
        count = counts[name]
        out[name]["answered ahead"] = count.answered
        out[name]["cache elsewhere"] = [count.hits_elsewhere, count.misses_elsewhere]
        try:
            cases.assert_true_to(obj, str(Budgets((obj,))))
            for text in records.texts:
                cases.assert_no_internals(text)
            out[name]["clean"] = True
        except AssertionError as error:
            out[name]["clean"] = repr(error)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
