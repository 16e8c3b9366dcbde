"""XLA executables by the module they were compiled from: what warm start records of a
compile, compiles ahead on a restart, and hands back to the call whose lowered module,
compile options and devices are the same.

Every XLA compile of a `jax.jit` call (and of a stage's ``compile()``) goes through
``jax._src.compiler.compile_or_get_cached(backend, computation, devices,
compile_options, host_callbacks, executable_devices, pgle_profiler)``, looked up on
the module at each call (``compiler.compile_or_get_cached`` in
``jax._src.interpreters.pxla``); JAX's persistent cache is consulted inside it. No
public API lets a program supply an executable for a module, so `intercept` replaces
that module attribute with a function that asks a handler first and otherwise calls
JAX's own. Read on jax 0.9.2, 0.10.2 and 0.12.1 (the same seven parameters); where a
JAX renames it, `intercept` returns ``False`` and warm start records and compiles
nothing ahead (every call compiles as without it).

A module is named by the digest of its canonical form, as JAX's persistent cache
names it (``jax._src.cache_key._canonicalize_ir``: a clone with its debug locations
stripped, written as MLIR bytecode), so that moving a line of the program keeps the
name. Compile options are named by their serialized proto (``CompileOptions``'s
``SerializeAsString``, which JAX's cache key hashes too); devices by their ids.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np


class Request(NamedTuple):
    """One call of ``compile_or_get_cached``, as JAX made it."""

    backend: Any
    module: Any  # an MLIR module, in its own context
    devices: Any  # numpy array of the devices, in the device assignment's order
    options: Any  # xla_client.CompileOptions
    host_callbacks: Sequence[Any]
    executable_devices: Any
    pgle_profiler: Any


def _jax(name: str) -> Any:
    """One of JAX's internal modules (``jax._src.lib.mlir.ir``), untyped: JAX does not
    export them, and their types are its own."""
    return importlib.import_module(f"jax._src.{name}")


Handler = Callable[[Request, Callable[[Request], Any]], Any]
"""Given the request and JAX's own compile (a function of a request), the executable."""

_lock = threading.Lock()
_installed: list[Handler] = []
_original: list[Callable[..., Any]] = []  # JAX's own compile_or_get_cached, once intercepted


def jax_compile(request: Request) -> Any:
    """JAX's own ``compile_or_get_cached`` for ``request`` (`intercept` must have run)."""
    return _original[0](*request)


def intercept(handler: Handler) -> bool:
    """Makes ``handler`` answer every XLA compile of the process from now on (once; a
    second call replaces the handler). ``False`` where JAX has no
    ``compile_or_get_cached`` to intercept."""
    compiler = _jax("compiler")
    with _lock:
        if _installed:
            _installed[0] = handler
            return True
        original = getattr(compiler, "compile_or_get_cached", None)
        if original is None:
            return False
        _original.append(original)

        def compile_or_get_cached(
            backend: Any,
            computation: Any,
            devices: Any,
            compile_options: Any,
            host_callbacks: Sequence[Any],
            executable_devices: Any,
            pgle_profiler: Any = None,
        ) -> Any:
            request = Request(
                backend,
                computation,
                devices,
                compile_options,
                host_callbacks,
                executable_devices,
                pgle_profiler,
            )
            return _installed[0](request, jax_compile)

        compile_or_get_cached.__wrapped__ = original  # type: ignore[attr-defined]
        _installed.append(handler)
        compiler.compile_or_get_cached = compile_or_get_cached
        return True


def module_name(module: Any) -> str:
    """The module's symbol name (``jit_train_step``)."""
    ir = _jax("lib.mlir").ir
    return str(ir.StringAttr(module.operation.attributes["sym_name"]).value)


def module_bytes(module: Any) -> bytes:
    """The module as MLIR bytecode, with its locations (what is recorded)."""
    out = io.BytesIO()
    module.operation.write_bytecode(file=out)
    return out.getvalue()


def module_digest(module: Any) -> str:
    """The digest of the module's canonical form: its debug locations stripped, as
    JAX's persistent cache key strips them."""
    passmanager = _jax("lib.mlir").passmanager
    with module.context:
        clone = module.operation.clone()
        passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(clone)
        out = io.BytesIO()
        clone.write_bytecode(file=out)
    return hashlib.sha256(out.getvalue()).hexdigest()


def options_bytes(options: Any) -> bytes:
    """The compile options as their serialized proto."""
    return bytes(options.SerializeAsString())


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def device_ids(devices: Any) -> tuple[int, ...]:
    """The ids of a request's devices, in the device assignment's order."""
    return tuple(int(device.id) for device in np.asarray(devices, dtype=object).flat)


def backend_started(platform: str) -> Any:
    """The backend of ``platform`` if the program has started JAX's backends, else
    ``None``; never starts one (``xla_bridge._backends``, read under its lock by
    ``backends_are_initialized``: 0.9.2 to 0.12.1)."""
    xla_bridge = _jax("xla_bridge")
    if not xla_bridge.backends_are_initialized():
        return None
    return xla_bridge._backends.get(platform)


def backends_started() -> bool:
    """Whether the program has started JAX's backends (starts none)."""
    return bool(_jax("xla_bridge").backends_are_initialized())


class Parsed(NamedTuple):
    """A recorded module and its options, read back in this process."""

    module: Any
    context: Any
    options: Any
    digest: str  # of the module as parsed here, canonical


def parse(module: bytes, options: bytes) -> Parsed:
    """A recorded module (bytecode) and its compile options, read back; the digest is
    that of the module as parsed now, so that a module this MLIR reads otherwise than
    the recording run's is named by what it is now."""
    mlir, ir = _jax("interpreters.mlir"), _jax("lib.mlir").ir
    xla_client = _jax("lib").xla_client
    context = mlir.make_ir_context()
    with context, ir.Location.unknown():
        parsed = ir.Module.parse(module)
    compile_options = xla_client.CompileOptions.ParseFromString(options)
    return Parsed(parsed, context, compile_options, module_digest(parsed))


def compile_parsed(backend: Any, parsed: Parsed, ids: Sequence[int]) -> Any:
    """Compiles ``parsed`` for the devices ``ids`` of ``backend`` with JAX's own compile
    (so that JAX's persistent cache is read and written as for a call); raises
    `KeyError` for a device id this process does not have."""
    xla_client = _jax("lib").xla_client
    found = {int(device.id): device for device in backend.devices()}
    devices = np.empty(len(ids), dtype=object)
    for index, number in enumerate(ids):
        devices[index] = found[number]
    listed = xla_client.DeviceList(tuple(devices.flat))
    with parsed.context:
        request = Request(backend, parsed.module, devices, parsed.options, (), listed, None)
        return jax_compile(request)
