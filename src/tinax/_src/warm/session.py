"""Warm start: a restarted program compiles, ahead of its calls, the executables last
run's calls ran, and nothing of the program runs ahead.

`warm_start(path)` is called once, at program start. From then on:

- **Recording.** Each trace an object commits is encoded at trace time (its text
  and its pickle, `manifest.encode`); each compile of one of its traces records the
  module the call lowered to (MLIR bytecode, in a file named by its canonical digest
  beside the manifest), its compile options and devices (`_compiled`, run by
  `ahead.Ahead` at every compile: never on a cached call). Both wake a daemon writer
  thread, which writes the file `workers._WRITE_DELAY` seconds later (`manifest.save`:
  a temporary file, fsync, rename; merged under a lock with what the file holds), so
  that a run killed at any moment leaves what it ran; and once more at exit. The file
  is the process's own: ``path``, or under ``jax.distributed``
  ``<path stem>.process-<i><suffix>`` for process ``i > 0``. Each object's run that
  used a signature counts (`manifest.used`): the most used, then most recent, compile
  ahead.
- **Compiles ahead.** An object built at a place the manifest names (same function,
  file, line and rank there; a line that moved is found by function, file and rank,
  and said) hands the recorded executables of its most used signatures, at most its
  budget, to `ahead.Ahead`: each compiles in a background thread once the program has
  started JAX's backend. Nothing is traced ahead: no code of the program runs before
  the program runs it, and the object's call is the `jax.jit` object from the start.
- **The first call** traces and lowers as a cold run does; its compile is answered
  by the executable compiled ahead only where its module, compile options and
  devices are those the executable was compiled from (`ahead.Ahead.compile`), and
  waits only for that one. Otherwise it compiles, as without warm start.
- **Misses, explained.** A trace at a recorded place that matches no recorded
  signature is logged at ``INFO`` with its differences from the closest one, in the
  words of a budget error; a compile whose module is named as a recorded one but is
  not it says what differs (module, options, devices); a change of JAX, jaxlib,
  backend, devices or XLA flags since the recorded run, and a function whose code
  changed, are logged once (``INFO``).

``TINAX_WARM_START=0`` turns all of it off. Nothing is ever wrong because of a
manifest: a missing, stale or corrupt file is a log line, and the run starts cold.
"""

from __future__ import annotations

import base64
import logging
import re
import sys
import threading
from typing import TYPE_CHECKING

import attrs

from tinax._src import private
from tinax._src.budget import compiles
from tinax._src.diagnosis import compare, record, report, reuse
from tinax._src.diagnosis.record import TracedSignature
from tinax._src.observe import watchers
from tinax._src.observe.log import logger
from tinax._src.parallel import trace_agreement
from tinax._src.warm import ahead, manifest, modules
from tinax._src.warm.workers import Writer

if TYPE_CHECKING:
    from tinax._src.objects.handle import Handle

_PLACE = re.compile(r"^(?P<function>.*) built at (?P<file>.*):(?P<line>\d+), #(?P<rank>\d+)$")


