"""The warm-start manifest: the traced signatures of every budgeted object of a run,
in a JSON file a person can read.

One entry per object, keyed as trace agreement keys it across processes (its function's
qualified name, the file name and line where it was built, its rank among the objects
built there): ``"step built at train.py:42, #0"``. Each signature is kept as the text a
budget error prints (``x: f32[8,3], n=3``), for people and as its identity; as a pickle
of the `TracedSignature` (base64), which explains next run's misses; and as the
executables its calls ran (`Executable`: the module each compile lowered to, in a file
of its own beside the manifest, its compile options and devices), which warm start
compiles ahead. Abstract values are pickled as calls of their constructors
(`private.portable_dumps`), so that they load as the running JAX's own; module-level
objects (a function, ``jax.nn.relu``, equinox's ``MISSING``) by reference, so that they
load as the running program's own (`values`). The run's environment (JAX and jaxlib
versions, backend, devices, XLA flags) and each function's code digest are written too:
they say, next run, why JAX's persistent cache may miss.

Each object and signature carries its use: ``runs``, how many runs used the object
(a call traced one of its signatures), and per signature how many runs
used it and the object's run that used it last (``last``). The signatures are kept
most used first, then most recent; one that the object's last `RETIRE_AFTER_RUNS`
runs did not use is dropped. `save` writes under a lock file, merging what the
file holds (another process's records), so that two writers lose nothing.

Nothing here raises on a bad file: `read` says why it cannot use one
(`ManifestError`), and the caller logs it and starts cold.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import marshal
import os
import pickle
import platform
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, cast

import attrs
import jax

from tinax._src.diagnosis import record
from tinax._src.diagnosis.record import TracedSignature
from tinax._src.warm import modules as modules_kept
from tinax._src.warm import values

FORMAT = "tinax warm start 2"
_FORMAT_1 = "tinax warm start 1"  # read as every signature used by one run, in file order
MAX_SIGNATURES = 64  # kept per object, most used first
RETIRE_AFTER_RUNS = 5  # a signature the object's last 5 runs did not use is dropped
_LOCK_WAIT_S = 10.0  # then written without the lock (a writer holds it for milliseconds)


class ManifestError(Exception):
    """A manifest that cannot be used; the message says why, in one line."""


class Unwritable(Exception):
    """A signature that cannot be written: ``path`` names the value in its argument
    that does not pickle (``model.layers[0].activation``, a closure's lambda), or is
    ``None`` where no argument holds it (the ambient mesh, a JAX config value)."""

    def __init__(self, path: str | None, value: object) -> None:
        super().__init__(path)
        self.path = path
        self.value = value


@attrs.frozen
class Executable:
    """One executable a call of a signature ran, as recorded: the symbol name and the
    canonical digest of the module it was compiled from (the module itself is a file
    of its own, `modules.module_file`), its compile options (serialized, base64), the ids
    of its
    devices and their platform."""

    name: str
    digest: str
    options: str
    devices: tuple[int, ...]
    platform: str


@attrs.frozen
class Recorded:
    """One traced signature as written: its text and its pickle (base64, ``""`` where
    it cannot be written), the executables its calls ran; ``runs``, how many runs of
    its object used it, and ``last``, the object's run (`Place.runs`) that used it
    last."""

    text: str
    data: str
    runs: int = 1
    last: int = 1
    executables: tuple[Executable, ...] = ()

    @property
    def identity(self) -> str:
        """What makes two records one signature: its text (the pickle holds each run's
        timings). Two signatures of one text (an nnx model in ``train()`` and
        ``eval()``) are one record holding both executables; records of two texts with
        an executable in common are folded into one (`_same`)."""
        return self.text


@attrs.frozen
class Place:
    """What the manifest keeps of one object: its function, the digest of its code,
    its signatures (most used first, then most recent), and ``runs``, how many runs
    used the object."""

    function: str
    code: str | None
    signatures: tuple[Recorded, ...]
    runs: int = 1


@attrs.frozen
class Manifest:
    environment: Mapping[str, str]
    places: Mapping[str, Place]


def environment() -> dict[str, str]:
    """What JAX's persistent cache keys on besides the program: versions, backend,
    devices and XLA flags. Reads the devices: call it once backends are up."""
    devices: list[Any] = cast("Any", jax).devices()
    return {
        "jax": jax.__version__,
        "jaxlib": _jaxlib_version(),
        "python": platform.python_version(),
        "backend": str(cast("Any", jax).default_backend()),
        "devices": f"{len(devices)} x {devices[0].device_kind}" if devices else "(none)",
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", "").strip(),
    }


def _jaxlib_version() -> str:
    try:
        import jaxlib

        return str(cast("Any", jaxlib).__version__)
    except Exception:
        return "unknown"


def changes(before: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """``["jax 0.10.2 -> 0.12.0.1", ...]``: what differs between two environments."""
    found: list[str] = []
    for key in ("jax", "jaxlib", "python", "backend", "devices", "XLA_FLAGS"):
        old, new = before.get(key), now.get(key)
        if old is not None and new is not None and old != new:
            found.append(f"{key} {old or '(none)'} -> {new or '(none)'}")
    return found


def code_digest(function: Callable[..., Any]) -> str | None:
    """A digest of the function's code (bytecode, constants, names), or ``None`` for
    a callable with no ``__code__``. Moving the function, or editing a comment, keeps
    it; editing what it does changes it."""
    code = getattr(function, "__code__", None)
    if code is None:
        code = getattr(getattr(function, "func", None), "__code__", None)  # a partial
    if code is None:
        return None
    try:
        parts = _code_parts(code)
        return hashlib.sha1(marshal.dumps(parts), usedforsecurity=False).hexdigest()[:16]
    except Exception:
        return None


def _code_parts(code: Any) -> tuple[Any, ...]:
    consts = tuple(
        _code_parts(const) if hasattr(const, "co_code") else repr(const) for const in code.co_consts
    )
    return (code.co_code, consts, code.co_names, code.co_varnames)


def encode(signature: TracedSignature, function: object = None) -> Recorded:
    """The signature as written; raises `Unwritable` naming the value that cannot be
    written. A module-level object is written by reference (`values`): one of its own
    module, or bound to a name in ``function``'s module or ``__main__``."""
    text = record.signature_text(signature)
    home = getattr(function, "__module__", None)
    modules = (home,) if isinstance(home, str) else ()
    try:
        data = values.dumps(signature, modules)
    except Exception:
        path, value = _unwritable(signature, modules)
        raise Unwritable(path, value) from None
    return Recorded(text, base64.b64encode(data).decode("ascii"))


def _unwritable(signature: TracedSignature, modules: Sequence[str]) -> tuple[str | None, object]:
    """``(path, value)`` of the first value of ``signature`` that cannot be written."""
    keystr: Any = cast("Any", jax).tree_util.keystr
    for argument in signature.recorded:
        for path, value in zip(argument.paths, argument.values, strict=False):
            if not values.pickles(value, modules):
                where = argument.name if argument.static else argument.name + keystr(path)
                return values.culprit(value, where, modules)
        if argument.static or values.pickles(argument.treedef, modules):
            continue
        try:  # a static inside the tree structure: found in the value rebuilt around it
            rebuilt = argument.treedef.unflatten(argument.values)
        except Exception:
            return argument.name, argument.treedef
        return values.culprit(rebuilt, argument.name, modules)
    return None, signature


def decode(recorded: Recorded) -> TracedSignature:
    """The `TracedSignature` back; raises what unpickling raises (`values.Gone` for a
    module-level object no longer there)."""
    signature = pickle.loads(base64.b64decode(recorded.data))
    if not isinstance(signature, TracedSignature):
        raise ManifestError(f"a signature is a {type(signature).__name__}")
    return signature


def read(path: str | os.PathLike[str]) -> Manifest:
    """The manifest at ``path``; raises `FileNotFoundError` where there is none, and
    `ManifestError` (one line, why) where the file cannot be used."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    try:
        content = json.loads(text)
    except ValueError as error:
        raise ManifestError(f"not JSON ({error})") from None
    found = cast("dict[str, Any]", content).get("format") if isinstance(content, dict) else None
    if found not in (FORMAT, _FORMAT_1):
        raise ManifestError(f'not a tinax warm-start manifest (no "format": {FORMAT!r})')
    body = cast("dict[str, Any]", content)
    env = body.get("environment", {})
    objects = body.get("objects", {})
    if not isinstance(env, dict) or not isinstance(objects, dict):
        raise ManifestError('"environment" and "objects" must be JSON objects')
    places: dict[str, Place] = {}
    for name, entry in cast("dict[str, Any]", objects).items():
        places[name] = _place(name, entry)
    environment_read = {str(k): str(v) for k, v in cast("dict[str, Any]", env).items()}
    return Manifest(environment_read, places)


def _place(name: str, entry: object) -> Place:
    if not isinstance(entry, dict):
        raise ManifestError(f"object {name!r} is not a JSON object")
    fields = cast("dict[str, Any]", entry)
    signatures = fields.get("signatures", [])
    if not isinstance(signatures, list):
        raise ManifestError(f'object {name!r}: "signatures" is not a list')
    runs = _count(name, fields, "runs")
    kept: list[Recorded] = []
    for item in cast("list[Any]", signatures):
        if not isinstance(item, dict):
            raise ManifestError(f"object {name!r}: a signature is not a JSON object")
        signature = cast("dict[str, Any]", item)
        text, data = signature.get("text"), signature.get("data")
        if not isinstance(text, str):
            raise ManifestError(_not_a_string(name, "text"))
        if not isinstance(data, str):
            raise ManifestError(_not_a_string(name, "data"))
        try:  # checked here, so that a damaged field reads as any other damage
            base64.b64decode(data, validate=True)  # "" where the signature was not written
        except ValueError:  # binascii.Error: "Incorrect padding", "Non-base64 digit found"
            raise ManifestError(f'object {name!r}: a signature\'s "data" is not base64') from None
        kept.append(
            Recorded(
                text,
                data,
                _count(name, signature, "runs"),
                _count(name, signature, "last"),
                _executables(name, signature.get("executables", [])),
            )
        )
    code = fields.get("code")
    function = fields.get("function")
    return Place(
        str(function) if function is not None else name,
        code if isinstance(code, str) else None,
        tuple(ranked(kept)),
        runs,
    )


def _executables(name: str, items: object) -> tuple[Executable, ...]:
    """A signature's ``"executables"``, checked field by field."""
    if not isinstance(items, list):
        raise ManifestError(f'object {name!r}: a signature\'s "executables" is not a list')
    found: list[Executable] = []
    for item in cast("list[Any]", items):
        fields = cast("dict[str, Any]", item) if isinstance(item, dict) else None
        if fields is None:
            raise ManifestError(f"object {name!r}: an executable is not a JSON object")
        name_, digest, options, platform_ = (
            fields.get(key) for key in ("name", "digest", "options", "platform")
        )
        devices = fields.get("devices")
        if not (
            isinstance(name_, str)
            and isinstance(digest, str)
            and isinstance(options, str)
            and isinstance(platform_, str)
            and isinstance(devices, list)
            and all(type(device) is int for device in cast("list[Any]", devices))
        ):
            raise ManifestError(
                f'object {name!r}: an executable needs "name", "digest", "options" and '
                '"platform" strings and "devices", a list of ints'
            )
        if not modules_kept.DIGEST.match(digest):
            raise ManifestError(f'object {name!r}: an executable\'s "digest" is not a sha256')
        try:
            base64.b64decode(options, validate=True)
        except ValueError:
            raise ManifestError(
                f'object {name!r}: an executable\'s "options" is not base64'
            ) from None
        ids = tuple(cast("list[int]", devices))
        found.append(Executable(name_, digest, options, ids, platform_))
    return tuple(found)


def _not_a_string(name: str, field: str) -> str:
    return f'object {name!r}: a signature\'s "{field}" is missing or not a string'


def _count(name: str, fields: Mapping[str, Any], key: str) -> int:
    """A use count; 1 where absent (a manifest of format 1: one run used everything)."""
    value = fields.get(key, 1)
    if type(value) is not int or value < 0:
        raise ManifestError(f"object {name!r}: {key!r} is not a count (an int >= 0)")
    return value


def write(
    path: str | os.PathLike[str], manifest: Manifest, modules: Mapping[str, bytes] | None = None
) -> None:
    """Writes ``manifest`` to ``path`` at once: a temporary file in the same folder,
    flushed to disk (``fsync``), then renamed over ``path`` (``os.replace``). A reader
    sees the old file or the new one, whole; a run killed while writing leaves the old
    one."""
    content = {
        "format": FORMAT,
        "environment": dict(manifest.environment),
        "objects": {
            name: {
                "function": place.function,
                "code": place.code,
                "runs": place.runs,
                "signatures": [
                    {
                        "text": recorded.text,
                        "runs": recorded.runs,
                        "last": recorded.last,
                        "data": recorded.data,
                        "executables": [
                            {
                                "name": executable.name,
                                "digest": executable.digest,
                                "devices": list(executable.devices),
                                "platform": executable.platform,
                                "options": executable.options,
                            }
                            for executable in recorded.executables
                        ],
                    }
                    for recorded in place.signatures
                ],
            }
            for name, place in sorted(manifest.places.items())
        },
    }
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    os.makedirs(folder, exist_ok=True)
    modules_kept.write(target, referenced(manifest), modules or {})
    text = json.dumps(content, indent=1) + "\n"
    modules_kept.replace_whole(target, text.encode("utf-8"), prefix=".tinax-warm-", suffix=".json")
    _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    """Makes the rename itself durable (POSIX; elsewhere, and where the folder cannot be
    opened, the rename is as durable as the file system makes it)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def save(
    path: str | os.PathLike[str], manifest: Manifest, modules: Mapping[str, bytes] | None = None
) -> Manifest:
    """Writes ``manifest`` to ``path`` merged with what the file holds now (`combined`),
    under a lock file beside it, so that processes writing one file lose nothing of
    each other's. Returns what was written. A file that cannot be read is replaced."""
    target = os.fspath(path)
    with _locked(target):
        try:
            on_disk = read(target)
        except (OSError, ManifestError, UnicodeDecodeError):
            on_disk = None
        result = manifest if on_disk is None else combined(manifest, on_disk)
        write(target, result, modules)
    return result


@contextlib.contextmanager
def _locked(target: str) -> Generator[None]:
    """An exclusive ``flock`` on ``.<name>.lock`` beside ``target``, for at most
    `_LOCK_WAIT_S` (then without it: a lost merge is a lost signature, never a corrupt
    file). Where there is no ``fcntl`` (Windows) or the file system refuses locks, no
    lock."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    folder, name = os.path.split(os.path.abspath(target))
    try:
        os.makedirs(folder, exist_ok=True)
        handle = os.open(os.path.join(folder, f".{name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.005)
            except OSError:  # no locks on this file system
                break
        yield
    finally:
        os.close(handle)  # closing releases the lock


def ranked(signatures: Iterable[Recorded]) -> list[Recorded]:
    """Most used first, then most recent; in the given order where both tie."""
    return sorted(signatures, key=lambda recorded: (-recorded.runs, -recorded.last))


def _kept(place: Place) -> Place:
    """``place`` with records of one signature folded into one (`_folded`), the
    signatures its last `RETIRE_AFTER_RUNS` runs did not use left out, ranked, at most
    `MAX_SIGNATURES`."""
    alive = [r for r in _folded(place.signatures) if place.runs - r.last < RETIRE_AFTER_RUNS]
    return attrs.evolve(place, signatures=tuple(ranked(alive)[:MAX_SIGNATURES]))


def _same(one: Recorded, other: Recorded) -> bool:
    """Whether two records are of one signature: one identity, or an executable in
    common (the module a call lowered to names the signature, whatever the text: a
    static whose text holds an address reads anew each run)."""
    if one.identity == other.identity:
        return True
    digests = {(e.digest, e.options, e.devices) for e in one.executables}
    return any((e.digest, e.options, e.devices) in digests for e in other.executables)


def _folded(signatures: Iterable[Recorded]) -> list[Recorded]:
    """Records of one signature (`_same`) as one: the first's text and pickle, the
    larger counts, every executable."""
    kept: list[Recorded] = []
    for recorded in signatures:
        index = next((i for i, known in enumerate(kept) if _same(known, recorded)), None)
        if index is None:
            kept.append(recorded)
            continue
        known = kept[index]
        kept[index] = attrs.evolve(
            known,
            runs=max(known.runs, recorded.runs),
            last=max(known.last, recorded.last),
            executables=merged(known.executables, recorded.executables),
        )
    return kept


def used(before: Place | None, function: str, code: str | None, now: Sequence[Recorded]) -> Place:
    """The object's place after a run whose calls used the signatures ``now`` (in the
    order they were traced; none: the place as it was). The run counts once for the
    object and for each signature it used (found among the earlier ones as `_same`);
    the signatures no recent run used retire."""
    if not now:
        return before if before is not None else Place(function, code, (), 0)
    runs = (before.runs if before is not None else 0) + 1
    earlier = list(before.signatures) if before is not None else []
    fresh: list[Recorded] = []
    for recorded in _folded(now):
        old = next((known for known in earlier if _same(known, recorded)), None)
        if old is not None:
            earlier.remove(old)
        fresh.append(
            attrs.evolve(
                recorded,
                runs=(old.runs if old is not None else 0) + 1,
                last=runs,
                executables=merged(recorded.executables, old.executables if old else ()),
            )
        )
    return _kept(Place(function, code, (*fresh, *earlier), runs))


MAX_EXECUTABLES = 4  # kept per signature, newest first (a trace compiled per placement)


def merged(newer: Sequence[Executable], older: Sequence[Executable]) -> tuple[Executable, ...]:
    """``newer``'s executables, then ``older``'s not among them, at most `MAX_EXECUTABLES`."""
    seen: dict[tuple[str, str, tuple[int, ...]], Executable] = {}
    for executable in (*newer, *older):
        seen.setdefault((executable.digest, executable.options, executable.devices), executable)
    return tuple(seen.values())[:MAX_EXECUTABLES]


def referenced(manifest: Manifest) -> set[str]:
    """The digests of every module the manifest's executables name."""
    return {
        executable.digest
        for place in manifest.places.values()
        for recorded in place.signatures
        for executable in recorded.executables
    }


def combined(mine: Manifest, theirs: Manifest) -> Manifest:
    """``mine`` merged with ``theirs`` (the file as another writer left it): every
    object and signature of either; where both hold one, the larger counts (a
    signature's text is its identity), ``mine``'s pickle, function and code."""
    places = dict(theirs.places)
    for name, place in mine.places.items():
        other = places.get(name)
        places[name] = place if other is None else _combined(place, other)
    return Manifest(mine.environment or theirs.environment, places)


def _combined(mine: Place, theirs: Place) -> Place:
    runs = max(mine.runs, theirs.runs)
    both = (*mine.signatures, *theirs.signatures)  # folded by `_kept`: mine first
    return _kept(Place(mine.function, mine.code, both, runs))
