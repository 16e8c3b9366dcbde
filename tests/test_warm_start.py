"""`tinax.warm_start`: a program run twice, each run a fresh process, starts warm on the
second; a stale, corrupt or unwritable manifest is a log line, never a wrong result."""

import enum
import functools
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
import numpy as np
import optax
import pytest
from flax import nnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinax
from helpers.processes import PIPE, PROGRAMS, run_program, start_program
from helpers.strategies import wide_values
from tinax._src import private
from tinax._src.core import validation
from tinax._src.diagnosis import record
from tinax._src.models import nonarrays
from tinax._src.observe import watchers
from tinax._src.warm import manifest, same, start, values, workers
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


def _built_at(marker):
    """The program's line where ``marker`` builds an object (its place in the manifest)."""
    lines = PROGRAM.read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if marker in line)


STEP = f"main.<locals>.step built at warm_start_program.py:{_built_at('step_jit = ')}, #0"
APPLY = f"main.<locals>.apply built at warm_start_program.py:{_built_at('apply_jit = ')}, #0"


def run(path, *options, env=None, expect_ok=True, program=PROGRAM, devices=1):
    """Runs the program once in a fresh process, on one device unless told: (facts
    printed, its log)."""
    done = run_program(
        program, path, *options, env=env, devices=devices, returncode=0 if expect_ok else None
    )
    if expect_ok:
        return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr
    return done.returncode, done.stderr


@pytest.fixture(scope="module")
def _recorded_once(tmp_path_factory):
    """One cold run of the program with its defaults (batch 8, max_traces=1): the manifest
    that many tests' second run starts from. The run is the same for each of them, so it
    runs once; each test gets a copy (`recorded`)."""
    path = tmp_path_factory.mktemp("recorded") / "signatures.json"
    run(path)
    return path.read_bytes()


@pytest.fixture
def recorded(_recorded_once, tmp_path):
    """``tmp_path / "signatures.json"``, as the program's cold run with its defaults left it."""
    path = tmp_path / "signatures.json"
    path.write_bytes(_recorded_once)
    return path


