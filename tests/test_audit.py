"""``tinax.audit``: every trace of every jitted function, counted as JAX counts it, compared by
tinax's diagnosis, costed, reported, written as data, and JAX left as it was."""

import collections
import contextlib
import io
import json
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax._src import pjit

import tinax
from helpers.processes import Module, run_program
from tinax._src.audit import command
from tinax._src.audit.functions import NEW_FUNCTION

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def jax_events():
    """JAX's own trace and compile events, by function name: ``{"trace": Counter, ...}``."""
    heard = {"trace": collections.Counter(), "compile": collections.Counter()}

    def listen(event, duration, **metadata):
        name = str(metadata.get("fun_name", ""))
        if event == TRACE_EVENT:
            heard["trace"][name] += 1
        elif event == COMPILE_EVENT:
            heard["compile"][name.removeprefix("jit(").removesuffix(")")] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield heard
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def by_name(audit):
    return {function.name.rpartition(".")[2]: function for function in audit.functions}


def line_of(function):
    return function.__code__.co_firstlineno


class TestRecording:
    def test_traces_equal_jax_trace_events_for_each_kind_of_jit(self):
        @jax.jit
        def plain(x, n):
            return x * n

        def static(x, n):
            return x * n

        static_jit = jax.jit(static, static_argnums=1)

        @eqx.filter_jit
        def filtered(model, x, scale):
            return jnp.sum(model(x)) * scale

        class Net(nnx.Module):
            def __init__(self, n):
                self.lin = nnx.Linear(2, n, rngs=nnx.Rngs(0))

        @nnx.jit
        def lifted(net, x):
            return net.lin(x)

        budgeted = tinax.jit.bounded_jit(lambda x: x + 1, max_traces=4)
        model = eqx.nn.MLP(2, 2, 4, 1, key=jax.random.PRNGKey(0))
        nets = (Net(3), Net(4))
        with jax_events() as heard, tinax.audit() as audit:
            for n in (3, 4, 4):
                plain(jnp.ones(n), 2)
                static_jit(jnp.ones(2), n)
                filtered(model, jnp.ones(2), float(n))
                budgeted(jnp.ones(n))
            for net in nets:
                lifted(net, jnp.ones((1, 2)))
        found = by_name(audit)
        for name in ("plain", "static", "filtered", "lifted"):
            assert found[name].traces == heard["trace"][name], name
            assert found[name].compiles == heard["compile"][name], name
        assert found["<lambda>"].traces == heard["trace"]["<lambda>"] == 2
        assert [found[name].traces for name in ("plain", "static", "filtered", "lifted")] == [
            2,
            2,
            2,
            2,
        ]
        kinds = {name: function.kind for name, function in found.items()}
        assert kinds == {
            "plain": "jax.jit",
            "static": "jax.jit",
            "filtered": "equinox.filter_jit",
            "lifted": "nnx.jit",
            "<lambda>": "tinax",
        }

    def test_jax_numpy_internal_jits_are_left_out(self):
        with jax_events() as heard, tinax.audit() as audit:
            jnp.arange(11).sum() + jnp.ones(7)
        assert sum(heard["trace"].values()) > 0  # JAX traced its own functions
        assert audit.functions == []

    def test_a_nested_jit_is_a_trace_without_a_compile(self):
        @jax.jit
        def inner(x):
            return x + 1

        @jax.jit
        def outer(x):
            return inner(x) * 2

        with tinax.audit() as audit:
            outer(jnp.ones(5))
        found = by_name(audit)
        assert (found["inner"].traces, found["inner"].compiles) == (1, 0)
        assert found["inner"].misses[0].nested
        assert (found["outer"].traces, found["outer"].compiles) == (1, 1)

    def test_where_defined_and_where_called(self):
        @jax.jit
        def step(x):
            return x - 1

        with tinax.audit() as audit:
            step(jnp.ones(2))
            call_line = sys._getframe().f_lineno + 1
            step(jnp.ones(3))
        [function] = audit.functions
        assert function.defined_at.endswith(f"test_audit.py:{line_of(step.__wrapped__)}")
        assert function.misses[1].called_at.endswith(f"test_audit.py:{call_line}")

    def test_seconds_add_up_and_are_positive(self):
        f = jax.jit(lambda x: jnp.sin(x) @ x)
        with tinax.audit() as audit:
            f(jnp.ones((4, 4)))
        [function] = audit.functions
        [miss] = function.misses
        assert miss.trace_seconds > 0 and miss.lower_seconds > 0 and miss.compile_seconds > 0
        assert miss.seconds == pytest.approx(
            miss.trace_seconds + miss.lower_seconds + miss.compile_seconds
        )
        assert function.seconds == pytest.approx(miss.seconds)

    def test_functions_are_ranked_most_costly_first(self):
        cheap = jax.jit(lambda x: x + 1)

        @jax.jit
        def costly(x):
            for _ in range(40):
                x = jnp.sin(x) @ x
            return x

        with tinax.audit() as audit:
            cheap(jnp.ones(2))
            costly(jnp.ones((8, 8)))
            costly(jnp.ones((9, 9)))
        seconds = [function.seconds for function in audit.functions]
        assert seconds == sorted(seconds, reverse=True)
        assert audit.functions[0].name.endswith("costly")


