"""A preempted job restarts warm, shown: the equinox program of
`examples/warm_start_equinox.py` trains until a SIGTERM stops it (as a scheduler
preempts a job; Python's default action ends the process at once: no exit handler
runs), then restarts, warm: its first call compiles nothing, and its first step
computes what the stopped run's first step did, bit for bit. The guide
`docs/warm-start.md` shows this output.

    python examples/warm_start_preempted.py [FOLDER]

The signatures and JAX's persistent cache go to FOLDER (by default a temporary one).
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PROGRAM = Path(__file__).with_name("warm_start_equinox.py")


def recorded(signatures):
    """How many signatures, and executables of theirs, the file holds (it is written as
    traces and compiles happen)."""
    try:
        objects = json.loads(signatures.read_text())["objects"]
    except (OSError, ValueError):
        return 0, 0
    found = [signature for place in objects.values() for signature in place["signatures"]]
    return len(found), sum(len(signature["executables"]) for signature in found)


def main(folder):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_FLAGS"))}
    signatures, cache = folder / "signatures.json", folder / "jax-cache"
    command = [sys.executable, str(PROGRAM), str(signatures), str(cache)]
    first, restarted = folder / "stopped.npz", folder / "restart.npz"
    shown = str(folder) + os.sep
    print(f"{PROGRAM.name} stopped by SIGTERM, then restarted; each run a fresh process.")

    job = subprocess.Popen(
        [*command, "--until-stopped", "--results", str(first)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines = [job.stdout.readline() for _ in range(3)]  # the log line, step 1, the counts
    deadline = time.monotonic() + 30
    while recorded(signatures)[1] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    held = recorded(signatures)
    job.send_signal(signal.SIGTERM)
    rest, _ = job.communicate(timeout=60)
    print("=== run 1: cold, stopped by SIGTERM while training")
    print("".join([*lines, rest]).replace(shown, "").rstrip())
    print(
        f"{signatures.name} held {held[0]} signature(s) and {held[1]} executable(s) when "
        "SIGTERM was sent"
    )
    print(f"exit status {job.returncode}: stopped by the signal, no exit handler ran")

    done = subprocess.run(
        [*command, "--results", str(restarted)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    print("=== run 2: the restart, warm")
    print(done.stdout.replace(shown, "").rstrip())
    with np.load(first) as a, np.load(restarted) as b:
        equal = a.files == b.files and all(a[k].tobytes() == b[k].tobytes() for k in a.files)
    print(f"its first step computed what run 1's did, bit for bit: {equal}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as temporary:
            main(Path(temporary))
