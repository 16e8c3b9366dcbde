"""Warm start across restarts: a program computes, draws and counts with warm start on
exactly what it does with warm start off, and a restart with nothing changed compiles
nothing in its first call.

Each kind of state is one ``--kind`` of `tests/programs/warm_restart_program.py`, run in
fresh processes: cold (warm start off), then warm (run 1 records the manifest, run 2
restarts from it) with the same ``--value``, and, for the kinds whose step reads the value,
a restart from run 1's manifest with another value, against a cold run with that value.
"""

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers.processes import PROGRAMS, run_program

PROGRAM = PROGRAMS / "warm_restart_program.py"
VALUE, OTHER = "0.5", "2.0"  # the program's setting, and another (neither is its default)
COLD = {"TINAX_WARM_START": "0"}


@dataclasses.dataclass(frozen=True)
class Kind:
    devices: int | None = 8  # the CPU device count XLA_FLAGS forces (None: no XLA_FLAGS)
    valued: bool = True  # whether the step reads --value (a restart may change it)


KINDS = {
    "lru": Kind(),
    "nested_eval": Kind(),
    "scan_body": Kind(),
    "readonly_view": Kind(),
    "readonly_flip": Kind(),
    "readonly_reshaped": Kind(valued=False),
    "rng": Kind(),  # --value seeds NumPy's global generator
    "counter": Kind(valued=False),
    "devices": Kind(devices=None, valued=False),  # main() asks for 4 devices itself
    "xla_flags": Kind(devices=None, valued=False),
    "argparse_global": Kind(),
    "dataclass_config": Kind(),
    "class_attr": Kind(),
    "closure": Kind(),
    "partial_kw": Kind(),
    "environ": Kind(),
    "optax_lr": Kind(),  # --value is the learning rate
    "nnx_modes": Kind(valued=False),
    "address_static": Kind(),
    "sharded_no_mesh": Kind(devices=4, valued=False),
    "committed": Kind(devices=4, valued=False),
}
VALUED = [kind for kind, facts in KINDS.items() if facts.valued]
RESTARTS = {"address_static": 2}  # restarts after the recording run (else 1)


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of the program: its exit status, the JSON line it printed, its log, and
    the manifest's signatures after it (warm runs)."""

    name: str
    returncode: int
    printed: dict | None
    log: str
    signatures: int | None = None
    manifest_bytes: int | None = None

    def facts(self):
        """What it printed; the test fails showing its log if it did not finish."""
        assert self.returncode == 0 and self.printed is not None, (
            f"{self.name} exited with status {self.returncode}:\n{self.log[-4000:]}"
        )
        return self.printed


def _signatures(path):
    """How many signatures the manifest holds: the entries of its "signatures" lists."""
    found = 0
    stack = [json.loads(Path(path).read_text())]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "signatures" and isinstance(value, list):
                    found += len(value)
                else:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return found


def _run(name, manifest, kind, value, *, cwd, cold=False):
    done = run_program(
        PROGRAM,
        "-" if cold else manifest,
        "--kind",
        kind,
        "--value",
        value,
        env=COLD if cold else None,
        devices=KINDS[kind].devices,
        cwd=cwd,
        returncode=None,
        timeout=240,
    )
    lines = done.stdout.strip().splitlines()
    printed = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    log = f"--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}"
    if cold or not Path(manifest).exists():
        return Run(name, done.returncode, printed, log)
    size = Path(manifest).stat().st_size
    return Run(name, done.returncode, printed, log, _signatures(manifest), size)


