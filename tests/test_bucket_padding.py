"""The batches padded per combination of Dims: counted by pad_ragged and pad_to_bucket
(buckets/tally), shown under budgets()'s table and read as Budgets.padding
(observe/bucket_padding). The counts live on the Dim padded to: each test pads to Dims of
its own."""

import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinax._src.buckets import ragged, tally
from tinax._src.buckets.sizes import tally_of
from tinax._src.observe import bucket_padding
from tinax.jit import Dim, bounded_jit, budgets, pad_ragged, pad_to_bucket

ROWS = Dim("rows", (1, 2, 4, 8))
LENGTH = Dim("length", (4, 8, 16))


@pytest.fixture(autouse=True)
def _dims_of_its_own(monkeypatch):
    """ROWS and LENGTH made anew for each test: a Dim carries the batches padded to it."""
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "ROWS", Dim("rows", (1, 2, 4, 8)))
    monkeypatch.setattr(module, "LENGTH", Dim("length", (4, 8, 16)))


def rows_of(*lengths, dtype=np.int32):
    return [np.ones(length, dtype) for length in lengths]


def counted(*dims):
    """The counts on ``dims`` (the test's ROWS and LENGTH by default) as plain tuples:
    combination -> (batches, real, padded)."""
    tallies = [tally_of(dim) for dim in dims or (ROWS, LENGTH)]
    return {combination: tuple(counts) for combination, counts in tally.counted(tallies).items()}


class TestPadRaggedCounts:
    def test_batches_real_and_padded_entries_are_exact_when_both_sizes_are_dims(self):
        pad_ragged(rows_of(3, 1, 2), LENGTH, batch_sizes=ROWS)  # 4 x 4: 6 real of 16
        pad_ragged(rows_of(4, 4, 4), LENGTH, batch_sizes=ROWS)  # 4 x 4: 12 of 16
        pad_ragged(rows_of(9), LENGTH, batch_sizes=ROWS)  # 1 x 16: 9 of 16
        assert counted() == {
            (("rows", 4), ("length", 4)): (2, 18, 32),
            (("rows", 1), ("length", 16)): (1, 9, 16),
        }

    def test_only_the_length_is_named_when_batch_sizes_are_plain_or_none(self):
        pad_ragged(rows_of(3, 1, 2), LENGTH, batch_sizes=(4, 8))  # 4 x 4
        pad_ragged(rows_of(5), LENGTH)  # 1 x 8
        assert counted() == {(("length", 4),): (1, 6, 16), (("length", 8),): (1, 5, 8)}

    def test_only_the_rows_are_named_when_sizes_are_plain(self):
        pad_ragged(rows_of(3, 1, 2), (4, 8), batch_sizes=ROWS)
        assert counted() == {(("rows", 4),): (1, 6, 16)}

    def test_one_combination_from_batches_of_different_plain_sizes_adds_up(self):
        pad_ragged(rows_of(3), LENGTH, batch_sizes=(1, 2))  # 1 x 4: 3 of 4
        pad_ragged(rows_of(3, 3), LENGTH, batch_sizes=(1, 2))  # 2 x 4: 6 of 8
        assert counted() == {(("length", 4),): (2, 9, 12)}

    @pytest.mark.parametrize(
        "rows, fill",
        [
            pytest.param([[1, 2, 3], [4]], 0, id="nested-lists"),
            pytest.param(rows_of(3, 1, dtype=np.float32), -1.0, id="a-fill"),
            pytest.param([np.ones((3, 5)), np.ones((1, 5))], 0, id="trailing-dims"),
            pytest.param([jnp.ones(3), jnp.ones(1)], 0, id="jax-rows"),
        ],
    )
    def test_the_general_path_counts_entries_per_trailing_element_alike(self, rows, fill):
        padded, lengths = pad_ragged(rows, LENGTH, batch_sizes=ROWS, fill=fill)
        assert padded.shape[:2] == (2, 4) and lengths.tolist() == [3, 1]
        assert counted() == {(("rows", 2), ("length", 4)): (1, 4, 8)}

    def test_plain_sizes_are_not_counted(self):
        pad_ragged(rows_of(3, 1), (4, 8), batch_sizes=(1, 2))
        pad_ragged([[1, 2, 3]], (4, 8), fill=0.0)
        pad_to_bucket(np.ones(3), (4, 8))
        pad_to_bucket(np.ones(3), [4, 8])
        assert counted() == {}

    def test_a_pad_that_raises_counts_nothing(self):
        with pytest.raises(ValueError, match="larger than the largest of sizes"):
            pad_ragged(rows_of(17), LENGTH, batch_sizes=ROWS)
        with pytest.raises(ValueError, match="more than the largest of batch_sizes"):
            pad_ragged(rows_of(*[1] * 9), LENGTH, batch_sizes=ROWS)
        assert counted() == {}

    @settings(max_examples=40, deadline=None)
    @given(
        batches=st.lists(
            st.lists(st.integers(0, 16), min_size=1, max_size=8), min_size=1, max_size=6
        ),
        plain_rows=st.booleans(),
    )
    def test_the_counts_are_those_of_the_padded_arrays(self, batches, plain_rows):
        rows, length = Dim("rows", (1, 2, 4, 8)), Dim("length", (4, 8, 16))  # per example
        expected: dict = {}
        for lengths in batches:
            padded, true_lengths = pad_ragged(
                rows_of(*lengths), length, batch_sizes=rows.sizes if plain_rows else rows
            )
            height, width = padded.shape
            key = (("length", width),) if plain_rows else (("rows", height), ("length", width))
            batches_before, real, entries = expected.get(key, (0, 0, 0))
            real += int(true_lengths.sum())
            expected[key] = (batches_before + 1, real, entries + height * width)
        assert counted(rows, length) == expected


