"""Warm start, shown: one training program run three times, each in a fresh process.

Run 1 starts cold and records, for each step, its signature and the executable its
call compiled; run 2 compiles those executables ahead while it loads data (from JAX's
persistent cache, set up by the program), and its first calls trace and lower as run
1's did but compile nothing; run 3 is given another batch size, and the log says why
its warm start missed. Last, the results are compared bit for bit: run 2's with run
1's, and run 3's with those of a cold run of the same batch size (warm start off). The
guide `docs/warm-start.md` shows this output.

    python examples/warm_start.py [FOLDER]

The signatures and JAX's persistent cache go to FOLDER (by default a temporary one).
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

PROGRAM = Path(__file__).with_name("warm_start_train.py")


def run(title, signatures, cache, results, *options, env=None, shown=True):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_FLAGS"))},
        **(env or {}),
    }
    command = [sys.executable, str(PROGRAM), str(signatures), str(cache), "--results", results]
    done = subprocess.run(
        [*command, *options], capture_output=True, text=True, env=env, check=True, timeout=300
    )
    if shown:
        print(f"=== {title}")
        print(done.stdout.replace(str(signatures.parent) + os.sep, "").rstrip())


def same(one, other):
    """Whether two runs' saved results are equal, bit for bit."""
    with np.load(one) as a, np.load(other) as b:
        return a.files == b.files and all(
            a[name].tobytes() == b[name].tobytes() for name in a.files
        )


def shortened(content):
    """The manifest with what differs per Python, JAX and run cut short."""
    content["environment"] = {"jax": "...", "...": "..."}
    for place in content["objects"].values():
        place["code"] = "..."
        for signature in place["signatures"]:
            signature["data"] = signature["data"][:4] + "..."
            for executable in signature["executables"]:
                executable["digest"] = "..."  # these differ per JAX too
                executable["options"] = "..."
    return content


def main(folder):
    print(f"Three runs of {PROGRAM.name}, each in a fresh process.")
    signatures, cache = folder / "signatures.json", folder / "jax-cache"
    results = {name: str(folder / f"{name}.npz") for name in ("1", "2", "3", "cold-48")}
    run("run 1: cold (no signatures yet)", signatures, cache, results["1"])
    run("run 2: warm", signatures, cache, results["2"])
    print("=== signatures.json (digests, pickles, options and environment cut short)")
    print(json.dumps(shortened(json.loads(signatures.read_text())), indent=1))
    run("run 3: a batch of 48, not 64", signatures, cache, results["3"], "--batch", "48")
    cold = folder / "cold"  # warm start off, and a cache of its own: a cold run
    cold.mkdir(exist_ok=True)
    run("", cold / "unused.json", cold / "jax-cache", results["cold-48"], "--batch", "48",
        env={"TINAX_WARM_START": "0"}, shown=False)  # fmt: skip
    print("=== the results, bit for bit")
    print(f"run 2 (warm) computed what run 1 (cold) did: {same(results['1'], results['2'])}")
    print(
        "run 3 (warm start missed) computed what a cold run of batch 48 does: "
        f"{same(results['3'], results['cold-48'])}"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as temporary:
            main(Path(temporary))