class TestTwoRuns:
    def test_the_second_run_compiles_the_recorded_signature_before_the_first_call(self, tmp_path):
        path = tmp_path / "signatures.json"
        first, _ = run(path, "--wait")
        assert first["traces_before_call"] == 0  # nothing recorded yet: cold
        assert (first["runs"], first["traces_used"], first["compiles_used"]) == (1, 1, 1)
        second, log = run(path, "--wait")
        assert second["traces_before_call"] == 1  # compiled while the program went on
        assert second["compiles_before_call"] == 1
        # the call ran from it: no second counted trace, no second compile; the body ran
        # twice: the warm trace, and its check at the first call (traced again, not counted)
        assert (second["runs"], second["traces_used"], second["compiles_used"]) == (2, 1, 1)
        assert second["explain_lines"] == first["explain_lines"] == 0  # compiled: nothing to add
        assert second["result"] == first["result"]
        assert "holds 1 signature(s) of 1 object(s)" in log

    def test_arrays_split_over_an_auto_mesh_are_compiled_ahead_as_split(self, tmp_path):
        """On a mesh with Auto axes JAX's types read every array as replicated; the
        warm compile is for the placement the recorded call's arrays had, so the first
        call of the next run compiles nothing."""
        path = tmp_path / "signatures.json"
        first, _ = run(path, "--wait", "--sharded", devices=8)
        assert (first["runs"], first["traces_used"], first["compiles_used"]) == (1, 1, 1)
        second, _ = run(path, "--wait", "--sharded", devices=8)
        assert (second["traces_before_call"], second["compiles_before_call"]) == (1, 1)
        assert (second["runs"], second["traces_used"], second["compiles_used"]) == (2, 1, 1)
        assert second["result"] == first["result"]

    def test_a_call_during_the_warm_compile_waits_for_it_and_never_traces_twice(self, recorded):
        path = recorded
        # the trace sleeps 2 s: the first call comes while the warm compile is tracing
        second, _ = run(path, "--slow", "2", "--calls", "3")
        assert (second["runs"], second["traces_used"], second["compiles_used"]) == (2, 1, 1)

    def test_a_call_of_another_signature_during_the_warm_compile_waits_and_is_not_refused(
        self, recorded
    ):
        # (JAX itself waits for a trace of the same signature in flight; one of another
        # signature would be refused beside the warm trace in flight, max_traces=1.)
        path = recorded
        second, log = run(path, "--slow", "2", "--batch", "16")
        assert (second["runs"], second["traces_used"]) == (2, 1)
        assert "gives its place in the budget to this call's trace" in log

    def test_a_warm_trace_a_call_ran_from_counts_as_any_trace(self, recorded):
        # The first call ran from the warm trace: it is no longer provisional, so a call
        # of another signature is over the budget, as it would be after a cold start.
        path = recorded
        second, _ = run(path, "--wait", "--then-batch", "16")
        assert second["traces_before_call"] == 1
        assert second["last_call_refused"] is True
        assert (second["runs"], second["traces_used"]) == (
            2,
            1,
        )  # the warm trace, and its check at the first call (traced again, not counted)

    def test_the_manifest_is_a_json_file_a_person_can_read(self, recorded):
        path = recorded
        content = json.loads(path.read_text())
        assert content["format"] == manifest.FORMAT
        assert content["environment"]["jax"] == jax.__version__
        [name] = [name for name in content["objects"] if "step" in name]
        assert name == STEP
        [signature] = content["objects"][name]["signatures"]
        assert signature["text"] == "x: f32[8,3], scale: weak-typed f32[]"

    def test_at_most_the_budget_is_compiled_ahead(self, tmp_path):
        path = tmp_path / "signatures.json"
        run(path, "--max-traces", "2")
        run(path, "--max-traces", "2", "--batch", "4")  # two signatures recorded now
        texts = _texts(path, "step")
        assert texts == [
            "x: f32[4,3], scale: weak-typed f32[]",
            "x: f32[8,3], scale: weak-typed f32[]",
        ]
        third, _ = run(path, "--max-traces", "1", "--batch", "4", "--wait")
        assert third["traces_before_call"] == 1
        assert third["traces_used"] == 1


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
            assert first["traces_before_call"] is None and first["traces_used"] == 1
            assert _texts(path, "step") == ["x: f32[8,3], scale: weak-typed f32[]"]
            if signal_number == signal.SIGKILL:
                return
            second = _killed(path, signal_number, "--wait", log=log)
        assert second["traces_before_call"] == 1  # warm: compiled before its call
        assert (second["runs"], second["traces_used"]) == (2, 1)  # the call ran from it
        # and the killed warm run's use of it was written too
        [place] = [p for name, p in json.loads(path.read_text())["objects"].items() if name == STEP]
        assert (place["runs"], place["signatures"][0]["runs"]) == (2, 2)


class TestUse:
    def test_what_runs_use_outranks_a_one_off_run(self, tmp_path):
        path = tmp_path / "signatures.json"
        run(path, "--batch", "64")
        run(path, "--batch", "64")
        run(path, "--batch", "48")  # a one-off: 64 compiled ahead in vain, 48 traced
        assert _texts(path, "step") == [
            "x: f32[64,3], scale: weak-typed f32[]",  # two runs used it
            "x: f32[48,3], scale: weak-typed f32[]",  # one, the latest
        ]
        facts, _ = run(path, "--batch", "64", "--wait")  # max_traces=1: one compiled ahead
        assert facts["traces_before_call"] == 1
        assert (facts["runs"], facts["traces_used"]) == (2, 1)  # the call ran from it
        [place] = [p for name, p in json.loads(path.read_text())["objects"].items() if name == STEP]
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


