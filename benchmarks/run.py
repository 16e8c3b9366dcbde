"""tinax benchmarks: each row times tinax against its contenders, side by side.

Run from the repository root:  python benchmarks/run.py [--quick] [--record] [ROW ...]

The rows live in families (`families/`: dispatch, wrap, models, meshes, plugin,
warm start, serving), on the shared harness (`harness.py`); this file runs them and
writes their data (``results.json``, see `results.py`), its table (``results.md``) and
its chart to ``--out``. ``--record`` also merges the rows into the data set of the JAX
that ran them, under ``benchmarks/data/``, from which `figures.py` makes the tables of
docs/benchmarks.md, the figures the guides quote and the chart.

Every row runs its contenders in one process, interleaved in alternating
rounds (so a noisy neighbour slows both alike), and reports per contender the
median time and the median, min and max of its per-round ratio to the
baseline. ``--quick`` runs few rounds: it checks that the rows still execute,
not their timings, and its data is marked quick (the committed data holds none).
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import sys
from collections.abc import Callable

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
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
from harness import HERE, Row, record, report
from results import DATA, Record, bars, dataset_name, draw, load, merged, save, table_lines

import tinax

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
        "--out",
        type=pathlib.Path,
        default=HERE / "out",
        help="where results.json, results.md and the chart go",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"also merge the rows into this JAX's data set under {DATA}",
    )
    options = parser.parse_args(argv)
    unknown = [key for key in options.rows if key not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {list(ROWS)}")
    run = {
        "date": datetime.date.today().isoformat(),
        "tinax": tinax.__version__,
        "quick": options.quick,
    }
    done: list[Record] = []
    for key in options.rows or list(ROWS):
        made = ROWS[key](options.quick)
        rows = made if isinstance(made, list) else [made]
        for index, row in enumerate(rows, start=1):
            if row.unit == "s" and not row.measured:
                row.run(2 if options.quick else row.rounds, 1 if options.quick else row.repeat)
            print("\n".join(report(row)), flush=True)
            done.append(record(row, f"{key}.{index}" if len(rows) > 1 else key, **run))
    data = {
        "platform": jax.default_backend(),
        "jax": jax.__version__,
        "python": platform.python_version(),
        "devices": f"{jax.device_count()} x {jax.devices()[0].device_kind}",
        "rows": done,
    }
    options.out.mkdir(parents=True, exist_ok=True)
    save(data, options.out / "results.json")
    (options.out / "results.md").write_text("\n".join(table_lines(done)) + "\n")
    draw(bars(done), options.out / "benchmarks.png")
    print(f"wrote results.json, results.md and benchmarks.png to {options.out}")
    if options.record:
        path = DATA / f"{dataset_name(data['platform'], data['jax'])}.json"
        held = load(path) if path.exists() else {key: data[key] for key in data if key != "rows"}
        save(merged(held, done, list(ROWS)), path)
        print(f"recorded {len(done)} rows in {path}: run benchmarks/figures.py to update the docs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
