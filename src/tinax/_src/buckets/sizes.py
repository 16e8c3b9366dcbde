"""Lists of bucket sizes: checking one (`check_sizes`), the usual ones (`bucket_sizes`),
and padding an array to the smallest size that holds it (`pad_to_bucket`)."""

from __future__ import annotations

import operator
from typing import Any, cast

from tinax._src.core import validation


def check_sizes(api: str, parameter: str, value: object) -> tuple[int, ...]:
    """``value`` as a tuple of sizes: a non-empty, ordered sequence of positive ints
    (booleans rejected), strictly increasing. ``api`` and ``parameter`` name it in the
    message (``"BoundedJit"``, ``"buckets['x'][1]"``)."""
    expected = "a non-empty sequence of positive int, increasing"
    try:  # ordered and sized: a list, a tuple, a range, a NumPy array (not a set, a str)
        unordered = isinstance(cast("Any", value), (str, bytes, set, frozenset))
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
        if isinstance(entry, bool) or not _is_index(entry):
            raise TypeError(validation.message(api, f"{parameter}[{index}]", "an int", entry))
        size = operator.index(entry)
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


def _is_index(value: object) -> bool:
    try:
        operator.index(value)  # pyright: ignore[reportArgumentType]
    except Exception:
        return False
    return True
