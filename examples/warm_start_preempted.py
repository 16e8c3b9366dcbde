"""A preempted job restarts warm, shown: the equinox program of
`examples/warm_start_equinox.py` trains until a SIGTERM stops it (as a scheduler
preempts a job; Python's default action ends the process at once: no exit handler
runs), then restarts, warm. The guide `docs/warm-start.md` shows this output.

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

PROGRAM = Path(__file__).with_name("warm_start_equinox.py")


def recorded(signatures):
    """How many signatures the file holds (it is written as traces happen)."""
    try:
        objects = json.loads(signatures.read_text())["objects"]
    except (OSError, ValueError):
        return 0
    return sum(len(place["signatures"]) for place in objects.values())


def main(folder):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_FLAGS"))}
    signatures, cache = folder / "signatures.json", folder / "jax-cache"
    command = [sys.executable, str(PROGRAM), str(signatures), str(cache)]
    shown = str(folder) + os.sep
    print(f"{PROGRAM.name} stopped by SIGTERM, then restarted; each run a fresh process.")

    job = subprocess.Popen(
        [*command, "--until-stopped"], stdout=subprocess.PIPE, text=True, env=env
    )
    lines = [job.stdout.readline() for _ in range(3)]  # the log line, step 1, the counts
    deadline = time.monotonic() + 30
    while not recorded(signatures) and time.monotonic() < deadline:
        time.sleep(0.05)
    held = recorded(signatures)
    job.send_signal(signal.SIGTERM)
    rest, _ = job.communicate(timeout=60)
    print("=== run 1: cold, stopped by SIGTERM while training")
    print("".join([*lines, rest]).replace(shown, "").rstrip())
    print(f"{signatures.name} held {held} signature(s) when SIGTERM was sent")
    print(f"exit status {job.returncode}: stopped by the signal, no exit handler ran")

    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True, timeout=300)
    print("=== run 2: the restart, warm")
    print(done.stdout.replace(shown, "").rstrip())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as temporary:
            main(Path(temporary))