class TestPadToBucketCounts:
    def test_a_dim_pads_as_its_sizes_do(self):
        x = np.arange(6).reshape(2, 3)
        padded, length = pad_to_bucket(x, LENGTH, axis=1)
        expected, _ = pad_to_bucket(x, LENGTH.sizes, axis=1)
        np.testing.assert_array_equal(padded, expected)
        assert length == 3

    def test_entries_are_counted_per_element_of_the_axes_before_the_padded_one(self):
        pad_to_bucket(np.ones((2, 3)), LENGTH, axis=1)  # 2 x (3 of 4)
        pad_to_bucket(np.ones((2, 3)), LENGTH, axis=-1)
        pad_to_bucket(np.ones(3), LENGTH)  # 3 of 4
        pad_to_bucket(np.ones((3, 5)), LENGTH)  # axis 0: 3 of 4, per row of 5 alike
        pad_to_bucket(np.ones((2, 2, 7)), LENGTH, axis=2)  # 2 x 2 x (7 of 8)
        assert counted() == {(("length", 4),): (4, 18, 24), (("length", 8),): (1, 28, 32)}

    @pytest.mark.parametrize(
        "x",
        [
            pytest.param(np.ones(8), id="numpy"),
            pytest.param([1.0] * 8, id="a-list"),
            pytest.param(jnp.ones(8), id="jax"),
        ],
    )
    def test_a_batch_that_fills_its_bucket_is_counted_with_no_padding(self, x):
        padded, _ = pad_to_bucket(x, LENGTH)
        assert padded.shape == (8,)
        assert counted() == {(("length", 8),): (1, 8, 8)}

    @pytest.mark.parametrize("fill", [0, 0.0, -1.0], ids=["default", "zero-float", "minus-one"])
    def test_the_general_path_counts_alike(self, fill):
        pad_to_bucket(np.ones((2, 5), np.float32), LENGTH, axis=1, fill=fill)
        pad_to_bucket(jnp.ones((2, 5)), LENGTH, axis=1, fill=fill)
        assert counted() == {(("length", 8),): (2, 20, 32)}

    def test_a_pad_inside_a_trace_is_not_counted(self):
        jax.jit(lambda x: pad_to_bucket(x, LENGTH)[0])(jnp.ones(3))
        jax.jit(lambda x: pad_to_bucket(x, LENGTH)[0])(jnp.ones(4))
        assert counted() == {}

    def test_a_pad_that_raises_counts_nothing(self):
        with pytest.raises(ValueError, match="no bucket in sizes holds it"):
            pad_to_bucket(np.ones(17), LENGTH)
        with pytest.raises(ValueError, match="fill"):
            pad_to_bucket(np.ones(3, np.uint8), LENGTH, fill=-1)
        assert counted() == {}

    def test_a_dim_seen_before_is_counted_on_the_quick_path(self):
        for _ in range(3):  # the first call remembers the Dim; the next take the quick path
            pad_to_bucket(np.ones((1, 3), np.int32), LENGTH, axis=1)
        assert counted() == {(("length", 4),): (3, 9, 12)}


