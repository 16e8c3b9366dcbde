"""The port, written out: the ``bounded_jit(...)`` line that would hold the run audited."""

from __future__ import annotations

from tinax._src.audit.recorder import EQUINOX, JAX_JIT, NNX, TINAX, Book
from tinax._src.buckets.sizes import bucket_sizes
from tinax._src.diagnosis.record import TracedSignature

_MAX_TRACES_FLOOR = 1


def axis_sizes(signatures: list[TracedSignature]) -> dict[str, dict[int, tuple[int, ...]]]:
    """``{leaf path: {axis: sizes seen}}`` for each array axis that took several sizes
    while the array kept its rank, in first-seen order of paths; sizes increasing."""
    seen: dict[str, dict[int, set[int]]] = {}
    ranks: dict[str, set[int]] = {}
    for signature in signatures:
        for leaf in signature.leaves:
            if leaf.kind != "array" or leaf.shape is None:
                continue
            ranks.setdefault(leaf.path, set()).add(len(leaf.shape))
            axes = seen.setdefault(leaf.path, {})
            for axis, size in enumerate(leaf.shape):
                axes.setdefault(axis, set()).add(size)
    found: dict[str, dict[int, tuple[int, ...]]] = {}
    for path, axes in seen.items():
        if len(ranks[path]) != 1 or "." in path:  # a model's field: its shape is the model's
            continue
        varied = {axis: tuple(sorted(sizes)) for axis, sizes in axes.items() if len(sizes) > 1}
        if varied:
            found[path] = varied
    return found


def _buckets_text(axes: dict[str, dict[int, tuple[int, ...]]]) -> tuple[str, int]:
    """``buckets={...}`` text with `bucket_sizes` of each axis's sizes, and how many
    combinations it declares."""
    entries: list[str] = []
    combinations = 1
    for path, sizes_of in axes.items():
        inner: list[str] = []
        for axis, sizes in sizes_of.items():
            combinations *= len(bucket_sizes(sizes[0], sizes[-1]))
            inner.append(f"{axis}: {_sizes(sizes)}")
        entries.append(f"{path!r}: {{{', '.join(inner)}}}")
    return "buckets={" + ", ".join(entries) + "}", combinations


def _sizes(sizes: tuple[int, ...]) -> str:
    return f"tinax.jit.bucket_sizes({sizes[0]}, {sizes[-1]})"


def _pad_lines(axes: dict[str, dict[int, tuple[int, ...]]]) -> list[str]:
    """Per bucketed axis, the line that pads a call's input to its bucket."""
    return [
        f"{path}, _ = tinax.jit.pad_to_bucket({path}, {_sizes(sizes)}, axis={axis})"
        for path, sizes_of in axes.items()
        for axis, sizes in sizes_of.items()
    ]


def port_line(book: Book) -> str:
    """``name = tinax.jit.bounded_jit(name, max_traces=N, ...)``: ``max_traces`` the traces
    seen (at least the buckets' combinations), ``buckets=`` where an axis took several sizes
    (from `bucket_sizes` of the smallest and largest seen), ``static_nonarrays=True`` for an
    `equinox.filter_jit` (a model passed whole), ``propagate_updates=True`` for an
    ``nnx.jit``; a `jax.jit`'s statics carried over. A tinax object is already one."""
    short = book.name.rpartition(".")[2]
    if not short.isidentifier():  # a lambda
        short = "f"
    if book.kind == TINAX:
        return f"{short}: already a tinax object (its traces_used and explain tell the rest)"
    traces = [t for t in book.traces if not t.failed]
    signatures = [t.signature for t in traces if t.signature is not None]
    options: list[str] = []
    max_traces = max(len(traces), _MAX_TRACES_FLOOR)
    axes = axis_sizes(signatures)
    if axes:
        text, combinations = _buckets_text(axes)
        max_traces = max(max_traces, combinations)
        options.append(text)
    if book.kind == EQUINOX:
        options.append("static_nonarrays=True")
    elif book.kind == NNX:
        options.append("propagate_updates=True")
    if book.kind == JAX_JIT and book.statics.argnums:
        options.append(f"static_argnums={book.statics.argnums!r}")
    if book.kind == JAX_JIT and book.statics.argnames:
        options.append(f"static_argnames={book.statics.argnames!r}")
    joined = ", ".join([f"max_traces={max_traces}", *options])
    lines = [f"{short} = tinax.jit.bounded_jit({short}, {joined})"]
    if axes:  # each call's inputs padded to their buckets
        lines.extend(_pad_lines(axes))
    return "\n".join(lines)
