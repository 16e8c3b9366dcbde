"""Shape buckets: a call inside the declared sizes is JAX's own cached call; a trace
outside them is named before it traces (refused, or warned about or logged and run, as
the overrun policy says); ``explain`` says so; ``precompile_buckets`` compiles every
combination ahead, in threads; ``budgets()`` shows them."""

import logging
import pickle
import threading
import warnings

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tinax.jit import (
    BatchedJit,
    TraceBudgetError,
    TraceBudgetWarning,
    batched_jit,
    bounded_jit,
    budgets,
)
from tinax.testing import no_new_compiles, no_new_traces

SIZES = (16, 32, 64)


def masked_sum(tokens, mask):
    return (tokens * mask).sum(-1)


def make_step(**options):
    """Two arguments, each its own bucket dimension: 3 x 3 combinations."""
    options.setdefault("max_traces", len(SIZES) ** 2)
    return bounded_jit(masked_sum, buckets={"tokens": {1: SIZES}, "mask": {1: SIZES}}, **options)


def served(step, length, batch=2):
    """A call with ``length`` tokens on axis 1 of both arguments."""
    return step(jnp.ones((batch, length)), jnp.ones((batch, length)))


def tied(**options):
    """One bucket dimension for both arrays of a dict argument."""
    options.setdefault("max_traces", len(SIZES))

    def total(batch):
        return (batch["tokens"] * batch["mask"]).sum(-1)

    return bounded_jit(total, buckets={"batch": {1: SIZES}}, **options)


def batch_of(length, mask_length=None):
    return {
        "tokens": jnp.ones((2, length)),
        "mask": jnp.ones((2, length if mask_length is None else mask_length)),
    }


class TestInsideTheBuckets:
    def test_each_bucket_traces_once_and_a_cached_call_is_jax_jits_own(self):
        step = tied()
        for length in (16, 32, 16, 64, 32):
            out = step(batch_of(length))
            np.testing.assert_array_equal(out, jax.jit(step.function)(batch_of(length)))
        assert step.traces_used == 3
        assert type(step).__call__.fget(step) is step._jitted  # nothing on the cached path

    def test_a_key_naming_an_argument_covers_every_array_under_it(self):
        step = tied()
        step(batch_of(16))
        with pytest.raises(TraceBudgetError, match="outside its shape buckets") as info:
            step(batch_of(16, mask_length=20))
        assert (
            "  batch, axis 1: its arrays differ (batch['mask'] 20, batch['tokens'] 16); "
            "the arrays under one key share a bucket"
        ) in str(info.value)


