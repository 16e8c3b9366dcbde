"""A traced call compared with its object's buckets (`declared.Declared`): what of it
is outside them (`misses`: a size that is no bucket, axes of one `Dim` that differ, a
combination ``where`` rules out), the fix, and which combination a trace is
(`combination`), so that a call outside the buckets is named before it traces. A call
inside them never comes here: it is JAX's own cached call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, TypeAlias, cast

from tinax._src.buckets.declared import Declared, inside
from tinax._src.buckets.dims import Bucket
from tinax._src.buckets.writes import PADDED, writes
from tinax._src.diagnosis.elide import LINE_LIMIT
from tinax._src.diagnosis.record import Leaf, TracedSignature


class Miss(NamedTuple):
    """A declared axis whose size in a call is no bucket."""

    path: str
    axis: int
    size: int
    sizes: tuple[int, ...]
    others: str = ""  # arrays under one key that disagree: their sizes, as text
    arrays: tuple[str, ...] = ()  # the paths of the call's arrays under ``path``
    writes: tuple[str | None, ...] = ()  # per array: the statement that puts it back

    @property
    def paddable(self) -> bool:
        """Whether a bucket holds the size: padding the input fixes the call."""
        return not self.others and self.size <= self.sizes[-1]

    def text(self) -> str:
        """``batch['tokens'], axis 1: 37 is no bucket of (16, 32, 64): pad it to 64``."""
        head = f"{self.path}, axis {self.axis}: "
        if self.others:
            return (
                f"{head}its arrays differ ({self.others}); the arrays under one key share a bucket"
            )
        if self.size > self.sizes[-1]:
            return (
                f"{head}{self.size} is larger than the largest bucket, {self.sizes[-1]}: "
                "split the input, or add a larger bucket"
            )
        target = next(size for size in self.sizes if size > self.size)
        return f"{head}{self.size} is no bucket of {_sizes_text(self.sizes)}: pad it to {target}"

    def fixes(self) -> list[str]:
        """The fix, one line per array, as code to run before the call where padding is
        one: ``pad before the call: tokens, length = tinax.jit.pad_to_bucket(tokens,
        (16, 32, 64), axis=1) (length: its true size, to mask the padding)``. An array
        held by an immutable container (a tuple, a NamedTuple, a frozen dataclass, an
        equinox Module) is padded into ``padded`` and put back by a second statement on
        the line (`writes.write`): ``...; batch = batch._replace(tokens=padded)``."""
        largest = self.sizes[-1]
        if self.size > largest:  # with ``others``: the largest of the arrays' sizes
            return [
                f"{self.path}, axis {self.axis}: split the input into pieces of at most "
                f"{largest} (the largest bucket), or add a larger bucket to buckets= and "
                "raise max_traces with it"
            ]
        arrays = self.arrays or (self.path,)
        if self.others:  # every array padded to the bucket that holds the largest of them
            target = next(size for size in self.sizes if size >= self.size)
            sizes: tuple[int, ...] = (target,)
            head = f"pad to {target}, one bucket for the arrays under {self.path}"
        else:
            sizes, head = self.sizes, "pad"
        puts = self.writes or (None,) * len(arrays)
        note = " (length: its true size, to mask the padding)"
        pads = [
            (f"tinax.jit.pad_to_bucket({path}, {sizes!r}, axis={self.axis})", path, put)
            for path, put in zip(arrays[:_LISTED], puts, strict=False)
        ]
        joined = [
            f"{head} before the call: {path}, length = {pad}{note}"
            if put is None
            else f"{head} before the call: {PADDED}, length = {pad}; {put}{note}"
            for pad, path, put in pads
        ]
        if all(len(line) <= _CODE_ROOM for line in joined):
            lines = joined
        else:  # each put-back on its own line, so that no code is elided: it must run
            lines: list[str] = []
            for pad, path, put in pads:
                name = path if put is None else PADDED
                lines.append(f"{head} before the call: {name}, length = {pad}{note}")
                if put is not None:
                    lines.append(f"{PUT_BACK} {put}")
        if len(arrays) > _LISTED:
            lines.append(f"and the {len(arrays) - _LISTED} more arrays under {self.path} alike")
        return lines


class Untied(NamedTuple):
    """Axes given one `Dim` that take different sizes in a call: ``axes`` is each axis's
    path, axis number and size, in declaration order; ``short``, the padding of each
    axis shorter than the size that holds them all, as a `Miss` to that one size (its
    arrays, and how each is put back)."""

    name: str
    sizes: tuple[int, ...]
    axes: tuple[tuple[str, int, int], ...]
    short: tuple[Miss, ...] = ()

    @property
    def paddable(self) -> bool:
        """Never: padding each array to its own bucket does not tie them."""
        return False

    @property
    def others(self) -> str:
        """None: the arrays of each key agree."""
        return ""

    def text(self) -> str:
        """``Dim 'length': batch['tokens'] axis 1 is 32, lengths axis 0 is 16; ...``."""
        shown = ", ".join(f"{path} axis {axis} is {size}" for path, axis, size in self.axes)
        return f"Dim {self.name!r}: {shown}; the axes given one Dim take one size"

    def fixes(self) -> list[str]:
        """The fix: each shorter axis padded to the size that holds them all, as code to
        run before the call (`Miss.fixes` to that one size), or else split the input."""
        largest = max(size for _, _, size in self.axes)
        if largest > self.sizes[-1]:
            return [
                f"Dim {self.name!r}: split the input into pieces of at most {self.sizes[-1]} "
                "(its largest size), or add a larger size to the Dim and raise max_traces "
                "with it"
            ]
        target = untied_target(self.sizes, self.axes)
        short = ", ".join(f"{path} axis {axis}" for path, axis, size in self.axes if size < target)
        code = [line for miss in self.short for line in miss.fixes()]
        return [
            f"Dim {self.name!r}: pad {short} to {target}, its size that holds them all"
            + (":" if code else ""),
            *code,
            "or, where those axes differ by design, give each its own Dim and raise max_traces "
            "to the combinations",
        ]


def untied_target(sizes: tuple[int, ...], axes: Sequence[tuple[str, int, int]]) -> int:
    """The size of ``sizes`` that holds every axis of ``axes`` (the largest size past
    them all: there is none to pad to)."""
    largest = max(size for _, _, size in axes)
    return next((size for size in sizes if size >= largest), sizes[-1])


class RuledOut(NamedTuple):
    """A call whose sizes are buckets, in a combination ``where`` rules out: ``taken``
    as ``name=size`` text."""

    taken: str

    @property
    def paddable(self) -> bool:
        """Never: every size is a bucket already."""
        return False

    @property
    def others(self) -> str:
        """None: the arrays of each key agree."""
        return ""

    def text(self) -> str:
        """``rows=8, length=2048: a combination that where rules out (it returned False)``."""
        return f"{self.taken}: a combination that where rules out (it returned False)"

    def fixes(self) -> list[str]:
        return [
            "split the call into calls in combinations that where allows, or widen where= "
            "and raise max_traces with it"
        ]


Outside: TypeAlias = Miss | Untied | RuledOut
"""What of a call is outside the buckets, one line of its error each."""


_LISTED = 3  # arrays of one key whose padding a fix writes out
_CODE_ROOM = LINE_LIMIT - len("  shape: ")  # a fix line's room, after the longest indent
PUT_BACK = "and put it back before the call:"
"""The head of a fix line that puts a padded array back, where one line cannot hold both."""


def _padding(found: Sequence[Outside]) -> tuple[str, ...]:
    """Each miss's fix lines (`Miss.fixes`), each line once; a line that puts an array
    back each time, after the padding it follows (an array missing on two axes)."""
    lines: list[str] = []
    for miss in found:
        for line in miss.fixes():
            if line.startswith(PUT_BACK) or line not in lines:
                lines.append(line)
    return tuple(lines)


def fix_lines(found: Sequence[Outside]) -> list[str]:
    """The "How to fix:" lines of a call outside the buckets: each miss's fix, then, where
    one is padding, that the size can be declared instead, and where arrays under one key
    differ, that each can have a key of its own."""
    lines = list(_padding(found))
    if any(miss.paddable for miss in found):
        lines.append("or add the size to buckets= and raise max_traces with it")
    if any(miss.others for miss in found):
        lines.append(
            "or, where those arrays' sizes differ by design, give each its own key in buckets= "
            "and raise max_traces to the combinations"
        )
    return lines


def _sizes_text(sizes: tuple[int, ...]) -> str:
    """The sizes as Python writes a tuple of them (``(4,)`` for one), elided past 12."""
    if len(sizes) <= 12:
        return repr(tuple(int(size) for size in sizes))
    return f"({', '.join(map(str, sizes[:6]))}, ..., {', '.join(map(str, sizes[-3:]))})"


def _arrays(call: TracedSignature) -> list[Leaf]:
    return [leaf for leaf in call.leaves if leaf.kind == "array" and leaf.shape is not None]


def _under(leaves: Sequence[Leaf], key: str) -> list[Leaf]:
    return [leaf for leaf in leaves if inside(leaf.path, key)]


def sizes_of(api: str, buckets: Declared, call: TracedSignature) -> Iterator[tuple[Bucket, Leaf]]:
    """Each declared axis with each array of ``call`` under its path. Raises
    `ValueError` for a declaration the call shows wrong: a path under which the
    call has no array while its argument has some, an axis beyond an array's rank."""
    arrays = _arrays(call)
    for entry in buckets.entries:
        found = _under(arrays, entry.path)
        if not found:
            of_argument = _under(call.leaves, entry.argument)
            if of_argument:  # the argument is passed, but nothing lies at the path
                paths = ", ".join(leaf.path for leaf in of_argument[:6])
                more = ", ..." if len(of_argument) > 6 else ""
                raise ValueError(
                    f"{api}: buckets names {entry.path!r}, under which this call has no "
                    f"array; the leaves of {entry.argument} are: {paths}{more}."
                )
            continue
        for leaf in found:
            shape = cast("tuple[int, ...]", leaf.shape)
            if entry.axis >= len(shape):
                raise ValueError(
                    f"{api}: buckets names axis {entry.axis} of {entry.path!r}, but "
                    f"{leaf.path} is {leaf.text}, of rank {len(shape)}: "
                    + (
                        "its only axis is 0."
                        if len(shape) == 1
                        else f"its axes are 0 to {len(shape) - 1}."
                    )
                    if shape
                    else f"{api}: buckets names axis {entry.axis} of {entry.path!r}, but "
                    f"{leaf.path} is {leaf.text}, a scalar: it has no axis."
                )
            yield entry, leaf