class TestJaxLeftAsItWas:
    def test_the_trace_entry_is_jax_own_after_the_audit(self):
        original = pjit._trace_for_jit
        with tinax.audit():
            assert pjit._trace_for_jit is not original
        assert pjit._trace_for_jit is original

    def test_hooks_are_removed_when_the_block_raises(self):
        original = pjit._trace_for_jit
        listeners = list(jax._src.monitoring.get_event_duration_listeners())
        with pytest.raises(ZeroDivisionError), tinax.audit():
            1 / 0  # noqa: B018
        assert pjit._trace_for_jit is original
        assert list(jax._src.monitoring.get_event_duration_listeners()) == listeners

    def test_an_inner_audit_leaves_the_outer_one_listening(self):
        f = jax.jit(lambda x: x * 3)
        with tinax.audit() as outer:
            with tinax.audit() as inner:
                f(jnp.ones(2))
            f(jnp.ones(3))
        assert [function.traces for function in inner.functions] == [1]
        assert [function.traces for function in outer.functions] == [2]

    def test_nothing_is_recorded_after_the_block(self):
        f = jax.jit(lambda x: x * 3)
        with tinax.audit() as audit:
            f(jnp.ones(2))
        f(jnp.ones(3))
        assert [function.traces for function in audit.functions] == [1]

    def test_an_audit_is_entered_once(self):
        audit = tinax.audit()
        with audit:
            pass
        with pytest.raises(RuntimeError, match="entered once"), audit:
            pass


class TestDifferences:
    def test_a_changed_static_names_the_static_not_another_key(self):
        f = jax.jit(lambda x, n: x * n, static_argnums=1)
        with tinax.audit() as audit:
            f(jnp.ones(3), 2)
            f(jnp.ones(4), 2)
            f(jnp.ones(4), 3)
        misses = audit.functions[0].misses
        assert misses[0].differences == [] and misses[0].fix == ""
        assert misses[1].differences == ["x: f32[3] -> f32[4] (shape)"]
        assert misses[2].differences == ["n: 2 -> 3 (static argument value)"]
        assert misses[2].fix.startswith("static value: ")

    def test_dtype_and_weak_type(self):
        f = jax.jit(lambda x: x + 1)
        with tinax.audit() as audit:
            f(jnp.ones(3))
            f(jnp.ones(3, jnp.int32))
            f(2.0)
        misses = audit.functions[0].misses
        assert misses[1].differences == ["x: f32[3] -> i32[3] (dtype)"]
        assert "weak" in misses[2].differences[0]

    def test_an_equinox_miss_names_the_user_argument(self):
        @eqx.filter_jit
        def scaled(x, scale):
            return x * scale

        with tinax.audit() as audit:
            scaled(jnp.ones(2), 1.0)
            scaled(jnp.ones(2), 2.0)
        [function] = audit.functions
        assert function.misses[1].differences == ["scale: 1.0 -> 2.0 (static leaf)"]
        assert "static_nonarrays=True" in function.port

    def test_an_nnx_graph_change_is_named(self):
        class Net(nnx.Module):
            def __init__(self, n):
                self.lin = nnx.Linear(2, n, rngs=nnx.Rngs(0))

        @nnx.jit
        def apply(net, x):
            return net.lin(x)

        with tinax.audit() as audit:
            apply(Net(3), jnp.ones((1, 2)))
            apply(Net(4), jnp.ones((1, 2)))
        [function] = audit.functions
        assert any("out_features: 3 -> 4" in line for line in function.misses[1].differences)

    def test_a_function_made_again_is_named_as_such(self):
        with tinax.audit() as audit:
            for _ in range(3):
                jax.jit(lambda x: x + 1)(jnp.ones(2))
        [function] = audit.functions
        assert function.traces == 3
        assert all(NEW_FUNCTION in miss.differences[0] for miss in function.misses[1:])
        assert function.misses[1].fix.startswith("function: ")

    def test_differences_agree_with_explain_of_a_tinax_object(self):
        step = tinax.jit.bounded_jit(lambda batch: batch["x"].sum(), max_traces=5)
        first = {"x": jnp.ones((2, 3))}
        second = {"x": jnp.ones((2, 3), jnp.bfloat16)}
        with tinax.audit() as audit:
            step(first)
            told = str(step.explain(second))
            step(second)
        [line] = audit.functions[0].misses[1].differences
        assert f"  {line}" in told.splitlines()


