"""``python -m tinax audit [--top N] [--json PATH] [--trace PATH] SCRIPT [ARGS...]``: the
script run as ``python SCRIPT ARGS...`` runs it, inside an audit, and the report after."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from collections.abc import Sequence
from typing import Any, TextIO

from tinax._src.audit.session import Audit

PROGRAM = "python -m tinax"
_UNCAUGHT = 1  # Python's exit status for an uncaught exception
_INTERRUPTED = 130  # a shell's status for a program stopped by Ctrl-C


def _top(text: str) -> int:
    try:
        number = int(text, 10)
    except ValueError:
        number = 0
    if number < 1 or not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"--top must be an int of at least 1; got {text!r}")
    return number


def parser() -> argparse.ArgumentParser:
    """The command line: one subcommand, ``audit``."""
    main = argparse.ArgumentParser(
        prog=PROGRAM, description="tinax's command line: run a program and audit its traces."
    )
    commands = main.add_subparsers(dest="command", required=True, metavar="COMMAND")
    audit = commands.add_parser(
        "audit",
        help="run SCRIPT as python would, and report every trace of every jitted function",
        description=(
            "Runs SCRIPT as `python SCRIPT ARGS...` would (its sys.argv, __main__, output "
            "and exit status unchanged), records every trace of every jitted function, and "
            "prints the report to stderr when it ends."
        ),
    )
    audit.add_argument(
        "--top", type=_top, default=None, metavar="N", help="list the N most costly functions"
    )
    audit.add_argument("--json", default=None, metavar="PATH", help="write the audit as JSON")
    audit.add_argument(
        "--trace", default=None, metavar="PATH", help="write Chrome trace events (Perfetto)"
    )
    audit.add_argument("script", metavar="SCRIPT", help="the Python file to run")
    audit.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="its arguments")
    return main


def _exit_status(code: Any, err: TextIO) -> int:
    """The status Python exits with for ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)
    return 1


def run_script(script: str, args: Sequence[str], audit: Audit, err: TextIO) -> int:
    """Runs ``script`` as ``__main__`` with ``sys.argv`` ``[script, *args]`` and its folder
    first on ``sys.path``, as ``python script args`` does, inside ``audit``; its exit status.
    ``sys.argv`` and ``sys.path`` are put back after."""
    if not os.path.exists(script):
        print(
            f"{PROGRAM} audit: can't open file {os.path.abspath(script)!r}: "
            "[Errno 2] No such file or directory",
            file=err,
        )
        return 2
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        with audit:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        return _exit_status(stop.code, err)
    except KeyboardInterrupt:
        traceback.print_exc(file=err)
        return _INTERRUPTED
    except BaseException:  # the script's error, shown as Python shows it
        kind, error, trace = sys.exc_info()
        frames = traceback.extract_tb(trace)
        shown = [
            frame
            for frame in frames
            if frame.filename != __file__ and "runpy" not in frame.filename
        ]
        print("Traceback (most recent call last):", file=err)
        print("".join(traceback.format_list(shown)), end="", file=err)
        print("".join(traceback.format_exception_only(kind, error)), end="", file=err)
        return _UNCAUGHT
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0


def main(argv: Sequence[str] | None = None, *, err: TextIO | None = None) -> int:
    """``python -m tinax``: parses ``argv`` (``sys.argv[1:]``), runs the subcommand, and
    returns the exit status (the script's own for ``audit``)."""
    stream = sys.stderr if err is None else err
    options = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    audit = Audit()
    status = run_script(options.script, options.args, audit, stream)
    try:
        stream.flush()
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed stream: the report still goes out
        pass
    print(audit.report(options.top), file=stream)
    if options.json is not None:
        audit.to_json(options.json)
    if options.trace is not None:
        audit.to_chrome_trace(options.trace)
    return status