class TestOutsideTheBuckets:
    def test_the_error_names_path_axis_size_buckets_and_the_bucket_to_pad_to(self):
        step = make_step()
        served(step, 16)
        with pytest.raises(TraceBudgetError) as info:
            served(step, 37)
        line = served.__code__.co_firstlineno + 2  # the call in `served`
        assert str(info.value) == (
            f"masked_sum (tests/test_buckets.py:{masked_sum.__code__.co_firstlineno}) was "
            "called outside its shape buckets: max_traces=9, traces_used=1; this call would "
            "be trace 2.\n"
            "buckets= declares the sizes this function traces; this call was refused before "
            "tracing, and calls whose sizes are buckets still run.\n"
            "Outside the buckets (2 sizes):\n"
            "  tokens, axis 1: 37 is no bucket of (16, 32, 64): pad it to 64 (tokens: f32[2,37])\n"
            "  mask, axis 1: 37 is no bucket of (16, 32, 64): pad it to 64 (mask: f32[2,37])\n"
            "How to fix:\n"
            "  pad before the call: tokens, length = tinax.jit.pad_to_bucket(tokens, (16, 32, 64), "
            "axis=1) (length: its true size, to mask the padding)\n"
            "  pad before the call: mask, length = tinax.jit.pad_to_bucket(mask, (16, 32, 64), "
            "axis=1) (length: its true size, to mask the padding)\n"
            "  or add the size to buckets= and raise max_traces with it\n"
            f"Called from tests/test_buckets.py:{line}."
        )
        assert step.traces_used == 1  # refused before tracing: nothing counted
        served(step, 32)  # and the buckets still trace
        assert step.traces_used == 2

    def test_a_size_larger_than_the_largest_bucket_says_so(self):
        step = make_step()
        with pytest.raises(TraceBudgetError) as info:
            served(step, 65)
        text = str(info.value)
        assert (
            "  tokens, axis 1: 65 is larger than the largest bucket, 64: split the input, "
            "or add a larger bucket"
        ) in text
        assert (
            "How to fix:\n  tokens, axis 1: split the input into pieces of at most 64 (the largest "
            "bucket), or add a larger bucket to buckets= and raise max_traces with it\n"
            "  mask, axis 1: split"
        ) in text
        assert "pad it to" not in text

    def test_refused_within_the_budget_too(self):
        step = make_step(max_traces=10)
        with pytest.raises(TraceBudgetError, match="this call would be trace 1"):
            served(step, 17)
        assert step.traces_used == 0

    def test_the_error_pickles_with_its_message_and_facts(self):
        step = make_step()
        with pytest.raises(TraceBudgetError) as info:
            served(step, 17)
        back = pickle.loads(pickle.dumps(info.value))
        assert str(back) == str(info.value)
        assert (back.max_traces, back.traces_used, back.closest) == (9, 0, None)
        assert back.signature.leaves[0].text == "f32[2,17]"

    @pytest.mark.parametrize("policy", ["warn", "log"])
    def test_a_policy_that_runs_overruns_compiles_it_says_so_and_counts_it(self, policy, caplog):
        step = make_step(on_exceed=policy)
        with (
            caplog.at_level(logging.WARNING, logger="tinax"),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            out = served(step, 17)
        np.testing.assert_array_equal(out, jnp.full((2,), 17.0))
        assert step.traces_used == 1
        assert step.compiles_used == 1
        said = [str(w.message) for w in caught if w.category is TraceBudgetWarning]
        if policy == "warn":
            assert len(said) == 1
            assert "on_exceed='warn': this trace runs and is counted." in said[0]
            assert "  tokens, axis 1: 17 is no bucket of (16, 32, 64): pad it to 32" in said[0]
            assert (
                "trace 1 is outside its shape buckets and runs (on_exceed='warn'); tokens, "
                "axis 1: 17 is no bucket" in caplog.text
            )
        else:
            assert said == []
            assert "on_exceed='log': this trace runs and is counted." in caplog.text
            assert "  mask, axis 1: 17 is no bucket of (16, 32, 64): pad it to 32" in caplog.text
        assert "retrace" not in caplog.text  # said once, not again as a retrace

    @pytest.mark.parametrize("policy", ["warn", "log"])
    def test_a_call_outside_the_buckets_and_over_budget_is_reported_once(self, policy, caplog):
        """Outside the buckets and over max_traces at once: one report (the buckets'), not
        the bucket report and then the overrun's in full."""
        step = tied(on_exceed=policy)
        for length in SIZES:
            step(batch_of(length))
        with (
            caplog.at_level(logging.WARNING, logger="tinax"),
            warnings.catch_warnings(record=True) as caught,
        ):
            caplog.clear()  # the buckets' own traces are logged at INFO where a test left it on
            warnings.simplefilter("always")
            step(batch_of(20))
        assert step.traces_used == 4
        said = [str(w.message) for w in caught if w.category is TraceBudgetWarning]
        records = [record.getMessage() for record in caplog.records]
        assert len(records) == 1, records
        assert len(said) == (1 if policy == "warn" else 0), said
        (text,) = said or records
        assert "called outside its shape buckets: max_traces=3, traces_used=3" in text
        assert text.count("How to fix:") == 1

    def test_under_disabled_chex_assertions_it_runs_and_is_counted(self):
        step = make_step()
        chex.disable_asserts()
        try:
            served(step, 17)
        finally:
            chex.enable_asserts()
        assert step.traces_used == 1
        with pytest.raises(TraceBudgetError):
            served(step, 18)

    def test_an_axis_beyond_the_rank_is_named_at_the_first_call(self):
        step = bounded_jit(masked_sum, max_traces=3, buckets={"tokens": {2: SIZES}})
        with pytest.raises(ValueError) as info:
            served(step, 16)
        assert str(info.value) == (
            "BoundedJit: buckets names axis 2 of 'tokens', but tokens is f32[2,16], of rank 2: "
            "its axes are 0 to 1."
        )
        assert step.traces_used == 0

    def test_a_path_with_no_array_under_it_is_named(self):
        step = bounded_jit(
            lambda batch: batch["x"].sum(), max_traces=3, buckets={"batch['y']": {0: SIZES}}
        )
        with pytest.raises(ValueError) as info:
            step({"x": jnp.ones(16)})
        assert str(info.value) == (
            "BoundedJit: buckets names \"batch['y']\", under which this call has no array; "
            "the leaves of batch are: batch['x']."
        )

    def test_the_calls_own_error_comes_first(self):
        step = make_step()
        with pytest.raises(TypeError, match="missing 1 required positional argument"):
            step(jnp.ones((2, 17)))

    def test_a_batched_jit_buckets_its_batch_axis(self):
        norms = batched_jit(lambda v: (v * v).sum(), max_traces=2, buckets={"v": {0: (4, 8)}})
        np.testing.assert_array_equal(norms(jnp.ones((4, 3))), jnp.full((4,), 3.0))
        with pytest.raises(TraceBudgetError) as info:
            norms(jnp.ones((5, 3)))  # the last, partial batch
        assert "  v, axis 0: 5 is no bucket of (4, 8): pad it to 8" in str(info.value)
        assert norms.traces_used == 1


class TestRetraceLog:
    def test_a_first_trace_of_a_bucket_is_debug_a_second_of_one_combination_a_retrace(self, caplog):
        """A new dtype at a bucket already traced is a retrace as any other (``INFO``,
        with its difference), not the expected trace of a bucket; and budgets() names it."""
        step = tied()
        with caplog.at_level(logging.DEBUG, logger="tinax"):
            step(batch_of(16))
            step(batch_of(32))
            step({"tokens": jnp.ones((2, 16), jnp.int32), "mask": jnp.ones((2, 16))})
        records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "tinax"]
        assert [level for level, _ in records] == [logging.DEBUG, logging.DEBUG, logging.INFO]
        assert "bucket batch axis 1: 32" in records[1][1]
        assert "retrace, trace 3" in records[2][1]
        assert "batch['tokens']: f32[2,16] -> i32[2,16] (dtype)" in records[2][1]
        row = next(line for line in str(budgets()).splitlines() if "total" in line)
        assert "batch['tokens']" in row


