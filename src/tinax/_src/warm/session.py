"""Warm start: every budgeted object compiles last run's signatures as it is built.

`warm_start(path)` is called once, at program start. From then on:

- **Recording.** Each trace an object commits is encoded at trace time (its text
  and its pickle, `manifest.encode`) and wakes a daemon writer thread, which writes
  the file `_WRITE_DELAY` seconds later (`manifest.save`: a temporary file, fsync,
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

import atexit
import contextlib
import logging
import os
import queue
import re
import threading
import time
import weakref
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from tinax._src import private
from tinax._src.core import validation
from tinax._src.diagnosis import compare, record, report, reuse
from tinax._src.diagnosis.record import TracedSignature
from tinax._src.observe import registry, watchers
from tinax._src.observe.log import logger
from tinax._src.parallel import trace_agreement
from tinax._src.warm import manifest, same

if TYPE_CHECKING:
    from tinax._src.objects.handle import Handle
    from tinax._src.objects.ledger import Ledger

_API = "warm_start"
_VARIABLE = "TINAX_WARM_START"


_LedgerRef: TypeAlias = "weakref.ref[Ledger]"
_WATCHED_CALLS = 16  # calls that may confirm warm traces before the call is the jax.jit's
_WRITE_DELAY = 0.25  # seconds from a trace to its write: the traces of a burst, one write
_thread = threading.local()  # ``warming``: this thread runs a warm compile


# A warm trace: its arguments, its JAX stage, the mesh it was made under (or None)
_Made = tuple[tuple[Any, ...], dict[str, Any], Any, Any]


def _no_call(*args: Any, **kwargs: Any) -> Any:
    """A warm start's call before it gates the object's (never run: `_Warming.install`
    gates at once, and an object gone by then has no call left to run)."""
    raise ReferenceError("the budgeted object is gone")


class _Warming:
    """The warm compiles of one object, and its call until they are confirmed.

    While a warm compile runs, the object's call is `call`, which waits for them
    all (a call never traces what a warm compile is tracing). Each warm trace is
    checked at the first call that would run from it (`_check`): the function is
    traced again, now, outside JAX's caches and not counted, and the two are
    compared (`same.same_stage`); where they differ (the program set what the
    function reads after the warm trace), the warm trace is dropped (`_drop`) and
    the call traces and compiles as without warm start. Each warm trace is
    lent to the budget (`Ledger.lend`) until a call runs from it: a call that
    makes no trace is matched, as ``explain`` matches it, to the trace it ran from.
    Once none is provisional, or after `_WATCHED_CALLS` calls, the original call (the
    `jax.jit` object) is put back, so cached calls cost what they cost without warm
    start; warm traces no call has checked by then are dropped. A provisional trace
    gives its place in the budget to a call's trace that would exceed it
    (`budget.counting`): a stale manifest never refuses a call.
    """

    __slots__ = (
        "__weakref__",
        "_calls",
        "_checking",
        "_done",
        "_handle",
        "_ledger",
        "_left",
        "_lock",
        "_name",
        "_original",
        "_unchecked",
        "_used",
    )

    def __init__(self, handle: Handle, count: int, used: Callable[[], None], name: str) -> None:
        self._handle = handle
        self._used = used  # a call ran from a warm trace: the manifest has news
        self._ledger = handle.ledger
        self._name = name
        self._original: Callable[..., Any] = _no_call  # the object's call, once gated
        self._left = count
        self._calls = 0
        self._lock = threading.Lock()
        self._checking = threading.Lock()  # one check at a time; calls wait for it
        self._done = threading.Event()
        # warm traces no call has checked: number -> (its arguments, its JAX stage)
        self._unchecked: dict[int, _Made] = {}

    def install(self) -> None:
        """Makes `call` the object's call, and `check` its stages' (`Seams.gate`: the
        object's own call is built now, in the building thread, if not yet)."""
        handle = self._handle
        original = handle.seams.gate(handle, self.call, self.check)
        if original is not None:
            self._original = original

    def check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``lower``, ``trace``, ``precompile`` and ``eval_shape`` check the warm trace
        they would use as a call does (not in a warm compile's own thread)."""
        if getattr(_thread, "warming", False):
            return
        self._done.wait()
        if self._unchecked:
            self._check(args, kwargs)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        self._done.wait()
        if self._unchecked:
            self._check(args, kwargs)
        ledger = self._ledger
        before = ledger.used
        out = self._original(*args, **kwargs)
        self._confirm(args, kwargs, traced=ledger.used != before)
        return out

    def _check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Before a call runs from a warm trace: the function traced again now, and
        compared; a warm trace that differs is dropped. Where the call's signature
        cannot be matched to a trace, every unchecked warm trace is dropped."""
        with self._checking:
            handle = self._handle
            if handle.public() is None or not self._unchecked:
                return
            seams = handle.seams
            try:
                number = seams.reused(handle, args, kwargs)
            except Exception:  # not known which trace it runs from: none unchecked
                for found in list(self._unchecked):
                    self._drop(found, None, "a call's signature could not be read")
                return
            if number is None or number not in self._unchecked:
                return
            warm = self._unchecked[number][2]
            fresh: Any = None
            try:
                fresh = seams.fresh_stage(handle, args, kwargs)
                equal = same.same_stage(warm, fresh)
            except Exception:  # the call raises it, or JAX moved: traced as it would be
                equal = False
            if equal:
                del self._unchecked[number]
                return
            if fresh is not None:  # what the step calls through JAX's caches traces anew too
                private.forget_nested(fresh)
            self._drop(
                number,
                (args, kwargs),
                "what the function reads changed between the warm trace and its first call "
                "(the program set a global, an attribute or a static it reads after the "
                "warm trace)",
            )

    def _drop(
        self,
        number: int,
        call: tuple[tuple[Any, ...], dict[str, Any]] | None,
        why: str,
    ) -> None:
        """Warm trace ``number`` leaves JAX's caches, the budget, the history and the
        compile count: the next call of its signature traces as without warm start."""
        args, kwargs, stage, mesh = self._unchecked.pop(number)
        if call is not None:  # in the call's context, with its arguments: the call's key
            args, kwargs, mesh = *call, None
        given_back = self._ledger.gave_back(number)  # its place was given, and said
        handle = self._handle
        with _ambient(mesh) if mesh is not None else contextlib.nullcontext():  # the warm key
            handle.seams.forget_trace(handle, args, kwargs, stage.jaxpr, number)
        logger.log(
            logging.DEBUG if given_back else logging.INFO,
            "tinax warm start: %s: trace %d, made ahead as the object was built, is dropped "
            "unused: %s; a call of its signature traces and compiles then, as without "
            "warm start",
            self._name,
            number,
            why,
        )

    def _confirm(self, args: tuple[Any, ...], kwargs: dict[str, Any], *, traced: bool) -> None:
        ledger = self._ledger
        with self._lock:
            self._calls += 1
            calls = self._calls
        if ledger.lent and not traced:
            handle = self._handle
            try:
                alive = handle.public() is not None
                reused = handle.seams.reused(handle, args, kwargs) if alive else None
            except Exception:  # donated arrays, odd leaves: left provisional
                reused = None
            if reused is not None and ledger.confirm(reused):
                self._used()
        if not ledger.lent or calls >= _WATCHED_CALLS:
            self._restore()

    def _restore(self) -> None:
        handle = self._handle
        seams = handle.seams
        if not seams.gated(handle, self.call):
            return
        with self._checking:  # unchecked: never run unchecked, by a call of the jax.jit
            for number in list(self._unchecked):
                self._drop(number, None, "no call ran from it in the object's first calls")
        seams.ungate(handle, self._original)

    def finished_one(self, number: int | None, made: _Made | None) -> None:
        """A warm compile ended: ``number`` is the trace it made (``made``: its arguments
        and JAX stage), ``None`` if it failed or made none."""
        ledger = self._ledger
        if number is not None and made is not None:
            with self._checking:
                self._unchecked[number] = made
            ledger.lend(number)
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            if not ledger.lent:  # nothing to confirm: the jax.jit object at once
                self._restore()
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


class _Workers:
    """A few daemon threads that run warm compiles, started on the first task. Daemon:
    a program that ends before its warm compiles are done is not held up by them."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._started = False
        self._lock = threading.Lock()
        self.stopped = False

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                for index in range(self._count):
                    thread = threading.Thread(
                        target=self._run, name=f"tinax-warm-start-{index}", daemon=True
                    )
                    thread.start()
        self._tasks.put(task)

    def _run(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None or self.stopped:
                return
            task()


class _Writer:
    """A daemon thread that writes the manifest `_WRITE_DELAY` seconds after it is
    woken (a trace, a warm trace a call ran from), off the call path: a trace costs a
    `threading.Event.set`, a cached call nothing. Woken again while writing, it writes
    again. Daemon: it never holds up the exit, whose own write comes last."""

    def __init__(self, write: Callable[[], None]) -> None:
        self._write = write
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def wake(self) -> None:
        self._wanted.set()
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="tinax-warm-start-writer", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            time.sleep(_WRITE_DELAY)
            self._wanted.clear()  # what comes from now on wakes it again
            self._write()


class WarmStart:
    """One program's warm start: the manifest read at start, this run's signatures,
    the warm compiles in flight, the writer."""

    def __init__(
        self, path: str, workers: int, loaded: manifest.Manifest | None, file: str | None = None
    ) -> None:
        self.path = path
        self.file = path if file is None else file  # this process's own manifest
        self._workers = _Workers(workers)
        self._loaded: dict[str, manifest.Place] = dict(loaded.places) if loaded else {}
        self._loaded_environment = dict(loaded.environment) if loaded else {}
        self._decoded: dict[str, list[TracedSignature]] = {}
        # this run's traces per object: (trace number, as written, its ledger if warm)
        self._recorded: dict[str, list[tuple[int, manifest.Recorded, _LedgerRef | None]]] = {}
        self._functions: dict[str, tuple[str, str | None]] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._environment_checked = False
        self._pending: list[weakref.ref[_Warming]] = []
        self._environment_now: dict[str, str] | None = None
        self._writer = _Writer(self._write_in_background)
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
        pending = _Warming(handle, len(chosen), self._writer.wake, name)
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
        pending: _Warming,
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
            self._local.warming = _thread.warming = True
            use_mesh = (
                mesh is not None and handle.mesh is None and not signature.abstract_mesh.empty
            )
            ledger = handle.ledger
            with _ambient(mesh) if use_mesh else contextlib.nullcontext():
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
            self._local.warming = _thread.warming = False
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
        lines = report.explanation_lines(best, found, entry)
        if lines:  # the recorded run's trace numbers mean nothing in this run
            lines[0] = re.sub(
                r"^Closest earlier trace: #\d+ ", "Closest recorded signature ", lines[0]
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
                self._environment_now = _environment_or({})
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


def _environment_or(fallback: dict[str, str]) -> dict[str, str]:
    try:
        return manifest.environment()
    except Exception:
        return fallback


@contextlib.contextmanager
def _ambient(mesh: Any) -> Generator[None]:
    previous = private.enter_mesh(mesh)
    try:
        yield
    finally:
        private.restore_mesh(previous)


# --- the public functions -------------------------------------------------------------------

_session_lock = threading.Lock()


def _check_path(api: str, path: object) -> str:
    """A non-empty ``str`` or ``os.PathLike`` of ``str``, as a plain ``str``."""
    kind = type(path)
    expected = "a str or os.PathLike"
    if issubclass(kind, str):
        text = str.__str__(cast(str, path))
    elif hasattr(kind, "__fspath__"):
        try:
            text = os.fspath(cast(os.PathLike[str], path))
        except Exception:
            raise TypeError(validation.message(api, "path", expected, path)) from None
        if type(text) is not str:  # a bytes path: JSON manifests are named by text
            raise TypeError(validation.message(api, "path", f"{expected} of str", path))
    else:
        raise TypeError(validation.message(api, "path", expected, path))
    if not text or "\x00" in text:  # the OS refuses a NUL in a path (ValueError from open)
        raise ValueError(
            validation.message(api, "path", "a non-empty file path without a NUL", path)
        )
    if os.path.isdir(text) or text.endswith(("/", os.sep)):  # never read nor written
        raise ValueError(validation.message(api, "path", "a file path, not a folder", path))
    return text


def _check_workers(workers: object) -> int:
    if workers is None:
        return max(1, os.cpu_count() or 1)
    count = validation.check_int(_API, "workers", "None or an int", workers)
    if count < 1:
        raise ValueError(validation.message(_API, "workers", "None or an int >= 1", workers))
    return count


def active() -> WarmStart | None:
    """The process's warm start, if `warm_start` turned it on."""
    hook = watchers.warm_hook
    return hook if isinstance(hook, WarmStart) else None


def warm_start(path: str | os.PathLike[str], *, workers: int | None = None) -> None:
    """Starts warm: compiles last run's signatures as each budgeted object is built,
    and records this run's for the next.

    Call it once, at program start, before the budgeted objects are built (and
    after `jax.distributed.initialize`, where a job calls it). Every
    `BoundedJit`/`BatchedJit` built afterwards records the signatures it traces
    in ``path``, a JSON file a person can read: a background thread writes it
    within a second of each new trace (a temporary file, flushed to disk, then
    renamed over ``path``: a reader never sees half a file), and again at exit, so
    a run killed at any moment (SIGTERM, SIGKILL, a crash) leaves what it traced.
    A cached call does no recording work.

    On the next run, an object built at a recorded place (its function, the file
    and line where it was built, its rank among the objects built there) starts
    compiling its recorded signatures at once, in background threads, while the
    program goes on loading data: its first call finds the executable ready or
    waits only for what remains. The first call that would run from a warm trace
    traces the function again (not counted) and compares: a warm trace made before
    the program set what the function reads is dropped, and the call traces as
    without warm start. These traces count in the object's budget as
    `precompile`'s do: at most the budget is warm-compiled, the signatures most
    runs used first, then the most recent. A signature that the object's last 5
    runs did not use (runs that called the object) is dropped from the file.

    Under ``jax.distributed`` with several processes, each process records in a
    file of its own: process 0 in ``path``, process ``i`` in
    ``<stem>.process-<i><suffix>`` (``signatures.process-3.json``); a process
    with no file yet starts from process 0's. Writers of one file (two programs
    given one path) merge under a lock file beside it (``.<name>.lock``), so
    neither loses the other's signatures.

    With JAX's persistent compilation cache set (``jax_compilation_cache_dir``),
    the warm compiles are loads from it. A trace that no recorded signature
    matches is logged at ``INFO`` on the ``tinax`` logger with its differences from
    the closest one; so is a change of JAX, backend, devices, XLA flags or the
    function's code since the recorded run. A missing, stale or corrupt manifest
    is a log line: the run starts cold. A manifest of an earlier tinax (format 1)
    reads as signatures one run used. ``TINAX_WARM_START=0`` turns warm start off
    (nothing is read, compiled or written).

    Args:
        path: The manifest's file (``str`` or ``os.PathLike``); it need not exist.
        workers: Threads that compile in the background. Defaults to `None`: the
            CPU count.

    Raises:
        TypeError: ``path`` is not a str or os.PathLike; ``workers`` is not `None`
            or an int (bool is not accepted).
        ValueError: ``path`` is empty or names a folder; ``workers`` is below 1;
            warm start is on already with another path.

    Examples:
        >>> import tinax
        >>> tinax.warm_start("run/tinax-signatures.json")  # doctest: +SKIP
    """
    target = _check_path(_API, path)
    count = _check_workers(workers)
    if os.environ.get(_VARIABLE, "").strip() == "0":
        logger.info("tinax warm start: off (%s=0); nothing is read or written", _VARIABLE)
        return
    with _session_lock:
        current = active()
        if current is not None:
            if os.path.abspath(current.path) == os.path.abspath(target):
                return  # called again (a notebook cell run twice): already on
            raise ValueError(
                f"{_API}: warm start is on already with path {current.path!r}; got "
                f"{target!r} (call it once, at program start)."
            )
        own = own_file(target)
        session = WarmStart(target, count, _load(own, target), own)
        watchers.warm_hook = session
    atexit.register(session.save_at_exit)


def own_file(path: str) -> str:
    """This process's manifest: ``path``, or under ``jax.distributed`` with several
    processes, ``<stem>.process-<i><suffix>`` for process ``i > 0`` (process 0 keeps
    ``path``, so a job that grows or shrinks keeps its history)."""
    try:
        state = private.distributed_state()
        index, processes = int(state.process_id or 0), int(state.num_processes or 1)
    except Exception:  # JAX moved it: every process merges into one file, under its lock
        return path
    if processes <= 1 or index <= 0:
        return path
    stem, suffix = os.path.splitext(path)
    return f"{stem}.process-{index}{suffix}"


def _load(path: str, first: str | None = None) -> manifest.Manifest | None:
    """The manifest at ``path``; where there is none yet and ``path`` is another
    process's file than ``first`` (process 0's), the one at ``first``: a job that grew
    starts its new processes from process 0's signatures."""
    try:
        loaded = manifest.read(path)
    except FileNotFoundError:
        if first is not None and first != path and os.path.exists(first):
            logger.info(
                "tinax warm start: no manifest at %s yet; starting from process 0's, %s",
                path,
                first,
            )
            return _load(first)
        logger.info("tinax warm start: no manifest at %s yet; this run records one", path)
        return None
    except (manifest.ManifestError, UnicodeDecodeError) as error:
        logger.warning(
            "tinax warm start: %s cannot be used (%s); starting cold, and it is written anew",
            path,
            error,
        )
        return None
    except OSError as error:  # whether it can be written, the writer's log line says
        logger.warning(
            "tinax warm start: %s cannot be read (%s: %s); starting cold",
            path,
            type(error).__name__,
            error,
        )
        return None
    logger.info(
        "tinax warm start: %s holds %d signature(s) of %d object(s)",
        path,
        sum(len(place.signatures) for place in loaded.places.values()),
        len(loaded.places),
    )
    return loaded


def save_signatures(path: str | os.PathLike[str]) -> None:
    """Writes the traced signatures of every budgeted object to ``path`` now.

    With `warm_start` on, this writes what it would write at exit (this run's
    signatures, and the recorded ones of objects this run did not trace);
    without it, the signatures of the objects alive now. A later
    ``tinax.warm_start(path)`` compiles them as the objects are built.

    Args:
        path: The file to write (``str`` or ``os.PathLike``), replaced whole.

    Raises:
        TypeError: ``path`` is not a str or os.PathLike.
        ValueError: ``path`` is empty or names a folder.
        OSError: The file cannot be written.
    """
    target = _check_path("save_signatures", path)
    session = active()
    if session is not None:
        session.save(target)
        return
    manifest.write(target, _live_manifest())


def _live_manifest() -> manifest.Manifest:
    places: dict[str, manifest.Place] = {}
    for handle in registry.handles():
        name = trace_agreement.identity(handle)
        if name is None:
            continue
        function = handle.function
        with handle.ledger.lock:
            history = tuple(handle.ledger.history)
        kept: list[manifest.Recorded] = []
        for entry in history:
            try:
                kept.append(manifest.encode(entry, function))
            except manifest.Unwritable:
                continue
        places[name] = manifest.Place(
            report.function_name(function), manifest.code_digest(function), tuple(kept)
        )
    return manifest.Manifest(_environment_or({}) if places else {}, places)
