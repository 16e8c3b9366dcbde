"""The warm-start manifest: the traced signatures of every budgeted object of a run,
in a JSON file a person can read.

One entry per object, keyed as trace agreement keys it across processes (its
function's qualified name, the file name and line where it was built, its rank
among the objects built there): ``"step built at train.py:42, #0"``. Each
signature is kept twice: as the text a budget error prints (``x: f32[8,3],
n=3``), for people, and as a pickle of the `TracedSignature` (base64), which
`precompile` takes back. Abstract values are pickled as calls of their
constructors (`private.portable_dumps`), so that they load as the running JAX's
own. The run's environment (JAX and jaxlib versions, backend, devices, XLA
flags) and each function's code digest are written too: they say, next run, why
JAX's persistent cache may miss.

Nothing here raises on a bad file: `read` says why it cannot use one
(`ManifestError`), and the caller logs it and starts cold.
"""

from __future__ import annotations

import base64
import hashlib
import json
import marshal
import os
import pickle
import platform
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import attrs
import jax

from tinax._src import private
from tinax._src.diagnosis.record import TracedSignature

FORMAT = "tinax warm start 1"
MAX_SIGNATURES = 64  # kept per object, newest run first


class ManifestError(Exception):
    """A manifest that cannot be used; the message says why, in one line."""


class Unwritable(Exception):
    """A signature that cannot be written: ``argument`` holds a value that does not
    pickle (a lambda, an open file...)."""

    def __init__(self, argument: str, value: object) -> None:
        super().__init__(argument)
        self.argument = argument
        self.value = value


@attrs.frozen
class Recorded:
    """One traced signature as written: its text and its pickle (base64)."""

    text: str
    data: str


@attrs.frozen
class Place:
    """What the manifest keeps of one object: its function, the digest of its code,
    and its signatures, in the order they were traced."""

    function: str
    code: str | None
    signatures: tuple[Recorded, ...]


@attrs.frozen
class Manifest:
    environment: Mapping[str, str]
    places: Mapping[str, Place]


def environment() -> dict[str, str]:
    """What JAX's persistent cache keys on besides the program: versions, backend,
    devices and XLA flags. Reads the devices: call it once backends are up."""
    devices: list[Any] = cast(Any, jax).devices()
    return {
        "jax": jax.__version__,
        "jaxlib": _jaxlib_version(),
        "python": platform.python_version(),
        "backend": str(cast(Any, jax).default_backend()),
        "devices": f"{len(devices)} x {devices[0].device_kind}" if devices else "(none)",
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", "").strip(),
    }


def _jaxlib_version() -> str:
    try:
        import jaxlib

        return str(cast(Any, jaxlib).__version__)
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


def encode(signature: TracedSignature) -> Recorded:
    """The signature as written; raises `Unwritable` naming the argument whose value
    cannot be pickled."""
    text = str(signature).partition(": ")[2]
    try:
        data = private.portable_dumps(signature)
    except Exception:
        for argument in signature.recorded:
            try:
                private.portable_dumps(argument.values)
            except Exception:
                raise Unwritable(argument.name, _unwritable(argument.values)) from None
        raise Unwritable("(the signature)", signature) from None
    return Recorded(text, base64.b64encode(data).decode("ascii"))


def _unwritable(values: Sequence[Any]) -> object:
    for value in values:
        try:
            pickle.dumps(value)
        except Exception:
            return value
    return values


def decode(recorded: Recorded) -> TracedSignature:
    """The `TracedSignature` back; raises what unpickling raises."""
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
    if not isinstance(content, dict) or cast(dict[str, Any], content).get("format") != FORMAT:
        raise ManifestError(f'not a tinax warm-start manifest (no "format": {FORMAT!r})')
    body = cast(dict[str, Any], content)
    env = body.get("environment", {})
    objects = body.get("objects", {})
    if not isinstance(env, dict) or not isinstance(objects, dict):
        raise ManifestError('"environment" and "objects" must be JSON objects')
    places: dict[str, Place] = {}
    for name, entry in cast(dict[str, Any], objects).items():
        places[name] = _place(name, entry)
    environment_read = {str(k): str(v) for k, v in cast(dict[str, Any], env).items()}
    return Manifest(environment_read, places)


def _place(name: str, entry: object) -> Place:
    if not isinstance(entry, dict):
        raise ManifestError(f"object {name!r} is not a JSON object")
    fields = cast(dict[str, Any], entry)
    signatures = fields.get("signatures", [])
    if not isinstance(signatures, list):
        raise ManifestError(f'object {name!r}: "signatures" is not a list')
    kept: list[Recorded] = []
    for item in cast(list[Any], signatures):
        if not isinstance(item, dict):
            raise ManifestError(f"object {name!r}: a signature is not a JSON object")
        text, data = cast(dict[str, Any], item).get("text"), cast(dict[str, Any], item).get("data")
        if not isinstance(text, str) or not isinstance(data, str):
            raise ManifestError(f'object {name!r}: a signature lacks "text" or "data"')
        kept.append(Recorded(text, data))
    code = fields.get("code")
    function = fields.get("function")
    return Place(
        str(function) if function is not None else name,
        code if isinstance(code, str) else None,
        tuple(kept),
    )


def write(path: str | os.PathLike[str], manifest: Manifest) -> None:
    """Writes ``manifest`` to ``path`` at once (a file next to it, then renamed): a
    run killed while writing leaves the old manifest whole."""
    content = {
        "format": FORMAT,
        "environment": dict(manifest.environment),
        "objects": {
            name: {
                "function": place.function,
                "code": place.code,
                "signatures": [
                    {"text": recorded.text, "data": recorded.data} for recorded in place.signatures
                ],
            }
            for name, place in sorted(manifest.places.items())
        },
    }
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tinax-warm-", suffix=".json", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(content, file, indent=1)
            file.write("\n")
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def merged(
    now: Sequence[Recorded], before: Sequence[Recorded], limit: int = MAX_SIGNATURES
) -> tuple[Recorded, ...]:
    """This run's signatures, then last run's that this run did not trace (by text),
    at most ``limit``."""
    seen = {recorded.text for recorded in now}
    kept = list(now) + [recorded for recorded in before if recorded.text not in seen]
    return tuple(kept[:limit])