class TestExplain:
    def test_names_a_call_outside_the_buckets_without_tracing(self):
        step = make_step()
        served(step, 16)
        found = step.explain(jnp.ones((2, 40)), jnp.ones((2, 40)))
        assert found.retraces
        assert found.outside_buckets == (
            "tokens, axis 1: 40 is no bucket of (16, 32, 64): pad it to 64",
            "mask, axis 1: 40 is no bucket of (16, 32, 64): pad it to 64",
        )
        text = str(found).splitlines()
        assert text[0].endswith(
            "this call is outside its shape buckets: max_traces=9, traces_used=1; it would be "
            "trace 2."
        )
        assert text[1:4] == [
            "Outside the buckets (2 sizes):",
            "  tokens, axis 1: 40 is no bucket of (16, 32, 64): pad it to 64",
            "  mask, axis 1: 40 is no bucket of (16, 32, 64): pad it to 64",
        ]
        assert step.traces_used == 1

    def test_its_shape_fix_is_true_of_the_buckets(self):
        """No generic "pad or bucket inputs" for an object that has buckets: the code that
        pads to the bucket (even with no trace to compare), that a size is larger than the
        largest, or, for a bucket not traced yet, compiling them ahead."""
        step = tied()
        first = str(step.explain(batch_of(20)))
        assert first.splitlines()[-3:] == [
            "How to fix:",
            "  shape: pad before the call: batch['mask'], length = tinax.jit.pad_to_bucket("
            "batch['mask'], (16, 32, 64), axis=1) (length: its true size, to mask the padding)",
            "  shape: pad before the call: batch['tokens'], length = tinax.jit.pad_to_bucket("
            "batch['tokens'], (16, 32, 64), axis=1) (length: its true size, to mask the padding)",
        ]
        step(batch_of(16))
        texts = [str(step.explain(batch_of(length))) for length in (20, 65, 32)]
        assert all("pad or bucket inputs" not in text for text in texts)
        assert "  shape: pad before the call: batch['mask'], length = " in texts[0]
        assert "  shape: batch, axis 1: split the input into pieces of at most 64" in texts[1]
        assert (
            "  shape: this call's sizes (batch axis 1: 32) are buckets, each combination traced "
            "once: compile them all ahead with the object's precompile_buckets(*example_args)"
        ) in texts[2]
        other = str(step.explain({"tokens": jnp.ones((3, 16)), "mask": jnp.ones((3, 16))}))
        assert "pad or bucket inputs to a few fixed shapes" in other  # axis 0 has no buckets

    def test_a_call_inside_the_buckets_is_not_outside(self):
        step = make_step()
        served(step, 16)
        found = step.explain(jnp.ones((2, 32)), jnp.ones((2, 32)))
        assert found.retraces and found.outside_buckets == ()
        assert "outside" not in str(found)
        assert step.explain(jnp.ones((2, 16)), jnp.ones((2, 16))).reuses is not None


