"""Frames: the call site of a trace and the construction site of an object (the first
frame outside JAX, tinax, the standard library and the transformation libraries tinax
supports, equinox and flax), and warnings issued from there."""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
import types
import warnings
from site import getsitepackages

import jax

_USER, _LIBRARY, _JAX = 0, 1, 2


def _directory(module: types.ModuleType) -> str:
    return os.path.dirname(os.path.abspath(module.__file__ or "")) + os.sep


# tinax's own directory (src/tinax/), from this file's place in it: importing the package
# from here would make an import cycle.
_TINAX_DIRECTORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")) + os.sep


def _library_directories() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(JAX's, tinax's and the standard library's, site-packages)`` directories."""
    import jaxlib  # pyright: ignore[reportMissingTypeStubs]

    jax_dirs = (_directory(jax), _directory(jaxlib))
    paths = sysconfig.get_paths()
    stdlib = {
        os.path.abspath(paths[key]) + os.sep for key in ("stdlib", "platstdlib") if key in paths
    }
    sites = {os.path.abspath(paths[key]) + os.sep for key in ("purelib", "platlib") if key in paths}
    try:
        sites.update(os.path.abspath(path) + os.sep for path in getsitepackages())
    except Exception:  # some embedded interpreters have no site.getsitepackages
        pass
    sites.update(os.path.abspath(path) + os.sep for path in sys.path if path.endswith("-packages"))
    return jax_dirs, (_TINAX_DIRECTORY, *sorted(stdlib)), tuple(sorted(sites))


def _transform_directories() -> tuple[str, ...]:
    """equinox's and flax's directories, where installed (found without importing them):
    their transformations (``eqx.filter_vmap``, ``nnx.vmap``, ...) call the user's function
    from their own files, as ``jax.vmap`` does from JAX's."""
    found: list[str] = []
    for name in ("equinox", "flax"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            found.extend(
                os.path.abspath(location) + os.sep for location in spec.submodule_search_locations
            )
    return tuple(found)


_JAX_DIRS, _LIBRARY_DIRS, _SITE_DIRS = _library_directories()
_TRANSFORM_DIRS = _transform_directories()
_KINDS: dict[str, int] = {}
_SHOWN: dict[str, str] = {}
CACHE_LIMIT = 4096


def _classify(filename: str) -> int:
    if filename.startswith(("<frozen ", "<attrs generated")):
        return _LIBRARY  # the import system; attrs' generated __init__ of our classes
    if filename.startswith("<"):
        return _USER  # <string>, <stdin>, a notebook cell
    path = os.path.abspath(filename)
    if path.startswith(_JAX_DIRS):
        return _JAX
    if path.startswith(_TRANSFORM_DIRS):
        return _LIBRARY
    if path.startswith(_LIBRARY_DIRS) and not path.startswith(_SITE_DIRS):
        return _LIBRARY
    return _USER


def _kind(filename: str) -> int:
    kind = _KINDS.get(filename)
    if kind is None:
        if len(_KINDS) > CACHE_LIMIT:
            _KINDS.clear()
        kind = _KINDS[filename] = _classify(filename)
    return kind


def shown(filename: str) -> str:
    """The file as the budget error shows locations: relative to the working directory
    when inside it."""
    shown = _SHOWN.get(filename)
    if shown is None:
        shown = filename
        try:
            relative = os.path.relpath(filename)
        except ValueError:  # another drive (Windows)
            relative = filename
        if not relative.startswith(".."):
            shown = relative
        if len(_SHOWN) > CACHE_LIMIT:
            _SHOWN.clear()
        _SHOWN[filename] = shown
    return shown


def user_frame(frame: types.FrameType | None) -> types.FrameType | None:
    """The first frame, from ``frame`` outwards, outside JAX, tinax, the standard library,
    equinox and flax."""
    kinds = _KINDS
    while frame is not None:
        filename = frame.f_code.co_filename
        kind = kinds.get(filename)
        if kind is None:
            kind = _kind(filename)
        if kind == _USER:
            return frame
        frame = frame.f_back
    return None


def call_site() -> str | None:
    """``file:line`` of the user's call that made the trace in progress (called from
    the traced function, whose own frame is tinax's and skipped)."""
    return site_of(sys._getframe(2))  # pyright: ignore[reportPrivateUsage]


def site_of(frame: types.FrameType | None) -> str | None:
    """``file:line`` of the first frame, from ``frame`` outwards, outside JAX, tinax, the
    standard library, equinox and flax (``None`` if there is none)."""
    frame = user_frame(frame)
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    return f"{_SHOWN.get(filename) or shown(filename)}:{frame.f_lineno}"


def construction_site(frame: types.FrameType | None) -> tuple[str, int] | None:
    """``(file, line)`` of the user's code that is building a budgeted object, from
    ``frame`` (inside tinax) outwards."""
    frame = user_frame(frame)
    if frame is None:
        return None
    return frame.f_code.co_filename, frame.f_lineno


def warn(warning: Warning, site: tuple[str, int] | None = None) -> None:
    """Emits ``warning`` as if from ``site``, else from the user's frame on the stack."""
    if site is not None:
        warnings.warn_explicit(warning, type(warning), site[0], site[1])
        return
    frame = user_frame(sys._getframe(1))  # pyright: ignore[reportPrivateUsage]
    if frame is None:
        warnings.warn(warning, stacklevel=2)
        return
    globals_ = frame.f_globals
    registry = globals_.setdefault("__warningregistry__", {})
    warnings.warn_explicit(
        warning,
        type(warning),
        frame.f_code.co_filename,
        frame.f_lineno,
        module=globals_.get("__name__"),
        registry=registry,
    )
