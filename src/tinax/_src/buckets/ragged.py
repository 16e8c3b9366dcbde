"""A batcher's helpers: the bucket a count fits (`bucket_for`), and a ragged batch of
rows padded into one host array with each row's true length (`pad_ragged`)."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Mapping, Sequence
from typing import Any, cast

import jax
import numpy as np
from jax.core import Tracer

from tinax._src.buckets import tally
from tinax._src.buckets.sizes import Dim, checked_sizes, fill_value, numeric, tally_of
from tinax._src.core import validation


def _sizes(api: str, parameter: str, value: object) -> tuple[int, ...]:
    """The sizes of ``value``: a `Dim`'s (checked when it was made), or a sequence's."""
    if type(value) is Dim:
        return value.sizes
    return checked_sizes(api, parameter, value)


def bucket_for(n: int, sizes: Sequence[int] | Dim) -> int:
    """The smallest of ``sizes`` that holds ``n``: the bucket to pad ``n`` to.

    A batcher asks it twice per batch: for the longest request (the length
    bucket) and for the number of requests (the batch bucket). Nothing is ever
    cut: a count larger than every size is an error naming both.

    Args:
        n: A count: a non-negative int (a bool is not accepted).
        sizes: The sizes, increasing (as `bucket_sizes` returns), or a `Dim`.

    Returns:
        The first size that is at least ``n``.

    Raises:
        TypeError: If ``n`` is not an int, or ``sizes`` is neither a `Dim` nor
            an ordered sequence of ints.
        ValueError: If ``n`` is negative, ``sizes`` is empty or not positive
            and increasing, or ``n`` is larger than the largest size.

    Examples:
        >>> from tinax.jit import bucket_for
        >>> bucket_for(37, (16, 32, 64))
        64
        >>> bucket_for(32, (16, 32, 64))
        32
    """
    api = "bucket_for"
    count = validation.check_int(api, "n", "an int (a count)", n)
    buckets = _sizes(api, "sizes", sizes)
    if count < 0:
        raise ValueError(validation.message(api, "n", "a non-negative count", n))
    index = bisect.bisect_left(buckets, count)
    if index == len(buckets):
        raise ValueError(
            f"{api}: n is {count}, larger than the largest size, {buckets[-1]}: nothing is "
            "cut; split the input, or add a larger size."
        )
    return buckets[index]


_ROWS = "a non-empty sequence of arrays (NumPy or JAX arrays, or nested lists)"


def _rows(api: str, rows: object) -> list[np.ndarray[Any, Any]]:
    """``rows`` as NumPy arrays of rank 1 or more; JAX arrays fetched to the host in one
    `jax.device_get`. A TypeError or ValueError naming ``rows`` (or one row) otherwise."""
    try:  # ordered and sized: a list, a tuple, an array; not a str, a set or a mapping
        kind = type(rows)
        unordered = issubclass(kind, (str, bytes, set, frozenset, Mapping))
        if not unordered and _is_jax(rows):  # one array of rows: fetched whole
            rows = np.asarray(jax.device_get(rows))
        ordered = not unordered and hasattr(rows, "__len__")
        given: list[Any] | None = list(cast("Sequence[Any]", rows)) if ordered else None
    except Exception:  # a traced array, a sequence that raises
        given = None
    if given is None:
        raise TypeError(validation.message(api, "rows", _ROWS, rows))
    if not given:
        raise ValueError(validation.message(api, "rows", _ROWS, rows))
    on_device = [i for i, row in enumerate(given) if type(row) is not np.ndarray and _is_jax(row)]
    if on_device:
        for i in on_device:
            if isinstance(given[i], Tracer):  # pad_ragged pads on the host
                expected = "a concrete array (pad_ragged pads on the host, outside a trace)"
                raise TypeError(validation.message(api, f"rows[{i}]", expected, given[i]))
        try:
            fetched = jax.device_get([given[i] for i in on_device])
        except Exception:  # a deleted or donated array
            fetched = None
        if fetched is None:
            expected = "arrays that can be fetched to the host (none deleted or donated)"
            raise TypeError(validation.message(api, "rows", expected, rows))
        for i, row in zip(on_device, fetched, strict=True):
            given[i] = row
    arrays: list[np.ndarray[Any, Any]] = []
    for index, row in enumerate(given):
        array: np.ndarray[Any, Any] | None
        if type(row) is np.ndarray:
            array = cast("np.ndarray[Any, Any]", row)
        else:
            try:
                array = np.asarray(row)
            except Exception:  # a ragged list, a sequence that raises
                array = None
        if array is None or not numeric(array.dtype):
            expected = "an array of numbers or booleans (a NumPy or JAX array, or a nested list)"
            raise TypeError(validation.message(api, f"rows[{index}]", expected, row))
        if not array.ndim:
            expected = "an array of rank 1 or more (its first axis is its length)"
            raise ValueError(validation.message(api, f"rows[{index}]", expected, row))
        arrays.append(array)
    return arrays


def _is_jax(value: object) -> bool:
    try:
        return isinstance(value, jax.Array)
    except Exception:  # a hostile __class__
        return False


def pad_ragged(
    rows: Sequence[jax.typing.ArrayLike],
    sizes: Sequence[int] | Dim,
    *,
    batch_sizes: Sequence[int] | Dim | None = None,
    fill: jax.typing.ArrayLike = 0,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A ragged batch padded into one host array, with each row's true length.

    A server batches requests of different lengths; a rectangle padded to the
    longest and masked by one length is wrong for every shorter row. This pads
    every row to one length bucket in a single preallocated array and returns
    each row's true length, so that the function masks each row by its own:
    inside it, ``jnp.arange(padded.shape[1]) < lengths[:, None]`` is `True` on
    the real entries. With ``batch_sizes``, whole rows of ``fill`` are added up
    to the batch bucket, with length 0.

    Args:
        rows: The rows: arrays of rank 1 or more, of any length on their first
            axis and one shape after it, as NumPy arrays, JAX arrays (fetched
            to the host in one transfer) or nested lists. Their dtypes combine
            as in `numpy.stack`.
        sizes: The length buckets, increasing (`bucket_sizes`), or a `Dim`:
            axis 1 is padded to ``bucket_for(longest row, sizes)``.
        batch_sizes: The batch buckets, or a `Dim`: axis 0 is padded to
            ``bucket_for(len(rows), batch_sizes)`` rows. `None` (the default):
            one row per row given. Where ``sizes`` or ``batch_sizes`` is a
            `Dim`, the batch is counted on that `Dim` (on ``sizes`` where both
            are), under the names and sizes of those given as `Dim`s, with
            its real entries (the rows' lengths) and its padded ones (rows x
            length), for `budgets` to show.
        fill: The value of the padding: a scalar that the rows' dtype holds
            exactly. The default: 0.

    Returns:
        padded: A NumPy array of shape ``(batch, length, *trailing)``: row ``i``
            equal to ``rows[i]`` on its first ``lengths[i]`` entries and to
            ``fill`` after them; the rows added for ``batch_sizes`` all ``fill``.
        lengths: An ``int32`` array of shape ``(batch,)``: each row's true
            length, 0 for the rows added.

    Raises:
        TypeError: If ``rows`` is not an ordered sequence, a row is not an
            array of numbers or booleans (or is a traced array), ``sizes`` or
            ``batch_sizes`` is neither a `Dim` nor an ordered sequence of ints,
            or ``fill`` is not a number.
        ValueError: If ``rows`` is empty, a row is a scalar or its shape after
            the first axis differs from the first row's, ``sizes`` or
            ``batch_sizes`` is empty or not positive and increasing, the
            longest row is longer than the largest of ``sizes``, there are more
            rows than the largest of ``batch_sizes`` (nothing is ever cut), or
            ``fill`` is a number the dtype does not hold.

    Examples:
        >>> import numpy as np
        >>> from tinax.jit import pad_ragged
        >>> padded, lengths = pad_ragged([[5, 6, 7], [8]], (4, 8), batch_sizes=(1, 4))
        >>> padded
        array([[5, 6, 7, 0],
               [8, 0, 0, 0],
               [0, 0, 0, 0],
               [0, 0, 0, 0]])
        >>> lengths
        array([3, 1, 0, 0], dtype=int32)
        >>> (np.arange(padded.shape[1]) < lengths[:, None]).sum(axis=1)  # the mask
        array([3, 1, 0, 0])
    """
    # A batcher's call, on every batch: a list of host rows of tokens of one dtype, sizes
    # given as Dims or tuples checked before, the default fill. Its checks, inlined, and
    # the pad as a hand-written one makes it; anything else, or anything that would
    # raise, takes the general path, which checks every argument and names what is wrong.
    kind = type(rows)
    if (kind is list or kind is tuple) and rows and fill is _ZERO:
        if type(sizes) is Dim:
            widths, across, owner = sizes.sizes, sizes.name, sizes
        else:
            widths, across, owner = checked_sizes(_API, "sizes", sizes), None, None
        heights = down = None
        if batch_sizes is not None:
            if type(batch_sizes) is Dim:
                heights, down = batch_sizes.sizes, batch_sizes.name
                owner = owner or batch_sizes
            else:
                heights = checked_sizes(_API, "batch_sizes", batch_sizes)
        first = rows[0]
        dtype = first.dtype if type(first) is _ndarray else None
        if dtype is not None and dtype.kind in "biufc":  # not a str, not an object
            lengths: list[int] = []
            longest = 0
            try:
                for row in rows:  # NumPy rows of one dtype, or the general path
                    if type(row) is not _ndarray or row.dtype is not dtype:
                        raise _General
                    length = len(row)
                    if length == 1 and row.ndim != 1:  # a (1, 1) row is not copied as (1,)
                        raise _General
                    lengths.append(length)
                    if length > longest:
                        longest = length
                count = len(lengths)
                width = widths[_bisect_left(widths, longest)]  # too long: IndexError
                height = count if heights is None else heights[_bisect_left(heights, count)]
                padded = _zeros((height, width), dtype)
                true_lengths = _zeros(height, _INT32)
                for index, row in enumerate(rows):
                    length = lengths[index]
                    padded[index, :length] = row  # of rank 2 (but all ones): ValueError
                    true_lengths[index] = length
            except (TypeError, ValueError, IndexError, _General):
                pass
            else:
                if owner is not None:  # counted on a Dim: `tally.add`, inlined
                    key = (down, height, across, width)
                    counts = owner._tally  # pyright: ignore[reportPrivateUsage]
                    cell = counts.cells.get(key)
                    if cell is None:
                        cell = _new_cell(counts, key)
                    cell.append(sum(lengths))
                    if len(cell) >= _FOLD_AT:
                        _fold(counts, key, cell)
                return padded, true_lengths
    padded, true_lengths, real = _pad_ragged(rows, sizes, batch_sizes, fill)
    owner = sizes if type(sizes) is Dim else batch_sizes if type(batch_sizes) is Dim else None
    if owner is not None:  # per trailing element alike
        across = sizes.name if type(sizes) is Dim else None
        down = batch_sizes.name if type(batch_sizes) is Dim else None
        height, width = padded.shape[:2]
        tally.add(tally_of(owner), (down, height, across, width), real)
    return padded, true_lengths


