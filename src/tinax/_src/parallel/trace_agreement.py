"""Trace agreement: the processes of a multi-process mesh must trace alike.

In a multi-controller JAX job every process runs the same program; an object
whose mesh spans several processes compiles one SPMD program whose collectives
need every process. If one host retraces (a short last batch) while the others
reuse the old program, the collectives no longer match and the job hangs.

Once `fail_fast` is armed, every trace of such an object publishes its
abstract signature in JAX's coordination key-value store under
``tinax/agree/<object>/<round>/<process>`` and waits, up to ``trace_timeout``
seconds, for the other processes of the mesh to publish theirs for the same
object and round. A process missing at the deadline, or a signature that
differs, ends the job (`job_failure.fail_agreed`) with one message naming who
traced, who did not, and the differences.

Two objects on two processes are "the same" when the wrapped function's
qualified name, the file name and line where the object was built, and the
object's rank among the objects built there (in order of construction) all
agree. The file's directory is left out, so that hosts with different checkout
paths still agree.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from tinax._src import private
from tinax._src.diagnosis import compare, record, report, reuse
from tinax._src.diagnosis.kinds import HINTS
from tinax._src.parallel import job_failure

if TYPE_CHECKING:
    from jax.sharding import Mesh

    from tinax._src.diagnosis.record import TracedSignature
    from tinax._src.objects.handle import Handle

_PREFIX = "tinax/agree/"
_MAX_LISTED = 12
_MAX_NAME = 60

_lock = threading.Lock()
_built: dict[tuple[str, int] | None, int] = {}  # place built -> objects built there so far
_mesh_processes: dict[Mesh, tuple[int, ...]] = {}


class Agreement:
    """An object's state here, once a trace of it is checked (the handle's ``agreement``;
    until then, its rank alone: no object made at wrap time): its rank among the objects
    built at its place, in order, and the traces checked across processes so far."""

    __slots__ = ("rank", "rounds")

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.rounds = 0


def _rank(handle: Handle) -> int:
    """The object's rank among the objects built at its place (`constructed`)."""
    found = handle.agreement
    return found.rank if isinstance(found, Agreement) else cast("int", found)


def _agreement(handle: Handle) -> Agreement:
    """The handle's ``agreement``, made from its rank at its first check (under ``_lock``)."""
    found = handle.agreement
    if isinstance(found, Agreement):
        return found
    made = handle.agreement = Agreement(cast("int", found))
    return made


def _place(handle: Handle) -> tuple[str, int] | None:
    """Where the user's code built the object (its birth, `observe.rebuilt`), or ``None``."""
    birth = cast("tuple[tuple[str, int], Any] | None", handle.birth)
    return None if birth is None else birth[0]


def constructed(handle: Handle) -> None:
    """Gives a new object its rank among the objects built at its place (wrap time: a
    dictionary update; the identity text is made only at a trace that is checked)."""
    place = _place(handle)
    with _lock:
        rank = _built.get(place, 0)
        _built[place] = rank + 1
    handle.agreement = rank


def identity(handle: Handle) -> str | None:
    """What every process (and every run of the program: warm start) calls this object:
    function, file name and line where it was built, and its rank among the objects
    built there; ``None`` for an object no user code built."""
    place = _place(handle)
    if place is None:
        return None
    filename, line = place
    rank = _rank(handle)
    return f"{_name(handle.function)} built at {os.path.basename(filename)}:{line}, #{rank}"


def _name(function: Callable[..., Any]) -> str:
    """The function's qualified name; a callable whose attributes raise must not break
    the construction of its wrapper."""
    try:
        return report.function_name(function)
    except Exception:
        return "<unnamed function>"


def _processes(mesh: Mesh) -> tuple[int, ...]:
    found = _mesh_processes.get(mesh)
    if found is None:
        found = tuple(sorted({int(device.process_index) for device in mesh.devices.flat}))
        if len(_mesh_processes) > 256:
            _mesh_processes.clear()
        _mesh_processes[mesh] = found
    return found


def _listed(processes: Sequence[int]) -> str:
    if len(processes) == 1:
        return f"process {processes[0]}"
    return "processes " + ", ".join(str(process) for process in processes)


def _payload(call: TracedSignature) -> bytes:
    text = record.signature_text(call)
    try:  # abstract values load as the receiver's own, so that no comparison hangs on identity
        return private.portable_dumps((text, call))
    except Exception:  # a static value that does not pickle: compare by text
        return pickle.dumps((text, None))


def _unpacked(data: bytes) -> tuple[str, TracedSignature | None]:
    try:
        text, signature = pickle.loads(data)  # written by this job's own processes
        return str(text), signature
    except Exception:
        return "(unreadable)", None


def _same(mine: tuple[str, TracedSignature | None], theirs: tuple[str, Any]) -> bool:
    if mine[1] is not None and theirs[1] is not None:
        try:
            return reuse.matches(mine[1], theirs[1])
        except Exception:
            pass
    return mine[0] == theirs[0]


