"""Warm start, shown: one training program run three times, each in a fresh process.

Run 1 starts cold and records its signatures; run 2 compiles them while it loads
data (from JAX's persistent cache, set up by the program); run 3 is given another
batch size, and the log says why its warm start missed. The guide
`docs/warm-start.md` shows this output.

    python examples/warm_start.py [FOLDER]

The signatures and JAX's persistent cache go to FOLDER (by default a temporary one).
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = Path(__file__).with_name("warm_start_train.py")


def run(title, signatures, cache, *options):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_FLAGS"))}
    done = subprocess.run(
        [sys.executable, str(PROGRAM), str(signatures), str(cache), *options],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    here = str(signatures.parent) + os.sep
    print(f"=== {title}")
    print(done.stdout.replace(here, "").rstrip())


def main(folder):
    print(f"Three runs of {PROGRAM.name}, each in a fresh process.")
    signatures = folder / "signatures.json"
    cache = folder / "jax-cache"
    run("run 1: cold (no signatures yet)", signatures, cache)
    run("run 2: warm", signatures, cache)
    content = json.loads(signatures.read_text())
    for place in content["objects"].values():  # these differ per Python and JAX
        place["code"] = "..."
        for signature in place["signatures"]:
            signature["data"] = signature["data"][:4] + "..."
    content["environment"] = {"jax": "...", "...": "..."}
    print("=== signatures.json (digests, pickles and environment cut short)")
    print(json.dumps(content, indent=1))
    run("run 3: a batch of 48, not 64", signatures, cache, "--batch", "48")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as temporary:
            main(Path(temporary))
