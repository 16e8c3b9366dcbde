"""`tinax.warm_start`: a program run twice, each run a fresh process. The first run records
what each call's compile lowered to; the second compiles those modules ahead, in
background threads, once the program has started JAX's backend, and its first call,
traced and lowered as cold, compiles nothing. Anything else compiles as cold: a stale,
corrupt or unwritable manifest or module file is a log line, never a wrong result."""

import base64
import enum
import importlib
import json
import os
import pickle
import signal
import sys
import threading
import time
import types
from pathlib import Path

import attrs
import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinax
from helpers.processes import PIPE, PROGRAMS, run_program, start_program
from helpers.strategies import wide_values
from programs.warm_start_program import await_compiles_ahead
from tinax._src import private
from tinax._src.core import validation
from tinax._src.diagnosis import record
from tinax._src.observe import watchers
from tinax._src.private import executables
from tinax._src.warm import manifest, modules, start, values, workers
from tinax.jit import bounded_jit


def equinox_missing():
    """equinox's sentinel for a field not set (in its aux data): where this equinox keeps it."""
    for home in ("equinox._module._flatten", "equinox._module"):
        try:
            return importlib.import_module(home).MISSING
        except (ImportError, AttributeError):
            continue
    return None


def double(x):
    return x * 2.0


PROGRAM = PROGRAMS / "warm_start_program.py"
MODELS = PROGRAMS / "warm_start_models_program.py"
STATE = PROGRAMS / "warm_start_state_program.py"


def _built_at(marker, program=PROGRAM):
    """The program's line where ``marker`` builds an object (its place in the manifest)."""
    lines = program.read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if marker in line)


STEP = f"main.<locals>.step built at warm_start_program.py:{_built_at('step_jit = ')}, #0"
APPLY = f"main.<locals>.apply built at warm_start_program.py:{_built_at('apply_jit = ')}, #0"
STEP_8 = "x: f32[8,3], scale: weak-typed f32[]"  # the signature of the default call


def run(path, *options, env=None, expect_ok=True, program=PROGRAM, devices=1):
    """Runs the program once in a fresh process, on one device unless told: (facts
    printed, its log)."""
    done = run_program(
        program, path, *options, env=env, devices=devices, returncode=0 if expect_ok else None
    )
    if expect_ok:
        return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr
    return done.returncode, done.stderr


def _modules(path):
    """The folder of the modules recorded beside the manifest ``path``."""
    return Path(modules.module_file(path, "x")).parent


def _saved(path):
    """What a run left: the manifest at ``path`` and the module files beside it, as bytes."""
    folder = _modules(path)
    modules = {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}
    return path.read_bytes(), modules


def _restored(saved, path):
    """``path`` (and its modules folder) as a run left them (`_saved`)."""
    content, modules = saved
    path.write_bytes(content)
    _modules(path).mkdir(exist_ok=True)
    for name, data in modules.items():
        (_modules(path) / name).write_bytes(data)
    return path


def _place(path, name):
    return json.loads(Path(path).read_text())["objects"][name]


@pytest.fixture(scope="module")
def _recorded_once(tmp_path_factory):
    """One cold run of the program with its defaults (batch 8, max_traces=1) and a static
    lambda (a signature that cannot be written): what many tests' second run starts
    from. The run is the same for each of them, so it runs once; each test gets a copy
    (`recorded`). (facts, log, the files it left)."""
    path = tmp_path_factory.mktemp("recorded") / "signatures.json"
    facts, log = run(path, "--static-lambda")
    return facts, log, _saved(path)


@pytest.fixture
def recorded(_recorded_once, tmp_path):
    """``tmp_path / "signatures.json"``, with its modules, as the cold run left them."""
    return _restored(_recorded_once[2], tmp_path / "signatures.json")


@pytest.fixture(scope="module")
def restart(_recorded_once, tmp_path_factory):
    """The run after `_recorded_once`, with the same options, once the compiles ahead are
    done: (cold facts, warm facts, warm log, the manifest after it)."""
    path = _restored(_recorded_once[2], tmp_path_factory.mktemp("restart") / "signatures.json")
    warm, log = run(path, "--static-lambda", "--wait")
    return _recorded_once[0], warm, log, path


class TestTwoRuns:
    def test_the_second_runs_first_call_compiles_nothing_and_computes_the_same_bits(self, restart):
        cold, warm, log, _ = restart
        assert (cold["runs"], cold["traces_used"], cold["compiles_used"]) == (1, 1, 1)
        # the call traced and lowered as cold (its body ran once), and compiled nothing
        assert (warm["runs"], warm["traces_used"]) == (1, 1)
        assert (warm["compiles_used"], warm["cache_loads"]) == (0, 0)
        assert warm["result"] == cold["result"]
        assert warm["explain_lines"] == cold["explain_lines"] == 0  # compiled: nothing to add
        assert "holds 2 signature(s) of 2 object(s)" in log
        assert (
            f"DEBUG tinax warm start: {STEP}: the call runs the executable compiled ahead "
            f"for {STEP_8}\n"
        ) in log
        assert "WARNING" not in log and "not the one recorded" not in log

    def test_warm_start_starts_no_backend(self, restart):
        """Objects built at recorded places, their executables waiting to compile: JAX's
        backend stays the program's to start (jax_num_cpu_devices, XLA_FLAGS and
        jax.distributed.initialize must come first)."""
        cold, warm, log, _ = restart
        assert f"DEBUG tinax warm start: {STEP}: 1 recorded executable(s) to compile ahead" in log
        assert cold["backend_started_when_built"] is False
        assert warm["backend_started_when_built"] is False

    def test_a_signature_that_cannot_be_written_is_said_once_and_its_executable_compiled_ahead(
        self, _recorded_once, restart
    ):
        cold, cold_log, _ = _recorded_once
        lines = [line for line in cold_log.splitlines() if "cannot be written" in line]
        assert len(lines) == 1, cold_log
        assert f"{APPLY}: trace 1's signature is not recorded: fn holds" in lines[0]
        assert "fn holds <function <lambda>> (type function), which cannot be written" in lines[0]
        assert lines[0].endswith(
            "its executable still is, but a miss of it is not explained next run"
        )
        [signature] = _place(restart[3], APPLY)["signatures"]
        assert signature["data"] == ""
        assert len(signature["executables"]) == 1
        assert cold["apply"] == [1, 1, 0]
        assert restart[1]["apply"] == [1, 0, 0]  # its call compiled nothing

    def test_the_manifest_is_a_json_file_a_person_can_read_beside_its_modules(self, recorded):
        path = recorded
        content = json.loads(path.read_text())
        assert content["format"] == manifest.FORMAT
        assert content["environment"]["jax"] == jax.__version__
        [name] = [name for name in content["objects"] if "step" in name]
        assert name == STEP
        [signature] = content["objects"][name]["signatures"]
        assert signature["text"] == STEP_8
        [executable] = signature["executables"]
        assert (executable["name"], executable["devices"]) == ("jit_step", [0])
        assert executable["platform"] == "cpu"
        # the module the call lowered to, in a file named by its canonical digest
        module = Path(modules.module_file(path, executable["digest"]))
        assert module.parent == path.parent / "signatures.modules"
        options = base64.b64decode(executable["options"], validate=True)
        parsed = private.parse(module.read_bytes(), options)
        assert parsed.digest == executable["digest"]
        assert private.module_name(parsed.module) == "jit_step"
        digests = {
            e["digest"]
            for place in content["objects"].values()
            for s in place["signatures"]
            for e in s["executables"]
        }
        assert {p.name for p in module.parent.iterdir()} == {f"{d}.mlirbc" for d in digests}

    def test_arrays_split_over_an_auto_mesh_are_compiled_ahead_as_split(self, tmp_path):
        """On a mesh with Auto axes JAX's types read every array as replicated; the
        module recorded is the one the call lowered to, for the placement its arrays had,
        so the first call of the next run compiles nothing."""
        path = tmp_path / "signatures.json"
        first, _ = run(path, "--sharded", devices=8)
        assert (first["runs"], first["traces_used"], first["compiles_used"]) == (1, 1, 1)
        second, _ = run(path, "--wait", "--sharded", devices=8)
        assert (second["runs"], second["traces_used"], second["compiles_used"]) == (1, 1, 0)
        assert second["cache_loads"] == 0
        assert second["result"] == first["result"]