class Runs:
    """Each kind's runs, made once for the module's tests (every file under its folder).

    The first test of a kind starts its two chains of runs, each a process at a time, side
    by side: the cold runs, and the warm runs (run 1, the restarts, the restart with
    another value)."""

    def __init__(self, folder, pool):
        self.folder = folder
        self.pool = pool
        self.chains = {}

    def _chains(self, kind):
        if kind not in self.chains:
            self.chains[kind] = (
                self.pool.submit(self._cold_runs, kind),
                self.pool.submit(self._warm_runs, kind),
            )
        return self.chains[kind]

    def cold(self, kind, value=VALUE):
        """A cold run (warm start off, ``MANIFEST`` ``-``) with ``--value value``."""
        return self._chains(kind)[0].result()[value]

    def warm(self, kind):
        """Run 1 (records), then the restarts from its manifest: [run 1, run 2, ...]."""
        return self._chains(kind)[1].result()["warm"]

    def other(self, kind):
        """A restart from run 1's manifest with another ``--value``."""
        return self._chains(kind)[1].result()["other"]

    def _cold_runs(self, kind):
        values = [VALUE, OTHER] if KINDS[kind].valued else [VALUE]
        return {
            value: _run(
                f"{kind} cold --value {value}", "-", kind, value, cwd=self.folder, cold=True
            )
            for value in values
        }

    def _warm_runs(self, kind):
        folder = self.folder / kind
        folder.mkdir()
        path = folder / "signatures.json"
        made = {"warm": [_run(f"{kind} warm run 1", path, kind, VALUE, cwd=folder)]}
        recorded = path.read_bytes() if path.exists() else None
        for number in range(2, 2 + RESTARTS.get(kind, 1)):
            made["warm"].append(_run(f"{kind} warm run {number}", path, kind, VALUE, cwd=folder))
        if KINDS[kind].valued and recorded is not None:
            other = folder / "other.json"
            other.write_bytes(recorded)
            name = f"{kind} warm restart from run 1 --value {OTHER}"
            made["other"] = _run(name, other, kind, OTHER, cwd=folder)
        return made


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield Runs(tmp_path_factory.mktemp("restarts"), pool)


def observables(facts):
    """What the program computed, drew and counted, beside the compile counts."""
    return {
        "result": facts["result"],
        "observed": facts["observed"],
        "traces_used": [call["traces_used"] for call in facts["calls"]],
    }


@pytest.mark.parametrize("kind", KINDS)
class TestRestarts:
    def test_the_recording_run_computes_and_counts_as_a_cold_run(self, runs, kind):
        cold = runs.cold(kind).facts()
        first = runs.warm(kind)[0].facts()
        assert observables(first) == observables(cold)
        assert first["calls"] == cold["calls"]
        assert (first["traces_used"], first["compiles_used"]) == (1, 1)
        assert runs.warm(kind)[0].manifest_bytes, "run 1 wrote no manifest"

    def test_a_restart_computes_draws_and_counts_as_a_cold_run(self, runs, kind):
        cold = runs.cold(kind).facts()
        for restart in runs.warm(kind)[1:]:
            assert observables(restart.facts()) == observables(cold), restart.name

    def test_a_restart_with_nothing_changed_compiles_nothing_in_its_first_calls(self, runs, kind):
        cold = runs.cold(kind).facts()
        for restart in runs.warm(kind)[1:]:
            facts = restart.facts()
            assert facts["calls"] == [
                {"traces_used": call["traces_used"], "compiles_used": 0, "cache_loads": 0}
                for call in cold["calls"]
            ], restart.name


def test_a_restart_that_asks_for_4_devices_sees_4_and_logs_no_traceback(runs):
    for kind in ("devices", "xla_flags"):
        for run in [runs.cold(kind), *runs.warm(kind)]:
            facts = run.facts()
            assert facts["observed"] == {"devices": 4, "out_devices": 4}, run.name
            assert "Traceback" not in run.log, run.log[-4000:]


@pytest.mark.parametrize("kind", VALUED)
def test_a_restart_with_another_value_computes_and_counts_as_a_cold_run_with_it(runs, kind):
    cold = runs.cold(kind, OTHER).facts()
    assert cold["result"] != runs.cold(kind).facts()["result"], "the value changes nothing"
    assert runs.warm(kind)[0].manifest_bytes, "run 1 wrote no manifest"
    restart = runs.other(kind).facts()
    assert observables(restart) == observables(cold)
    assert restart["calls"] == cold["calls"]  # what it reads changed: it compiles, as cold


def test_a_static_whose_repr_holds_an_address_does_not_grow_the_manifest(runs):
    """Its repr differs from run to run; the signature it stands in does not."""
    made = runs.warm("address_static")  # run 1 records, runs 2 and 3 restart
    for run in made:
        run.facts()
    counts = [run.signatures for run in made]
    assert counts == [counts[0]] * len(made), f"signatures after runs 1, 2, 3: {counts}"
    # however the manifest is written, a second entry of the signature would lengthen it
    sizes = [run.manifest_bytes for run in made]
    assert None not in sizes, f"a run wrote no manifest: {sizes}"
    assert max(sizes) - min(sizes) < min(sizes) // 4, f"bytes after runs 1, 2, 3: {sizes}"
