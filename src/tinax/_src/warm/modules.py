"""The modules warm start records, beside the manifest: one file per module a call lowered
to (MLIR bytecode), named by the digest of its canonical form
(``<stem>.modules/<digest>.mlirbc``), written whole before the manifest that names it, and
removed once no signature of the manifest names it."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable, Mapping

DIGEST = re.compile(r"^[0-9a-f]{64}$")  # a sha256, as `private.module_digest` writes it


def replace_whole(target: str, content: bytes, *, prefix: str, suffix: str = "") -> None:
    """Writes ``content`` to ``target`` at once: a temporary file in its folder, flushed to
    disk (``fsync``), renamed over ``target``. A reader sees the old file or the new one,
    whole; a run killed while writing leaves the old one."""
    folder = os.path.dirname(os.path.abspath(target))
    handle, temporary = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def module_file(manifest_path: str, digest: str) -> str:
    """Where the module of digest ``digest`` is kept: ``<stem>.modules/<digest>.mlirbc``
    beside the manifest (one folder per manifest file)."""
    stem, _ = os.path.splitext(os.fspath(manifest_path))
    return os.path.join(f"{stem}.modules", f"{digest}.mlirbc")


def modules_of(path: str, digests: Iterable[str]) -> dict[str, bytes]:
    """The modules of ``digests`` kept beside the manifest at ``path``, where readable."""
    found: dict[str, bytes] = {}
    for digest in digests:
        try:
            with open(module_file(path, digest), "rb") as file:
                found[digest] = file.read()
        except OSError:
            continue
    return found


def _holds(where: str, content: bytes) -> bool:
    """Whether the file ``where`` holds ``content`` (one a run damaged is written anew)."""
    try:
        if os.path.getsize(where) != len(content):
            return False
        with open(where, "rb") as file:
            return file.read() == content
    except OSError:
        return False


def write(target: str, wanted: set[str], modules: Mapping[str, bytes]) -> None:
    """Each module of ``wanted`` (the digests the manifest at ``target`` names) that
    ``modules`` holds, in its own file
    (`module_file`), written whole (a temporary file renamed), before the manifest that
    names it; the folder's modules that the manifest no longer names are removed."""
    folder = os.path.dirname(module_file(target, "x"))
    for digest in sorted(wanted & set(modules)):
        where = module_file(target, digest)
        if _holds(where, modules[digest]):
            continue
        os.makedirs(folder, exist_ok=True)
        replace_whole(where, modules[digest], prefix=".tinax-module-")
    if not os.path.isdir(folder):
        return
    for entry in os.listdir(folder):
        digest, suffix = os.path.splitext(entry)
        if suffix == ".mlirbc" and digest not in wanted:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, entry))