@pytest.fixture(scope="module")
def _three_recorded(tmp_path_factory):
    """A cold run that traced three signatures of ``step`` (batches 4, 8, 16; max_traces=3)
    and ``heavy`` once (half a second of compile): (facts, the files it left)."""
    path = tmp_path_factory.mktemp("three") / "signatures.json"
    facts, _ = run(path, "--batches", "4,8,16", "--max-traces", "3", "--heavy")
    return facts, _saved(path)


class TestSeveralRecorded:
    def test_a_call_waits_only_for_its_own_executable(self, _three_recorded, tmp_path):
        cold, saved = _three_recorded
        path = _restored(saved, tmp_path / "signatures.json")
        # the compiles ahead of batches 4 and 16 (and heavy's) are held until the call of
        # batch 8 has returned: it waits for its own alone, and compiles nothing
        facts, log = run(
            path, "--batches", "8", "--max-traces", "3", "--hold-others", "--workers", "4"
        )
        assert facts["held_at_return"] == 3
        assert (facts["traces_used"], facts["compiles_used"], facts["cache_loads"]) == (1, 0, 0)
        assert facts["result"] == cold["results"][1]
        assert f"DEBUG tinax warm start: {STEP}: 3 recorded executable(s) to compile ahead" in log

    def test_at_most_the_budget_is_compiled_ahead(self, _three_recorded, tmp_path):
        cold, saved = _three_recorded
        path = _restored(saved, tmp_path / "signatures.json")
        facts, log = run(path, "--batches", "4", "--max-traces", "1", "--wait")
        # one run used all three: the first traced comes first, and only it is compiled
        assert f"DEBUG tinax warm start: {STEP}: 1 recorded executable(s) to compile ahead" in log
        assert "x: f32[8,3]" not in log and "x: f32[16,3]" not in log
        assert (facts["traces_used"], facts["compiles_used"]) == (1, 0)
        assert facts["result"] == cold["results"][0]

    def test_a_run_that_ends_while_a_compile_ahead_runs_exits_cleanly(
        self, _three_recorded, tmp_path
    ):
        """heavy is not called: its compile ahead is still in XLA when the program ends."""
        _, saved = _three_recorded
        path = _restored(saved, tmp_path / "signatures.json")
        facts, _ = run(path, "--batches", "8", "--max-traces", "3", "--exit-in-flight")
        assert facts["in_flight_at_exit"] >= 1
        assert facts["compiles_used"] == 0
        assert _place(path, STEP)["runs"] == 2  # and the exit wrote the manifest


@pytest.fixture(scope="module")
def cached_runs(tmp_path_factory):
    """Three runs with one manifest: cold with JAX's persistent cache in a folder of its own,
    warm with it (and then a call of another batch), warm without it: [(facts, log)]."""
    folder = tmp_path_factory.mktemp("cached")
    path, cache = folder / "signatures.json", folder / "cache"
    found = [run(path, "--cache", cache)]
    found.append(run(path, "--cache", cache, "--wait", "--then-batch", "16"))
    found.append(run(path, "--wait"))
    return found


class TestWithJaxsPersistentCache:
    def test_the_compile_ahead_is_a_load_and_the_call_compiles_nothing(self, cached_runs):
        (cold, _), (warm, log), _ = cached_runs
        assert (cold["compiles_used"], cold["cache_loads"]) == (1, 0)
        assert cold["jax_cache"]["misses here"] == 1
        assert (warm["traces_used"], warm["compiles_used"], warm["cache_loads"]) == (1, 0, 0)
        assert warm["result"] == cold["result"]
        # JAX's word: its cache answered jit_step in another thread, never in the call's
        assert warm["jax_cache"] == {
            "hits here": 0,
            "hits elsewhere": 1,
            "misses here": 0,
            "misses elsewhere": 0,
        }
        assert f"{STEP}: {STEP_8} loaded from JAX's persistent cache ahead in " in log
        assert (
            f"DEBUG tinax warm start: {STEP}: the call runs the executable loaded from JAX's "
            f"persistent cache ahead for {STEP_8}\n"
        ) in log

    def test_a_trace_whose_call_ran_an_executable_compiled_ahead_counts_in_the_budget(
        self, cached_runs
    ):
        # as after a cold start: a call of another signature is over max_traces=1
        (_, _), (warm, _), _ = cached_runs
        assert warm["last_call_refused"] is True
        assert warm["traces_used"] == 1

    def test_compile_options_that_differ_are_named_and_the_call_compiles(self, cached_runs):
        """The persistent cache's folder is among the compile options JAX gives XLA: a run
        without it compiles its call, and says so."""
        (cold, _), _, (uncached, log) = cached_runs
        assert (uncached["compiles_used"], uncached["cache_loads"]) == (1, 0)
        assert uncached["result"] == cold["result"]
        assert (
            f"INFO tinax warm start: {STEP}: the call's compile is not the one recorded for "
            f"{STEP_8}: its compile options differ(s); it compiles now, as without warm start"
        ) in log


class TestSetBeforeTheBackendStarts:
    def test_jax_num_cpu_devices_set_in_main_after_building_works_on_a_restart(self, tmp_path):
        path = tmp_path / "signatures.json"
        first, _ = run(path, "--cpu-devices", "4", devices=None)
        second, _ = run(path, "--cpu-devices", "4", devices=None)
        for facts in (first, second):
            assert facts["device_count"] == 4
            assert facts["backend_started_when_built"] is False
        assert (second["traces_used"], second["compiles_used"]) == (1, 0)
        assert second["result"] == first["result"]


def _killed(path, signal_number, *options, log):
    """Runs the program until it printed its facts, waits one second, sends the
    signal (no exit handler runs): the facts."""
    process = start_program(PROGRAM, path, "--hang", *options, devices=1, stdout=PIPE, stderr=log)
    try:
        facts = json.loads(process.stdout.readline())
        time.sleep(1.0)
        process.send_signal(signal_number)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    assert process.returncode == -signal_number
    return facts


class TestPreemption:
    @pytest.mark.parametrize(
        "signal_number", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"]
    )
    def test_a_run_killed_a_second_after_its_first_trace_leaves_it_and_the_next_starts_warm(
        self, tmp_path, signal_number
    ):
        path = tmp_path / "signatures.json"
        with open(tmp_path / "log.txt", "w") as log:
            first = _killed(path, signal_number, log=log)
            assert (first["traces_used"], first["compiles_used"]) == (1, 1)
            assert _texts(path, "step") == [STEP_8]
            [signature] = _place(path, STEP)["signatures"]
            assert len(signature["executables"]) == 1  # and what its compile lowered to
            if signal_number == signal.SIGKILL:
                return
            second = _killed(path, signal_number, "--wait", log=log)
        assert (second["traces_used"], second["compiles_used"]) == (1, 0)  # compiled ahead
        assert second["result"] == first["result"]
        # and the killed warm run's use of it was written too
        place = _place(path, STEP)
        assert (place["runs"], place["signatures"][0]["runs"]) == (2, 2)


