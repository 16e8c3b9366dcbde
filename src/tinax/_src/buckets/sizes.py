"""Lists of bucket sizes: checking one (`check_sizes`), the usual ones (`bucket_sizes`),
and padding an array to the smallest size that holds it (`pad_to_bucket`)."""

from __future__ import annotations

import bisect
import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast, overload

import attrs
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from tinax._src.buckets import tally
from tinax._src.core import validation


def check_sizes(api: str, parameter: str, value: object) -> tuple[int, ...]:
    """``value`` as a tuple of sizes: a non-empty, ordered sequence of positive ints
    (booleans rejected), strictly increasing. ``api`` and ``parameter`` name it in the
    message (``"BoundedJit"``, ``"buckets['x'][1]"``)."""
    expected = "a non-empty sequence of positive ints, increasing"
    try:  # ordered and sized: a list, a tuple, a range, a NumPy array (not a set, a str)
        unordered = issubclass(type(value), (str, bytes, set, frozenset))
        ordered = not unordered and hasattr(value, "__len__")
        entries: tuple[Any, ...] | None = tuple(cast("Any", value)) if ordered else None
    except Exception:
        entries = None
    if entries is None:
        raise TypeError(validation.message(api, parameter, expected, value))
    if not entries:
        raise ValueError(validation.message(api, parameter, expected, value))
    sizes: list[int] = []
    for index, entry in enumerate(entries):
        # type(), not isinstance: an entry whose __class__ raises is refused, not raised from
        size = None if issubclass(type(entry), bool) else _index(entry)
        if size is None:
            raise TypeError(validation.message(api, f"{parameter}[{index}]", "an int", entry))
        if size < 1:
            raise ValueError(validation.message(api, f"{parameter}[{index}]", "positive", entry))
        if sizes and size <= sizes[-1]:
            raise ValueError(
                validation.message(
                    api, parameter, f"increasing ({sizes[-1]} is followed by {size})", value
                )
            )
        sizes.append(size)
    return tuple(sizes)