class TestNothingWrongBecauseOfAManifest:
    def test_a_stale_signature_gives_its_place_to_the_call_and_the_miss_is_explained(
        self, recorded
    ):
        path = recorded  # batch 8, max_traces=1
        second, log = run(path, "--batch", "16", "--wait")
        assert second["traces_before_call"] == 1  # the recorded batch of 8, compiled ahead
        # a cold run would trace batch 16 once and run: so does this one
        assert second["traces_used"] == 1
        assert "trace #1 was compiled ahead by tinax.warm_start" in log
        assert "gives its place in the budget to this call's trace (1 of max_traces=1)" in log
        assert "traced a signature the recorded run did not" in log
        assert "Closest recorded signature (1 difference):" in log
        assert "x: f32[8,3] -> f32[16,3] (shape)" in log
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
        # next run, the signature the program called comes first
        assert _texts(path, "step")[0] == "x: f32[16,3], scale: weak-typed f32[]"

    @pytest.mark.parametrize("damage", CORRUPT.values(), ids=CORRUPT.keys())
    def test_a_corrupt_manifest_is_a_log_line_and_is_written_anew(self, recorded, damage):
        path = recorded
        damaged, said = damage
        path.write_text(damaged(json.loads(path.read_text())))
        facts, log = run(path, "--wait")
        assert facts["traces_before_call"] == 0
        assert facts["traces_used"] == 1
        assert f"cannot be used ({said}" in log
        assert "); starting cold, and it is written anew" in log
        assert "Incorrect padding" not in log and "not compiled" not in log
        assert _texts(path, "step") == ["x: f32[8,3], scale: weak-typed f32[]"]

    def test_a_signature_that_no_longer_unpickles_is_a_warning_and_the_call_runs_cold(
        self, recorded
    ):
        path = recorded
        content = json.loads(path.read_text())
        for place in content["objects"].values():
            for signature in place["signatures"]:
                signature["data"] = "bm90IGEgcGlja2xl"  # "not a pickle"
        path.write_text(json.dumps(content))
        facts, log = run(path, "--wait")
        assert facts["traces_before_call"] == 0
        assert (facts["runs"], facts["traces_used"]) == (1, 1)
        assert "recorded signature (x: f32[8,3], scale: weak-typed f32[]) not compiled" in log

    def test_a_warm_compile_that_fails_leaves_the_object_as_a_cold_start_would(self, recorded):
        path = recorded
        code, log = run(path, "--wait", env={"WARM_TEST_FAIL": "1"}, expect_ok=False)
        # the function raises (as one reading state the program has not set yet): INFO
        assert "INFO tinax warm start: " in log
        assert "not compiled ahead, left to its first call: ValueError: step refuses" in log
        assert "WARNING" not in log
        # the call raises what it raises cold: the body's own error, not a budget error
        assert code != 0
        assert "ValueError: step refuses to trace (WARM_TEST_FAIL=1)" in log
        assert "TraceBudgetError" not in log

    def test_tinax_warm_start_0_reads_and_writes_nothing(self, tmp_path):
        path = tmp_path / "signatures.json"
        run(path)
        before = path.read_text()
        facts, log = run(path, "--wait", "--batch", "4", env={"TINAX_WARM_START": "0"})
        assert facts["traces_before_call"] == 0
        assert "warm start: off (TINAX_WARM_START=0)" in log
        assert path.read_text() == before
        missing = tmp_path / "never.json"
        run(missing, env={"TINAX_WARM_START": "0"})
        assert not missing.exists()

    def test_a_static_value_that_cannot_be_written_is_left_out_with_one_log_line(self, tmp_path):
        path = tmp_path / "signatures.json"
        _, log = run(path, "--static-lambda")
        lines = [line for line in log.splitlines() if "cannot be written" in line]
        assert len(lines) == 1, log
        assert f"{APPLY}: trace 1" in lines[0]
        assert "fn holds <function <lambda>> (type function), which cannot be written" in lines[0]
        assert _texts(path, "apply") == []
        assert _texts(path, "step") == ["x: f32[8,3], scale: weak-typed f32[]"]


@pytest.fixture(scope="module")
def model_runs(tmp_path_factory):
    """The models program run twice with one manifest: [(facts, log), (facts, log)]."""
    path = tmp_path_factory.mktemp("models") / "signatures.json"
    return [run(path, program=MODELS) for _ in range(2)]


