"""Executables compiled ahead from last run's lowered modules, and the call that uses one.

Nothing of the program runs ahead: what is compiled is the StableHLO module a call of
the recorded run lowered to, read back from the file (`Recipe`), never a trace of the
user's function. A recipe waits until the program has started JAX's backend itself
(warm start starts none: `jax_num_cpu_devices`, ``XLA_FLAGS`` and
`jax.distributed.initialize` stay the program's to set first), then compiles in a
background thread through JAX's own compile, so that JAX's persistent cache is read
and written as for a call.

A call of the program traces and lowers as a cold run does; its compile asks `Ahead`
first (`take`). The call's module is named by its canonical digest, its options and
devices by their bytes and ids; an executable compiled ahead is used only where all
three are those of the module it was compiled from, on the same backend: a wrong
result cannot come from warm start. Where the compile it matches is still running, the
call waits for it alone; where it has not started, the call compiles it itself.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from tinax._src import private
from tinax._src.observe import compile_events
from tinax._src.observe.log import logger
from tinax._src.warm.workers import Workers

_POLL_S = (0.002, 0.05)  # waiting for the program to start the backend: first, longest
_TEXT = 120  # characters of a signature's text in a log line
_EXIT_WAIT_S = 120.0  # at exit, for the compiles ahead in XLA to end


@attrs.frozen
class Recipe:
    """One executable as recorded: the file of the module (MLIR bytecode) a call lowered
    to, the digest of its canonical form, its compile options (serialized), the devices it was
    compiled for (ids), the platform, and the object and signature it was recorded for
    (for the log)."""

    module: str  # the file that holds it
    digest: str
    options: bytes = attrs.field(repr=False)
    devices: tuple[int, ...]
    platform: str
    name: str  # the module's symbol name (``jit_step``), as the call's reads
    place: str
    text: str

    @property
    def options_digest(self) -> str:
        return private.digest(self.options)

    @property
    def short(self) -> str:
        """The signature's text, for a log line (at most `_TEXT` characters)."""
        text = self.text
        return text if len(text) <= _TEXT else text[: _TEXT - 3] + "..."


class _Entry:
    """A recipe in this run: waiting, compiling, or compiled (``executable``)."""

    __slots__ = ("backend", "done", "error", "executable", "loaded", "recipe", "started")

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.started = False  # taken by a worker or by the call (under Ahead's lock)
        self.done = threading.Event()
        self.executable: Any = None
        self.error: str | None = None
        self.loaded = False  # the compile ahead was a load from JAX's persistent cache
        self.backend: Any = None


