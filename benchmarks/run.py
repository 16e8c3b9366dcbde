"""tinax benchmarks: each row times tinax against its contenders, side by side.

Run from the repository root:  python benchmarks/run.py [--quick] [ROW ...]

The rows live in families (`families/`: dispatch, wrap, models, meshes, plugin,
warm start, serving), on the shared harness (`harness.py`); this file runs them and
writes the table and the chart (`plot.py` draws the chart again from a table).

Every row runs its contenders in one process, interleaved in alternating
rounds (so a noisy neighbour slows both alike), and reports per contender the
median time and the median, min and max of its per-round ratio to the
baseline. ``--quick`` runs few rounds: it checks that the rows still execute,
not their timings.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
from collections.abc import Callable

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from families.dispatch import (
    batched_row,
    bookkeeping_row,
    dispatch_options_row,
    dispatch_row,
    recording_row,
)
from families.meshes import _mesh_call_row, batched_mesh_row
from families.models import equinox_row, nnx_row, nnx_step_rows, static_nonarrays_row
from families.plugin import pytest_plugin_row
from families.serving import prefill_rows, ragged_pad_row, serving_rows
from families.warm_start import built_in_main_rows, lengths_rows, startup_rows, transformer_rows
from families.wrap import (
    first_call_row,
    memory_row,
    memory_worker,
    precompiled_first_call_row,
    wrap_fresh_row,
    wrap_options_row,
    wrap_row,
)
from harness import HERE, Row, chart, markdown_table, report

ROWS: dict[str, Callable[[bool], Row | list[Row]]] = {
    "dispatch": dispatch_row,
    "batched": batched_row,
    "mesh-outside": lambda quick: _mesh_call_row(inside=False),
    "mesh-inside": lambda quick: _mesh_call_row(inside=True),
    "wrap": wrap_row,
    "wrap-fresh": wrap_fresh_row,
    "dispatch-options": dispatch_options_row,
    "wrap-options": wrap_options_row,
    "first-call": first_call_row,
    "precompiled-first-call": precompiled_first_call_row,
    "memory": memory_row,
    "recording": lambda quick: recording_row(),
    "batched-mesh": lambda quick: batched_mesh_row(),
    "bookkeeping": lambda quick: bookkeeping_row(tiny=False),
    "bookkeeping-tiny": lambda quick: bookkeeping_row(tiny=True),
    "static-nonarrays": static_nonarrays_row,
    "equinox-train": lambda quick: equinox_row("train", quick),
    "equinox-cnn-train": lambda quick: equinox_row("cnn-train", quick),
    "equinox-eval": lambda quick: equinox_row("eval", quick),
    "pytest-plugin": pytest_plugin_row,
    "nnx": nnx_row,
    "nnx-steps": nnx_step_rows,
    "warm-start": startup_rows,
    "warm-start-main": built_in_main_rows,
    "warm-start-lengths": lengths_rows,
    "warm-start-transformer": transformer_rows,
    "serving": serving_rows,
    "ragged-pad": ragged_pad_row,
    "prefill": prefill_rows,
}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--memory-worker"]:
        memory_worker(argv[1], int(argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", help=f"rows to run, of {', '.join(ROWS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="few rounds: check rows execute")
    parser.add_argument(
        "--out", type=pathlib.Path, default=HERE / "out", help="where results.md and the chart go"
    )
    options = parser.parse_args(argv)
    unknown = [key for key in options.rows if key not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {list(ROWS)}")
    done: list[Row] = []
    for key in options.rows or list(ROWS):
        made = ROWS[key](options.quick)
        for row in made if isinstance(made, list) else [made]:
            if row.unit == "s" and not row.measured:
                row.run(2 if options.quick else row.rounds, 1 if options.quick else row.repeat)
            print("\n".join(report(row)), flush=True)
            done.append(row)
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "results.md").write_text(markdown_table(done) + "\n")
    chart(done, options.out / "benchmarks.png")
    print(f"wrote {options.out / 'results.md'} and {options.out / 'benchmarks.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