class TestModels:
    """equinox modules under static_nonarrays, flax.nnx objects under propagate_updates."""

    @pytest.mark.parametrize("name", ["mlp", "conv", "named", "nnx"])
    def test_a_model_is_compiled_ahead_on_the_second_run(self, model_runs, name):
        (cold, _), (warm, log) = model_runs
        assert (cold[name]["traces_before_call"], cold[name]["traced_in_call"]) == (0, 1)
        assert (warm[name]["traces_before_call"], warm[name]["traced_in_call"]) == (1, 0), log
        assert "not compiled" not in log
        assert "traced a signature the recorded run did not" not in log

    def test_results_are_bit_identical_to_the_cold_runs(self, model_runs):
        (cold, _), (warm, _) = model_runs
        assert warm == {
            name: {**facts, "traces_before_call": 1, "traced_in_call": 0}
            if name != "closure"
            else facts
            for name, facts in cold.items()
        }

    def test_a_closure_static_is_left_out_with_one_line_naming_its_path_and_type(self, model_runs):
        (_, log), (warm, _) = model_runs
        lines = [line for line in log.splitlines() if "cannot be written" in line]
        assert len(lines) == 1, log
        assert "closure_step built at warm_start_models_program.py:" in lines[0]
        assert (
            ": trace 1 is not recorded: model.activation holds <function <lambda>> (type "
            "function), which cannot be written" in lines[0]
        )
        assert (warm["closure"]["traces_before_call"], warm["closure"]["traced_in_call"]) == (0, 1)


class TestWhyItMissed:
    def test_a_change_of_xla_flags_and_devices_is_named(self, recorded):
        path = recorded
        flags = "--xla_force_host_platform_device_count=2"
        _, log = run(path, "--wait", env={"XLA_FLAGS": flags})
        [line] = [line for line in log.splitlines() if "changed since the recorded run" in line]
        assert "devices, XLA_FLAGS changed since the recorded run" in line
        assert "devices 1 x cpu -> 2 x cpu" in line
        assert f"XLA_FLAGS --xla_force_host_platform_device_count=1 -> {flags}" in line

    def test_a_function_whose_code_changed_is_named(self, recorded):
        path = recorded
        facts, log = run(path, "--wait", "--version", "2")
        assert f"{STEP}: its code changed" in log
        assert facts["traces_before_call"] == 1  # the signature still compiles ahead
        assert "XLA_FLAGS" not in log  # nothing else changed

    def test_nothing_is_logged_as_changed_when_nothing_changed(self, recorded):
        path = recorded
        _, log = run(path, "--wait")
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


# --- in this process: arguments, saving, the file format -----------------------------------


@pytest.fixture
def no_session(monkeypatch):
    """Warm start off around the test, whatever the test turns on (and no exit hook)."""
    monkeypatch.setattr(watchers, "warm_hook", None)
    monkeypatch.setattr(start.atexit, "register", lambda *_: None)


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

    def test_a_second_call_with_the_same_path_is_a_no_op_and_another_path_is_refused(
        self, no_session, tmp_path
    ):
        tinax.warm_start(tmp_path / "m.json")
        first = start.active()
        tinax.warm_start(str(tmp_path / "m.json"))
        assert start.active() is first
        with pytest.raises(ValueError, match="warm start is on already with path"):
            tinax.warm_start(tmp_path / "other.json")

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


def _sound():
    """A manifest that reads: one object, one signature (its data unpickled only later)."""
    signature = {"text": "x: f32[3]", "runs": 1, "last": 1, "data": "gASVAA=="}
    place = {"function": "f", "code": None, "runs": 1, "signatures": [signature]}
    return {"format": manifest.FORMAT, "environment": {}, "objects": {"f": place}}


def _signature(content):
    return content["objects"]["f"]["signatures"][0]


# Each kind of damage `manifest.read` tells: (the file written instead, or a change to
# `_sound()`'s content; what the error says).
DAMAGE = {
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
}