class TestUse:
    def test_what_runs_use_outranks_a_one_off_run(self, tmp_path):
        path = tmp_path / "signatures.json"
        run(path, "--batch", "64")
        run(path, "--batch", "64")
        run(path, "--batch", "48")  # a one-off: 64 compiled ahead in vain, 48 compiled
        assert _texts(path, "step") == [
            "x: f32[64,3], scale: weak-typed f32[]",  # two runs used it
            "x: f32[48,3], scale: weak-typed f32[]",  # one, the latest
        ]
        facts, _ = run(path, "--batch", "64", "--wait")  # max_traces=1: one compiled ahead
        assert (facts["traces_used"], facts["compiles_used"]) == (1, 0)  # the call ran it
        place = _place(path, STEP)
        assert place["runs"] == 4
        assert [(s["runs"], s["last"]) for s in place["signatures"]] == [(3, 4), (1, 3)]


def _data_not_base64(content):
    content["objects"][STEP]["signatures"][0]["data"] = "gAS"  # cut short: "Incorrect padding"
    return json.dumps(content)


# Kinds of damage to the cold run's manifest: (its content to the file written instead, what
# the log line says is wrong).
CORRUPT = {
    "not JSON": (lambda _: '{"format": "tinax warm start 1", "objects": [1, 2', "not JSON ("),
    "data not base64": (_data_not_base64, f'object {STEP!r}: a signature\'s "data" is not base64)'),
}


def _module_of(path, name):
    """The module file of the first executable recorded for the object ``name``."""
    [executable] = _place(path, name)["signatures"][0]["executables"]
    return Path(modules.module_file(path, executable["digest"]))


# A module file that cannot serve: (what is done to step's, what the log line says).
MODULE_DAMAGE = {
    "missing": (lambda module, path: module.unlink(), "FileNotFoundError: "),
    "not MLIR": (lambda module, path: module.write_bytes(b"not a module"), "MLIRError: "),
    "another module": (
        lambda module, path: module.write_bytes(_module_of(path, APPLY).read_bytes()),
        "LookupError: the recorded module reads back as another module here",
    ),
}


@pytest.fixture(scope="module")
def module_damage_runs(_recorded_once, tmp_path_factory):
    """Per kind of damage to step's module file, a run from the cold run's manifest:
    {kind: (facts, log, the manifest's path)}."""
    found = {}
    for kind, (damaged, _) in MODULE_DAMAGE.items():
        path = _restored(_recorded_once[2], tmp_path_factory.mktemp("module") / "m.json")
        damaged(_module_of(path, STEP), path)
        found[kind] = (*run(path, "--wait"), path)
    return found


class TestNothingWrongBecauseOfAManifest:
    def test_a_stale_signature_compiles_ahead_in_vain_and_the_miss_is_explained(
        self, recorded, _recorded_once
    ):
        path = recorded  # batch 8, max_traces=1
        second, log = run(path, "--batch", "16", "--wait")
        # a cold run would trace batch 16 once, compile and run: so does this one
        assert (second["traces_used"], second["compiles_used"]) == (1, 1)
        assert (  # the whole record, its trace numbers left out (they mean nothing here)
            f"INFO tinax warm start: {STEP} traced a signature the recorded run did not "
            "(compiled now, not ahead of its call).\n"
            "Closest recorded signature (1 difference):\n"
            "  x: f32[8,3] -> f32[16,3] (shape)\n"
            "How to fix:\n"
            "  shape: every new shape is a new trace: pad or bucket inputs to a few fixed shapes "
            "(declare them with buckets= and pad with tinax.jit.pad_to_bucket; pad or drop a "
            "last, partial batch)\n"
        ) in log
        assert (
            f"INFO tinax warm start: {STEP}: the call's compile is not the one recorded for "
            f"{STEP_8}: its lowered module (what the function computes: its constants, "
            "shapes, dtypes, shardings or code) differ(s); it compiles now"
        ) in log
        # next run, the signature the program called comes first
        assert _texts(path, "step")[0] == "x: f32[16,3], scale: weak-typed f32[]"

    @pytest.mark.parametrize("damage", CORRUPT.values(), ids=CORRUPT.keys())
    def test_a_corrupt_manifest_is_a_log_line_and_is_written_anew(self, recorded, damage):
        path = recorded
        damaged, said = damage
        path.write_text(damaged(json.loads(path.read_text())))
        facts, log = run(path, "--wait")
        assert (facts["traces_used"], facts["compiles_used"]) == (1, 1)
        assert f"cannot be used ({said}" in log
        assert "); starting cold, and it is written anew" in log
        assert "Incorrect padding" not in log and "compiled ahead" not in log
        assert _texts(path, "step") == [STEP_8]

    @pytest.mark.parametrize("kind", MODULE_DAMAGE)
    def test_a_module_file_that_cannot_serve_is_a_log_line_and_the_call_compiles(
        self, module_damage_runs, _recorded_once, kind
    ):
        facts, log, _ = module_damage_runs[kind]
        assert (facts["traces_used"], facts["compiles_used"], facts["cache_loads"]) == (1, 1, 0)
        assert facts["result"] == _recorded_once[0]["result"]
        [line] = [line for line in log.splitlines() if "not compiled ahead" in line]
        assert line.startswith(
            f"INFO tinax warm start: {STEP}: recorded executable ({STEP_8}) not compiled "
            f"ahead; its call compiles it: {MODULE_DAMAGE[kind][1]}"
        ), line
        assert "WARNING" not in log and "Traceback" not in log

    @pytest.mark.parametrize("kind", MODULE_DAMAGE)
    def test_the_run_that_compiled_it_writes_the_module_file_anew(self, module_damage_runs, kind):
        """So that the next run starts warm again."""
        _, _, path = module_damage_runs[kind]
        [executable] = _place(path, STEP)["signatures"][0]["executables"]
        written = _module_of(path, STEP).read_bytes()
        options = base64.b64decode(executable["options"])
        assert private.parse(written, options).digest == executable["digest"]

    def test_a_signature_whose_pickle_no_longer_loads_still_compiles_ahead(self, recorded):
        """The pickle only explains a miss; the executable needs none of it."""
        path = recorded
        content = json.loads(path.read_text())
        for place in content["objects"].values():
            for signature in place["signatures"]:
                signature["data"] = "bm90IGEgcGlja2xl"  # "not a pickle"
        path.write_text(json.dumps(content))
        facts, log = run(path, "--wait")
        assert (facts["traces_used"], facts["compiles_used"]) == (1, 0)
        assert "WARNING" not in log

    def test_a_step_that_raises_raises_as_cold(self, recorded):
        path = recorded
        code, log = run(path, "--wait", env={"WARM_TEST_FAIL": "1"}, expect_ok=False)
        # the call raises what it raises cold: the body's own error, not a budget error
        assert code != 0
        assert "ValueError: step refuses to trace (WARM_TEST_FAIL=1)" in log
        assert "TraceBudgetError" not in log
        assert "WARNING" not in log

    def test_tinax_warm_start_0_reads_and_writes_nothing(self, recorded):
        path = recorded
        before = _saved(path)
        facts, log = run(path, "--wait", "--batch", "4", env={"TINAX_WARM_START": "0"})
        assert facts["compiles_used"] == 1
        assert "warm start: off (TINAX_WARM_START=0)" in log
        assert "compiled ahead" not in log
        assert _saved(path) == before


@pytest.fixture(scope="module")
def model_runs(tmp_path_factory):
    """The models program run twice with one manifest: [(facts, log), (facts, log)]."""
    path = tmp_path_factory.mktemp("models") / "signatures.json"
    return [run(path, program=MODELS) for _ in range(2)]


