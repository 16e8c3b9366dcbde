"""The one way the tests run a program in a fresh Python process.

`run_program` runs one to completion; `start_program` starts one and returns it (jobs of
several processes, a run stopped by a signal). Both give the program the same environment,
`environment`:

- ``XLA_FLAGS`` holds exactly ``--xla_force_host_platform_device_count=devices`` (8, as the
  tests' own process), or is removed for ``devices=None`` (as a newcomer runs an example;
  the multi-process workers choose their own count);
- ``JAX_PLATFORMS=cpu``;
- ``PYTHONPATH`` starts with this checkout's ``src`` and ``tests`` (so the program imports
  this tinax and ``helpers``), after any ``pythonpath`` folders the test gives;
- no ``TINAX_`` variable and no proxy setting is inherited (a test sets the ``TINAX_``
  variables it means in ``env``; a proxy would route the workers' gRPC traffic to 127.0.0.1
  through it, so that they never find each other).

When a program exits with another status than the test expects, or runs out of time, the
test fails showing its command, stdout and stderr.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "programs"
EXAMPLES = ROOT / "examples"


@dataclass(frozen=True)
class Module:
    """A program run as ``python -m name`` (pytest, mkdocs)."""

    name: str


Program = str | Path | Module  # code (run with ``-c``), a script, or a module


def environment(
    env: Mapping[str, str | None] | None = None,
    *,
    devices: int | None = 8,
    pythonpath: Iterable[str | Path] = (),
) -> dict[str, str]:
    """The environment of a fresh program: this process's, as the module docstring says,
    then ``env`` (a value of `None` removes that variable)."""
    result = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("TINAX_")
        and not name.lower().endswith("_proxy")
        and name not in ("XLA_FLAGS", "PYTHONPATH")
    }
    if devices is not None:
        result["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    result["JAX_PLATFORMS"] = "cpu"
    folders = [*map(str, pythonpath), str(ROOT / "src"), str(ROOT / "tests")]
    inherited = os.environ.get("PYTHONPATH")
    result["PYTHONPATH"] = os.pathsep.join([*folders, *([inherited] if inherited else [])])
    for name, value in (env or {}).items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = value
    return result


def command(program: Program, args: Iterable[Any] = ()) -> list[str]:
    """``python`` and its arguments for ``program`` and ``args``."""
    if isinstance(program, Module):
        start = ["-m", program.name]
    elif isinstance(program, Path):
        start = [str(program)]
    else:
        start = ["-c", program]
    return [sys.executable, *start, *map(str, args)]


def shown(done: subprocess.CompletedProcess[str] | subprocess.TimeoutExpired) -> str:
    """A finished (or timed out) program's command and output, as a failing test shows it."""
    out, err = (
        text.decode(errors="replace") if isinstance(text, bytes) else text or ""
        for text in (done.stdout, done.stderr)
    )
    return f"{done.args}\n--- stdout ---\n{out}\n--- stderr ---\n{err}"


def run_program(
    program: Program,
    *args: Any,
    env: Mapping[str, str | None] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 300,
    devices: int | None = 8,
    pythonpath: Iterable[str | Path] = (),
    returncode: int | None = 0,
    capture: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Runs ``program`` with ``args`` in a fresh Python process, to its end.

    Args:
        program: Python code (a `str`, run with ``-c``), a script (a `Path`), or a `Module`.
        *args: The program's arguments (made `str`).
        env: Variables set (or removed, for `None`) over `environment`'s.
        cwd: Its working directory (default: this process's).
        timeout: Seconds it may take; past them the test fails, showing its output.
        devices: The CPU device count its ``XLA_FLAGS`` forces; `None` for no ``XLA_FLAGS``.
        pythonpath: Folders before this checkout's ``src`` and ``tests`` on its path.
        returncode: The exit status the test expects; `None` accepts any.
        capture: Whether stdout and stderr are captured (as text) rather than inherited.

    Returns:
        The finished process (``returncode``, and ``stdout`` and ``stderr`` if captured).
    """
    try:
        done = subprocess.run(
            command(program, args),
            capture_output=capture,
            text=True,
            env=environment(env, devices=devices, pythonpath=pythonpath),
            cwd=cwd,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"ran past its {timeout} s: {shown(expired)}", pytrace=False)
    if returncode is not None and done.returncode != returncode:
        pytest.fail(
            f"exited with status {done.returncode}, not {returncode}: {shown(done)}", pytrace=False
        )
    return done


def start_program(
    program: Program,
    *args: Any,
    env: Mapping[str, str | None] | None = None,
    cwd: str | Path | None = None,
    devices: int | None = 8,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
) -> subprocess.Popen[str]:
    """Starts ``program`` as `run_program` runs it, and returns the running process; the
    caller waits for it (or kills it). ``stdout`` and ``stderr`` are as for `subprocess.Popen`
    (`PIPE`, `STDOUT`, a file; `None` inherits)."""
    return subprocess.Popen(
        command(program, args),
        env=environment(env, devices=devices),
        cwd=cwd,
        stdout=stdout,
        stderr=stderr,
        text=True,
    )


PIPE, STDOUT, TimeoutExpired = subprocess.PIPE, subprocess.STDOUT, subprocess.TimeoutExpired


def run_example(name: str, *arguments: Any) -> str:
    """Runs ``examples/<name>`` from the checkout's root as a newcomer would (no
    ``XLA_FLAGS``): its stdout; the test fails if it fails."""
    return run_program(EXAMPLES / name, *arguments, cwd=ROOT, devices=None).stdout


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing is listening on at the moment (a job's
    coordinator)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