class TestPrecompileBuckets:
    def test_compiles_every_combination_then_no_call_inside_them_compiles(self):
        step = bounded_jit(masked_sum, max_traces=6, buckets={"tokens": {0: (1, 2), 1: SIZES}})
        example = jax.ShapeDtypeStruct((1, 16), jnp.float32)
        assert step.precompile_buckets(example, jnp.ones(())) == 6
        assert (step.traces_used, step.compiles_used) == (6, 6)
        calls = [(jnp.ones((batch, length)), jnp.ones(())) for batch in (1, 2) for length in SIZES]
        with no_new_compiles(), no_new_traces(step):
            outs = [step(*call) for call in calls]
        for (tokens, _), out in zip(calls, outs, strict=True):
            np.testing.assert_array_equal(out, jnp.full(tokens.shape[:1], float(tokens.shape[1])))
        assert step.precompile_buckets(example, jnp.ones(())) == 0  # nothing new
        assert step.compiles_used == 6

    def test_counts_the_combinations_it_traced_not_another_threads_traces(self):
        """A trace another thread makes meanwhile (here, from inside the first bucket's
        trace, a call at a new dtype) counts against the budget but is not one of the
        combinations precompile_buckets made new; an inner object's trace neither."""
        inner = bounded_jit(jnp.negative, max_traces=3)
        spawned = []

        def total(x):
            if not spawned:  # the first trace: another thread traces this object meanwhile
                spawned.append(threading.Thread(target=lambda: step(jnp.ones(4, jnp.int32))))
                spawned[0].start()
                spawned[0].join()
            return inner(x).sum()

        step = bounded_jit(total, max_traces=3, buckets={"x": {0: (4, 8)}})
        assert step.precompile_buckets(jnp.ones(4)) == 2
        assert step.traces_used == inner.traces_used == 3
        assert step.precompile_buckets(jnp.ones(4)) == 0

    def test_the_other_dimensions_come_from_the_example(self):
        step = tied()
        example = {"tokens": jnp.ones((3, 5), jnp.int32), "mask": jnp.ones((3, 5), jnp.int32)}
        assert step.precompile_buckets(example) == 3
        texts = [signature.leaves[1].text for signature in step.traced_signatures]
        assert sorted(texts) == ["i32[3,16]", "i32[3,32]", "i32[3,64]"]

    def test_logs_each_bucket_as_it_is_compiled(self, caplog):
        step = tied()
        with caplog.at_level(logging.INFO, logger="tinax"):
            step.precompile_buckets(batch_of(1))
        done = [r.getMessage() for r in caplog.records if "compiled in" in r.getMessage()]
        assert len(done) == 3
        assert {message.split("(batch axis 1: ")[1] for message in done} == {"16)", "32)", "64)"}
        assert all(f"bucket {n} of 3" in " ".join(done) for n in (1, 2, 3))

    def test_budgets_shows_the_buckets_compiled(self):
        def counted_here(batch):  # defined here: its own row in the table
            return batch["tokens"].sum()

        step = bounded_jit(counted_here, max_traces=3, buckets={"batch": {1: SIZES}})

        def row():
            table = str(budgets()).splitlines()  # every live object: columns may be cut
            assert "buckets" in table[0].split()
            (line,) = [line for line in table if line.split()[0].endswith(".counted_here")]
            return line

        step(batch_of(16))
        assert " 1/3 (" in row()
        step.precompile_buckets(batch_of(1))
        assert " 3/3 (" in row()

    def test_an_object_without_buckets_is_told_so(self):
        step = bounded_jit(masked_sum, max_traces=1)
        with pytest.raises(ValueError, match="this one declares none"):
            step.precompile_buckets(jnp.ones((2, 3)), jnp.ones((2, 3)))

    def test_a_batched_jit_compiles_its_batch_buckets(self):
        norms = BatchedJit(lambda v: (v * v).sum(), max_traces=3, buckets={"v": {0: (2, 4, 8)}})
        assert norms.precompile_buckets(jax.ShapeDtypeStruct((1, 3), jnp.float32)) == 3
        calls = [jnp.ones((size, 3)) for size in (2, 4, 8)]
        with no_new_compiles():
            outs = [norms(call) for call in calls]
        for call, out in zip(calls, outs, strict=True):
            np.testing.assert_array_equal(out, jnp.full(call.shape[:1], 3.0))

    def test_a_spent_budget_is_raised_after_the_others_compile(self):
        step = tied()
        step({"tokens": jnp.ones((2, 16), jnp.int32), "mask": jnp.ones((2, 16), jnp.int32)})
        with pytest.raises(TraceBudgetError, match="exceeded its trace budget"):
            step.precompile_buckets(batch_of(1))  # another dtype: 1 + 3 traces, budget 3
        assert step.traces_used == 3