class TestModels:
    """equinox modules under static_nonarrays, flax.nnx objects under propagate_updates."""

    @pytest.mark.parametrize("name", ["mlp", "conv", "named", "nnx", "closure"])
    def test_a_models_first_call_compiles_nothing_on_the_second_run(self, model_runs, name):
        (cold, _), (warm, log) = model_runs
        assert cold[name]["call"] == [1, 1, 0]
        assert warm[name]["call"] == [1, 0, 0], log
        assert "not compiled" not in log and "not the one recorded" not in log
        assert "traced a signature the recorded run did not" not in log

    def test_results_are_bit_identical_to_the_cold_runs(self, model_runs):
        (cold, _), (warm, _) = model_runs

        def results(run):
            return {name: {k: v for k, v in f.items() if k != "call"} for name, f in run.items()}

        assert results(warm) == results(cold)
        assert set(cold) == {"mlp", "conv", "named", "nnx", "closure"}
        assert "metrics" in cold["nnx"]

    def test_a_closure_static_is_said_once_naming_its_path_and_type(self, model_runs):
        (_, log), _ = model_runs
        lines = [line for line in log.splitlines() if "cannot be written" in line]
        assert len(lines) == 1, log
        assert "closure_step built at warm_start_models_program.py:" in lines[0]
        assert (
            ": trace 1's signature is not recorded: model.activation holds <function <lambda>> "
            "(type function), which cannot be written" in lines[0]
        )


class TestWhyItMissed:
    def test_a_change_of_xla_flags_and_devices_is_named(self, recorded):
        path = recorded
        flags = "--xla_force_host_platform_device_count=2"
        _, log = run(path, "--wait", env={"XLA_FLAGS": flags})
        [line] = [line for line in log.splitlines() if "changed since the recorded run" in line]
        assert "devices, XLA_FLAGS changed since the recorded run" in line
        assert "devices 1 x cpu -> 2 x cpu" in line
        assert f"XLA_FLAGS --xla_force_host_platform_device_count=1 -> {flags}" in line

    def test_a_function_whose_code_changed_is_named_and_its_call_compiles(
        self, recorded, _recorded_once
    ):
        path = recorded
        facts, log = run(path, "--wait", "--version", "2")
        assert f"{STEP}: its code changed since the recorded run" in log
        assert f"{STEP}: x: f32[8,3], scale: weak-typed f32[] compiled ahead" in log  # in vain
        assert (
            f"{STEP}: the call's compile is not the one recorded for {STEP_8}: its lowered module"
        ) in log
        assert (facts["traces_used"], facts["compiles_used"]) == (1, 1)
        assert facts["result"] != _recorded_once[0]["result"]  # cos, not tanh
        assert "XLA_FLAGS" not in log  # nothing else changed

    def test_nothing_is_logged_as_changed_when_nothing_changed(self, restart):
        _, _, log, _ = restart
        assert "changed" not in log
        assert "traced a signature the recorded run did not" not in log


def _texts(path, function):
    content = json.loads(Path(path).read_text())
    return [
        signature["text"]
        for name, place in content["objects"].items()
        if f".{function} built at" in name
        for signature in place["signatures"]
    ]


# --- state the program sets after building its steps, in three runs ---------------------


@pytest.fixture(scope="module")
def state_runs(tmp_path_factory):
    """The state program: recorded with 1.0, then warm with 0.5 and with 1.0, and cold
    (warm start off) with 0.5: {name: (facts, stdout, log)}."""
    folder = tmp_path_factory.mktemp("state")
    recorded = folder / "recorded.json"

    def one(path, value, env=None):
        done = run_program(STATE, path, "--value", value, env=env, devices=1)
        return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout, done.stderr

    found = {"recorded": one(recorded, "1.0")}
    saved = _saved(recorded)
    for name, value in (("changed", "0.5"), ("unchanged", "1.0")):
        found[name] = one(_restored(saved, folder / f"{name}.json"), value)
    found["cold"] = one(folder / "cold.json", "0.5", env={"TINAX_WARM_START": "0"})
    found["manifest"] = json.loads(recorded.read_text())
    return found


STATE_KINDS = [
    "global",
    "attribute",
    "class",
    "cell",
    "static",
    "none",
    "numpy",
    "nested",
    "scan",
    "vjp",
    "optimizer",
    "precompile",
]
# what no executable is recorded of: a step differentiated by jax.grad around it (a
# transformation of its trace), and steps that call back into Python
UNRECORDED_KINDS = ["rule", "print", "callback"]
STATE_FUNCTIONS = {
    "global": "with_global",
    "attribute": "with_attribute",
    "class": "with_class",
    "cell": "closed.<locals>.with_cell",
    "static": "with_static",
    "none": "with_table",
    "numpy": "with_weights",
    "nested": "with_nested",
    "scan": "with_scan",
    "vjp": "with_vjp",
    "optimizer": "train",
    "precompile": "with_global_precompiled",
    "rule": "with_rule",
    "print": "with_print",
    "callback": "with_callback",
}


def _state_place(kind):
    return f"{STATE_FUNCTIONS[kind]} built at warm_start_state_program.py:"


class TestStateSetAfterTheStepsAreBuilt:
    """The steps are built at module level, before main() sets what they read; nothing is
    traced before main() calls. Each call computes what it computes with warm start off,
    and counts what that run counts."""

    @pytest.mark.parametrize("kind", STATE_KINDS + UNRECORDED_KINDS)
    def test_a_restart_that_changes_what_the_step_reads_computes_as_a_cold_run(
        self, state_runs, kind
    ):
        warm, _, log = state_runs["changed"]
        cold, _, _ = state_runs["cold"]
        assert warm[kind]["result"] == cold[kind]["result"]
        counts = ("traces_used", "compiles_used", "cache_loads")
        assert [warm[kind][name] for name in counts] == [cold[kind][name] for name in counts]
        assert "WARNING" not in log
        missed = [line for line in log.splitlines() if "not the one recorded" in line]
        mine = [line for line in missed if _state_place(kind) in line]
        if kind in STATE_KINDS:
            [line] = mine
            assert "its lowered module (what the function computes" in line, line
        else:
            assert mine == []

    @pytest.mark.parametrize("kind", STATE_KINDS)
    def test_a_restart_with_the_state_unchanged_compiles_nothing_in_its_first_call(
        self, state_runs, kind
    ):
        first, _, _ = state_runs["recorded"]
        second, _, log = state_runs["unchanged"]
        assert second[kind]["result"] == first[kind]["result"]
        assert first[kind]["compiles_used"] == 1
        assert (second[kind]["traces_used"], second[kind]["compiles_used"]) == (1, 0)
        assert second[kind]["cache_loads"] == 0
        assert "not the one recorded" not in log and "WARNING" not in log

    @pytest.mark.parametrize("kind", UNRECORDED_KINDS)
    def test_a_transformed_or_calling_back_step_records_no_executable_and_compiles(
        self, state_runs, kind
    ):
        [place] = [
            place
            for name, place in state_runs["manifest"]["objects"].items()
            if name.startswith(_state_place(kind))
        ]
        assert [len(s["executables"]) for s in place["signatures"]] == [0]
        first, _, log = state_runs["recorded"]
        second, _, _ = state_runs["unchanged"]
        assert second[kind] == first[kind]  # compiled again, the same bits
        said = [
            line
            for line in log.splitlines()
            if line.startswith(f"DEBUG tinax warm start: {_state_place(kind)}")
            and line.endswith(
                ": trace 1 calls back into Python (jax.debug, pure_callback): its executable "
                "is not recorded"
            )
        ]
        assert len(said) == (kind != "rule"), log

    def test_jax_debug_print_prints_what_this_run_computes(self, state_runs):
        for name, printed in (("recorded", 6.0), ("unchanged", 6.0), ("changed", 3.0)):
            _, stdout, _ = state_runs[name]
            assert f"printed {printed}" in stdout.splitlines(), (name, stdout)