class TestManifestFile:
    @settings(max_examples=100, deadline=None)
    @given(
        content=st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda children: (
                st.lists(children, max_size=3)
                | st.dictionaries(st.text(max_size=8), children, max_size=3)
            ),
            max_leaves=10,
        ).map(lambda c: {"format": manifest.FORMAT, "objects": c} if isinstance(c, dict) else c)
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

    @pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
    def test_each_kind_of_damage_is_a_manifest_error_naming_it(self, tmp_path, damage):
        damaged, said = damage
        path = tmp_path / "m.json"
        path.write_text(json.dumps(_sound()))
        assert [r.text for r in manifest.read(path).places["f"].signatures] == ["x: f32[3]"]
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
        x, y = manifest.Recorded("x", "mine", 2, 3), manifest.Recorded("y", "y", 1, 1)
        mine = manifest.Manifest({"jax": "1"}, {"f": manifest.Place("f", None, (x,), 3)})
        theirs = manifest.Manifest(
            {},
            {
                "f": manifest.Place("f", None, (manifest.Recorded("x", "theirs", 5, 2), y), 3),
                "g": manifest.Place("g", None, (y,), 1),
            },
        )
        both = manifest.combined(mine, theirs)
        assert set(both.places) == {"f", "g"}
        assert both.places["f"].signatures == (manifest.Recorded("x", "mine", 5, 3), y)
        assert both.environment == {"jax": "1"}

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

    def test_a_trace_wakes_the_writer_once_and_a_cached_call_never(
        self, no_session, monkeypatch, tmp_path
    ):
        tinax.warm_start(tmp_path / "m.json")
        active = start.active()
        wakes = []
        monkeypatch.setattr(active._writer, "wake", lambda: wakes.append(1))
        triple = bounded_jit(lambda x: x * 3, max_traces=1)
        triple(jnp.ones(3))
        assert len(wakes) == 1
        for _ in range(20):
            triple(jnp.ones(3))
        assert len(wakes) == 1

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
        assert set(active.snapshot().places) == {"f built at a.py:1, #0"}

    def test_the_call_waits_while_warm_traces_are_unconfirmed_then_is_the_jax_jit_object(
        self, no_session, tmp_path
    ):
        def build():
            return bounded_jit(lambda x: x * 3, max_traces=1)  # one place: rank 0, then 1

        cold = build()
        cold(jnp.ones(3))
        path = tmp_path / "m.json"
        tinax.save_signatures(path)
        saved = manifest.read(path)
        [name] = [name for name in saved.places if "test_warm_start.py" in name]
        assert name.endswith(", #0")
        renamed = {name[: -len("#0")] + "#1": saved.places[name]}  # the next object built there
        manifest.write(path, manifest.Manifest(saved.environment, renamed))
        tinax.warm_start(path)
        warm = build()
        assert warm.__call__ is not warm._jitted  # gated: waits for its warm compile
        assert start.active().wait(60)
        assert warm.traces_used == 1
        warm.lower(jnp.ones(3))  # checked as a call is, and no trace
        warm(jnp.ones(3))  # runs from the warm trace: confirmed, the gate goes
        assert warm.traces_used == 1
        assert warm.__call__ is warm._jitted
        assert "_warm_check" not in vars(warm)


def _texts_of(path):
    try:
        content = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return []
    return [s["text"] for place in content["objects"].values() for s in place["signatures"]]


STATE = PROGRAMS / "warm_start_state_program.py"
CHANGED = "is dropped unused: what the function reads changed between the warm trace and"
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
    "rule",
    "optimizer",
]