class Ahead:
    """The executables this run compiles ahead, by module name, then digest."""

    def __init__(self, workers: int) -> None:
        self._workers = Workers(workers)
        self._lock = threading.Lock()
        self._entries: dict[str, list[_Entry]] = {}  # module name -> entries
        self._waiting: list[_Entry] = []  # until the program starts the backend
        self._poller: threading.Thread | None = None
        self._said_failed = False
        self._stopping = False
        self._running = 0  # compiles ahead in XLA now
        self._foreground = 0  # the program's compiles in progress, while recipes wait
        self._idle = threading.Condition(self._lock)
        self.installed = private.intercept(self.compile)
        # what records a compile, and names the object it is of (None: no object's)
        self.recorder: Callable[[private.Request, Facts], str | None] | None = None

    # --- a restart: recipes to compile ---------------------------------------------

    def add(self, recipes: Iterable[Recipe]) -> None:
        """Compiles ``recipes`` ahead, in this order, once the program has started JAX's
        backend (at once where it has)."""
        if not self.installed:
            return
        fresh = [_Entry(recipe) for recipe in recipes]
        if not fresh:
            return
        with self._lock:
            for entry in fresh:
                self._entries.setdefault(_name(entry.recipe), []).append(entry)
            if self._poller is None and private.backends_started():
                self._submit(fresh)
                return
            self._waiting.extend(fresh)
            if self._poller is None:
                self._poller = threading.Thread(
                    target=self._await_backend, name="tinax-warm-start-backend", daemon=True
                )
                self._poller.start()

    def _submit(self, entries: Iterable[_Entry]) -> None:
        for entry in entries:
            self._workers.submit(lambda entry=entry: self._compile_ahead(entry))

    def _await_backend(self) -> None:
        """Waits, without starting it, until the program has started JAX's backend; then
        hands every waiting recipe to the workers, and ends."""
        pause = _POLL_S[0]
        while not private.backends_started():
            time.sleep(pause)
            pause = min(pause * 2, _POLL_S[1])
        with self._lock:
            waiting, self._waiting = self._waiting, []
            self._poller = None  # from now on, add() submits at once
            self._submit(waiting)

    def _compile_ahead(self, entry: _Entry) -> None:
        with self._lock:  # the program's own compiles first: none starts beside them
            self._idle.wait_for(lambda: not self._foreground or self._stopping)
            if entry.started or self._stopping:
                return  # its call compiled it first, or the program is ending
            entry.started = True
            self._running += 1
        recipe = entry.recipe
        try:
            backend = private.backend_started(recipe.platform)
            if backend is None:
                raise LookupError(f"no {recipe.platform} backend in this process")
            with open(recipe.module, "rb") as file:
                parsed = private.parse(file.read(), recipe.options)
            if parsed.digest != recipe.digest:  # read otherwise here: named by what it is
                raise LookupError("the recorded module reads back as another module here")
            started = time.perf_counter()
            entry.executable = private.compile_parsed(backend, parsed, recipe.devices)
            entry.loaded = compile_events.loaded()
            entry.backend = backend
            logger.debug(
                "tinax warm start: %s: %s %s ahead in %.2f s (%s)",
                recipe.place,
                recipe.short,
                "loaded from JAX's persistent cache" if entry.loaded else "compiled",
                time.perf_counter() - started,
                _name(recipe),
            )
        except Exception as error:
            entry.error = f"{type(error).__name__}: {error}"
            logger.info(
                "tinax warm start: %s: recorded executable (%s) not compiled ahead; its "
                "call compiles it: %s",
                recipe.place,
                recipe.short,
                entry.error,
            )
        finally:
            entry.done.set()
            with self._lock:
                self._running -= 1
                if not self._running:
                    self._idle.notify_all()

    # --- every compile of the process ------------------------------------------------

    def compile(
        self, request: private.Request, jax_compile: Callable[[private.Request], Any]
    ) -> Any:
        """JAX's compile, answered by an executable compiled ahead where the request's
        module, options and devices are the ones it was compiled from."""
        facts = Facts(request)
        place = None
        recorder = self.recorder
        if recorder is not None:
            try:
                place = recorder(request, facts)
            except Exception as error:  # recording must never break a compile
                self._recording_failed(error)
        if not self._entries or request.host_callbacks or request.pgle_profiler is not None:
            return jax_compile(request)
        with self._lock:
            self._foreground += 1
        try:
            taken = self._take(request, facts, place)
            if taken is None:
                return jax_compile(request)
        finally:
            with self._lock:
                self._foreground -= 1
                if not self._foreground:
                    self._idle.notify_all()
        compile_events.note_ahead()
        logger.debug(
            "tinax warm start: %s: the call runs the executable %s ahead for %s",
            taken.recipe.place,
            "loaded from JAX's persistent cache" if taken.loaded else "compiled",
            taken.recipe.short,
        )
        return taken.executable

    def _recording_failed(self, error: Exception) -> None:
        """Once per run: a compile could not be recorded (JAX moved what is read)."""
        if self._said_failed:
            return
        self._said_failed = True
        logger.warning(
            "tinax warm start: a compile could not be recorded (%s: %s); what it "
            "compiled starts cold next run",
            type(error).__name__,
            error,
        )

    def _take(self, request: private.Request, facts: Facts, place: str | None) -> _Entry | None:
        """The entry compiled ahead from the request's module, options and devices, once
        its compile is done (``None``: none, or not begun: the call compiles, as cold)."""
        try:
            name = facts.name
            with self._lock:
                candidates = list(self._entries.get(name, ()))
            if not candidates:
                return None
            call = (facts.digest, facts.options_digest, facts.devices)
        except Exception:
            return None
        for entry in candidates:
            recipe = entry.recipe
            if (recipe.digest, recipe.options_digest, recipe.devices) != call:
                continue
            with self._lock:
                if not entry.started:  # not begun: the call compiles it, as cold
                    entry.started = True
                    self._forget(name, entry)
                    return None
            entry.done.wait()
            with self._lock:
                self._forget(name, entry)
            if entry.executable is None or entry.backend is not request.backend:
                return None
            return entry
        own = [entry for entry in candidates if entry.recipe.place == place]
        if own:
            _say_missed(own[0].recipe, facts)
        return None

    def _forget(self, name: str, entry: _Entry) -> None:
        """Caller holds the lock: ``entry`` is used (or compiled by its call)."""
        found = self._entries.get(name)
        if found is not None and entry in found:
            found.remove(entry)
            if not found:
                del self._entries[name]

    def stop(self, timeout: float = _EXIT_WAIT_S) -> None:
        """At exit: no more compiles ahead start, and those in XLA now are waited for (at
        most ``timeout`` seconds): a thread ended inside XLA as the interpreter shuts
        down aborts the process."""
        self._workers.stopped = True
        with self._lock:
            self._stopping = True
            self._idle.wait_for(lambda: not self._running, timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for the compiles ahead started so far; whether they all finished."""
        with self._lock:
            entries = [entry for found in self._entries.values() for entry in found]
        deadline = None if timeout is None else time.monotonic() + timeout
        for entry in entries:
            if not entry.started:
                continue
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not entry.done.wait(left):
                return False
        return True


class Facts:
    """What a compile request is, each read when first asked (the digest of a module
    costs a clone and a pass over it): shared by the recording and the lookup."""

    def __init__(self, request: private.Request) -> None:
        self.request = request

    @functools.cached_property
    def name(self) -> str:
        return private.module_name(self.request.module)

    @functools.cached_property
    def digest(self) -> str:
        return private.module_digest(self.request.module)

    @functools.cached_property
    def options(self) -> bytes:
        return private.options_bytes(self.request.options)

    @functools.cached_property
    def options_digest(self) -> str:
        return private.digest(self.options)

    @functools.cached_property
    def devices(self) -> tuple[int, ...]:
        return private.device_ids(self.request.devices)


def _say_missed(recipe: Recipe, facts: Facts) -> None:
    """A compile of an object that recorded executables, none of which is the one the
    call lowered to: what differs from the first of them."""
    differs = [
        what
        for what, same in (
            (
                "its lowered module (what the function computes: its constants, shapes, "
                "dtypes, shardings or code)",
                recipe.digest == facts.digest,
            ),
            ("its compile options", recipe.options_digest == facts.options_digest),
            (
                f"its devices (recorded {list(recipe.devices)}, now {list(facts.devices)})",
                recipe.devices == facts.devices,
            ),
        )
        if not same
    ]
    logger.info(
        "tinax warm start: %s: the call's compile is not the one recorded for %s: %s "
        "differ(s); it compiles now, as without warm start",
        recipe.place,
        recipe.short,
        ", ".join(differs) or "nothing visible",
    )


def _name(recipe: Recipe) -> str:
    return recipe.name