# --- in this process: arguments, saving, the file format -----------------------------------


@pytest.fixture
def no_session(monkeypatch):
    """Warm start off around the test, whatever the test turns on (and no exit hook); a
    session intercepts every XLA compile of the process (`executables.intercept`): JAX's
    own compile is put back after the test."""
    from jax._src import compiler

    monkeypatch.setattr(watchers, "warm_hook", None)
    monkeypatch.setattr(start.atexit, "register", lambda *_: None)
    monkeypatch.setattr(compiler, "compile_or_get_cached", compiler.compile_or_get_cached)
    monkeypatch.setattr(executables, "_installed", [])
    monkeypatch.setattr(executables, "_original", [])


class TestArguments:
    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],  # one folder, one stub
    )
    @given(path=wide_values(), workers=st.one_of(st.none(), wide_values()))
    def test_bad_arguments_raise_only_documented_errors_naming_the_argument(
        self, no_session, monkeypatch, tmp_path, path, workers
    ):
        # An accepted path is relative to the working directory: tmp_path, never the
        # checkout (each example that is accepted would write a manifest there at exit).
        monkeypatch.chdir(tmp_path)
        watchers.warm_hook = None
        try:
            tinax.warm_start(path, workers=workers)
        except (TypeError, ValueError) as error:
            text = str(error)
            assert text.startswith("warm_start: "), text
            assert "path must be" in text or "workers must be" in text, text
        finally:
            watchers.warm_hook = None

    def test_a_bool_for_workers_is_refused(self, no_session, tmp_path):
        with pytest.raises(TypeError, match=r"workers must be None or an int; got True \(bool\)"):
            tinax.warm_start(tmp_path / "m.json", workers=True)

    def test_zero_workers_is_refused(self, no_session, tmp_path):
        with pytest.raises(ValueError, match=r"workers must be None or an int >= 1; got 0"):
            tinax.warm_start(tmp_path / "m.json", workers=0)

    @pytest.mark.parametrize(("cpus", "expected"), [(None, 1), (1, 1), (2, 1), (16, 15)])
    def test_by_default_a_core_is_left_to_the_program(self, monkeypatch, cpus, expected):
        monkeypatch.setattr(start.os, "cpu_count", lambda: cpus)
        assert start._check_workers(None) == expected
        assert start._check_workers(3) == 3  # given: as given

    def test_a_second_call_with_the_same_path_is_a_no_op_and_another_path_is_refused(
        self, no_session, tmp_path
    ):
        tinax.warm_start(tmp_path / "m.json")
        first = start.active()
        tinax.warm_start(str(tmp_path / "m.json"))
        assert start.active() is first
        with pytest.raises(ValueError, match="warm start is on already with path"):
            tinax.warm_start(tmp_path / "other.json")

    def test_tinax_warm_start_0_turns_it_off_before_anything_is_read_or_written(
        self, no_session, monkeypatch, tmp_path
    ):
        from jax._src import compiler

        monkeypatch.setenv("TINAX_WARM_START", "0")
        own = compiler.compile_or_get_cached
        tinax.warm_start(tmp_path / "never.json")
        assert start.active() is None
        assert compiler.compile_or_get_cached is own  # no compile is intercepted
        bounded_jit(lambda x: x - 1, max_traces=1)(jnp.ones(2))
        assert os.listdir(tmp_path) == []

    @pytest.mark.parametrize("folder", ["folder", "slash", "PathLike"])
    def test_a_folder_is_refused_naming_it(self, no_session, tmp_path, folder):
        """A manifest at a folder's path can be neither read nor written."""
        path = {"folder": str(tmp_path), "slash": f"{tmp_path}/new/", "PathLike": tmp_path}[folder]
        expected = f"path must be a file path, not a folder; got {validation.describe(path)}"
        with pytest.raises(ValueError) as raised:
            tinax.warm_start(path)
        assert str(raised.value) == f"warm_start: {expected}."
        assert start.active() is None
        with pytest.raises(ValueError) as raised:
            tinax.save_signatures(path)
        assert str(raised.value) == f"save_signatures: {expected}."
        assert os.listdir(tmp_path) == []


class TestSaveSignatures:
    def test_without_warm_start_it_writes_the_live_objects_signatures(self, no_session, tmp_path):
        double = bounded_jit(lambda x: x * 2, max_traces=2)
        double(jnp.ones(3))
        double(jnp.ones((2, 2)))
        path = tmp_path / "saved.json"
        tinax.save_signatures(path)
        read = manifest.read(path)
        [place] = [place for name, place in read.places.items() if "test_warm_start.py" in name]
        assert [r.text for r in place.signatures] == ["x: f32[3]", "x: f32[2,2]"]
        assert [manifest.decode(r).leaves[0].text for r in place.signatures] == [
            "f32[3]",
            "f32[2,2]",
        ]

    def test_a_bad_path_is_refused_naming_it(self):
        with pytest.raises(TypeError, match=r"save_signatures: path must be a str or os.PathLike"):
            tinax.save_signatures(3)
        with pytest.raises(ValueError, match=r"save_signatures: path must be .* without a NUL"):
            tinax.save_signatures("signatures\x00.json")


_EXECUTABLE = {
    "name": "jit_f",
    "digest": "ab" * 32,
    "devices": [0],
    "platform": "cpu",
    "options": "",
}


def _sound():
    """A manifest that reads: one object, one signature (its data unpickled only later)
    with one executable (its module file read only when it compiles)."""
    signature = {
        "text": "x: f32[3]",
        "runs": 1,
        "last": 1,
        "data": "gASVAA==",
        "executables": [dict(_EXECUTABLE)],
    }
    place = {"function": "f", "code": None, "runs": 1, "signatures": [signature]}
    return {"format": manifest.FORMAT, "environment": {}, "objects": {"f": place}}


def _signature(content):
    return content["objects"]["f"]["signatures"][0]


def _executable(content):
    return _signature(content)["executables"][0]


_NEEDS = (
    'object \'f\': an executable needs "name", "digest", "options" and "platform" '
    'strings and "devices", a list of ints'
)