class TestStateSetAfterTheWarmTrace:
    """The step is built at module level: its warm trace reads the state as the import
    left it; main() then sets what it reads. Each call computes what it computes with
    warm start off, and counts what that run counts."""

    @pytest.mark.parametrize("kind", STATE_KINDS)
    def test_a_restart_that_changes_what_the_step_reads_computes_as_a_cold_run(
        self, tmp_path, kind
    ):
        path = tmp_path / "signatures.json"
        run(path, "--kind", kind, "--value", "1.0", program=STATE)
        assert path.exists()
        warm, log = run(path, "--kind", kind, "--value", "0.5", program=STATE)
        cold, _ = run(
            path, "--kind", kind, "--value", "0.5", program=STATE, env={"TINAX_WARM_START": "0"}
        )
        assert warm["result"] == cold["result"]
        counts = ("traces_used", "compiles_used", "cache_loads")
        assert [warm[name] for name in counts] == [cold[name] for name in counts]
        assert "WARNING" not in log
        if kind != "none":  # a None global: the warm trace raised, nothing to drop
            assert warm["compiles_before_call"] == 1  # compiled ahead, then dropped
            assert CHANGED in log

    def test_precompile_before_the_first_call_checks_the_warm_trace_as_a_call_does(self, tmp_path):
        path = tmp_path / "signatures.json"
        run(path, "--kind", "global", "--value", "1.0", program=STATE)
        options = ("--kind", "global", "--value", "0.5", "--precompile")
        warm, log = run(path, *options, program=STATE)
        cold, _ = run(path, *options, program=STATE, env={"TINAX_WARM_START": "0"})
        assert warm["result"] == cold["result"]
        assert (warm["traces_used"], warm["compiles_used"]) == (1, 1)
        assert CHANGED in log

    @pytest.mark.parametrize("kind", ["global", "static", "nested", "scan", "vjp", "optimizer"])
    def test_a_restart_with_the_state_unchanged_compiles_nothing_in_its_first_call(
        self, tmp_path, kind
    ):
        path = tmp_path / "signatures.json"
        first, _ = run(path, "--kind", kind, "--value", "1.0", program=STATE)
        second, log = run(path, "--kind", kind, "--value", "1.0", program=STATE)
        assert second["result"] == first["result"]
        assert second["compiles_before_call"] == 1  # compiled ahead
        assert (second["traces_used"], second["compiles_used"]) == (1, 1)  # the call: none
        assert "dropped" not in log

    def test_a_global_that_main_loads_is_no_warning(self, tmp_path):
        path = tmp_path / "signatures.json"
        run(path, "--kind", "none", "--value", "2.0", program=STATE)
        second, log = run(path, "--kind", "none", "--value", "2.0", program=STATE)
        assert "WARNING" not in log
        assert "with_table built at" in log and "not compiled ahead" in log
        assert (second["traces_used"], second["compiles_used"]) == (1, 1)


