"""Shortening printed text without cutting a name or a value in two.

A line that names the leaf that changed is useless once the name is cut in the
middle (``model.layers[1].weigh ... ion relu>``). These helpers drop whole
items (leaves of a call, path segments, words) and say how many went, keeping
the ends, where the names are. Every line of a message fits in `LINE_LIMIT`
characters: `fit` cuts a line in the middle where nothing better was done.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_PATH_PART = re.compile(r"\[[^\]]*\]|\.?[^.\[]+")


def path(text: str, limit: int) -> str:
    """A leaf path of at most ``limit`` characters: its first segment (the argument)
    and as many of its last segments as fit, whole, with ``...`` between."""
    if len(text) <= limit:
        return text
    parts: list[str] = _PATH_PART.findall(text)
    if len(parts) < 2 or "".join(parts) != text:
        return tail(text, limit)
    head: str = parts[0]
    kept: list[str] = []
    room = limit - len(head) - 3
    for part in reversed(parts[1:]):
        if len(part) > room:
            break
        kept.insert(0, part)
        room -= len(part)
    if not kept:
        return tail(text, limit)
    return f"{head}...{''.join(kept)}"


def tail(text: str, limit: int) -> str:
    """The end of ``text`` in at most ``limit`` characters (``...`` first): for dotted
    names (``test_x.<locals>.step``) the end is the name itself."""
    if len(text) <= limit:
        return text
    if "." in text:
        parts = text.split(".")
        kept: list[str] = []
        room = limit - 2
        for part in reversed(parts):
            if len(part) + 1 > room:
                break
            kept.insert(0, part)
            room -= len(part) + 1
        if kept:
            return "..." + ".".join(kept)
    return "..." + text[len(text) - (limit - 3) :]


def words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a space (never inside a value),
    ending in ``...``."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 3)
    if cut <= 0:
        return text[: limit - 3] + "..."
    return text[:cut].rstrip(",;:") + " ..."


def items(entries: Sequence[tuple[str, str, bool]], limit: int, separator: str = ", ") -> str:
    """``path: text`` entries joined, in at most ``limit`` characters: whole entries are
    dropped from the middle (``... N more ...``), those marked as mattering last; an
    entry too long alone keeps its path's last segments and its value's start."""
    shown = [f"{name}: {text}" for name, text, _ in entries]
    joined = separator.join(shown)
    if len(joined) <= limit:
        return joined
    each = max(limit // 2, 40)
    shown = [
        entry if len(entry) <= each else _one(name, text, each)
        for entry, (name, text, _) in zip(shown, entries, strict=True)
    ]
    return joined_within(shown, [entry[2] for entry in entries], limit, separator)


def joined_within(
    shown: Sequence[str], marked: Sequence[bool], limit: int, separator: str = ", "
) -> str:
    """``shown`` joined, in at most ``limit`` characters: whole entries dropped from the
    middle (``... N more ...``), those ``marked`` last, then the first and the latest."""
    joined = separator.join(shown)
    if len(joined) <= limit:
        return joined
    order = sorted(range(len(shown)), key=lambda i: (not marked[i], i != 0, -i))
    kept: list[int] = []
    text = ""
    for index in order[:64]:  # at most a few dozen entries fit in a line
        trial = _joined(shown, {*kept, index}, separator)
        if len(trial) <= limit:
            kept.append(index)
            text = trial
    return text or words(shown[0], limit)


def _joined(shown: Sequence[str], kept: set[int], separator: str) -> str:
    parts: list[str] = []
    dropped = 0
    for index, entry in enumerate(shown):
        if index in kept:
            if dropped:
                parts.append(f"... {dropped} more ...")
                dropped = 0
            parts.append(entry)
        else:
            dropped += 1
    if dropped:
        parts.append(f"... {dropped} more")
    return separator.join(parts)


def _one(name: str, text: str, limit: int) -> str:
    value = words(text, max(min(len(text), limit // 2), 12))
    return f"{path(name, max(limit - len(value) - 2, 12))}: {value}"


# --- lines that fit ------------------------------------------------------------------------

LINE_LIMIT = 200  # no line of a message is longer
MAX_NAME = 60  # a function's name in a heading, a leaf's path in a list
MAX_CELL = 60  # a table's cell, a value in a list of traces


def fit(line: str, limit: int = LINE_LIMIT) -> str:
    """``line``, elided in the middle to at most ``limit`` characters."""
    if len(line) <= limit:
        return line
    keep = limit - 5
    head = keep * 2 // 3
    return f"{line[:head]} ... {line[len(line) - (keep - head) :]}"


def window(text: str, at: int, limit: int) -> str:
    """At most ``limit`` characters of ``text`` around position ``at``."""
    if len(text) <= limit:
        return text
    size = max(limit - 6, 1)
    start = max(0, min(at - size // 3, len(text) - size))
    piece = text[start : start + size]
    return ("..." if start > 0 else "") + piece + ("..." if start + size < len(text) else "")


def pair(before: str, after: str, limit: int) -> tuple[str, str]:
    """Two texts cut to ``limit`` characters each, keeping the part where they differ."""
    at = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        at += 1
    return window(before, at, limit), window(after, at, limit)