def _pad_ragged(
    rows: object, sizes: object, batch_sizes: object, fill: object
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], int]:
    """`pad_ragged`, every argument checked; and the rows' lengths added up."""
    api = _API
    widths = _sizes(api, "sizes", sizes)
    heights = None if batch_sizes is None else _sizes(api, "batch_sizes", batch_sizes)
    arrays = _rows(api, rows)
    first = arrays[0]
    trailing, dtype = first.shape[1:], first.dtype
    alike = True
    longest, at = 0, 0
    lengths: list[int] = []
    for index, array in enumerate(arrays):
        shape = array.shape
        if shape[1:] != trailing:
            expected = f"of shape (length, {', '.join(map(str, trailing))}), as rows[0] is"
            if not trailing:
                expected = "of rank 1, as rows[0] is"
            raise ValueError(
                f"{api}: rows[{index}] must be {expected}; got an array of shape {shape}."
            )
        if array.dtype != dtype:
            alike = False
        length = shape[0]
        lengths.append(length)
        if length > longest:
            longest, at = length, index
    if not alike:  # as numpy.stack: the dtypes' common type (of each dtype once)
        try:
            dtype = functools.reduce(np.result_type, {array.dtype for array in arrays})
        except Exception:  # ml_dtypes' types with others: no common type
            dtype = None
        if dtype is None or not numeric(dtype):
            dtypes = ", ".join(sorted({str(array.dtype) for array in arrays}))
            expected = f"arrays of dtypes that have a common type (got {dtypes})"
            raise TypeError(validation.message(api, "rows", expected, rows))
    width_index = bisect.bisect_left(widths, longest)
    if width_index == len(widths):
        raise ValueError(
            f"{api}: rows[{at}] has length {longest}, larger than the largest of sizes, "
            f"{widths[-1]}: nothing is cut; split it, or add a larger size."
        )
    count = len(arrays)
    height = count
    if heights is not None:
        height_index = bisect.bisect_left(heights, count)
        if height_index == len(heights):
            raise ValueError(
                f"{api}: rows has {count} rows, more than the largest of batch_sizes, "
                f"{heights[-1]}: nothing is cut; split the batch, or add a larger size."
            )
        height = heights[height_index]
    shape = (height, widths[width_index], *trailing)
    if fill is _ZERO:  # the default: zeros, the quickest fill
        padded = np.zeros(shape, dtype)
    else:
        padded = np.full(shape, fill_value(api, fill, dtype, "the rows'"), dtype)
    for index, array in enumerate(arrays):
        padded[index, : lengths[index]] = array
    true_lengths = np.zeros(height, np.int32)
    true_lengths[:count] = lengths
    return padded, true_lengths, sum(lengths)


class _General(Exception):
    """The rows are not what the quick path pads: the general path checks them."""


_API = "pad_ragged"
_ZERO = 0  # the default fill; any other zero (0.0, a NumPy 0) takes the checks
_bisect_left = bisect.bisect_left
_new_cell, _fold, _FOLD_AT = tally.new_cell, tally.fold, tally.FOLD_AT
_INT32 = np.dtype(np.int32)
_ndarray, _zeros = np.ndarray, np.zeros