def _grouped(
    api: str, buckets: Declared, call: TracedSignature
) -> Iterator[tuple[Bucket, list[Leaf], set[int]]]:
    """Each declared axis, in declaration order, with the arrays of ``call`` under its
    path and the sizes they take on it (`sizes_of`'s errors raised)."""
    seen: dict[tuple[str, int], list[Leaf]] = {}
    for entry, leaf in sizes_of(api, buckets, call):
        seen.setdefault((entry.path, entry.axis), []).append(leaf)
    for entry in buckets.entries:
        leaves = seen.get((entry.path, entry.axis), [])
        yield entry, leaves, {cast("tuple[int, ...]", leaf.shape)[entry.axis] for leaf in leaves}


def misses(api: str, buckets: Declared, call: TracedSignature) -> tuple[Outside, ...]:
    """What of ``call`` is outside the buckets (empty: nothing): each declared axis whose
    size is no bucket, each `Dim` whose axes take different sizes, and, where every
    size is a bucket, a combination that ``where`` rules out."""
    found: list[Outside] = []
    taken: dict[int, int] = {}  # each declared axis whose arrays agree: its size
    held: dict[int, list[Leaf]] = {}  # and its arrays
    for index, (entry, leaves, sizes) in enumerate(_grouped(api, buckets, call)):
        held[index] = leaves
        if len(sizes) > 1:
            others = ", ".join(
                f"{leaf.path} {cast('tuple[int, ...]', leaf.shape)[entry.axis]}"
                for leaf in leaves[:4]
            )
            arrays = tuple(leaf.path for leaf in leaves)
            puts = writes(call, arrays[:_LISTED])
            found.append(
                Miss(entry.path, entry.axis, max(sizes), entry.sizes, others, arrays, puts)
            )
            continue
        if not sizes:  # an argument left out of this call: nothing to compare
            continue
        size = taken[index] = next(iter(sizes))
        if size not in entry.sizes:
            arrays = tuple(leaf.path for leaf in leaves)
            puts = writes(call, arrays[:_LISTED])
            found.append(
                Miss(entry.path, entry.axis, size, entry.sizes, arrays=arrays, writes=puts)
            )
    for dimension in buckets.dimensions:
        axes = [
            (buckets.entries[index].path, buckets.entries[index].axis, taken[index])
            for index in dimension.entries
            if index in taken
        ]
        if dimension.name is not None and len({size for _, _, size in axes}) > 1:
            target = untied_target(dimension.sizes, axes)
            short: list[Miss] = []
            for index in dimension.entries:
                if index not in taken or taken[index] >= target:
                    continue
                entry, arrays = buckets.entries[index], tuple(leaf.path for leaf in held[index])
                puts = writes(call, arrays[:_LISTED])
                short.append(
                    Miss(
                        entry.path, entry.axis, taken[index], (target,), arrays=arrays, writes=puts
                    )
                )
            found.append(Untied(dimension.name, dimension.sizes, tuple(axes), tuple(short)))
    allowed = buckets.allowed
    if found or allowed is None:
        return tuple(found)
    sizes = _per_dimension(buckets, taken)
    if sizes is not None and sizes not in allowed:
        names = (cast("str", dimension.name) for dimension in buckets.dimensions)
        shown = ", ".join(f"{name}={size}" for name, size in zip(names, sizes, strict=True))
        found.append(RuledOut(shown))
    return tuple(found)