@attrs.frozen
class Dim:
    """A named bucket dimension: one size, shared by every axis that is given it.

    In ``buckets=``, an axis maps to its own list of sizes, or to a `Dim`. Every
    axis given the same `Dim` (by name), under any argument, path or axis number,
    is one dimension: in a call those axes take one size, one of ``sizes``, and
    the dimension counts once in the combinations that ``max_traces`` must cover
    and that ``precompile_buckets`` compiles. A call whose tied axes differ is
    refused before it traces, naming each axis and its size. Dims compare and
    hash by name and sizes.

    A `Dim` also carries the batches that `pad_ragged` and `pad_to_bucket`
    padded to its sizes (`budgets` shows them for each object given it): pad
    to the very `Dim` object given in ``buckets=``, made once at module level.

    Args:
        name: The dimension's name: a Python identifier (``where=`` of `Buckets`
            is called with it as a keyword), shown in messages.
        sizes: The sizes the dimension may take: a non-empty sequence of
            positive ints, increasing (`bucket_sizes` makes the usual lists).

    Raises:
        TypeError: If ``name`` is not a str, or ``sizes`` is not an ordered
            sequence of ints (a bool is not accepted).
        ValueError: If ``name`` is not an identifier, or ``sizes`` is empty or
            not positive and increasing.

    Examples:
        >>> from tinax.jit import Dim
        >>> length = Dim("length", [16, 32, 64])
        >>> length
        Dim(name='length', sizes=(16, 32, 64))
        >>> buckets = {"tokens": {1: length}, "mask": {1: length}}  # one dimension
    """

    name: str
    sizes: tuple[int, ...]
    _tally: tally.Tally = attrs.field(factory=tally.Tally, init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        name = cast("object", self.name)  # as given: anything
        if not issubclass(type(name), str):
            raise TypeError(validation.message("Dim", "name", "a str", name))
        plain = str.__str__(cast("str", name))
        if not plain.isidentifier():
            expected = "an identifier (where= is called with it as a keyword)"
            raise ValueError(validation.message("Dim", "name", expected, name))
        object.__setattr__(self, "name", plain)
        object.__setattr__(self, "sizes", check_sizes("Dim", "sizes", cast("object", self.sizes)))


def checked_sizes(api: str, parameter: str, value: object) -> tuple[int, ...]:
    """``value`` checked as `check_sizes` does, where it is no tuple checked before (a
    serving loop passes one tuple on every request: checked once, remembered by id)."""
    seen = _by_id.get(id(value))
    if seen is not None and seen[0] is value:
        return seen[1]
    sizes = check_sizes(api, parameter, value)
    if type(value) is tuple and len(_by_id) < _CHECKED_LIMIT:
        # the tuple is kept alive in the entry: its id is not reused while it is there
        _by_id[id(cast("object", value))] = (value, sizes, None)
    return sizes


def _index(value: object) -> int | None:
    """``value`` as an int, where it is one (`operator.index`: a NumPy integer too)."""
    try:
        return int(operator.index(cast("Any", value)))
    except Exception:
        return None


def bucket_sizes(floor: int, ceiling: int, *, gap: int | None = None) -> tuple[int, ...]:
    """The usual bucket sizes of an axis: doubling from ``floor``, then steps of ``gap``.

    Every new length of a padded axis is a new trace and a new compile; a few
    sizes that every length is padded up to bound both, at the cost of the
    padding. Doubling keeps the padding under half of each input; past ``gap``,
    steps of ``gap`` keep it under ``gap`` where doubling would waste too much
    (as vLLM and tpu-inference pad their token counts: 16, 32, ... up to 512,
    then every 512). Pass the result as the sizes of an axis in ``buckets=``, or
    to `pad_to_bucket`.

    Args:
        floor: The first size (at least 1). With ``floor=1`` the sizes below
            ``gap`` are the powers of two.
        ceiling: The last size, always in the result (at least ``floor``): the
            largest input the buckets hold.
        gap: Once a size reaches ``gap`` (is at least ``gap``), the next sizes
            are ``gap`` apart instead of doubling. `None` (the default): they
            double up to ``ceiling``.

    Returns:
        The sizes, increasing: every size of the sequence below ``ceiling``,
            then ``ceiling``.

    Raises:
        TypeError: If ``floor``, ``ceiling`` or ``gap`` (when given) is not an
            int (a bool is not accepted).
        ValueError: If ``floor`` or ``gap`` is less than 1, or ``ceiling`` is
            less than ``floor``.

    Examples:
        >>> from tinax.jit import bucket_sizes
        >>> bucket_sizes(16, 2048, gap=512)
        (16, 32, 64, 128, 256, 512, 1024, 1536, 2048)
        >>> bucket_sizes(1, 100)
        (1, 2, 4, 8, 16, 32, 64, 100)
        >>> bucket_sizes(8, 8)
        (8,)
    """
    api = "bucket_sizes"
    first = validation.check_int(api, "floor", "an int", floor)
    last = validation.check_int(api, "ceiling", "an int", ceiling)
    step = None if gap is None else validation.check_int(api, "gap", "None or an int", gap)
    if first < 1:
        raise ValueError(validation.message(api, "floor", "at least 1", floor))
    if last < first:
        raise ValueError(validation.message(api, "ceiling", f"at least floor ({first})", ceiling))
    if step is not None and step < 1:
        raise ValueError(validation.message(api, "gap", "None or at least 1", gap))
    sizes: list[int] = []
    size = first
    while size < last:
        sizes.append(size)
        size = size + step if step is not None and size >= step else size * 2
    return (*sizes, last)


@overload
def pad_to_bucket(
    x: jax.Array, sizes: Sequence[int] | Dim, *, axis: int = 0, fill: jax.typing.ArrayLike = 0
) -> tuple[jax.Array, int]: ...


@overload
def pad_to_bucket(
    x: np.ndarray[Any, Any] | Sequence[Any],
    sizes: Sequence[int] | Dim,
    *,
    axis: int = 0,
    fill: jax.typing.ArrayLike = 0,
) -> tuple[np.ndarray[Any, Any], int]: ...


def pad_to_bucket(
    x: jax.Array | np.ndarray[Any, Any] | Sequence[Any],
    sizes: Sequence[int] | Dim,
    *,
    axis: int = 0,
    fill: jax.typing.ArrayLike = 0,
) -> tuple[jax.Array | np.ndarray[Any, Any], int]:
    """``x`` padded along ``axis`` to the smallest bucket that holds it, and its true size.

    A function whose inputs take any length traces and compiles once per
    length; padded to a few sizes, it compiles once per size. Serving code pads
    on the host, before the transfer: a NumPy array is padded with NumPy (no
    device operation); a JAX array is copied to the host, padded there and put
    back with its sharding (no compile for any length), and a traced one, inside
    a traced function, is padded with `jax.numpy.pad`. The true size comes back
    with the padded array, to mask the padding or to cut the result back: inside
    the function, ``jnp.arange(padded.shape[axis]) < length`` is `True` on the real entries.

    Args:
        x: The array: a NumPy array, a JAX array, or anything `numpy.asarray`
            makes an array of numbers or booleans (a nested list).
        sizes: The bucket sizes of the axis, increasing (as `bucket_sizes`
            returns), or a `Dim`: each array padded (outside a trace) is then
            counted under its name and size, for `budgets` to show the batches
            and the share of padding of each bucket.
        axis: The axis padded; a negative one counts from the end, as in NumPy.
            The default: the first.
        fill: The value of the padding entries: a scalar that ``x``'s dtype
            holds exactly (an int within range for an integer array, a float
            for a float array). The default: 0.

    Returns:
        padded: ``x`` padded to the bucket, of ``x``'s dtype: a NumPy array
            for a NumPy array or a nested list, a JAX array for a JAX array (with
            ``x``'s sharding, committed where ``x`` is);
            equal to ``x`` on the first ``length`` entries of ``axis`` and to
            ``fill`` after them. ``x`` itself (no copy) when ``length`` is a
            bucket size.
        length: The size of ``x`` on ``axis``, an int.

    Raises:
        TypeError: If ``sizes`` is neither a `Dim` nor a sequence of ints, ``axis`` is not an
            int, ``x`` is not an array of numbers or booleans, or ``fill`` is
            not a number.
        ValueError: If ``sizes`` is empty or not positive and increasing,
            ``axis`` is not an axis of ``x``, ``x`` is larger on ``axis`` than
            the largest bucket (it is never cut), or ``fill`` is a number that
            ``x``'s dtype does not hold (``-1`` for ``uint8``, ``0.5`` for an
            int).

    Examples:
        >>> import numpy as np
        >>> from tinax.jit import pad_to_bucket
        >>> tokens, length = pad_to_bucket(np.array([5, 6, 7]), (4, 8, 16))
        >>> tokens, length
        (array([5, 6, 7, 0]), 3)
        >>> (np.arange(tokens.shape[0]) < length).tolist()  # the mask of real entries
        [True, True, True, False]
        >>> pad_to_bucket(np.ones((2, 5), np.float32), (8,), axis=-1, fill=-1.0)[0]
        array([[ 1.,  1.,  1.,  1.,  1., -1., -1., -1.],
               [ 1.,  1.,  1.,  1.,  1., -1., -1., -1.]], dtype=float32)
    """
    # A serving loop's call, on every request: a host array, a tuple of sizes checked
    # before, an int axis, the default fill. Its checks are the general path's, inlined.
    seen = _by_id.get(id(sizes))  # this very tuple, checked before: no hash of it
    if (
        seen is not None
        and seen[0] is sizes
        and type(x) is np.ndarray
        and type(axis) is int
        and fill is _ZERO  # the int 0, the default (not False, 0.0 or -0.0): no compare
    ):
        known_sizes = seen[1]
        shape = x.shape
        try:  # the range checks, as tuple indexing makes them (NumPy's axes are Python's)
            length = shape[axis]  # IndexError: no axis of x (the general path names it)
            size = known_sizes[_bisect_left(known_sizes, length)]  # or none holds it
        except IndexError:
            return _pad(sizes, known_sizes, x, axis, fill)
        dtype = x.dtype
        if dtype.kind in _NUMERIC_KINDS:
            rank = len(shape)
            if size == length:
                out = x
            # The shapes a request takes, indexed as a hand-written pad indexes them: a
            # loop's pad runs with the CPU's caches cold from the call before, and every
            # step it takes shows there.
            elif rank == 2 and (axis == 1 or axis == -1):  # a batch of rows of tokens
                out = np.zeros((shape[0], size), dtype)
                out[:, :length] = x
            elif rank == 1:
                out = np.zeros(size, dtype)
                out[:length] = x
            else:
                out = _on_host(x, axis % rank, size, None)
            if seen[2] is not None:  # a Dim: the pad is counted on it
                _count(seen[2], shape, axis % rank, length, size)
            return out, length
        return _pad(sizes, known_sizes, x, axis, fill)
    return _pad(sizes, None, x, axis, fill)


def _count(dim: Dim, shape: tuple[int, ...], dimension: int, length: int, size: int) -> None:
    """Counts a pad on its `Dim` (`tally`): ``length`` real entries of ``size`` on the
    padded axis, per element of the axes before it (those after it alike)."""
    across = math.prod(shape[:dimension])
    tally.add(dim._tally, (dim.name, size, across), length * across)  # pyright: ignore[reportPrivateUsage]


def tally_of(dim: Dim) -> tally.Tally:
    """The batches padded to ``dim``'s sizes, counted on it."""
    return dim._tally  # pyright: ignore[reportPrivateUsage]


def _pad(
    sizes: Sequence[int] | Dim, known: tuple[int, ...] | None, x: Any, axis: int, fill: Any
) -> tuple[Any, int]:
    """`pad_to_bucket`, every argument checked but ``sizes`` where they are ``known``
    (a tuple or a `Dim` seen before); a tuple checked now, or a `Dim`, is remembered."""
    api = "pad_to_bucket"
    dim = sizes if type(sizes) is Dim else None
    buckets = known
    if buckets is None:
        if type(sizes) is Dim:
            buckets = sizes.sizes  # checked when it was made
        else:
            buckets = check_sizes(api, "sizes", cast("object", sizes))  # raises for no list
        if (type(sizes) is tuple or dim is not None) and len(_by_id) < _CHECKED_LIMIT:
            # kept alive in the entry: its id is not reused while it is there
            _by_id[id(cast("object", sizes))] = (sizes, buckets, dim)
    array = _array(api, x)
    shape: tuple[int, ...] = array.shape
    rank = len(shape)
    given = validation.check_int(api, "axis", "an int", axis)
    if not -rank <= given < rank:
        expected = f"from {-rank} to {rank - 1}, an axis of x (shape {shape})"
        if not rank:
            expected = "an axis of x, which has none (shape ())"
        raise ValueError(validation.message(api, "axis", expected, axis))
    dimension = given % rank
    length = int(shape[dimension])
    value = fill_value(api, fill, array.dtype)
    index = bisect.bisect_left(buckets, length)
    if index == len(buckets):
        raise ValueError(
            f"{api}: x has size {length} on axis {given} (shape {shape}), and no bucket in sizes "
            f"holds it: the largest is {buckets[-1]}; split the input, or add a larger bucket."
        )
    size = buckets[index]
    traced = isinstance(cast("object", array), Tracer)
    padded: jax.Array | np.ndarray[Any, Any]
    if size == length:
        padded = array
    elif traced:  # in a traced function: in its program
        widths = [(0, 0)] * rank
        widths[dimension] = (0, size - length)
        padded = jnp.pad(array, widths, constant_values=value)  # pyright: ignore[reportUnknownMemberType]
    elif isinstance(array, jax.Array):
        # Padded on the host and put back where it was: a device pad (jnp.pad, or a jit
        # of it) compiles for every new input length (20 lengths, 20 compiles of ~50 ms);
        # this compiles nothing, at ~65 us a pad where a cached jnp.pad takes ~45 us.
        out = _on_host(np.asarray(array), dimension, size, value)
        put = cast("Callable[..., jax.Array]", jax.device_put)  # pyright: ignore[reportUnknownMemberType]
        padded = put(out, array.sharding) if array.committed else put(out)
    else:
        padded = _on_host(array, dimension, size, value)
    if dim is not None and not traced:  # a trace pads no batch: only its program is made
        _count(dim, shape, dimension, length, size)
    return padded, length


def _on_host(
    array: np.ndarray[Any, Any], dimension: int, size: int, value: np.ndarray[Any, Any] | None
) -> np.ndarray[Any, Any]:
    """``array`` padded to ``size`` on ``dimension`` with ``value`` (``None``: zeros, the
    quickest fill): the fill, then the array copied in (np.pad costs ~25 us more, on
    every request)."""
    shape = array.shape
    padded_shape = (*shape[:dimension], size, *shape[dimension + 1 :])
    if value is None:
        out = np.zeros(padded_shape, array.dtype)
    else:
        out = np.full(padded_shape, value, array.dtype)
    out[(*_EVERY[:dimension], slice(0, shape[dimension]))] = array
    return out


# The tuples of sizes a serving loop passes on every request, checked once. Bounded, so
# that a program that makes new ones each call checks them each call instead of growing it.
_CHECKED_LIMIT = 256
_by_id: dict[int, tuple[object, tuple[int, ...], Dim | None]] = {}  # and a Dim
_EVERY = (slice(None),) * 64  # the index of a whole axis, before the padded one
_bisect_left = bisect.bisect_left
_ZERO = 0  # the default fill; any other 0 (a computed int, a subclass) takes the checks


def _array(api: str, x: object) -> jax.Array | np.ndarray[Any, Any]:
    """``x`` as it is (a JAX or NumPy array) or made a NumPy array; an array of numbers or
    booleans, or a TypeError naming ``x``."""
    expected = "an array of numbers or booleans (a NumPy or JAX array, or a nested list)"
    array: jax.Array | np.ndarray[Any, Any] | None
    try:  # isinstance, for a tracer is a jax.Array; a hostile __class__ or aval may raise
        given = isinstance(x, jax.Array | np.ndarray)
        array = cast("jax.Array | np.ndarray[Any, Any]", x) if given else np.asarray(x)
    except Exception:  # a ragged list, a sequence that raises
        array = None
    if array is None or not numeric(array.dtype):
        raise TypeError(validation.message(api, "x", expected, x))
    return array


def numeric(dtype: Any) -> bool:
    """Whether ``dtype`` is a bool, an int, a float or a complex (ml_dtypes' too), not a
    str, an object or a PRNG key."""
    if isinstance(cast("object", dtype), np.dtype) and dtype.kind in _NUMERIC_KINDS:
        return True  # NumPy's own numbers; ml_dtypes' (kind 'V'), a key's: asked of JAX
    try:
        return bool(jnp.issubdtype(dtype, np.bool_) or jnp.issubdtype(dtype, np.number))
    except Exception:
        return False


_NUMERIC_KINDS = frozenset("biufc")


def fill_value(api: str, fill: object, dtype: Any, of: str = "x's") -> np.ndarray[Any, Any]:
    """``fill`` as a 0-d array of ``dtype`` (the dtype of ``of``, in messages): a number
    that the dtype holds, exactly for a bool or an int, finite where ``fill`` is for a
    float; otherwise the error naming it."""
    if type(fill) is int and isinstance(cast("object", dtype), np.dtype) and dtype.kind in "iu":
        info = np.iinfo(dtype)  # a pad token into tokens: its range, no cast to check
        if info.min <= fill <= info.max:
            return np.asarray(fill, dtype)
    try:
        value = np.asarray(fill)
    except Exception:
        value = None
    if value is None or value.ndim != 0 or not numeric(value.dtype):
        raise TypeError(validation.message(api, "fill", f"a number ({of} dtype is {dtype})", fill))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # overflow, and a complex's imaginary part dropped
        try:
            held_value = value.astype(dtype)
            back = held_value.astype(value.dtype)
        except Exception:
            held_value = back = None
        if held_value is None or back is None:
            held = False
        elif jnp.issubdtype(dtype, np.inexact):  # any number, but no overflow or lost part
            lost = not jnp.issubdtype(dtype, np.complexfloating) and bool(np.imag(value) != 0)
            overflowed = bool(np.isfinite(value)) and not bool(np.isfinite(held_value))
            held = not lost and not overflowed
        else:  # a bool or an int: exactly
            held = bool(back == value)
    if held_value is None or not held:
        expected = f"a value that {of} dtype {dtype} holds"
        raise ValueError(validation.message(api, "fill", expected, fill))
    return held_value
