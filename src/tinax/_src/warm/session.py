"""Warm start: every budgeted object compiles last run's signatures as it is built.

`warm_start(path)` is called once, at program start. From then on:

- **Recording.** Each trace an object commits is encoded at trace time (its text
  and its pickle, `manifest.encode`) and wakes a daemon writer thread, which writes
  the file `workers._WRITE_DELAY` seconds later (`manifest.save`: a temporary file, fsync,
  rename; merged under a lock with what the file holds), so that a run killed at any
  moment leaves what it traced; and once more at exit. The file is the process's
  own: ``path``, or under ``jax.distributed`` ``<path stem>.process-<i><suffix>``
  for process ``i > 0``. Each object's run that used a signature counts
  (`manifest.used`): the most used, then most recent, compile ahead.
- **Warm compiles.** An object built at a place the manifest names (same function,
  file, line and rank there) starts compiling the recorded signatures at once, in
  background threads: `precompile`, one task per signature, at most the object's
  budget left. Until they are all done, the object's call is a small wrapper that
  waits for them (a call never traces what a warm compile is tracing); the last one
  to finish puts the `jax.jit` object back as the call, so a cached call costs what
  it costs without warm start. A warm trace that raises (the program has not set
  what it reads yet) is logged at ``INFO``, a signature that no longer unpickles at
  ``WARNING``; either leaves the object as a first call would find it cold.
- **The check.** The warm trace read the program's state as the object was built
  (for one built at module level, during the import). The first call that would run
  from it traces the function again, in its own thread, outside JAX's caches and
  not counted, and compares the two (`same.same_stage`); where they differ, the
  warm trace is dropped (JAX's cache, the budget, the history, the compile counts)
  and the call traces as without warm start (``INFO``).
- **Misses, explained.** A trace at a recorded place that matches no recorded
  signature is logged at ``INFO`` with its differences from the closest one, in
  the words of a budget error; a change of JAX, jaxlib, backend, devices or XLA
  flags since the recorded run, and a function whose code changed, are logged once
  (``INFO``): JAX's persistent cache keys on them, so those compiles start anew.

``TINAX_WARM_START=0`` turns all of it off. Nothing is ever wrong because of a
manifest: a missing, stale or corrupt file is a log line, and the run starts cold.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from typing import TYPE_CHECKING, Any, TypeAlias

from tinax._src import private
from tinax._src.diagnosis import compare, record, report, reuse
from tinax._src.diagnosis.record import TracedSignature
from tinax._src.observe.log import logger
from tinax._src.parallel import trace_agreement
from tinax._src.warm import manifest, warming
from tinax._src.warm.workers import Workers, Writer

if TYPE_CHECKING:
    from tinax._src.objects.handle import Handle
    from tinax._src.objects.ledger import Ledger

_LedgerRef: TypeAlias = "weakref.ref[Ledger]"


class WarmStart:
    """One program's warm start: the manifest read at start, this run's signatures,
    the warm compiles in flight, the writer."""

    def __init__(
        self, path: str, workers: int, loaded: manifest.Manifest | None, file: str | None = None
    ) -> None:
        self.path = path
        self.file = path if file is None else file  # this process's own manifest
        self._workers = Workers(workers)
        self._loaded: dict[str, manifest.Place] = dict(loaded.places) if loaded else {}
        self._loaded_environment = dict(loaded.environment) if loaded else {}
        self._decoded: dict[str, list[TracedSignature]] = {}
        # this run's traces per object: (trace number, as written, its ledger if warm)
        self._recorded: dict[str, list[tuple[int, manifest.Recorded, _LedgerRef | None]]] = {}
        self._functions: dict[str, tuple[str, str | None]] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._environment_checked = False
        self._pending: list[weakref.ref[warming.Warming]] = []
        self._environment_now: dict[str, str] | None = None
        self._writer = Writer(self._write_in_background)
        self._write_lock = threading.Lock()  # one write at a time, each of a newer snapshot
        self._stopped = False  # exit's write is done: no more
        self._write_failed = False

    # --- wrap time -------------------------------------------------------------------

    def built(self, handle: Handle) -> None:
        """An object was built: if last run traced it, compile those signatures now."""
        if not self._loaded:
            return
        name = trace_agreement.identity(handle)
        place = None if name is None else self._loaded.get(name)
        if name is None or place is None or not place.signatures:
            return
        budget = max(0, handle.max_traces - handle.ledger.counted)
        chosen = manifest.ranked(place.signatures)[:budget]  # most used, then most recent
        if not chosen:
            return
        self._check_environment()
        code = manifest.code_digest(handle.function)
        if place.code is not None and code is not None and code != place.code:
            logger.info(
                "tinax warm start: %s: its code changed since the recorded run; its %d "
                "recorded signature(s) compile anew (JAX's persistent cache keys on the code)",
                name,
                len(chosen),
            )
        mesh = private.ambient_concrete_mesh()  # the building thread's: workers have none
        pending = warming.Warming(handle, len(chosen), self._writer.wake, name)
        pending.install()
        with self._lock:
            self._pending.append(weakref.ref(pending))
        logger.debug("tinax warm start: %s: compiling %d recorded signature(s)", name, len(chosen))
        reference = weakref.ref(handle)
        for recorded in chosen:
            self._workers.submit(
                lambda recorded=recorded: self._warm(reference, name, recorded, mesh, pending)
            )

    def _warm(
        self,
        reference: weakref.ref[Handle],
        name: str,
        recorded: manifest.Recorded,
        mesh: Any,
        pending: warming.Warming,
    ) -> None:
        number = None
        kept = None
        decoded = False
        try:
            handle = reference()
            owner = None if handle is None else handle.public()  # alive while it compiles
            if handle is None or owner is None:
                return
            signature = manifest.decode(recorded)
            decoded = True
            self._local.warming = warming.thread_state.warming = True
            use_mesh = (
                mesh is not None and handle.mesh is None and not signature.abstract_mesh.empty
            )
            ledger = handle.ledger
            with warming.ambient(mesh) if use_mesh else contextlib.nullcontext():
                traced_before = ledger.used
                args, kwargs, stage, _ = handle.seams.precompiled(handle, (signature,), {})
                with ledger.lock:
                    history = tuple(ledger.history)
                made = reuse.reused(history, signature)
            if made is not None and made.number > traced_before:  # a trace of its own
                number, kept = made.number, (args, kwargs, stage, mesh if use_mesh else None)
        except Exception as error:
            # A trace that raises: the program may not have set what the function reads
            # yet (a global still None); its first call traces it, as without warm start.
            (logger.info if decoded else logger.warning)(
                "tinax warm start: %s: recorded signature (%s) not compiled ahead, left to "
                "its first call: %s: %s",
                name,
                recorded.text,
                type(error).__name__,
                str(error).splitlines()[0] if str(error) else "",
            )
        finally:
            self._local.warming = warming.thread_state.warming = False
            pending.finished_one(number, kept)

    def _check_environment(self) -> None:
        with self._lock:
            if self._environment_checked:
                return
            self._environment_checked = True
        if not self._loaded_environment:
            return
        changed = manifest.changes(self._loaded_environment, manifest.environment())
        if changed:
            logger.info(
                "tinax warm start: %s changed since the recorded run (%s); JAX's persistent "
                "cache keys on them, so recorded signatures compile anew",
                ", ".join(change.split(" ")[0] for change in changed),
                "; ".join(changed),
            )

    # --- trace time ------------------------------------------------------------------

    def traced(self, handle: Handle, entry: TracedSignature) -> None:
        """A trace was committed: encode it for the manifest; say why last run's
        signatures did not cover it."""
        ledger, function = handle.ledger, handle.function
        name = trace_agreement.identity(handle)
        if name is None:
            return
        try:
            recorded = manifest.encode(entry, function)
        except manifest.Unwritable as unwritable:
            _log_unwritable(name, entry.number, unwritable)
            recorded = None
        warming = bool(getattr(self._local, "warming", False))
        with self._lock:
            if name not in self._functions:
                self._functions[name] = (
                    report.function_name(function),
                    manifest.code_digest(function),
                )
            if recorded is not None:
                kept = (entry.number, recorded, weakref.ref(ledger) if warming else None)
                self._recorded.setdefault(name, []).append(kept)
        if not warming:
            if recorded is not None:
                self._writer.wake()  # a warm trace is news once a call runs from it
            self._explain_miss(name, entry)

    def _explain_miss(self, name: str, entry: TracedSignature) -> None:
        place = self._loaded.get(name)
        if place is None or not logger.isEnabledFor(logging.INFO):
            return
        earlier = self._decoded_signatures(name, place)
        if not earlier or reuse.reused(earlier, entry) is not None:
            return
        best, found = compare.closest(earlier, entry)
        # the recorded run's trace numbers mean nothing in this run
        lines = report.explanation_lines(
            best, found, entry, closest_label="Closest recorded signature"
        )
        logger.info(
            "tinax warm start: %s traced a signature the recorded run did not (compiled "
            "now, not ahead of its call).\n%s",
            name,
            "\n".join(lines),
        )

    def _decoded_signatures(self, name: str, place: manifest.Place) -> list[TracedSignature]:
        with self._lock:
            found = self._decoded.get(name)
        if found is not None:
            return found
        decoded: list[TracedSignature] = []
        for recorded in place.signatures:
            try:
                decoded.append(manifest.decode(recorded))
            except Exception:
                continue
        with self._lock:
            self._decoded[name] = decoded
        return decoded

    # --- saving ----------------------------------------------------------------------

    def snapshot(self) -> manifest.Manifest:
        """What `save` writes: the manifest read at start, with this run's use of each
        object counted (`manifest.used`: the signatures its calls used, traced or run
        from a warm trace); objects this run did not use as they were."""
        with self._lock:
            recorded = {
                name: [kept for number, kept, ledger in found if _called(number, ledger)]
                for name, found in self._recorded.items()
            }
            functions = dict(self._functions)
        places = dict(self._loaded)
        for name, found in recorded.items():
            if found:
                function, code = functions[name]
                places[name] = manifest.used(places.get(name), function, code, found)
        env = self._loaded_environment
        if any(recorded.values()):
            if self._environment_now is None:
                self._environment_now = environment_or({})
            env = self._environment_now or env
        return manifest.Manifest(env, places)

    def save(self, path: str | None = None) -> None:
        """Writes the snapshot: to this process's file merged with what it holds, or
        whole to ``path``."""
        with self._write_lock:
            if path is None:
                manifest.save(self.file, self.snapshot())
            else:
                manifest.write(path, self.snapshot())

    def _write_in_background(self) -> None:
        with self._write_lock:
            if self._stopped:
                return
            try:
                manifest.save(self.file, self.snapshot())
            except Exception as error:  # the next trace tries again, and the exit
                if not self._write_failed:
                    self._write_failed = True
                    logger.warning(
                        "tinax warm start: signatures not written to %s (tried again at "
                        "the next trace and at exit): %s: %s",
                        self.file,
                        type(error).__name__,
                        error,
                    )

    def save_at_exit(self) -> None:
        self._workers.stopped = True
        try:
            with self._write_lock:
                self._stopped = True
                manifest.save(self.file, self.snapshot())
        except Exception as error:  # at exit: a log line, never a traceback
            logger.warning(
                "tinax warm start: signatures not written to %s: %s: %s",
                self.file,
                type(error).__name__,
                error,
            )

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for every warm compile started so far; whether they all finished."""
        with self._lock:
            pending = [found for ref in self._pending if (found := ref()) is not None]
        return all(item.wait(timeout) for item in pending)


def _log_unwritable(name: str, number: int, unwritable: manifest.Unwritable) -> None:
    """One line: the value that keeps trace ``number`` out of the manifest, by its path."""
    value = unwritable.value
    where = (
        f"{unwritable.path} holds {record.value_text(value, 200)} (type {type(value).__name__})"
        if unwritable.path is not None
        else "its ambient mesh or a JAX config value"
    )
    logger.info(
        "tinax warm start: %s: trace %d is not recorded: %s, which cannot be written "
        "(only plain values, and objects bound to a module-level name, are recorded); "
        "it traces on its first call next run",
        name,
        number,
        where,
    )


def _called(number: int, reference: _LedgerRef | None) -> bool:
    """Whether trace ``number`` ran a call: any trace a call made, and a warm trace that a
    call ran from (neither provisional nor given back). Only these count as this run's
    use of a signature; a warm trace no call used leaves its counts as they were."""
    if reference is None:
        return True
    ledger = reference()
    if ledger is None:  # dropped: whether a call used it is unknown
        return False
    return ledger.settled(number)


def environment_or(fallback: dict[str, str]) -> dict[str, str]:
    try:
        return manifest.environment()
    except Exception:
        return fallback