class TestThreads:
    @pytest.mark.parametrize("fold_at", [7, 1024], ids=["folds-often", "folds-rarely"])
    def test_threads_padding_at_once_are_counted_exactly(self, monkeypatch, fold_at):
        monkeypatch.setattr(tally, "FOLD_AT", fold_at)
        monkeypatch.setattr(ragged, "_FOLD_AT", fold_at)
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # threads switch between any two bytecodes, near enough
        threads, pads = 8, 400
        start = threading.Barrier(threads)

        def work():
            start.wait()
            for index in range(pads):
                pad_ragged(rows_of(3, 1), LENGTH, batch_sizes=ROWS)  # 2 x 4: 4 of 8
                pad_to_bucket(np.ones(5), LENGTH)  # 5 of 8
                if index % 50 == 0:
                    counted()  # a reader folds while the pads append

        workers = [threading.Thread(target=work) for _ in range(threads)]
        for worker in workers:
            worker.start()
        try:
            for worker in workers:
                worker.join()
        finally:
            sys.setswitchinterval(interval)
        total = threads * pads
        assert counted() == {
            (("rows", 2), ("length", 4)): (total, 4 * total, 8 * total),
            (("length", 8),): (total, 5 * total, 8 * total),
        }

    def test_a_pad_appended_while_a_fold_adds_up_is_counted_by_the_next(self, monkeypatch):
        """A fold removes only what it added up: a batch appended meanwhile (another
        thread's, here appended from inside the fold's sum) stays for the next."""
        monkeypatch.setattr(tally, "FOLD_AT", 3)
        added = []
        counts, key = tally.Tally(), ("length", 8, 1)

        def sum_then_a_pad_meanwhile(values):
            if not added:
                added.append(True)
                counts.cells[key].append(100)
            return sum(values)

        tally.add(counts, key, 1)
        tally.add(counts, key, 2)
        monkeypatch.setattr(tally, "sum", sum_then_a_pad_meanwhile, raising=False)
        tally.add(counts, key, 3)  # the fold: 1 + 2 + 3, and 100 appended while it added up
        monkeypatch.undo()
        assert counts.cells[key] == [100] and counts.totals[key] == [3, 6]
        assert tally.counted([counts]) == {(("length", 8),): (4, 106, 32)}


def prefill(tokens):
    return tokens


def decode(tokens):
    return tokens


def own_lines(text, name):
    """The lines of ``text`` from the title of ``name``'s padding to the next title."""
    lines = text.splitlines()
    at = [index for index, line in enumerate(lines) if line.startswith(f"{name} (")]
    if not at:
        return []
    following = lines[at[0] + 1 :]
    end = next((i for i, line in enumerate(following) if not line.startswith("  ")), None)
    return [lines[at[0]], *following[:end]]


class TestBudgetsLines:
    def test_nothing_is_printed_when_nothing_was_padded_to_a_dim(self):
        step = bounded_jit(prefill, max_traces=12, buckets={"tokens": {0: ROWS, 1: LENGTH}})
        pad_ragged(rows_of(3), (4, 8))  # plain sizes: not counted
        assert bucket_padding.HEADER not in str(budgets())
        assert [r for r in budgets().padding if r.object is step] == []

    def test_each_combination_padded_to_is_shown_most_batches_first(self):
        step = bounded_jit(prefill, max_traces=12, buckets={"tokens": {0: ROWS, 1: LENGTH}})
        for _ in range(3):
            pad_ragged(rows_of(9), LENGTH, batch_sizes=ROWS)  # rows=1, length=16: 9 of 16
        pad_ragged(rows_of(3, 1, 2), LENGTH, batch_sizes=ROWS)  # rows=4, length=4: 6 of 16
        pad_to_bucket(np.ones((2, 3)), LENGTH, axis=1)  # length=4: 6 of 8
        pad_to_bucket(np.ones((2, 3)), LENGTH, axis=1)
        text = str(budgets())
        assert bucket_padding.HEADER in text.splitlines()
        location = f"{__file__.rsplit('/', 1)[-1]}:{prefill.__code__.co_firstlineno}"
        assert own_lines(text, "prefill")[0].endswith(f"{location}):")
        assert own_lines(text, "prefill")[1:] == [
            "  rows=1, length=16: 3 batches, 44% padding",
            "  length=4: 2 batches, 25% padding",
            "  rows=4, length=4: 1 batch, 62% padding",
        ]
        assert step in budgets()

    def test_an_object_is_shown_only_the_combinations_of_its_own_dims(self):
        both = bounded_jit(prefill, max_traces=12, buckets={"tokens": {0: ROWS, 1: LENGTH}})
        rows_only = bounded_jit(decode, max_traces=4, buckets={"tokens": {0: ROWS}})
        pad_ragged(rows_of(3, 1, 2), LENGTH, batch_sizes=ROWS)
        pad_ragged(rows_of(3, 1), (4, 8), batch_sizes=ROWS)
        text = str(budgets())
        assert own_lines(text, "prefill")[1:] == [
            "  rows=2: 1 batch, 50% padding",
            "  rows=4, length=4: 1 batch, 62% padding",
        ]
        assert own_lines(text, "decode")[1:] == ["  rows=2: 1 batch, 50% padding"]
        assert both in budgets() and rows_only in budgets()

    @pytest.mark.parametrize(
        "buckets",
        [
            pytest.param({"tokens": {1: (4, 8, 16)}}, id="plain-sizes"),
            pytest.param({"tokens": {1: Dim("width", (4, 8, 16))}}, id="another-dim"),
            pytest.param(None, id="no-buckets"),
        ],
    )
    def test_an_object_without_those_dims_shows_nothing(self, buckets):
        step = bounded_jit(decode, max_traces=3, buckets=buckets)
        pad_ragged(rows_of(3), LENGTH)
        assert own_lines(str(budgets()), "decode") == []
        assert [r for r in budgets().padding if r.object is step] == []

    def test_nothing_is_printed_when_no_object_declares_the_dims_padded_to(self):
        bounded_jit(decode, max_traces=12, buckets={"tokens": {1: LENGTH}})
        other = Dim("a_length_no_object_declares", (4, 8))
        pad_ragged(rows_of(3), other)
        assert counted(other)  # counted, but for no object
        assert bucket_padding.HEADER not in str(budgets())

    def test_one_function_built_twice_shows_its_lines_once(self):
        first = bounded_jit(prefill, max_traces=12, buckets={"tokens": {1: LENGTH}})
        second = bounded_jit(prefill, max_traces=12, buckets={"tokens": {1: LENGTH}})
        pad_ragged(rows_of(3), LENGTH)
        text = str(budgets())
        assert [line for line in text.splitlines() if line.startswith("prefill (")] != []
        assert len([line for line in text.splitlines() if line.startswith("prefill (")]) == 1
        assert len([r for r in budgets().padding if r.object in (first, second)]) == 2