def _per_dimension(buckets: Declared, taken: dict[int, int]) -> tuple[int, ...] | None:
    """The size of each dimension, from ``taken`` (declared axis -> its size), where each
    one has an axis in it; ``None`` where one has none (an argument left out)."""
    sizes: list[int] = []
    for dimension in buckets.dimensions:
        found = [taken[index] for index in dimension.entries if index in taken]
        if not found:
            return None
        sizes.append(found[0])
    return tuple(sizes)


def combination(buckets: Declared, call: TracedSignature) -> tuple[int, ...] | None:
    """The sizes ``call`` takes, one per dimension (in their order), where it is a
    combination the buckets declare: every size a bucket, the axes of each `Dim` alike,
    allowed by ``where``; else ``None`` (a call outside the buckets, or one not
    recorded)."""
    taken: dict[int, int] = {}
    try:
        for index, (entry, _, sizes) in enumerate(_grouped("", buckets, call)):
            if len(sizes) != 1 or (size := next(iter(sizes))) not in entry.sizes:
                return None
            taken[index] = size
    except ValueError:
        return None
    for dimension in buckets.dimensions:
        if len({taken[index] for index in dimension.entries}) != 1:
            return None
    sizes = _per_dimension(buckets, taken)
    if sizes is None or (buckets.allowed is not None and sizes not in buckets.allowed):
        return None
    return sizes


