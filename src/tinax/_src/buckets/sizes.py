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
        size = None if type(entry) is bool else _index(entry)
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


def _index(value: object) -> int | None:
    """``value`` as an int, where it is one (`operator.index`: a NumPy integer too)."""
    try:
        return int(operator.index(cast("Any", value)))
    except Exception:
        return None
