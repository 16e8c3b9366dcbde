"""The public functions of warm start: `warm_start` turns it on for the process (one
`session.WarmStart`), `save_signatures` writes the traced signatures now."""

from __future__ import annotations

import atexit
import os
import threading
from typing import cast

from tinax._src import private
from tinax._src.core import validation
from tinax._src.diagnosis import report
from tinax._src.observe import registry, watchers
from tinax._src.observe.log import logger
from tinax._src.parallel import trace_agreement
from tinax._src.warm import manifest, session

_API = "warm_start"
_VARIABLE = "TINAX_WARM_START"

_session_lock = threading.Lock()


def _check_path(api: str, path: object) -> str:
    """A non-empty ``str`` or ``os.PathLike`` of ``str``, as a plain ``str``."""
    kind = type(path)
    expected = "a str or os.PathLike"
    if issubclass(kind, str):
        text = str.__str__(cast("str", path))
    elif hasattr(kind, "__fspath__"):
        try:
            text = os.fspath(cast("os.PathLike[str]", path))
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
    if workers is None:  # a core left to the program: XLA's compiles use every core
        return max(1, (os.cpu_count() or 1) - 1)
    count = validation.check_int(_API, "workers", "None or an int", workers)
    if count < 1:
        raise ValueError(validation.message(_API, "workers", "None or an int >= 1", workers))
    return count


def active() -> session.WarmStart | None:
    """The process's warm start, if `warm_start` turned it on."""
    hook = watchers.warm_hook
    return hook if isinstance(hook, session.WarmStart) else None


def warm_start(path: str | os.PathLike[str], *, workers: int | None = None) -> None:
    """Starts warm: compiles, ahead of each call, the executables last run's calls ran,
    and records this run's for the next.

    Call it once, at program start, before the budgeted objects are built. Every
    `BoundedJit`/`BatchedJit` built afterwards records, for each signature it
    traces, the module each compile of it lowered to, with its compile options and
    devices: in ``path``, a JSON file a person can read, and the modules in the
    folder ``<stem>.modules`` beside it. A background thread writes them within a
    second of each new trace or compile (a temporary file, flushed to disk, then
    renamed: a reader never sees half a file), and again at exit, so a run killed at
    any moment (SIGTERM, SIGKILL, a crash) leaves what it ran. A cached call does no
    recording work.

    On the next run, an object built at a recorded place (its function, the file
    and line where it was built, its rank among the objects built there) hands the
    recorded executables of its most used signatures, at most its budget, to
    background threads, which compile them once the program has started JAX's
    backend (warm start starts none, so ``jax_num_cpu_devices``, ``XLA_FLAGS`` and
    ``jax.distributed.initialize`` stay the program's to set first). Nothing of the
    program runs ahead: its first call traces and lowers as without warm start, and
    its compile is answered by an executable compiled ahead only where the module,
    compile options and devices are those it was compiled from; it waits only for
    that one. Anything else compiles as without warm start. Traces, the budget and
    the results are those of a cold run; such a call adds to neither
    ``compiles_used`` nor ``cache_loads``. A signature that the object's last 5 runs
    did not use is dropped from the file.

    Under ``jax.distributed`` with several processes, each process records in a
    file of its own: process 0 in ``path``, process ``i`` in
    ``<stem>.process-<i><suffix>`` (``signatures.process-3.json``); a process
    with no file yet starts from process 0's. Writers of one file (two programs
    given one path) merge under a lock file beside it (``.<name>.lock``), so
    neither loses the other's signatures.

    With JAX's persistent compilation cache set (``jax_compilation_cache_dir``),
    the compiles ahead are loads from it. A trace that no recorded signature
    matches is logged at ``INFO`` on the ``tinax`` logger with its differences from
    the closest one, and a compile that no recorded executable matches with what
    differs (module, options, devices); so is a change of JAX, backend, devices,
    XLA flags or the function's code since the recorded run. A missing, stale or
    corrupt manifest is a log line: the run starts cold. ``TINAX_WARM_START=0`` turns
    warm start off (nothing is read, compiled or written).

    Args:
        path: The manifest's file (``str`` or ``os.PathLike``); it need not exist.
        workers: Threads that compile in the background, at the lowest scheduling
            priority where the system allows it (Linux). Defaults to `None`: one
            less than the CPU count, at least one.

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
        started = session.WarmStart(target, count, _load(own, target), own)
        watchers.warm_hook = started
    atexit.register(started.save_at_exit)


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
    signatures with the executables their calls ran, and the recorded ones of
    objects this run did not trace), with the modules beside it; a later
    ``tinax.warm_start(path)`` compiles those executables ahead as the objects are
    built. Without it, only the signatures of the objects alive now are written
    (no compile was recorded): a later warm start compiles nothing ahead from
    them, and explains a call's miss against them.

    Args:
        path: The file to write (``str`` or ``os.PathLike``), replaced whole.

    Raises:
        TypeError: ``path`` is not a str or os.PathLike.
        ValueError: ``path`` is empty or names a folder.
        OSError: The file cannot be written.
    """
    target = _check_path("save_signatures", path)
    current = active()
    if current is not None:
        current.save(target)
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
    return manifest.Manifest(session.environment_or({}) if places else {}, places)