def declared_trace(
    buckets: Declared, entry: TracedSignature, earlier: Sequence[TracedSignature]
) -> bool:
    """Whether ``entry`` is the first trace of a combination of buckets: one the buckets
    declare. A second trace of one combination (a new dtype) is a retrace as any other."""
    taken = combination(buckets, entry)
    return taken is not None and all(combination(buckets, old) != taken for old in earlier)


def shape_fix(
    api: str, buckets: Declared, closest: TracedSignature | None, call: TracedSignature
) -> tuple[str, ...]:
    """The fix for ``call``'s shape differences from ``closest`` that is true of an object
    with ``buckets``, one line each: its misses' padding (`Miss.fixes`), or, where only
    declared axes changed and to buckets, compiling every combination ahead; none where
    the usual fix (pad or bucket the inputs) is the true one."""
    try:
        found = misses(api, buckets, call)
    except ValueError:  # a declaration the call shows wrong: its own error says so
        return ()
    if found:
        return _padding(found)
    taken = combination(buckets, call)
    if closest is None or taken is None:
        return ()
    before = {leaf.path: leaf.shape for leaf in _arrays(closest)}
    changed = False
    for leaf in _arrays(call):
        shape, old = cast("tuple[int, ...]", leaf.shape), before.get(leaf.path)
        if old is None or old == shape:
            continue
        if len(old) != len(shape):  # a new rank: no bucket makes it
            return ()
        covered = {entry.axis for entry in buckets.entries if inside(leaf.path, entry.path)}
        if any(
            a != b and axis not in covered
            for axis, (a, b) in enumerate(zip(old, shape, strict=True))
        ):
            return ()  # an axis with no buckets changed: the usual fix
        changed = True
    if not changed:
        return ()
    return (
        f"this call's sizes ({combination_text(buckets, taken)}) are buckets, each "
        "combination traced once: compile them all ahead with the object's "
        "precompile_buckets(*example_args), and no call inside them traces",
    )