def check(handle: Handle, call: TracedSignature, history: Sequence[TracedSignature]) -> None:
    """At a trace: if the ambient mesh spans several processes, waits for the others to
    make the same trace, and ends the job if they do not. Store errors skip the check."""
    job = job_failure.current_job()
    mesh = private.ambient_concrete_mesh()
    if job is None or mesh is None:
        return
    processes = _processes(mesh)
    if len(processes) < 2 or job.index not in processes:
        return
    name = identity(handle)
    if name is None:
        return
    function = handle.function
    with _lock:
        agreement = _agreement(handle)
        agreement.rounds += 1
        round_ = agreement.rounds
    digest = hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()[:24]
    base = f"{_PREFIX}{digest}/{round_}/"
    payload = _payload(call)
    try:
        job.client.key_value_set_bytes(base + str(job.index), payload, allow_overwrite=True)
    except Exception:
        return
    deadline = time.monotonic() + job.trace_timeout
    seen: dict[int, tuple[str, Any]] = {job.index: _unpacked(payload)}
    missing: list[int] = []
    for process in processes:
        if process == job.index:
            continue
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            seen[process] = _unpacked(
                job.client.blocking_key_value_get_bytes(base + str(process), left_ms)
            )
        except Exception:
            missing.append(process)
    mine = seen[job.index]
    if not missing and all(_same(mine, theirs) for theirs in seen.values()):
        return
    text = disagreement(
        function, processes, len(history) + 1, seen, missing, history, job.trace_timeout
    )
    heading = (
        f"tinax.parallel.fail_fast: process {job.index} of {job.count} found that the "
        "processes traced differently; ending every process."
    )
    job_failure.fail_agreed(job, f"{heading}\n{text}")


def _groups(seen: dict[int, tuple[str, Any]]) -> list[tuple[list[int], tuple[str, Any]]]:
    """The processes that traced, grouped by signature, in order of their lowest index."""
    groups: list[tuple[list[int], tuple[str, Any]]] = []
    for process in sorted(seen):
        for members, signature in groups:
            if _same(signature, seen[process]):
                members.append(process)
                break
        else:
            groups.append(([process], seen[process]))
    return groups


def _difference_lines(
    old: TracedSignature | None, new: tuple[str, Any], on: Sequence[int]
) -> tuple[list[str], list[Any]]:
    where = f" on {_listed(on)}"
    if old is not None and new[1] is not None:
        try:
            found = list(compare.differences(old, new[1]))
        except Exception:
            found = []
        if found:
            lines = [report.fit(f"  {difference}{where}") for difference in found[:_MAX_LISTED]]
            if len(found) > _MAX_LISTED:
                lines.append(f"  ... and {len(found) - _MAX_LISTED} more{where}")
            return lines, found
    return [report.fit(f"  {new[0]}{where}")], []


def disagreement(
    function: Callable[..., Any],
    processes: Sequence[int],
    number: int,
    seen: dict[int, tuple[str, Any]],
    missing: Sequence[int],
    history: Sequence[TracedSignature],
    timeout: float,
) -> str:
    """The message for a trace the processes of a mesh did not make alike."""
    name = report.fit(_name(function), _MAX_NAME)
    location = report.function_location(function)
    where = f"{name} ({location})" if location else name
    groups = _groups(seen)
    traced = sorted(seen)
    lines = [
        report.fit(
            f"{where}: the processes of its mesh ({', '.join(map(str, processes))}) no longer "
            "trace it alike, so their collectives would hang."
        )
    ]
    if missing:
        lines.append(
            report.fit(
                f"Trace {number} was made by {_listed(traced)} but not by {_listed(missing)} "
                f"within trace_timeout={timeout:g} s."
            )
        )
    if len(groups) > 1:
        lines.append(
            f"Trace {number} has {len(groups)} different signatures: "
            + "; ".join(_listed(members) for members, _ in groups)
            + "."
        )
    found: list[Any] = []
    if len(groups) > 1:
        reference_members, reference = groups[0]
        lines.append(f"Differences from the signature of {_listed(reference_members)}:")
        for members, signature in groups[1:]:
            more, kinds = _difference_lines(reference[1], signature, members)
            lines.extend(more)
            found.extend(kinds)
    else:
        best, _ = (
            compare.closest(history, groups[0][1][1])
            if groups[0][1][1] is not None and history
            else (None, ())
        )
        if best is None:
            lines.append("No earlier trace to compare with; this trace:")
            lines.extend(_difference_lines(None, groups[0][1], groups[0][0])[0])
        else:
            lines.append(f"Differences from trace #{best.number}, which every process made:")
            more, found = _difference_lines(best, groups[0][1], groups[0][0])
            lines.extend(more)
    fixes: dict[str, str] = {}
    for difference in found:
        for kind in difference.kinds:
            fixes.setdefault(kind, difference.fix or HINTS[kind])
    if fixes:
        lines.append("How to fix:")
        lines.extend(report.fit(f"  {kind}: {fix}") for kind, fix in fixes.items())
    return "\n".join(lines)