class TestReport:
    def test_the_report_names_the_function_the_difference_the_fix_and_the_port(self):
        f = jax.jit(lambda x: x * 2)
        with tinax.audit() as audit:
            for n in (3, 4):
                f(jnp.ones(n))
        text = audit.report()
        assert "1 jitted function, 2 traces (1 retrace)" in text
        assert "x: f32[3] -> f32[4] (shape)" in text
        assert "shape: every new shape is a new trace" in text
        assert "port: f = tinax.jit.bounded_jit(f, max_traces=2, buckets=" in text

    def test_call_sites_are_summed_across_functions(self):
        f = jax.jit(lambda x: x * 2)
        g = jax.jit(lambda x: x * 3)
        with tinax.audit() as audit:
            for n in (3, 4, 5):
                f(jnp.ones(n)), g(jnp.ones(n))  # one line, two functions
        [site] = tinax._src.audit.report.call_sites(audit.functions)
        assert site.retraces == 4
        assert f"{site.retraces} retraces" in audit.report()

    def test_top_lists_that_many_functions(self):
        fs = [
            jax.jit(lambda x: x + 1),
            jax.jit(lambda x: x + 2),
            jax.jit(lambda x: x + 3),
        ]
        with tinax.audit() as audit:
            for f in fs:
                f(jnp.ones(2))
        assert audit.report(top=1).count("port: ") == 1
        assert "... and 2 more functions" in audit.report(top=1)
        assert audit.report().count("port: ") == 3

    @PROPERTY
    @given(top=st.integers(max_value=0))
    def test_top_below_one_is_a_value_error(self, top):
        with pytest.raises(ValueError, match=rf"Audit.report: top must be at least 1 .*got {top} "):
            tinax.audit().report(top=top)

    @PROPERTY
    @given(top=st.one_of(st.booleans(), st.floats(), st.text(), st.lists(st.integers())))
    def test_top_not_an_int_is_a_type_error(self, top):
        with pytest.raises(
            TypeError, match=r"Audit.report: top must be an int of at least 1 or None"
        ):
            tinax.audit().report(top=top)

    @PROPERTY
    @given(top=st.integers(min_value=1))
    def test_any_top_of_at_least_one_is_accepted(self, top):
        assert tinax.audit().report(top=top).startswith("tinax audit: 0 jitted functions")


class TestPort:
    def test_the_port_line_holds_the_run_audited(self):
        def f(x):
            return x * 2

        jitted = jax.jit(f)
        sizes = (3, 4, 6)
        with tinax.audit() as audit:
            for n in sizes:
                jitted(jnp.ones(n))
        port = audit.functions[0].port
        assert port.splitlines() == [
            "f = tinax.jit.bounded_jit(f, max_traces=3, "
            "buckets={'x': {0: tinax.jit.bucket_sizes(3, 6)}})",
            "x, _ = tinax.jit.pad_to_bucket(x, tinax.jit.bucket_sizes(3, 6), axis=0)",
        ]
        scope = {"f": f, "tinax": tinax}
        exec(port.splitlines()[0], scope)
        for n in sizes:  # each call padded to its bucket, as the port's second line says
            padded, _ = tinax.jit.pad_to_bucket(jnp.ones(n), tinax.jit.bucket_sizes(3, 6))
            scope["f"](padded)
        assert scope["f"].traces_used == 2  # the buckets (3, 6)
        assert "tinax.jit.pad_to_bucket(x, tinax.jit.bucket_sizes(3, 6), axis=0)" in audit.report()

    def test_a_tinax_object_is_already_ported(self):
        step = tinax.jit.bounded_jit(lambda x: x, max_traces=1)
        with tinax.audit() as audit:
            step(jnp.ones(2))
        assert "already a tinax object" in audit.functions[0].port