def combination_text(buckets: Declared, taken: Sequence[int]) -> str:
    """``batch axis 1: 64, image axis 0: 8``, or ``length: 64`` for a `Dim`: a
    combination of sizes (one per dimension), for a person."""
    return ", ".join(
        f"{buckets.entries[dimension.entries[0]].path} axis "
        f"{buckets.entries[dimension.entries[0]].axis}: {size}"
        if dimension.name is None
        else f"{dimension.name}: {size}"
        for dimension, size in zip(buckets.dimensions, taken, strict=True)
    )


def compiled_summary(buckets: Declared, history: Sequence[TracedSignature]) -> tuple[int, float]:
    """How many combinations of buckets ``history`` compiled (or loaded), and the total
    compile time of their traces (`budgets`'s column)."""
    done: set[tuple[int, ...]] = set()
    seconds = 0.0
    for entry in history:
        taken = combination(buckets, entry)
        if taken is None or taken in done:
            continue
        done.add(taken)
        seconds += entry.compile_seconds or 0.0
    return len(done), seconds


def miss_lines(found: Sequence[Outside], call: TracedSignature) -> tuple[str, ...]:
    """Each miss's line (`Miss.text`) with the full shape of each array it names
    (``(tokens: i32[4,37])``), so that an axis declared wrong shows against the shape."""
    shapes = {leaf.path: leaf.text for leaf in _arrays(call)}
    lines: list[str] = []
    for miss in found:
        if isinstance(miss, Miss):
            paths: Sequence[str] = miss.arrays or (miss.path,)
        elif isinstance(miss, Untied):
            paths = tuple(dict.fromkeys(path for path, _, _ in miss.axes))
        else:
            paths = ()
        shown = [f"{path}: {shapes[path]}" for path in paths[:_LISTED] if path in shapes]
        more = f", and {len(paths) - _LISTED} more" if len(paths) > _LISTED else ""
        lines.append(f"{miss.text()} ({', '.join(shown)}{more})" if shown else miss.text())
    return tuple(lines)
