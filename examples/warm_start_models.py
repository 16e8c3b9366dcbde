"""Models that start warm, shown: an equinox program and a flax.nnx program, each run
twice in fresh processes (the second run compiles ahead the executable the first run's
call ran; its first call traces and lowers the step, and its compile runs that
executable: it compiles nothing), and the nnx program with its optax transformation
built inline, twice: its signature cannot be written, its executable is, and it starts
warm too. Last, each warm run's results are compared with its cold run's, bit for bit.
The guide `docs/warm-start.md` shows this output.

    python examples/warm_start_models.py [FOLDER]

The signatures and JAX's persistent cache go to FOLDER (by default a temporary one).
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


def run(title, program, folder, name, *options, results=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_FLAGS"))}
    signatures, cache = folder / f"{name}.json", folder / f"{name}-cache"
    saved = ("--results", str(folder / results)) if results else ()
    done = subprocess.run(
        [sys.executable, str(HERE / program), str(signatures), str(cache), *saved, *options],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    print(f"=== {title}")
    print(done.stdout.replace(str(folder) + os.sep, "").rstrip())


def same(one, other):
    """Whether two runs' saved results are equal, bit for bit."""
    with np.load(one) as a, np.load(other) as b:
        return a.files == b.files and all(
            a[name].tobytes() == b[name].tobytes() for name in a.files
        )


def main(folder):
    print("Runs of warm_start_equinox.py and warm_start_nnx.py, each in a fresh process.")
    runs = {  # what is compared: each library's runs, and the nnx step built inline
        "equinox": ("warm_start_equinox.py", "equinox", ()),
        "nnx": ("warm_start_nnx.py", "nnx", ()),
        "nnx, optax.adamw built inline": ("warm_start_nnx.py", "inline", ("--inline-optimizer",)),
    }
    for title, (program, name, options) in runs.items():
        for number, kind in ((1, "cold"), (2, "warm")):
            saved = f"{name}-{number}.npz"
            run(f"{title}, run {number}: {kind}", program, folder, name, *options, results=saved)
    print("=== the results, bit for bit")
    for title, (_, name, _) in runs.items():
        equal = same(folder / f"{name}-1.npz", folder / f"{name}-2.npz")
        print(f"{title}: run 2 (warm) computed what run 1 (cold) did: {equal}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as temporary:
            main(Path(temporary))
