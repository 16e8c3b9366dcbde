"""Models that start warm, shown: an equinox program and a flax.nnx program, each run
twice in fresh processes (the second run compiles the step ahead, and its first call
traces nothing), and the nnx program with its optax transformation built inline,
which is not recorded. The guide `docs/warm-start.md` shows this output.

    python examples/warm_start_models.py [FOLDER]

The signatures and JAX's persistent cache go to FOLDER (by default a temporary one).
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent


def run(title, program, folder, name, *options):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_FLAGS"))}
    signatures, cache = folder / f"{name}.json", folder / f"{name}-cache"
    done = subprocess.run(
        [sys.executable, str(HERE / program), str(signatures), str(cache), *options],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    print(f"=== {title}")
    print(done.stdout.replace(str(folder) + os.sep, "").rstrip())


def main(folder):
    print("Runs of warm_start_equinox.py and warm_start_nnx.py, each in a fresh process.")
    run("equinox, run 1: cold", "warm_start_equinox.py", folder, "equinox")
    run("equinox, run 2: warm", "warm_start_equinox.py", folder, "equinox")
    run("nnx, run 1: cold", "warm_start_nnx.py", folder, "nnx")
    run("nnx, run 2: warm", "warm_start_nnx.py", folder, "nnx")
    run("nnx, optax.adamw built inline", "warm_start_nnx.py", folder, "inline",
        "--inline-optimizer")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as temporary:
            main(Path(temporary))