class TestSameStage:
    """The check's comparison of two traces of one signature (`same.same_stage`)."""

    @staticmethod
    def _stage(function, *args, **options):
        return private.fresh_trace(jax.jit(function, **options), args, {})

    def test_two_traces_of_unchanged_code_and_state_are_the_same(self):
        import equinox as eqx

        mlp = eqx.nn.MLP(3, 2, 8, 2, activation=jax.nn.relu, key=jax.random.PRNGKey(0))
        params, static = eqx.partition(mlp, eqx.is_array)

        def step(params, x):
            return jax.grad(lambda p: eqx.combine(p, static)(x).sum())(params)

        # relu's custom_jvp: a lazy derivative rule, made anew by each trace
        first, second = (self._stage(step, params, jnp.ones(3)) for _ in range(2))
        assert same.same_stage(first, second)

    def test_two_traces_of_a_custom_vjp_call_are_the_same_until_its_primal_reads_another_value(
        self,
    ):
        scale = [2.0]

        @jax.custom_vjp
        def clipped(x):
            return jnp.sin(x) * scale[0]

        def forward(x):
            return clipped(x), x

        def backward(residual, g):
            return (g * jnp.cos(residual),)

        clipped.defvjp(forward, backward)

        def step(x):  # the rules are traced only when the jaxpr is differentiated
            return clipped(x).sum()

        before = self._stage(step, jnp.ones(3))
        assert same.same_stage(before, self._stage(step, jnp.ones(3)))
        scale[0] = 3.0
        assert not same.same_stage(before, self._stage(step, jnp.ones(3)))

    def test_two_traces_of_an_odeint_are_the_same(self):
        from jax.experimental.ode import odeint

        def step(y0):  # odeint's custom_vjp is given a bound method made in the trace
            return odeint(lambda y, t: -y, y0, jnp.array([0.0, 1.0]))

        first, second = (self._stage(step, jnp.ones(3)) for _ in range(2))
        assert same.same_stage(first, second)

    @pytest.mark.parametrize("rule", ["custom_jvp", "custom_vjp", "closure"])
    def test_a_derivative_rule_given_another_value_differs_though_the_primal_is_the_same(
        self, rule
    ):
        """A rule runs only when the jaxpr is differentiated (a ``jax.grad`` around the
        object, or an outer trace's), with the values the trace gave it: a
        ``nondiff_argnums`` argument or a cell of a rule made in the trace."""
        clip = [1.0]

        @functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
        def scaled_jvp(scale, x):
            return x

        @scaled_jvp.defjvp
        def _(scale, primals, tangents):
            return primals[0], tangents[0] * scale

        @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
        def scaled_vjp(scale, x):
            return x

        scaled_vjp.defvjp(lambda scale, x: (x, None), lambda scale, _, g: (g * scale,))

        def made_in_the_trace(scale, x):
            inner = jax.custom_jvp(lambda v: v)
            inner.defjvp(lambda primals, tangents: (primals[0], tangents[0] * scale))
            return inner(x)

        scaled = {"custom_jvp": scaled_jvp, "custom_vjp": scaled_vjp}.get(rule, made_in_the_trace)

        def step(x):
            return (scaled(clip[0], x) ** 2).sum()

        before = self._stage(step, jnp.ones(3))
        assert same.same_stage(before, self._stage(step, jnp.ones(3)))
        clip[0] = 0.25
        assert not same.same_stage(before, self._stage(step, jnp.ones(3)))

    @pytest.mark.parametrize(
        ("first", "second"),
        [(1.0, 0.5), (0.0, -0.0), (1.0, 1.0 + 2**-23)],  # literals, bit for bit
    )
    def test_a_literal_that_differs_in_any_bit_differs(self, first, second):
        scale = [first]

        def step(x):
            return x * scale[0]

        before = self._stage(step, jnp.ones(3, jnp.float32))
        scale[0] = second
        assert not same.same_stage(before, self._stage(step, jnp.ones(3, jnp.float32)))

    def test_a_constant_array_that_differs_differs(self):
        table = [np.zeros(64, np.float32)]

        def step(x):
            return x + table[0]

        before = self._stage(step, jnp.ones(64))
        table[0] = table[0].copy()
        assert same.same_stage(before, self._stage(step, jnp.ones(64)))  # equal values
        table[0][63] = 1.0
        assert not same.same_stage(before, self._stage(step, jnp.ones(64)))

    @pytest.mark.parametrize("read_as", ["array", "view", "read-only view", "sliced in the trace"])
    def test_a_numpy_array_the_program_can_change_in_place_is_never_known_the_same(self, read_as):
        """A NumPy array the step uses as an operand is a constant JAX views, not copies:
        the executable compiled ahead holds its content when it was lowered, and the
        program may have filled it since (``TABLE[:] = ...`` in main())."""
        table = np.ones((4, 3), np.float32)
        view = table[1:]
        view.flags.writeable = read_as != "read-only view"  # its base still writeable
        operand = table if read_as == "array" else view

        def step(x):
            return x * (table[1:] if read_as == "sliced in the trace" else operand)

        x = jnp.ones(operand.shape if read_as != "sliced in the trace" else (3, 3))
        assert not same.same_stage(self._stage(step, x), self._stage(step, x))

    def test_a_numpy_array_made_in_the_trace_or_frozen_is_compared_by_value(self):
        frozen = np.ones((4, 3), np.float32)
        frozen.flags.writeable = False  # owns its data, read-only

        def step(x):
            return x * frozen + np.tril(np.ones((4, 3), np.float32))

        first, second = (self._stage(step, jnp.ones((4, 3))) for _ in range(2))
        assert same.same_stage(first, second)

    def test_a_non_array_output_that_differs_differs(self):
        label = ["a"]

        def step(x):
            return x, label[0]

        def split(x):
            return nonarrays.parts(step(x))

        before = self._stage(split, jnp.ones(2))
        label[0] = "b"
        assert not same.same_stage(before, self._stage(split, jnp.ones(2)))

    def test_a_callback_closing_over_another_value_differs(self):
        factor = [2.0]

        def step(x):
            value = factor[0]
            shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
            return jax.pure_callback(lambda v: np.asarray(v * value, np.float32), shape, x)

        before = self._stage(step, jnp.ones(2, jnp.float32))
        assert same.same_stage(before, self._stage(step, jnp.ones(2, jnp.float32)))
        factor[0] = 3.0
        assert not same.same_stage(before, self._stage(step, jnp.ones(2, jnp.float32)))