class TestData:
    def test_json_holds_every_function_and_miss(self, tmp_path):
        f = jax.jit(lambda x: x * 2)
        with tinax.audit() as audit:
            f(jnp.ones(3)), f(jnp.ones(4))
        path = tmp_path / "audit.json"
        audit.to_json(path)
        data = json.loads(path.read_text())
        [function] = data["functions"]
        assert function["traces"] == 2
        assert function["misses"][1]["differences"] == ["x: f32[3] -> f32[4] (shape)"]
        assert data["call_sites"][0]["retraces"] == 1

    def test_chrome_trace_has_a_trace_lowering_and_compile_per_trace(self, tmp_path):
        f = jax.jit(lambda x: x * 2)
        with tinax.audit() as audit:
            f(jnp.ones(3)), f(jnp.ones(4))
        path = tmp_path / "trace.json"
        audit.to_chrome_trace(path)
        events = json.loads(path.read_text())["traceEvents"]
        kinds = collections.Counter(event["cat"] for event in events)
        assert kinds == {"trace": 2, "lower": 2, "compile": 2}
        assert all(event["ph"] == "X" and event["dur"] >= 0 for event in events)


SCRIPT = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp
    print("argv", sys.argv[1:], __name__)
    f = jax.jit(lambda x: x * 2)
    for n in (3, 4):
        f(jnp.ones(n))
    if sys.argv[1:2] == ["raise"]:
        raise KeyError("boom")
    if sys.argv[1:2] == ["exit"]:
        sys.exit(int(sys.argv[2]))
    """
)


class TestCommand:
    def run(self, tmp_path, *args):
        script = tmp_path / "prog.py"
        script.write_text(SCRIPT)
        return run_program(
            Module("tinax"), "audit", *args[:-1], script, *args[-1], cwd=tmp_path, returncode=None
        )

    def test_the_script_runs_as_python_runs_it_and_the_report_follows(self, tmp_path):
        done = self.run(tmp_path, ["a", "--b"])
        assert done.returncode == 0
        assert done.stdout == "argv ['a', '--b'] __main__\n"
        assert "1 jitted function, 2 traces (1 retrace)" in done.stderr

    @pytest.mark.parametrize("status", [0, 3])
    def test_sys_exit_keeps_its_status(self, tmp_path, status):
        done = self.run(tmp_path, ["exit", str(status)])
        assert done.returncode == status
        assert "2 traces" in done.stderr

    def test_an_uncaught_error_exits_1_with_its_traceback_and_the_report(self, tmp_path):
        done = self.run(tmp_path, ["raise"])
        assert done.returncode == 1
        assert "KeyError: 'boom'" in done.stderr
        assert "2 traces" in done.stderr

    def test_json_and_trace_files_are_written(self, tmp_path):
        done = self.run(tmp_path, "--json", "a.json", "--trace", "t.json", [])
        assert done.returncode == 0
        assert json.loads((tmp_path / "a.json").read_text())["functions"][0]["traces"] == 2
        assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]

    def test_a_missing_script_exits_2(self, tmp_path):
        err = io.StringIO()
        assert command.main(["audit", str(tmp_path / "none.py")], err=err) == 2
        assert "can't open file" in err.getvalue()

    @PROPERTY
    @given(text=st.text(max_size=6))
    def test_top_on_the_command_line_is_a_positive_int(self, text):
        err = io.StringIO()
        valid = text.isascii() and text.isdigit() and int(text) >= 1
        if valid:
            assert command.parser().parse_args(["audit", f"--top={text}", "x.py"]).top == int(text)
            return
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stop:
            command.parser().parse_args(["audit", f"--top={text}", "x.py"])
        assert stop.value.code == 2
        assert f"--top must be an int of at least 1; got {text!r}" in err.getvalue()