# Each kind of damage `manifest.read` tells: (the file written instead, or a change to
# `_sound()`'s content; what the error says).
DAMAGE = {
    "executable digest not a sha256": (  # it names a file: never one outside the folder
        lambda c: _executable(c).update(digest="../../x"),
        "object 'f': an executable's \"digest\" is not a sha256",
    ),
    "not JSON": ('{"format": ', "not JSON (Expecting value: line 1 column 12 (char 11))"),
    "no format": (
        lambda c: c.pop("format"),
        f'not a tinax warm-start manifest (no "format": {manifest.FORMAT!r})',
    ),
    "environment": (
        lambda c: c.update(environment=[]),
        '"environment" and "objects" must be JSON objects',
    ),
    "objects": (
        lambda c: c.update(objects=[1]),
        '"environment" and "objects" must be JSON objects',
    ),
    "object": (lambda c: c["objects"].update(f=1), "object 'f' is not a JSON object"),
    "signatures": (
        lambda c: c["objects"]["f"].update(signatures={}),
        "object 'f': \"signatures\" is not a list",
    ),
    "signature": (
        lambda c: c["objects"]["f"].update(signatures=[1]),
        "object 'f': a signature is not a JSON object",
    ),
    "no data": (
        lambda c: _signature(c).pop("data"),
        "object 'f': a signature's \"data\" is missing or not a string",
    ),
    "text": (
        lambda c: _signature(c).update(text=3),
        "object 'f': a signature's \"text\" is missing or not a string",
    ),
    "data": (
        lambda c: _signature(c).update(data=12),
        "object 'f': a signature's \"data\" is missing or not a string",
    ),
    "object runs": (
        lambda c: c["objects"]["f"].update(runs=-1),
        "object 'f': 'runs' is not a count (an int >= 0)",
    ),
    "signature last": (
        lambda c: _signature(c).update(last=True),
        "object 'f': 'last' is not a count (an int >= 0)",
    ),
    "data padding": (
        lambda c: _signature(c).update(data="gASVAA="),
        "object 'f': a signature's \"data\" is not base64",
    ),
    "data digit": (
        lambda c: _signature(c).update(data="gAS!AA=="),
        "object 'f': a signature's \"data\" is not base64",
    ),
    "executables": (
        lambda c: _signature(c).update(executables={}),
        "object 'f': a signature's \"executables\" is not a list",
    ),
    "executable": (
        lambda c: _signature(c).update(executables=[[]]),
        "object 'f': an executable is not a JSON object",
    ),
    "executable name": (lambda c: _executable(c).pop("name"), _NEEDS),
    "executable digest": (lambda c: _executable(c).update(digest=None), _NEEDS),
    "executable platform": (lambda c: _executable(c).update(platform=0), _NEEDS),
    "executable options": (lambda c: _executable(c).update(options=[]), _NEEDS),
    "executable devices": (lambda c: _executable(c).update(devices="0"), _NEEDS),
    "executable device": (lambda c: _executable(c).update(devices=[0, True]), _NEEDS),
    "executable options base64": (
        lambda c: _executable(c).update(options="gAS"),
        "object 'f': an executable's \"options\" is not base64",
    ),
}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)