class TestPaddingRecords:
    def test_each_record_holds_the_counts_and_the_share(self):
        step = bounded_jit(prefill, max_traces=12, buckets={"tokens": {0: ROWS, 1: LENGTH}})
        pad_ragged(rows_of(3, 1, 2), LENGTH, batch_sizes=ROWS)
        pad_ragged(rows_of(4, 4, 4), LENGTH, batch_sizes=ROWS)
        (record,) = [r for r in budgets().padding if r.object is step]
        assert dict(record.combination) == {"rows": 4, "length": 4}
        assert list(record.combination) == ["rows", "length"]
        assert (record.batches, record.real, record.padded) == (2, 18, 32)
        assert record.share == pytest.approx(1 - 18 / 32)

    def test_a_record_cannot_be_changed(self):
        step = bounded_jit(prefill, max_traces=12, buckets={"tokens": {1: LENGTH}})
        pad_ragged(rows_of(3), LENGTH)
        (record,) = [r for r in budgets().padding if r.object is step]
        with pytest.raises(TypeError):
            record.combination["length"] = 8  # pyright: ignore[reportIndexIssue]
        with pytest.raises(AttributeError):
            record.batches = 2  # pyright: ignore[reportAttributeAccessIssue]

    def test_the_records_are_read_at_each_access(self):
        step = bounded_jit(prefill, max_traces=12, buckets={"tokens": {1: LENGTH}})
        found = budgets()
        assert [r for r in found.padding if r.object is step] == []
        pad_ragged(rows_of(3), LENGTH)
        assert [r.batches for r in found.padding if r.object is step] == [1]


class TestCountsLiveOnTheDim:
    def test_an_equal_dim_made_apart_counts_on_its_own(self):
        """The counts are the Dim object's: a pad to an equal Dim made elsewhere is
        counted on that one, and the object given LENGTH does not show it."""
        step = bounded_jit(prefill, max_traces=3, buckets={"tokens": {1: LENGTH}})
        twin = Dim("length", LENGTH.sizes)
        pad_ragged(rows_of(3), twin)
        assert twin == LENGTH and counted(twin) == {(("length", 4),): (1, 3, 4)}
        assert counted() == {}
        assert [r for r in budgets().padding if r.object is step] == []
        pad_ragged(rows_of(3), LENGTH)
        assert [r.batches for r in budgets().padding if r.object is step] == [1]

    def test_a_dim_with_counts_compares_and_hashes_as_before(self):
        fresh = Dim("length", (4, 8, 16))
        pad_ragged(rows_of(3, 5), LENGTH)
        pad_to_bucket(np.ones(3), LENGTH)
        assert LENGTH == fresh and hash(LENGTH) == hash(fresh)
        assert repr(LENGTH) == "Dim(name='length', sizes=(4, 8, 16))"
        assert {LENGTH: 1}[fresh] == 1

    def test_a_dim_given_to_two_objects_shows_its_counts_for_both(self):
        first = bounded_jit(prefill, max_traces=3, buckets={"tokens": {1: LENGTH}})
        second = bounded_jit(decode, max_traces=3, buckets={"tokens": {1: LENGTH}})
        pad_ragged(rows_of(3), LENGTH)
        shown = {id(r.object): r.batches for r in budgets().padding}
        assert shown.get(id(first)) == 1 and shown.get(id(second)) == 1