class WarmStart:
    """One program's warm start: the manifest read at start, this run's signatures and
    executables, the compiles ahead, the writer."""

    def __init__(
        self, path: str, workers: int, loaded: manifest.Manifest | None, file: str | None = None
    ) -> None:
        self.path = path
        self.file = path if file is None else file  # this process's own manifest
        self._loaded: dict[str, manifest.Place] = dict(loaded.places) if loaded else {}
        self._loaded_environment = dict(loaded.environment) if loaded else {}
        self._decoded: dict[str, list[TracedSignature]] = {}
        # this run's traces per object: trace number -> as written (executables added)
        self._recorded: dict[str, dict[int, manifest.Recorded]] = {}
        self._functions: dict[str, tuple[str, str | None]] = {}
        self._modules: dict[str, bytes] = {}  # this run's modules by digest, to write
        self._lock = threading.Lock()
        self._environment_checked = False
        self._environment_now: dict[str, str] | None = None
        self._writer = Writer(self._write_in_background)
        self._write_lock = threading.Lock()  # one write at a time, each of a newer snapshot
        self._stopped = False  # exit's write is done: no more
        self._write_failed = False
        self._ahead = ahead.Ahead(workers)
        self._ahead.recorder = self._compiled

    # --- wrap time -------------------------------------------------------------------

    def built(self, handle: Handle) -> None:
        """An object was built: if last run's calls of it ran recorded executables,
        compile them ahead (once the program has started JAX's backend). Reads no
        state of the program and starts nothing of JAX."""
        if not self._loaded:
            return
        name = trace_agreement.identity(handle)
        if name is None:
            return
        found = self._place(name)
        if found is None:
            return
        recorded_as, place = found
        chosen = manifest.ranked(place.signatures)[: handle.max_traces]  # most used first
        code = manifest.code_digest(handle.function)
        if place.code is not None and code is not None and code != place.code:
            logger.info(
                "tinax warm start: %s: its code changed since the recorded run; its "
                "recorded executables are compiled ahead, and a call uses one only where "
                "it lowers to the same module",
                name,
            )
        recipes = [
            ahead.Recipe(
                module=modules.module_file(self.file, executable.digest),
                digest=executable.digest,
                options=base64.b64decode(executable.options),
                devices=executable.devices,
                platform=executable.platform,
                name=executable.name,
                place=name,
                text=recorded.text,
            )
            for recorded in chosen
            for executable in recorded.executables
        ]
        if recipes:
            logger.debug(
                "tinax warm start: %s: %d recorded executable(s) to compile ahead%s",
                name,
                len(recipes),
                "" if recorded_as == name else f" (recorded as {recorded_as})",
            )
            self._ahead.add(recipes)

    def _place(self, name: str) -> tuple[str, manifest.Place] | None:
        """The recorded place of the object named ``name``: its own, else the one of the
        same function, file and rank at another line (the line moved), said once."""
        place = self._loaded.get(name)
        if place is not None:
            return name, place
        wanted = _PLACE.match(name)
        if wanted is None:
            return None
        moved = [
            other
            for other in self._loaded
            if (found := _PLACE.match(other)) is not None
            and found["function"] == wanted["function"]
            and found["file"] == wanted["file"]
            and found["rank"] == wanted["rank"]
        ]
        if len(moved) != 1:
            if moved or any(
                _PLACE.match(o) and o.startswith(wanted["function"] + " built at ")
                for o in self._loaded
            ):
                logger.info(
                    "tinax warm start: %s was not found among the recorded objects; %s of "
                    "that function were: %s; nothing is compiled ahead for it",
                    name,
                    "places",
                    "; ".join(o for o in self._loaded if o.startswith(wanted["function"] + " ")),
                )
            return None
        logger.info(
            "tinax warm start: %s was not found among the recorded objects; it was "
            "recorded at %s (the line moved): its executables are compiled ahead for it",
            name,
            moved[0],
        )
        return moved[0], self._loaded[moved[0]]

    def _check_environment(self) -> None:
        """Once, at the first compile (the program has started the backend): what
        changed since the recorded run, that JAX's persistent cache keys on."""
        with self._lock:
            if self._environment_checked:
                return
            self._environment_checked = True
        if not self._loaded_environment:
            return
        changed = manifest.changes(self._loaded_environment, manifest.environment())
        if changed:
            logger.info(
                "tinax warm start: %s changed since the recorded run (%s); recorded "
                "executables are compiled ahead for this run's backend, and JAX's "
                "persistent cache keys on them",
                ", ".join(change.split(" ")[0] for change in changed),
                "; ".join(changed),
            )

    # --- trace and compile time ------------------------------------------------------

    def traced(self, handle: Handle, entry: TracedSignature) -> None:
        """A trace was committed: encode it for the manifest; say why last run's
        signatures did not cover it."""
        function = handle.function
        name = trace_agreement.identity(handle)
        if name is None:
            return
        try:
            recorded = manifest.encode(entry, function)
        except manifest.Unwritable as unwritable:
            _log_unwritable(name, entry.number, unwritable)
            recorded = manifest.Recorded(record.signature_text(entry), "")
        with self._lock:
            if name not in self._functions:
                self._functions[name] = (
                    report.function_name(function),
                    manifest.code_digest(function),
                )
            self._recorded.setdefault(name, {})[entry.number] = recorded
        self._writer.wake()
        self._explain_miss(name, entry)

    def _compiled(self, request: private.Request, facts: ahead.Facts) -> str | None:
        """A compile (`ahead.Ahead.compile`): where it is of a trace of a budgeted object
        this run recorded, its module, options and devices join that signature. Returns
        the object's name in the manifest (``None``: no budgeted object's compile)."""
        if watchers.warm_hook is not self:  # warm start was turned off since (a test)
            return None
        found = compiles.owner_of(sys._getframe(1))  # pyright: ignore[reportPrivateUsage]
        if found is None or found.transformed:
            return None
        self._check_environment()
        handle = found.handle
        number = found.number
        if number is None:
            number = compiles.trace_number(handle, found.jaxpr, consume=False)
        name = trace_agreement.identity(handle)
        if number is None or name is None:
            return name
        with self._lock:
            recorded = self._recorded.get(name, {}).get(number)
        if recorded is None:
            return name
        if request.host_callbacks:  # a callback's Python function lives in this run only
            logger.debug(
                "tinax warm start: %s: trace %d calls back into Python "
                "(jax.debug, pure_callback): its executable is not recorded",
                name,
                number,
            )
            return name
        module = private.module_bytes(request.module)
        executable = manifest.Executable(
            name=facts.name,
            digest=facts.digest,
            options=base64.b64encode(facts.options).decode("ascii"),
            devices=facts.devices,
            platform=str(request.backend.platform),
        )
        with self._lock:
            self._modules[executable.digest] = module
            kept = self._recorded[name][number]
            self._recorded[name][number] = attrs.evolve(
                kept, executables=manifest.merged((executable,), kept.executables)
            )
        self._writer.wake()
        return name

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

    def snapshot(self) -> tuple[manifest.Manifest, dict[str, bytes]]:
        """What `save` writes: the manifest read at start, with this run's use of each
        object counted (`manifest.used`: the signatures its calls traced, with the
        executables they ran); objects this run did not use as they were. And this
        run's modules by digest."""
        with self._lock:
            recorded = {name: list(found.values()) for name, found in self._recorded.items()}
            functions = dict(self._functions)
            modules = dict(self._modules)
        places = dict(self._loaded)
        for name, found in recorded.items():
            if found:
                function, code = functions[name]
                places[name] = manifest.used(places.get(name), function, code, found)
        env = self._loaded_environment
        if any(recorded.values()) and private.backends_started():  # never starts one
            if self._environment_now is None:
                self._environment_now = environment_or({})
            env = self._environment_now or env
        return manifest.Manifest(env, places), modules

    def save(self, path: str | None = None) -> None:
        """Writes the snapshot: to this process's file merged with what it holds, or
        whole to ``path``."""
        with self._write_lock:
            if path is None:
                manifest.save(self.file, *self.snapshot())
                return
            written, made = self.snapshot()
            wanted = manifest.referenced(written) - set(made)  # recorded by earlier runs
            manifest.write(path, written, {**modules.modules_of(self.file, wanted), **made})

    def _write_in_background(self) -> None:
        with self._write_lock:
            if self._stopped:
                return
            try:
                manifest.save(self.file, *self.snapshot())
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
        self._ahead.stop()
        try:
            with self._write_lock:
                self._stopped = True
                manifest.save(self.file, *self.snapshot())
        except Exception as error:  # at exit: a log line, never a traceback
            logger.warning(
                "tinax warm start: signatures not written to %s: %s: %s",
                self.file,
                type(error).__name__,
                error,
            )

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for every compile ahead started so far; whether they all finished."""
        return self._ahead.wait(timeout)


def _log_unwritable(name: str, number: int, unwritable: manifest.Unwritable) -> None:
    """One line: the value that keeps trace ``number`` out of the manifest, by its path."""
    value = unwritable.value
    where = (
        f"{unwritable.path} holds {record.value_text(value, 200)} (type {type(value).__name__})"
        if unwritable.path is not None
        else "its ambient mesh or a JAX config value"
    )
    logger.info(
        "tinax warm start: %s: trace %d's signature is not recorded: %s, which cannot "
        "be written (only plain values, and objects bound to a module-level name, are "
        "recorded); its executable still is, but a miss of it is not explained next run",
        name,
        number,
        where,
    )


def environment_or(fallback: dict[str, str]) -> dict[str, str]:
    try:
        return manifest.environment()
    except Exception:
        return fallback