class TestManifestFile:
    @settings(max_examples=100, deadline=None)
    @given(
        content=JSON.map(
            lambda c: {"format": manifest.FORMAT, "objects": c} if isinstance(c, dict) else c
        )
    )
    def test_any_json_reads_as_a_manifest_or_a_manifest_error(self, tmp_path_factory, content):
        path = tmp_path_factory.mktemp("m") / "m.json"
        path.write_text(json.dumps(content))
        try:
            read = manifest.read(path)
        except manifest.ManifestError as error:
            assert str(error)
        else:
            assert all(isinstance(place, manifest.Place) for place in read.places.values())

    @settings(max_examples=100, deadline=None)
    @given(
        executables=st.one_of(
            JSON,
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        key: st.one_of(JSON, st.just(value)) for key, value in _EXECUTABLE.items()
                    },
                ),
                max_size=3,
            ),
        )
    )
    def test_any_json_for_a_signatures_executables_reads_or_is_a_manifest_error(
        self, tmp_path_factory, executables
    ):
        content = _sound()
        _signature(content)["executables"] = executables
        path = tmp_path_factory.mktemp("m") / "m.json"
        path.write_text(json.dumps(content))
        try:
            read = manifest.read(path)
        except manifest.ManifestError as error:
            assert str(error).startswith("object 'f': "), error
        else:
            [recorded] = read.places["f"].signatures
            assert all(isinstance(e, manifest.Executable) for e in recorded.executables)
            assert all(type(device) is int for e in recorded.executables for device in e.devices)

    @pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
    def test_each_kind_of_damage_is_a_manifest_error_naming_it(self, tmp_path, damage):
        damaged, said = damage
        path = tmp_path / "m.json"
        path.write_text(json.dumps(_sound()))
        [sound] = manifest.read(path).places["f"].signatures
        assert sound.text == "x: f32[3]"
        assert sound.executables == (manifest.Executable("jit_f", "ab" * 32, "", (0,), "cpu"),)
        if isinstance(damaged, str):
            path.write_text(damaged)
        else:
            content = _sound()
            damaged(content)
            path.write_text(json.dumps(content))
        with pytest.raises(manifest.ManifestError) as raised:
            manifest.read(path)
        assert str(raised.value) == said

    def test_a_file_that_cannot_be_read_is_a_log_line_that_says_so(self, tmp_path, caplog):
        """Not "written anew": whether it can be written, the writer says when it tries."""
        caplog.set_level("INFO", logger="tinax")
        assert start._load(str(tmp_path)) is None  # a folder: open() raises an OSError
        [line] = caplog.messages
        assert line.startswith(f"tinax warm start: {tmp_path} cannot be read ("), line
        assert line.endswith("); starting cold"), line

    def test_a_run_counts_once_per_object_and_signature_and_ranks_most_used_then_recent(self):
        a, b, c = (manifest.Recorded(text, text) for text in "abc")
        place = manifest.used(None, "f", None, [a, b, a])
        assert place.runs == 1
        assert [(r.text, r.runs, r.last) for r in place.signatures] == [("a", 1, 1), ("b", 1, 1)]
        place = manifest.used(place, "f", None, [b])
        place = manifest.used(place, "f", None, [b])
        place = manifest.used(place, "f", None, [c])  # a one-off
        assert [(r.text, r.runs, r.last) for r in place.signatures] == [
            ("b", 3, 3),  # most used
            ("c", 1, 4),  # then the most recent
            ("a", 1, 1),
        ]
        assert manifest.used(place, "g", "code", []) == place  # a run that did not use it

    def test_a_signature_the_last_runs_did_not_use_is_dropped(self):
        a, b = manifest.Recorded("a", "a"), manifest.Recorded("b", "b")
        place = manifest.used(None, "f", None, [a, b])
        for _ in range(manifest.RETIRE_AFTER_RUNS - 1):
            place = manifest.used(place, "f", None, [a])
        assert [r.text for r in place.signatures] == ["a", "b"]
        stale = place
        place = manifest.used(place, "f", None, [a])
        assert [r.text for r in place.signatures] == ["a"]
        # nor does an older file merged in bring it back
        mine, theirs = manifest.Manifest({}, {"f": place}), manifest.Manifest({}, {"f": stale})
        assert [r.text for r in manifest.combined(mine, theirs).places["f"].signatures] == ["a"]

    def test_combined_keeps_every_object_and_signature_of_both_with_the_larger_counts(self):
        x, y = manifest.Recorded("x", "x-data", 2, 3), manifest.Recorded("y", "y", 1, 1)
        mine = manifest.Manifest({"jax": "1"}, {"f": manifest.Place("f", None, (x,), 3)})
        theirs = manifest.Manifest(
            {},
            {
                "f": manifest.Place("f", None, (manifest.Recorded("x", "x-data", 5, 2), y), 3),
                "g": manifest.Place("g", None, (y,), 1),
            },
        )
        both = manifest.combined(mine, theirs)
        assert set(both.places) == {"f", "g"}
        assert both.places["f"].signatures == (manifest.Recorded("x", "x-data", 5, 3), y)
        assert both.environment == {"jax": "1"}

    def test_a_signature_is_its_text_and_records_sharing_an_executable_are_one(self):
        """The pickle holds each run's timings, so a signature is its text: two of one text
        (an nnx model in ``train()`` and in ``eval()``) are one record holding both
        executables; two texts with an executable in common (a static whose text holds an
        address) are folded into one, counted once per run."""
        train_exe, eval_exe = (manifest.Executable("jit_f", d, "", (0,), "cpu") for d in "te")
        train = manifest.Recorded("model: Net", "dHJhaW4=", executables=(train_exe,))
        evaluate = manifest.Recorded("model: Net", "ZXZhbA==", executables=(eval_exe,))
        place = manifest.used(None, "f", None, [train, evaluate])
        [record_] = place.signatures
        assert set(record_.executables) == {train_exe, eval_exe}
        by_address = [
            manifest.Recorded(f"s=<S object at 0x{n}>", "", executables=(train_exe,))
            for n in (1, 2, 3)
        ]
        place = None
        for recorded in by_address:
            place = manifest.used(place, "f", None, [recorded])
        assert place is not None
        [first] = place.signatures
        assert (first.text, first.runs, first.last) == (by_address[-1].text, 3, 3)  # the latest
        theirs = manifest.Manifest({}, {"f": manifest.Place("f", None, (by_address[2],), 3)})
        both = manifest.combined(manifest.Manifest({}, {"f": place}), theirs)
        assert len(both.places["f"].signatures) == 1

    def test_a_signatures_executables_are_merged_newest_first_and_kept_at_most_four(self):
        made = [manifest.Executable("jit_f", f"{i}", "", (0,), "cpu") for i in range(6)]
        older = manifest.Recorded("x", "x", executables=(made[0], made[1]))
        newer = manifest.Recorded("x", "x", executables=(made[2], made[1]))  # this run's
        place = manifest.used(manifest.Place("f", None, (older,), 1), "f", None, [newer])
        assert place.signatures[0].executables == (made[2], made[1], made[0])
        theirs = manifest.Manifest({}, {"f": manifest.Place("f", None, (older,), 1)})
        mine = manifest.Manifest({}, {"f": manifest.Place("f", None, (newer,), 1)})
        both = manifest.combined(mine, theirs).places["f"].signatures[0]
        assert both.executables == (made[2], made[1], made[0])
        moved = manifest.Executable("jit_f", "0", "", (1,), "cpu")  # one module, other devices
        assert manifest.merged((moved,), made) == (moved, *made[:3])
        assert len(manifest.merged(made, ())) == manifest.MAX_EXECUTABLES

    def test_a_write_keeps_the_module_files_its_executables_name_and_removes_the_others(
        self, tmp_path
    ):
        path, folder = tmp_path / "m.json", tmp_path / "m.modules"

        def naming(*digests, runs=1):
            found = tuple(manifest.Executable("jit_f", d, "", (0,), "cpu") for d in digests)
            signature = manifest.Recorded("x: f32[3]", "eA==", executables=found)
            return manifest.Manifest({}, {"f": manifest.Place("f", None, (signature,), runs)})

        manifest.write(path, naming("a", "b"), {"a": b"A", "b": b"B", "c": b"C"})
        assert sorted(p.name for p in folder.iterdir()) == ["a.mlirbc", "b.mlirbc"]
        (folder / "stray.mlirbc").write_bytes(b"?")
        (folder / "notes.txt").write_text("not a module")
        manifest.write(path, naming("b"))  # a module of another run: kept as it was
        assert sorted(p.name for p in folder.iterdir()) == ["b.mlirbc", "notes.txt"]
        assert (folder / "b.mlirbc").read_bytes() == b"B"
        # a signature retired (its object's last 5 runs did not use it) takes its module along
        place = naming("b").places["f"]
        other = manifest.Recorded("x: f32[4]", "eQ==")
        for _ in range(manifest.RETIRE_AFTER_RUNS):
            place = manifest.used(place, "f", None, [other])
        assert manifest.save(path, manifest.Manifest({}, {"f": place})).places["f"] == place
        assert [r.text for r in manifest.read(path).places["f"].signatures] == ["x: f32[4]"]
        assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]

    def test_a_signature_keeps_how_its_arrays_were_split_and_one_written_before_loads(self, mesh8):
        """On an Auto mesh a signature's text and types read replicated; its pickle keeps
        how the call's array was split, and one written before tinax kept it (no such
        field) gives its arguments back as the types read."""
        step = bounded_jit(double, max_traces=1, mesh=mesh8)
        split = jax.sharding.NamedSharding(mesh8, jax.P("x"))
        step(jax.device_put(jnp.ones(8), split))
        recorded = manifest.encode(step.traced_signatures[0], double)
        assert recorded.text == "x: f32[8] under AbstractMesh('x': 8, axis_types=(Auto,))"
        loaded = manifest.decode(recorded)
        ((x,), _) = record.abstract_arguments(loaded, mesh8)
        assert x.sharding == split
        (argument,) = loaded.recorded
        before = object.__new__(type(argument))  # as unpickled from a tinax without the field
        for field in attrs.fields(type(argument)):
            if field.name != "placements":
                object.__setattr__(before, field.name, getattr(argument, field.name))
        ((x,), _) = record.abstract_arguments(attrs.evolve(loaded, recorded=(before,)), mesh8)
        assert x.sharding.mesh == mesh8 and x.sharding.is_fully_replicated

    def test_a_manifest_of_format_1_reads_as_one_run_in_its_order(self, tmp_path):
        path = tmp_path / "m.json"
        signatures = [{"text": t, "data": d} for t, d in (("b", "Yg=="), ("a", "YQ=="))]
        old = {"function": "f", "code": None, "signatures": signatures}
        content = {"format": "tinax warm start 1", "environment": {}, "objects": {"f": old}}
        path.write_text(json.dumps(content))
        place = manifest.read(path).places["f"]
        assert place.runs == 1
        assert place.signatures == (
            manifest.Recorded("b", "Yg=="),
            manifest.Recorded("a", "YQ=="),
        )
        assert (place.signatures[0].runs, place.signatures[0].last) == (1, 1)

    def test_two_writers_of_one_file_lose_nothing(self, tmp_path):
        # Two processes given one path (or one job's processes before
        # jax.distributed): each write merges what the file holds, under a lock.
        path = tmp_path / "m.json"
        missing = []

        def writer(tag):
            places = {}
            for index in range(25):
                recorded = manifest.Recorded(f"x: f32[{index}]", "data")
                places[f"{tag}{index}"] = manifest.Place("f", None, (recorded,), 1)
                manifest.save(path, manifest.Manifest({}, dict(places)))
                missing.extend(set(places) - set(manifest.read(path).places))

        threads = [threading.Thread(target=writer, args=(tag,)) for tag in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert missing == []
        assert len(manifest.read(path).places) == 50

    def test_a_write_replaces_the_file_whole(self, tmp_path):
        path = tmp_path / "deep" / "m.json"
        place = manifest.Place("f", None, (manifest.Recorded("x: f32[3]", "data"),))
        manifest.write(path, manifest.Manifest({"jax": "1"}, {"f built at a.py:1, #0": place}))
        manifest.write(path, manifest.Manifest({}, {}))
        assert manifest.read(path).places == {}
        assert [p.name for p in path.parent.iterdir()] == ["m.json"]  # no temporary left


HALF = lambda x: x / 2  # noqa: E731  (a lambda bound to a module-level name)


class Colour(enum.Enum):
    RED = 1


class TestValuesByReference:
    @pytest.mark.parametrize(
        "value",
        [jax.nn.relu, equinox_missing(), HALF, Colour.RED, jnp.float32, print],
        ids=["custom_jvp", "equinox MISSING", "module lambda", "enum member", "dtype", "builtin"],
    )
    def test_a_module_level_object_loads_as_itself(self, value):
        if value is None:
            pytest.skip("this equinox keeps no MISSING sentinel where it is looked for")
        assert pickle.loads(values.dumps(value)) is value
        assert pickle.loads(values.dumps((value, [value]))) == (value, [value])

    def test_an_object_bound_to_a_name_in_the_given_module_loads_as_itself(self, monkeypatch):
        module = types.ModuleType("tinax_warm_elsewhere")
        module.TX = optax.sgd(0.1)  # a namedtuple of closures, module-level
        monkeypatch.setitem(sys.modules, module.__name__, module)
        with pytest.raises((AttributeError, pickle.PicklingError)):
            values.dumps(module.TX)  # alone, its closures are looked for where they were made
        assert pickle.loads(values.dumps(module.TX, [module.__name__])) is module.TX

    def test_a_value_recorded_by_reference_that_is_gone_fails_to_load_naming_it(self, monkeypatch):
        module = types.ModuleType("tinax_warm_gone")
        exec("act = lambda x: x", module.__dict__)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        data = values.dumps(module.act)
        module.act = 3
        now_an_int = r"tinax_warm_gone\.act \(of type function\) is of type int now"
        with pytest.raises(values.Gone, match=now_an_int):
            pickle.loads(data)
        del module.act
        with pytest.raises(values.Gone, match=r"tinax_warm_gone\.act .* is no longer there"):
            pickle.loads(data)

    def test_a_closure_inside_a_tree_structure_is_named_by_its_path(self):
        model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)

        def step(model, optimizer):
            return model.kernel[...].sum()

        stepper = bounded_jit(step, max_traces=1, propagate_updates=True)
        stepper(model, optimizer)
        with pytest.raises(manifest.Unwritable) as raised:
            manifest.encode(stepper.traced_signatures[0], step)
        assert raised.value.path == "optimizer.tx.init"
        assert type(raised.value.value).__name__ == "function"


class TestRecordingAsItTraces:
    def test_a_reader_never_sees_a_partial_file_while_traces_are_written(
        self, no_session, monkeypatch, tmp_path
    ):
        monkeypatch.setattr(workers, "_WRITE_DELAY", 0.0)  # as many writes as can be
        writes = []
        write = manifest.write
        monkeypatch.setattr(manifest, "write", lambda *a: (writes.append(1), write(*a)))
        path = tmp_path / "m.json"
        tinax.warm_start(path)
        stop, reads, errors = threading.Event(), [], []

        def reader():
            while not stop.is_set():
                try:
                    reads.append(manifest.read(path))
                except FileNotFoundError:
                    continue
                except Exception as error:
                    errors.append(error)

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            add = bounded_jit(lambda x: x + 1, max_traces=40)
            for size in range(1, 41):
                add(jnp.ones(size))
            deadline = time.monotonic() + 30
            while len(_texts_of(path)) < 40 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            stop.set()
            thread.join()
        assert errors == []
        assert len(writes) > 1 and len(reads) > 1
        assert _texts_of(path) == [f"x: f32[{size}]" for size in range(1, 41)]

    def test_a_trace_and_its_compile_wake_the_writer_and_a_cached_call_never(
        self, no_session, monkeypatch, tmp_path
    ):
        tinax.warm_start(tmp_path / "m.json")
        active = start.active()
        wakes = []
        monkeypatch.setattr(active._writer, "wake", lambda: wakes.append(1))
        triple = bounded_jit(lambda x: x * 3, max_traces=1)
        triple(jnp.ones(3))
        assert len(wakes) == 2  # the signature, then the module its compile lowered to
        for _ in range(20):
            triple(jnp.ones(3))
        assert len(wakes) == 2

    def test_each_process_of_a_job_has_its_own_file_and_a_new_one_starts_from_process_0s(
        self, no_session, monkeypatch, tmp_path
    ):
        path = str(tmp_path / "signatures.json")
        job = types.SimpleNamespace(process_id=3, num_processes=4)
        monkeypatch.setattr(start.private, "distributed_state", lambda: job)
        assert start.own_file(path) == str(tmp_path / "signatures.process-3.json")
        assert start.own_file(str(tmp_path / "signatures")) == str(
            tmp_path / "signatures.process-3"
        )
        job.process_id = 0
        assert start.own_file(path) == path
        job.process_id, job.num_processes = 3, 1
        assert start.own_file(path) == path
        job.num_processes = 4
        place = manifest.Place("f", None, (manifest.Recorded("x: f32[3]", "data"),), 1)
        manifest.write(path, manifest.Manifest({}, {"f built at a.py:1, #0": place}))
        tinax.warm_start(path)
        active = start.active()
        assert active.file == str(tmp_path / "signatures.process-3.json")
        manifest_now, _ = active.snapshot()
        assert set(manifest_now.places) == {"f built at a.py:1, #0"}

    def test_an_object_built_where_one_was_recorded_is_the_jax_jit_object_and_compiles_nothing(
        self, no_session, tmp_path, caplog
    ):
        """In this process (its backend started): the recorded module is compiled ahead as
        the object is built, and its first call, traced and lowered, is answered by it.
        The place was recorded at another line (the line moved): found, and said."""

        def build():
            return bounded_jit(lambda x: jnp.sin(x) * 3, max_traces=1)  # one place: #0, #1

        path = tmp_path / "m.json"
        tinax.warm_start(path)
        cold = build()
        expected = cold(jnp.arange(3.0))
        assert (cold.traces_used, cold.compiles_used) == (1, 1)
        start.active().save()
        saved = manifest.read(path)
        [name] = [name for name in saved.places if "test_warm_start.py" in name]
        line = int(name.rsplit(":", 1)[1].split(",")[0])
        assert name.endswith(f"test_warm_start.py:{line}, #0")
        # the next object built there, as recorded by a run whose line was 40 lines lower
        moved = name.replace(f":{line}, #0", f":{line + 40}, #1")
        manifest.write(path, manifest.Manifest(saved.environment, {moved: saved.places[name]}))
        watchers.warm_hook = None  # a new session, reading the file
        tinax.warm_start(path)
        caplog.set_level("DEBUG", logger="tinax")
        warm = build()
        assert warm.__call__ is warm._jitted  # nothing gates the call
        assert (
            f"tinax warm start: {moved[: -len(f'{line + 40}, #1')]}{line}, #1 was not found "
            f"among the recorded objects; it was recorded at {moved} (the line moved): its "
            "executables are compiled ahead for it"
        ) in caplog.messages
        await_compiles_ahead()
        result = warm(jnp.arange(3.0))
        assert (warm.traces_used, warm.compiles_used, warm.cache_loads) == (1, 0, 0)
        assert result.tobytes() == expected.tobytes()
        assert any(
            "the call runs the executable compiled ahead for x: f32[3]" in m
            for m in caplog.messages
        )
        assert warm.__call__ is warm._jitted


def _texts_of(path):
    try:
        content = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return []
    return [s["text"] for place in content["objects"].values() for s in place["signatures"]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's nice value: Linux")
def test_the_compile_threads_run_at_the_lowest_priority_and_the_program_at_its_own():
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    ran = threading.Event()
    seen = {}

    def task():
        seen["worker"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        ran.set()

    pool = workers.Workers(1)
    pool.submit(task)
    assert ran.wait(30)
    pool.stopped = True
    pool.submit(lambda: None)  # wakes the thread, which sees stopped and ends
    assert seen["worker"] == 19
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own


def _identity(x):
    return x


def test_a_miss_explained_against_a_recorded_signature_calls_no_trace_a_retrace():
    # Warm start explains this run's trace (trace 1, say) against another run's recorded
    # signature: no "earlier trace #N" of this object, no "JAX traced again".
    from tinax._src.diagnosis import diff_lines

    step = tinax.jit.bounded_jit(_identity, max_traces=1)
    step(jnp.ones(3))
    (entry,) = step.traced_signatures
    recorded = entry.numbered(3)  # the recorded run's trace 3, the same signature
    lines = diff_lines.explanation_lines(
        recorded, (), entry, closest_label="Closest recorded signature"
    )
    assert lines == ["Closest recorded signature matches this call in all it records."]
    text = "\n".join(lines)
    assert "#" not in text and "again" not in text and "earlier trace" not in text
    # Without the label (a retrace of this object), the words of a retrace stay.
    plain = diff_lines.explanation_lines(recorded, (), entry)
    assert plain[0] == "Closest earlier trace: #3, which this call matches exactly."
