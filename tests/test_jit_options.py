"""Every `jax.jit` option, and `jax.vmap`'s, behaves under tinax as under JAX.

Each option is checked side by side: the same function under ``jax.jit(**options)``
(or ``jax.jit(jax.vmap(f), ...)``) and under ``bounded_jit``/``batched_jit`` gives the
same outputs, output shardings, donation and lowered program. Then what tinax adds:
validation at wrap time, the budget and the diagnosis with argnums, static arguments
that are not batched, and the decorator form.
"""

import functools
import inspect
import re
import traceback
import types
import typing
import warnings

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tinax._src.core.statics import Statics
from tinax._src.core.validation import describe
from tinax._src.jit import batched, bounded, jax_options, options
from tinax.jit import BatchedJit, BoundedJit, TraceBudgetError, batched_jit, bounded_jit


def scaled(x, n, y):
    return x * n + y


def _lowered_text(lowered):
    """The lowered module, with the module name (``jit_<name>``) made neutral."""
    return re.sub(r"@jit_\w+|jit_\w+", "jit_f", lowered.as_text())


def _same(ours, theirs):
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert a.sharding.is_equivalent_to(b.sharding, a.ndim)


# --- side by side: each option as under jax.jit ---------------------------------------------

OPTIONS = {
    "static_argnums": ({"static_argnums": 1}, (jnp.arange(4.0), 3, jnp.ones(4)), {}),
    "static_argnums-negative": ({"static_argnums": -2}, (jnp.arange(4.0), 3, jnp.ones(4)), {}),
    "static_argnums-keyword": ({"static_argnums": (1,)}, (jnp.arange(4.0),), {"n": 2, "y": 1.0}),
    "static_argnums+names": (
        {"static_argnums": 1, "static_argnames": ("n",)},
        (jnp.arange(4.0), 3, jnp.ones(4)),
        {},
    ),
    "donate_argnums": ({"donate_argnums": 0}, (jnp.arange(4.0), 2.0, jnp.ones(4)), {}),
    "donate_argnums+static": (
        {"donate_argnums": (2,), "static_argnums": (1,)},
        (jnp.arange(4.0), 3, jnp.ones(4)),
        {},
    ),
    "keep_unused": ({"keep_unused": True}, (jnp.arange(4.0), 2.0, jnp.ones(4)), {}),
    "inline": ({"inline": True}, (jnp.arange(4.0), 2.0, jnp.ones(4)), {}),
    "compiler_options": (
        {"compiler_options": {"xla_embed_ir_in_executable": True}},
        (jnp.arange(4.0), 2.0, jnp.ones(4)),
        {},
    ),
}


@pytest.mark.parametrize("case", OPTIONS)
def test_each_option_gives_what_jax_jit_gives(case):
    options, args, kwargs = OPTIONS[case]

    def fresh(tree):  # donated inputs are deleted by the call: each call gets its own
        return jax.tree.map(lambda a: a.copy() if isinstance(a, jax.Array) else a, tree)

    theirs = jax.jit(scaled, **options)
    ours = bounded_jit(scaled, max_traces=1000, **options)
    assert _lowered_text(ours.lower(*args, **kwargs)) == _lowered_text(
        theirs.lower(*args, **kwargs)
    )
    expected = theirs(*fresh(args), **fresh(kwargs))
    _same(ours(*fresh(args), **fresh(kwargs)), expected)
    assert ours.traces_used == 1  # lower traced; the call reused the trace


@pytest.mark.parametrize("make", [bounded_jit, BoundedJit])
def test_keep_unused_keeps_the_unused_argument_in_the_program(make):
    def first(x, unused):
        return x

    kept = make(first, max_traces=2, keep_unused=True).lower(1.0, 2.0).compile()
    pruned = make(first, max_traces=2).lower(1.0, 2.0).compile()
    assert len(kept.input_shardings[0]) == 2
    assert len(pruned.input_shardings[0]) == 2  # JAX keeps the signature, prunes the program
    assert "%arg1" in kept.as_text() or "parameter(1)" in kept.as_text()
    assert "parameter(1)" not in pruned.as_text()


class TestDonation:
    @pytest.mark.parametrize(
        "options", [{"donate_argnums": 0}, {"donate_argnames": "x"}, {"donate_argnums": (0,)}]
    )
    def test_the_donated_input_is_deleted_as_jax_deletes_it(self, options):
        def add(x, y):
            return x + y

        theirs_input, ours_input = jnp.ones(8), jnp.ones(8)
        jax.jit(add, **options)(theirs_input, 1.0)
        bounded_jit(add, max_traces=1, **options)(ours_input, 1.0)
        assert theirs_input.is_deleted()
        assert ours_input.is_deleted()

    def test_batched_donation_deletes_the_batch(self):
        batch = jnp.ones((4, 3))
        out = batched_jit(lambda v: v * 2, max_traces=1, donate_argnums=0)(batch)
        assert batch.is_deleted()
        np.testing.assert_array_equal(out, np.full((4, 3), 2.0))

    def test_lowered_reports_the_donated_arguments(self):
        lowered = bounded_jit(scaled, max_traces=1, donate_argnums=(0,)).lower(
            jnp.ones(2), 1.0, jnp.ones(2)
        )
        assert lowered.donate_argnums == (0,)


class TestShardings:
    def test_in_and_out_shardings_as_jax_jit(self, mesh8):
        data = NamedSharding(mesh8, P("x"))
        replicated = NamedSharding(mesh8, P())

        def step(w, batch):
            return w + batch.sum(), batch * w

        options = {"in_shardings": (replicated, data), "out_shardings": (replicated, data)}
        w, batch = jnp.float32(2.0), jax.device_put(jnp.arange(16.0), data)
        theirs = jax.jit(step, **options)
        ours = bounded_jit(step, max_traces=1, **options)
        _same(ours(w, batch), theirs(w, batch))
        assert _lowered_text(ours.lower(w, batch)) == _lowered_text(theirs.lower(w, batch))

    def test_a_partition_spec_resolves_against_the_bound_mesh(self, explicit_mesh8):
        mesh = explicit_mesh8

        def double(x):
            return x * 2

        ours = bounded_jit(
            double, max_traces=1, mesh=mesh, in_shardings=P("x"), out_shardings=P("x")
        )
        with jax.set_mesh(mesh):
            x = jax.device_put(jnp.arange(16.0), P("x"))
            theirs = jax.jit(double, in_shardings=P("x"), out_shardings=P("x"))(x)
        out = ours(x)  # no ambient mesh: the object's own
        _same(out, theirs)
        assert out.sharding.spec == P("x")

    def test_out_shardings_lay_out_a_batched_result(self, mesh8):
        data = NamedSharding(mesh8, P("x"))
        ours = batched_jit(lambda v: v.sum(), max_traces=1, out_shardings=data)
        theirs = jax.jit(jax.vmap(lambda v: v.sum()), out_shardings=data)
        batch = jnp.ones((8, 3))
        _same(ours(batch), theirs(batch))
        assert ours(batch).sharding == data

    def test_an_input_sharding_change_is_named_in_the_diagnosis(self, explicit_mesh8):
        mesh = explicit_mesh8

        def total(x):
            return x.sum()

        step = bounded_jit(total, max_traces=1, mesh=mesh, keep_unused=True)
        with jax.set_mesh(mesh):
            sharded = jax.device_put(jnp.ones((8, 2)), P("x", None))
            replicated = jax.device_put(jnp.ones((8, 2)), P())
        step(sharded)
        with pytest.raises(TraceBudgetError) as caught:
            step(replicated)
        assert "  x: f32[8@x,2] -> f32[8,2] (sharding)" in str(caught.value).splitlines()


# --- a call JAX can never run: inputs placed against the shardings -----------------------

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"


@pytest.fixture
def traces_jax_made():
    """The number of traces JAX records (its own trace event) while the test runs."""
    events = []

    def listener(event, duration, **kwargs):
        if event == TRACE_EVENT:
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    yield events
    jax.monitoring.unregister_event_duration_listener(listener)


def _error_of(call, *args):
    with pytest.raises(Exception) as caught:
        call(*args)
    return type(caught.value), str(caught.value)


class TestMisplacedCalls:
    """A call whose input is placed against ``in_shardings`` (or on devices that disagree)
    fails in JAX on every call: tinax raises JAX's own error before the body runs, so it
    is no trace (JAX records none, caches none), within the budget or past it."""

    @staticmethod
    def counted(log):
        def double(x):
            log.append(x.shape)
            return x * 2

        return double

    def test_is_jax_error_and_no_trace(self, explicit_mesh8, traces_jax_made):
        data = NamedSharding(explicit_mesh8, P("x"))
        runs, theirs_runs = [], []
        ours = bounded_jit(self.counted(runs), max_traces=2, in_shardings=data)
        theirs = jax.jit(self.counted(theirs_runs), in_shardings=data)
        ours(jax.device_put(jnp.arange(16.0), data))
        misplaced = jax.device_put(jnp.arange(16.0), jax.devices()[3])
        expected = _error_of(theirs, misplaced)
        assert expected[0] is ValueError and "does not match the sharding" in expected[1]
        del traces_jax_made[:]
        for _ in range(3):
            assert _error_of(ours, misplaced) == expected
        assert (ours.traces_used, ours.compiles_used, len(runs)) == (1, 1, 1)
        # JAX's trace event marks each attempt, one that raised included (as for a body
        # that raises, never counted): the body never ran, and JAX kept no trace
        assert len(traces_jax_made) == 3

    def test_a_later_call_that_fits_traces_and_counts_as_jax_jit(
        self, explicit_mesh8, traces_jax_made
    ):
        data = NamedSharding(explicit_mesh8, P("x"))
        runs, theirs_runs = [], []
        ours = bounded_jit(self.counted(runs), max_traces=2, in_shardings=data)
        theirs = jax.jit(self.counted(theirs_runs), in_shardings=data)
        misplaced = jax.device_put(jnp.arange(16.0), jax.devices()[3])
        for call in (ours, theirs):
            call(jax.device_put(jnp.arange(16.0), data))
            _error_of(call, misplaced)
            call(jnp.arange(16.0))  # uncommitted: fits (jax.jit reuses its misplaced trace)
        assert ours.traces_used == len(theirs_runs) == 2
        assert len(runs) == 2
        assert [signature.number for signature in ours.traced_signatures] == [1, 2]

    @pytest.mark.parametrize("on_exceed", ["raise", "warn"])
    def test_with_the_budget_spent_raises_jax_error(self, explicit_mesh8, on_exceed):
        data = NamedSharding(explicit_mesh8, P("x"))
        ours = bounded_jit(lambda x: x * 2, max_traces=1, in_shardings=data, on_exceed=on_exceed)
        theirs = jax.jit(lambda x: x * 2, in_shardings=data)
        ours(jax.device_put(jnp.arange(16.0), data))
        misplaced = jax.device_put(jnp.arange(32.0), jax.devices()[3])  # a new shape too
        assert _error_of(ours, misplaced) == _error_of(theirs, misplaced)  # no budget error
        assert ours.traces_used == 1

    def test_inside_no_new_compiles_raises_jax_error(self, explicit_mesh8):
        from tinax.testing import no_new_compiles

        data = NamedSharding(explicit_mesh8, P("x"))
        ours = bounded_jit(lambda x: x * 2, max_traces=1, in_shardings=data)
        with no_new_compiles():
            with pytest.raises(ValueError, match="does not match the sharding"):
                ours(jax.device_put(jnp.arange(16.0), jax.devices()[3]))
        assert ours.traces_used == 0

    def test_lower_is_jax_error_and_trace_counts(self, explicit_mesh8):
        data = NamedSharding(explicit_mesh8, P("x"))
        ours = bounded_jit(lambda x: x * 2, max_traces=1, in_shardings=data)
        misplaced = jax.device_put(jnp.arange(16.0), jax.devices()[3])
        expected = _error_of(jax.jit(lambda x: x * 2, in_shardings=data).lower, misplaced)
        assert _error_of(ours.lower, misplaced) == expected
        assert ours.traces_used == 0
        ours.trace(misplaced)  # a trace JAX makes and keeps: counted
        assert ours.traces_used == 1
        with pytest.raises(TraceBudgetError):  # trace succeeds in JAX: over budget, refused
            ours.trace(jax.device_put(jnp.arange(32.0), jax.devices()[3]))

    def test_devices_that_disagree_with_the_mesh_are_jax_error(self, mesh8):
        def double(x):
            return x * 2

        ours = bounded_jit(double, max_traces=1, mesh=mesh8)
        misplaced = jax.device_put(jnp.arange(16.0), jax.devices()[3])
        with jax.set_mesh(mesh8):
            expected = _error_of(jax.jit(double), misplaced)
        assert expected[0] is ValueError and "incompatible devices" in expected[1]
        assert _error_of(ours, misplaced) == expected
        assert ours.traces_used == 0
        explanation = ours.explain(misplaced)
        assert explanation.raises == f"ValueError: {' '.join(expected[1].split())}"

    def test_explain_says_jax_error_not_reuse(self, explicit_mesh8):
        data = NamedSharding(explicit_mesh8, P("x"))
        ours = bounded_jit(lambda x: x * 2, max_traces=2, in_shardings=data)
        ours(jnp.arange(16.0))  # uncommitted f32[16]: the misplaced call's signature
        misplaced = jax.device_put(jnp.arange(16.0), jax.devices()[3])
        explanation = ours.explain(misplaced)
        assert (explanation.reuses, explanation.retraces) == (None, False)
        assert explanation.raises is not None
        assert explanation.raises.startswith("ValueError: Sharding passed to jit does not match")
        text = str(explanation)
        assert "would reuse" not in text and "SingleDeviceSharding(device=CpuDevice(id=3)" in text
        assert ours.explain(jnp.arange(16.0)).reuses is not None

    @pytest.mark.parametrize("kind", ["bounded", "batched"])
    def test_explain_of_a_batch_that_does_not_divide_shows_the_cause(
        self, explicit_mesh8, kind, capsys
    ):
        data = NamedSharding(explicit_mesh8, P("x"))
        wrap = bounded_jit if kind == "bounded" else batched_jit
        ours = wrap(lambda x: x.sum(), max_traces=1, in_shardings=data)
        capsys.readouterr()
        explanation = ours.explain(jnp.ones((60, 3)))
        printed = capsys.readouterr().out  # jax 0.12 prints the line it blames
        text = str(explanation)
        assert explanation.raises is not None and "Error: " in explanation.raises
        assert "the dimension size is 60" in " ".join(text.split())
        assert "tinax" not in text + printed


# --- the budget and the diagnosis with argnums ----------------------------------------------


class TestArgnumsDiagnosis:
    def test_a_static_argnum_is_named_by_its_parameter(self, make_bounded):
        step = make_bounded(scaled, max_traces=1, static_argnums=(1,))
        step(jnp.ones(2), 3, jnp.ones(2))
        with pytest.raises(TraceBudgetError) as caught:
            step(jnp.ones(2), 4, jnp.ones(2))
        assert "  n: 3 -> 4 (static argument value)" in str(caught.value).splitlines()
        assert step.traces_used == 1

    def test_a_negative_static_argnum_is_named_by_its_parameter(self):
        step = bounded_jit(scaled, max_traces=1, static_argnums=-2)
        step(jnp.ones(2), 3, jnp.ones(2))
        with pytest.raises(TraceBudgetError) as caught:
            step(jnp.ones(2), 4, jnp.ones(2))
        assert "  n: 3 -> 4 (static argument value)" in str(caught.value).splitlines()

    def test_a_static_argnum_passed_by_keyword_is_static_as_jax_infers(self):
        step = bounded_jit(scaled, max_traces=2, static_argnums=1)
        step(jnp.ones(2), n=3, y=jnp.ones(2))
        history = step.traced_signatures[0]
        assert [leaf.kind for leaf in history.leaves if leaf.argument == "n"] == ["static"]

    def test_argnums_and_argnames_given_together_are_taken_as_given(self):
        # As jax.jit: with both given, nothing is inferred, so `n` by keyword is traced.
        seen = []

        def probe(x, n):
            seen.append(isinstance(n, jax.core.Tracer))
            return x

        ours = bounded_jit(probe, max_traces=3, static_argnums=1, static_argnames=())
        ours(1.0, 2)
        ours(1.0, n=2)
        assert seen == [False, True]
        kinds = [leaf.kind for s in ours.traced_signatures for leaf in s.leaves if leaf.path == "n"]
        assert kinds == ["static", "array"]

    def test_the_page_default_argnames_let_jax_infer_names_from_numbers(self):
        seen = []

        def probe(x, n):
            seen.append(isinstance(n, jax.core.Tracer))
            return x

        bounded_jit(probe, max_traces=2, static_argnums=1)(1.0, n=2)
        assert seen == [False]

    def test_a_static_argnum_inside_star_args_is_recorded_alone(self):
        def total(*parts):
            return sum(parts[:-1]) * parts[-1]

        step = bounded_jit(total, max_traces=1, static_argnums=(2,))
        step(jnp.ones(2), jnp.ones(2), 3)
        with pytest.raises(TraceBudgetError) as caught:
            step(jnp.ones(2), jnp.ones(2), 4)
        assert "  parts[2]: 3 -> 4 (static argument value)" in str(caught.value).splitlines()

    def test_a_donated_argnum_keeps_the_budget_exact(self):
        step = bounded_jit(scaled, max_traces=1, donate_argnums=0)
        step(jnp.ones(2), 1.0, jnp.ones(2))
        step(jnp.ones(2), 2.0, jnp.ones(2))
        with pytest.raises(TraceBudgetError) as caught:
            step(jnp.ones(3), 1.0, jnp.ones(3))
        lines = str(caught.value).splitlines()
        assert "  x: f32[2] -> f32[3] (shape)" in lines
        assert step.traces_used == 1

    def test_explain_and_precompile_follow_static_argnums(self):
        step = bounded_jit(scaled, max_traces=2, static_argnums=1)
        step(jnp.ones(2), 3, jnp.ones(2))
        assert not step.explain(jnp.ones(2), 3, jnp.ones(2)).retraces
        assert step.explain(jnp.ones(2), 5, jnp.ones(2)).retraces
        args, kwargs = step.traced_signatures[0].abstract_arguments()
        assert args[1] == 3 and not kwargs
        step.precompile(jnp.ones(2), 5, jnp.ones(2))
        assert step.traces_used == 2
        step(jnp.ones(2), 5, jnp.ones(2))
        assert step.traces_used == 2

    def test_eval_shape_and_trace_count_with_options(self):
        step = bounded_jit(scaled, max_traces=1, static_argnums=1, keep_unused=True)
        assert step.eval_shape(jnp.ones(2), 3, jnp.ones(2)).shape == (2,)
        step.trace(jnp.ones(2), 3, jnp.ones(2))
        assert step.traces_used == 1


# --- batched_jit: static arguments and vmap's options ---------------------------------------


def _per_example(x, cfg):
    return x * cfg[0] + cfg[1]


class TestBatched:
    def test_a_keyword_static_argument_is_not_batched(self, make_batched):
        step = make_batched(_per_example, max_traces=1, static_argnames="cfg")
        xs = jnp.arange(6.0).reshape(3, 2)
        expected = jax.jit(jax.vmap(functools.partial(_per_example, cfg=(2.0, 1.0))))(xs)
        np.testing.assert_array_equal(step(xs, cfg=(2.0, 1.0)), expected)
        with pytest.raises(TraceBudgetError) as caught:
            step(xs, cfg=(3.0, 1.0))
        assert "  cfg[0]: 2.0 -> 3.0 (static argument value)" in str(caught.value).splitlines()

    def test_a_positional_static_argument_drops_its_in_axes_entry(self):
        step = batched_jit(_per_example, in_axes=(0, None), max_traces=1, static_argnums=1)
        xs = jnp.arange(6.0).reshape(3, 2)
        np.testing.assert_array_equal(step(xs, (2.0, 1.0)), xs * 2.0 + 1.0)

    def test_axis_name_makes_collectives_over_the_batch_work(self):
        def centred(x):
            return x - jax.lax.pmean(x, "batch")

        xs = jnp.arange(8.0)
        ours = batched_jit(centred, max_traces=1, axis_name="batch")
        theirs = jax.jit(jax.vmap(centred, axis_name="batch"))
        np.testing.assert_array_equal(ours(xs), theirs(xs))
        assert float(jnp.abs(ours(xs).sum())) < 1e-5

    def test_psum_over_the_named_axis(self):
        ours = batched_jit(lambda x: jax.lax.psum(x, "b"), max_traces=1, axis_name="b")
        np.testing.assert_array_equal(ours(jnp.ones(4)), np.full(4, 4.0))

    def test_spmd_axis_name_partitions_the_batch_over_the_mesh(self, explicit_mesh8):
        mesh = explicit_mesh8

        def normed(v):
            return v / jnp.linalg.norm(v)

        ours = batched_jit(normed, max_traces=1, mesh=mesh, spmd_axis_name="x")
        with jax.set_mesh(mesh):
            batch = jax.device_put(jnp.arange(1.0, 33.0).reshape(8, 4), P("x"))
            theirs = jax.jit(jax.vmap(normed, spmd_axis_name="x"))(batch)
            ours_text = _lowered_text(ours.lower(batch))
            theirs_text = _lowered_text(jax.jit(jax.vmap(normed, spmd_axis_name="x")).lower(batch))
        _same(ours(batch), theirs)
        assert ours_text == theirs_text

    def test_sum_match_reaches_vmap(self):
        assert batched_jit(lambda x: x, max_traces=1, sum_match=True).sum_match is True

    def test_options_are_not_passed_when_not_given(self, monkeypatch):
        seen = {}
        real = jax.vmap

        def spy(function, **kwargs):
            seen.update(kwargs)
            return real(function, **kwargs)

        monkeypatch.setattr(jax, "vmap", spy)
        batched_jit(lambda x: x, max_traces=1)
        assert set(seen) == {"in_axes", "out_axes", "axis_size"}


# --- what reaches jax.jit ------------------------------------------------------------------


def spy_on_jax_jit(monkeypatch):
    """The keyword options each later ``jax.jit`` call is given, in order (it still jits)."""
    calls = []
    real = jax.jit

    def spy(function, **kwargs):
        calls.append(kwargs)
        return real(function, **kwargs)

    monkeypatch.setattr(jax, "jit", spy)
    return calls


class TestPassedOnlyWhenGiven:
    def _seen(self, monkeypatch, **options):
        calls = spy_on_jax_jit(monkeypatch)
        step = bounded_jit(scaled, max_traces=1, **options)
        assert step._jitted is not None  # built at the first use
        assert len(calls) == 1
        return calls[0]

    def test_nothing_is_passed_by_default(self, monkeypatch):
        assert self._seen(monkeypatch) == {}

    def test_defaults_given_explicitly_reach_jax_only_where_they_mean_something(self, monkeypatch):
        seen = self._seen(monkeypatch, keep_unused=False, inline=False, device=None)
        assert seen == {}

    def test_given_options_reach_jax_as_given(self, monkeypatch):
        seen = self._seen(monkeypatch, static_argnums=[1], donate_argnums=0, keep_unused=True)
        assert seen == {"static_argnums": (1,), "donate_argnums": (0,), "keep_unused": True}

    def test_an_explicit_empty_argnames_next_to_argnums_reaches_jax(self, monkeypatch):
        seen = self._seen(monkeypatch, static_argnums=1, static_argnames=())
        assert seen == {"static_argnums": (1,), "static_argnames": ()}

    def test_every_jax_inline_mode_reaches_jax_and_is_shown_as_given(self, monkeypatch):
        # jax.Inline arrived in jax 0.11; on older JAX there is no mode to pass.
        modes = list(getattr(jax, "Inline", ()))
        assert bool(modes) == (jax.__version_info__ >= (0, 11))
        for mode in modes:
            assert self._seen(monkeypatch, inline=mode) == {"inline": mode}
            step = bounded_jit(scaled, max_traces=1, inline=mode)
            assert step.inline is mode
            assert step(jnp.arange(4.0), 2.0, 1.0).tolist() == [1.0, 3.0, 5.0, 7.0], mode

    def test_inline_true_reaches_jax_as_true(self, monkeypatch):
        assert self._seen(monkeypatch, inline=np.bool_(True)) == {"inline": True}

    def test_an_inline_that_is_neither_says_what_this_jax_accepts(self):
        with pytest.raises(TypeError) as caught:
            bounded_jit(scaled, max_traces=1, inline="auto")
        error = caught.value
        if hasattr(jax, "Inline"):
            assert "inline must be a bool or a jax.Inline; got 'auto' (str)." in str(error)
        else:
            assert f"inline must be a bool (jax {jax.__version__} has no jax.Inline" in str(error)

    def test_the_object_shows_its_options_normalized(self):
        step = BoundedJit(scaled, max_traces=1, static_argnums=[1], donate_argnums=np.int64(0))
        assert (step.static_argnums, step.donate_argnums) == ((1,), (0,))
        assert step.static_argnames == ()


# --- jax.jit's own defaults port unchanged --------------------------------------------------

# jax.jit's keyword options with the defaults its signature declares: what code that
# forwards jax.jit's options passes when its caller gave none.
JAX_JIT_DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(jax.jit).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY
}


class TestJaxJitDefaultsPort:
    """Every default of ``jax.jit``'s signature (``None`` for the argnames and argnums,
    device, backend and compiler options) is accepted and means what leaving it out means."""

    def test_jax_jit_takes_none_for_the_argnames(self):
        # The case this covers: jax.jit's default for the names is None, not ().
        assert JAX_JIT_DEFAULTS["static_argnames"] is None
        assert JAX_JIT_DEFAULTS["donate_argnames"] is None
        assert set(JAX_JIT_DEFAULTS) <= set(options.SIGNATURES["BoundedJit"])

    @pytest.mark.parametrize("factory", [bounded_jit, batched_jit, BoundedJit, BatchedJit])
    def test_forwarded_defaults_behave_as_omitted(self, monkeypatch, factory):
        calls = spy_on_jax_jit(monkeypatch)
        x, n, y = jnp.arange(4.0).reshape(1, 4), jnp.full((1, 1), 2.0), jnp.ones((1, 4))
        omitted = factory(scaled, max_traces=1)
        forwarded = factory(scaled, max_traces=1, **JAX_JIT_DEFAULTS)
        np.testing.assert_array_equal(forwarded(x, n, y), omitted(x, n, y))
        assert calls == [{}, {}]  # jax.jit is given nothing, as when they are left out
        for name in ("static_argnames", "donate_argnames"):
            assert getattr(forwarded, name) == getattr(omitted, name) == ()
        assert repr(forwarded) == repr(omitted)
        assert forwarded.traces_used == omitted.traces_used == 1

    @pytest.mark.parametrize("name", ["static_argnames", "donate_argnames"])
    def test_none_names_next_to_argnums_still_let_jax_infer_them(self, monkeypatch, name):
        # Omitted, the names are inferred from the numbers (jax.jit given only the numbers);
        # an explicit () would stop that. None must be omission, not ().
        calls = spy_on_jax_jit(monkeypatch)
        numbers = name.replace("names", "nums")
        given = {numbers: 1}
        omitted = bounded_jit(scaled, max_traces=2, **given)
        forwarded = bounded_jit(scaled, max_traces=2, **given, **{name: None})
        assert omitted._jitted is not None and forwarded._jitted is not None
        assert calls == [{numbers: (1,)}, {numbers: (1,)}]

    def test_none_static_argnames_keeps_a_keyword_argnum_static(self):
        # n given by keyword is static only through the name jax.jit infers from argnum 1.
        def repeat(x, n):
            return x * len(range(n))

        step = bounded_jit(repeat, max_traces=1, static_argnums=1, static_argnames=None)
        assert step(jnp.ones(2), n=3).tolist() == [3.0, 3.0]
        assert jax.jit(repeat, static_argnums=1, static_argnames=None)(
            jnp.ones(2), n=3
        ).tolist() == [
            3.0,
            3.0,
        ]


_ORDERED = "a str or an ordered sequence (tuple, list) of str"
_NAMES = st.text(alphabet="abcxyz_", min_size=1, max_size=4)
_NOT_NAMES = st.one_of(
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.binary(max_size=4),
    st.frozensets(_NAMES, max_size=3),
    st.sets(_NAMES, max_size=3),
    st.dictionaries(_NAMES, st.integers(), max_size=2),
    st.just(object),
)
_NOT_A_NAME = st.one_of(st.none(), st.integers(), st.booleans(), st.binary(max_size=3))
PROPERTY = settings(max_examples=60, deadline=None)


class TestBadArgnamesStillRefused:
    """Accepting None changed nothing else: every other value that is not names gets the
    documented error, naming the argument, the value and what was expected."""

    @pytest.mark.parametrize("make", [bounded_jit, batched_jit])
    @pytest.mark.parametrize("name", ["static_argnames", "donate_argnames"])
    @PROPERTY
    @given(value=_NOT_NAMES)
    def test_a_value_that_is_not_names_is_a_type_error(self, make, name, value):
        api = "BoundedJit" if make is bounded_jit else "BatchedJit"
        with pytest.raises(TypeError) as caught:
            make(scaled, max_traces=1, **{name: value})
        assert str(caught.value) == f"{api}: {name} must be {_ORDERED}; got {describe(value)}."

    @pytest.mark.parametrize("make", [bounded_jit, batched_jit])
    @pytest.mark.parametrize("name", ["static_argnames", "donate_argnames"])
    @PROPERTY
    @given(
        before=st.lists(_NAMES, max_size=2, unique=True),
        entry=_NOT_A_NAME,
        as_list=st.booleans(),
    )
    def test_an_entry_that_is_not_a_str_is_a_type_error(self, make, name, before, entry, as_list):
        api = "BoundedJit" if make is bounded_jit else "BatchedJit"
        value = [*before, entry] if as_list else (*before, entry)
        with pytest.raises(TypeError) as caught:
            make(scaled, max_traces=1, **{name: value})
        expected = f"{api}: {name}[{len(before)}] must be a str; got {describe(entry)}."
        assert str(caught.value) == expected

    @pytest.mark.parametrize("make", [bounded_jit, batched_jit])
    @pytest.mark.parametrize("name", ["static_argnames", "donate_argnames"])
    @PROPERTY
    @given(names=st.lists(_NAMES, min_size=1, max_size=3, unique=True), data=st.data())
    def test_an_empty_or_repeated_name_is_a_value_error(self, make, name, names, data):
        api = "BoundedJit" if make is bounded_jit else "BatchedJit"
        repeated = data.draw(st.sampled_from(names))
        value = (*names, repeated)
        with pytest.raises(ValueError) as caught:
            make(scaled, max_traces=1, **{name: value})
        assert str(caught.value) == (
            f"{api}: {name} must be free of duplicates ({repeated!r} appears twice); "
            f"got {describe(value)}."
        )
        with pytest.raises(ValueError) as caught:
            make(scaled, max_traces=1, **{name: (*names, "")})
        assert (
            str(caught.value)
            == f"{api}: {name}[{len(names)}] must be a non-empty str; got '' (str)."
        )


# --- validation at wrap time ---------------------------------------------------------------


def f3(a, b, c):
    return a


def positional_only(a, /, b, *, c):
    return a


def star(a, *rest):
    return a


class _NotASharding:
    """An object no sharding rule accepts, whose repr (in a test id) is the same in
    every process, unlike an object()'s address."""

    def __repr__(self) -> str:
        return "<not a sharding>"


INVALID = [
    ({"static_argnums": True}, TypeError, r"static_argnums must be None, an int"),
    ({"static_argnums": (0, False)}, TypeError, r"static_argnums\[1\] must be an int"),
    ({"static_argnums": "0"}, TypeError, r"static_argnums must be None, an int"),
    ({"static_argnums": {0}}, TypeError, r"static_argnums must be None"),
    ({"static_argnums": 1.0}, TypeError, r"static_argnums must be None"),
    ({"static_argnums": (0, 0)}, ValueError, r"free of duplicates \(0 appears twice\)"),
    ({"donate_argnums": (1, 1)}, ValueError, r"donate_argnums must be free of duplicates"),
    ({"static_argnums": 3}, ValueError, r"static_argnums must index positional parameters"),
    ({"static_argnums": -4}, ValueError, r"got -4 in \(-4,\)"),
    ({"donate_argnums": 5}, ValueError, r"donate_argnums must index positional"),
    ({"static_argnums": 0, "donate_argnums": 0}, ValueError, r"\('a',\) in both"),
    ({"static_argnums": 1, "donate_argnames": "b"}, ValueError, r"\('b',\) in both"),
    ({"static_argnames": "c", "donate_argnums": -1}, ValueError, r"\('c',\) in both"),
    ({"keep_unused": 1}, TypeError, r"keep_unused must be a bool; got 1 \(int\)"),
    ({"inline": "yes"}, TypeError, r"inline must be a bool"),
    ({"device": "cpu"}, TypeError, r"device must be a jax.Device or None; got 'cpu'"),
    ({"backend": 3}, TypeError, r"backend must be a str"),
    ({"backend": "no-such-platform"}, ValueError, r"backend must be a backend JAX can run on"),
    ({"compiler_options": 3}, TypeError, r"compiler_options must be a dict"),
    ({"compiler_options": {1: True}}, TypeError, r"compiler_options key must be a str"),
    ({"in_shardings": (None, None)}, ValueError, r"in_shardings must have one entry per"),
    ({"in_shardings": 3}, TypeError, r"in_shardings leaf specifications"),  # jax.jit's own
    ({"out_shardings": _NotASharding()}, TypeError, r"out_shardings"),
]


@pytest.mark.parametrize(("options", "error", "pattern"), INVALID, ids=lambda v: str(v)[:40])
def test_invalid_options_are_refused_at_wrap_time(bounded_both_ways, options, error, pattern):
    with pytest.raises(error, match=pattern):
        bounded_both_ways(f3, max_traces=1, **options)


@pytest.mark.parametrize("kind", [BoundedJit, BatchedJit], ids=lambda kind: kind.__name__)
def test_every_option_turns_the_all_defaults_shortcut_off(kind):
    defaults = {field.name: field.default for field in attrs.fields(kind)}
    assert options.all_defaults(defaults)
    assert len(options.PARSED) == 13
    for name in options.PARSED:
        given = {**defaults, name: object()}
        assert not options.all_defaults(given), name
    for name in set(defaults) - set(options.PARSED):  # the class's own: checked apart
        given = {**defaults, name: object()}
        assert options.all_defaults(given), name


def _declared(api):
    """``(name, default)`` of each keyword of a class and its factory, as declared."""
    return [(name, options.BY_NAME[name].default) for name in options.SIGNATURES[api]]


def _keywords(signature):
    """``(name, default)`` of each keyword-only parameter of a signature."""
    return [
        (p.name, p.default)
        for p in signature.parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]


def _same_defaults(found, declared, *, overload=False):
    """Each found default is the declared object (or, in an overload, written as it:
    ``()`` for the argnames, ``...`` for the shardings)."""
    assert [name for name, _ in found] == [name for name, _ in declared]
    for (name, value), (_, default) in zip(found, declared, strict=True):
        if overload and default is jax_options.UNSPECIFIED:
            assert value is Ellipsis, name
        elif overload and default is jax_options.NO_NAMES:
            assert value == (), name
        else:
            assert value is default, name


@pytest.mark.parametrize(
    ("factory", "kind", "defined_in"),
    [(bounded_jit, BoundedJit, bounded), (batched_jit, BatchedJit, batched)],
    ids=["bounded", "batched"],
)
def test_factories_and_classes_match_the_declaration(factory, kind, defined_in):
    declared = _declared(kind.__name__)
    signature = inspect.signature(factory)
    assert next(iter(signature.parameters)) == "function"
    _same_defaults(_keywords(signature), declared)
    # Registered under the module that defines the factory (tinax.jit names the public one).
    home = types.SimpleNamespace(__module__=defined_in.__name__, __qualname__=factory.__name__)
    overloads = typing.get_overloads(home)
    assert len(overloads) == 2
    for overload in overloads:
        _same_defaults(_keywords(inspect.signature(overload)), declared, overload=True)
    fields = [(f.name, f.default) for f in attrs.fields(kind)]
    assert fields[0] == ("function", attrs.NOTHING)
    required = {attrs.NOTHING: options.REQUIRED}
    _same_defaults([(n, required.get(d, d)) for n, d in fields[1:]], declared)
    assert all(f.kw_only for f in attrs.fields(kind)[1:])
    assert {option.name for option in options.OPTIONS if kind.__name__ in option.classes} == set(
        options.SIGNATURES[kind.__name__]
    )


# A value each checker of the declaration refuses, by option.
_REFUSED = {
    "axis_size": True,
    "max_traces": -1,
    "mesh": "m",
    "on_exceed": "boom",
    "buckets": 1,
    "axis_name": [],
    "spmd_axis_name": [],
    "sum_match": 1,
    "propagate_updates": "yes",
    "static_argnames": 1,
    "donate_argnames": 1,
    "static_argnums": "a",
    "donate_argnums": "a",
    "keep_unused": 1,
    "inline": 1,
    "device": 1,
    "backend": 1,
    "compiler_options": 1,
    "static_nonarrays": 1,
}


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        (kind, option.name)
        for option in options.OPTIONS
        if option.check is not None
        for kind in (BoundedJit, BatchedJit)
        if kind.__name__ in option.classes
    ],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_the_declared_checker_is_the_one_that_refuses_its_option(kind, name):
    """The declaration's ``check`` is not a label: a bad value of its option is refused
    from inside that function."""
    check = options.BY_NAME[name].check
    with pytest.raises((TypeError, ValueError)) as refused:
        kind(scaled, **{"max_traces": 1, name: _REFUSED[name]})
    assert str(refused.value).startswith(f"{kind.__name__}: {name} must ")
    ran = {frame.f_code for frame, _ in traceback.walk_tb(refused.tb)}
    assert check.__code__ in ran


def _checked_in_turn(kind):
    """The options of ``kind`` that a checker of the declaration refuses, in its order."""
    return [o.name for o in options.OPTIONS if o.check is not None and kind.__name__ in o.classes]


@pytest.mark.parametrize(
    ("kind", "first", "second"),
    [
        (kind, *pair)
        for kind in (BoundedJit, BatchedJit)
        for pair in zip(_checked_in_turn(kind), _checked_in_turn(kind)[1:], strict=False)
    ],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_options_are_checked_in_their_declared_order(kind, first, second):
    """Of two bad options, a user hears of the one declared first."""
    given = {"max_traces": 1, first: _REFUSED[first], second: _REFUSED[second]}
    with pytest.raises((TypeError, ValueError)) as refused:
        kind(scaled, **given)
    assert str(refused.value).startswith(f"{kind.__name__}: {first} must ")


def test_jax_jit_is_given_the_options_in_its_own_order():
    """Checked in the declared order (inline before backend), given in `jax.jit`'s: the
    message of an option `jax.jit` refuses lists them as `jax.jit` does."""
    given = {"compiler_options": {}, "inline": True, "backend": "cpu", "keep_unused": True}
    with warnings.catch_warnings():  # jax.jit's deprecation of backend, on some versions
        warnings.simplefilter("ignore", DeprecationWarning)
        wrapped = BoundedJit(scaled, max_traces=1, static_argnums=1, **given)
    jax_order = [name for name in inspect.signature(jax.jit).parameters if name in given]
    assert jax_order == ["keep_unused", "backend", "inline", "compiler_options"]
    assert [name for name in wrapped._plan.jit_kwargs if name in given] == jax_order
    assert wrapped._plan.jit_kwargs["static_argnums"] == (1,)


class TestCheckedOncePerFunction:
    """The checks of argnums and argnames against the signature run once per function and
    option values while the function lives (a model wrapped again per test or example)."""

    @staticmethod
    def _counting(monkeypatch: pytest.MonkeyPatch) -> list[object]:
        calls: list[object] = []
        checks = jax_options._by_signature

        def counted(api, known, key):
            calls.append(key)
            return checks(api, known, key)

        monkeypatch.setattr(jax_options, "_by_signature", counted)
        return calls

    def test_the_same_options_are_checked_once(self, monkeypatch):
        def g(x, n, m=1):
            return x * n * m

        calls = self._counting(monkeypatch)
        first = bounded_jit(g, max_traces=1, static_argnums=1, donate_argnums=0)
        second = bounded_jit(g, max_traces=1, static_argnums=1, donate_argnums=0)
        assert len(calls) == 1
        assert second.static_argnames == first.static_argnames == ()
        assert second._static == first._static == Statics((1,), ("n",))

    def test_other_options_or_replaced_defaults_are_checked_again(self, monkeypatch):
        def g(x, n, m=1):
            return x * n * m

        calls = self._counting(monkeypatch)
        bounded_jit(g, max_traces=1, static_argnums=1)
        with pytest.raises(ValueError, match="must not overlap"):
            bounded_jit(g, max_traces=1, static_argnums=1, donate_argnums=1)
        g.__defaults__ = (2,)
        bounded_jit(g, max_traces=1, static_argnums=1)
        assert len(calls) == 3


@pytest.mark.parametrize(("options", "error", "pattern"), INVALID, ids=lambda v: str(v)[:40])
def test_batched_refuses_the_same_options(options, error, pattern):
    with pytest.raises(error, match=pattern):
        batched_jit(f3, max_traces=1, **options)


@pytest.mark.parametrize(
    ("function", "options"),
    [
        (f3, {"static_argnums": (0, 1, -3)}),  # as jax.jit: -3 is a, counted from the end
        (positional_only, {"static_argnums": (0, 1)}),
        (star, {"static_argnums": (0, 999)}),  # *args takes any position
        (star, {"donate_argnums": (0, -999)}),
        (f3, {"in_shardings": (None, None, None)}),
        (f3, {"static_argnums": 1, "in_shardings": (None, None)}),
        (f3, {"static_argnames": "c", "in_shardings": [None, None]}),
        (f3, {"in_shardings": P()}),  # one spec for every argument, though a tuple subclass
        (f3, {"static_argnums": 1, "static_argnames": "b"}),  # both spellings of b
    ],
)
def test_valid_options_are_accepted(make_bounded, function, options):
    step = make_bounded(function, max_traces=1, **options)
    assert step._jitted is not None  # and by jax.jit, where the first use builds it


def test_argnums_out_of_range_for_a_positional_only_signature():
    with pytest.raises(ValueError, match="takes 2 positional arguments"):
        bounded_jit(positional_only, max_traces=1, static_argnums=2)


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, (0, 2**40)])
def test_static_argnums_past_a_c_int_are_refused_at_wrap_time(bounded_both_ways, value):
    # Under *args no signature bounds them; jaxlib keeps static positions as C ints, and its
    # binding's TypeError would come at the first use, where the jax.jit object is built.
    with pytest.raises(ValueError, match=r"static_argnums must be positions between -2\*\*31"):
        bounded_both_ways(star, max_traces=1, static_argnums=value)
    assert bounded_both_ways(star, max_traces=1, static_argnums=2**31 - 1)._jitted is not None


def test_in_shardings_counts_parameters_with_defaults_as_optional():
    def defaults(x, y=1.0):
        return x

    bounded_jit(defaults, max_traces=1, in_shardings=(None,))
    bounded_jit(defaults, max_traces=1, in_shardings=(None, None))
    with pytest.raises(ValueError, match=r"\(1 to 2: x, y\)"):
        bounded_jit(defaults, max_traces=1, in_shardings=(None, None, None))


@pytest.mark.parametrize("option", ["device", "backend"])
def test_device_or_backend_with_a_mesh_is_refused(mesh8, option):
    value = jax.devices()[0] if option == "device" else "cpu"
    with pytest.raises(ValueError, match=rf"{option} must be None when mesh is given"):
        bounded_jit(f3, max_traces=1, mesh=mesh8, **{option: value})


@pytest.mark.parametrize("option", ["device", "backend"])
def test_device_and_backend_run_where_jax_runs_them(option):
    value = jax.devices()[1] if option == "device" else "cpu"
    with pytest.warns(DeprecationWarning, match="backend and device argument on jit"):
        ours = bounded_jit(lambda x: x + 1, max_traces=1, **{option: value})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        theirs = jax.jit(lambda x: x + 1, **{option: value})
    assert ours(1.0).devices() == theirs(1.0).devices()


def test_device_with_in_shardings_is_jax_jits_own_value_error():
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="in_shardings"):
        bounded_jit(f3, max_traces=1, device=jax.devices()[0], in_shardings=P())


class TestVmapOptions:
    def test_an_unhashable_axis_name_is_refused(self):
        with pytest.raises(TypeError, match=r"axis_name must be None or a hashable"):
            batched_jit(f3, max_traces=1, axis_name=["batch"])

    def test_spmd_axis_name_must_name_an_axis_of_the_bound_mesh(self, mesh8):
        with pytest.raises(ValueError, match=r"spmd_axis_name must be axis names of mesh"):
            batched_jit(f3, max_traces=1, mesh=mesh8, spmd_axis_name="y")
        batched_jit(f3, max_traces=1, mesh=mesh8, spmd_axis_name=("x",))

    def test_sum_match_must_be_a_bool(self):
        with pytest.raises(TypeError, match=r"sum_match must be a bool; got 'no'"):
            BatchedJit(f3, max_traces=1, sum_match="no")


# --- the decorator form --------------------------------------------------------------------


class TestDecoratorForm:
    def test_bounded_decorator_builds_what_the_direct_call_builds(self):
        @bounded_jit(max_traces=1, static_argnames="n")
        def power(x, n):
            return x**n

        direct = bounded_jit(power.__wrapped__, max_traces=1, static_argnames="n")
        assert type(power) is type(direct) is BoundedJit
        assert (power.max_traces, power.static_argnames) == (1, ("n",))
        np.testing.assert_array_equal(power(jnp.full(2, 3.0), n=2), direct(jnp.full(2, 3.0), n=2))
        with pytest.raises(TraceBudgetError):
            power(jnp.full(2, 3.0), n=3)

    def test_batched_decorator_builds_what_the_direct_call_builds(self):
        @batched_jit(in_axes=(None, 0), max_traces=1)
        def shift(offset, x):
            return x + offset

        assert type(shift) is BatchedJit and shift.in_axes == (None, 0)
        np.testing.assert_array_equal(shift(1.0, jnp.zeros(3)), np.ones(3))

    def test_partial_of_the_factory_decorates_too(self):
        @functools.partial(bounded_jit, max_traces=1, static_argnums=(1,))
        def repeat(x, times):
            return jnp.tile(x, times)

        assert repeat(jnp.ones(2), 3).shape == (6,)

    def test_a_missing_max_traces_fails_at_decoration_time(self):
        with pytest.raises(TypeError, match="max_traces"):
            bounded_jit(static_argnames="n")
        with pytest.raises(TypeError, match="max_traces"):
            batched_jit(in_axes=0)

    def test_invalid_options_fail_when_the_decorator_is_applied(self):
        decorator = bounded_jit(max_traces=-1)
        with pytest.raises(ValueError, match="max_traces must be non-negative"):
            decorator(f3)

    def test_none_is_not_a_function(self):
        with pytest.raises(TypeError, match="function must be callable"):
            bounded_jit(None, max_traces=1)

    def test_methods_decorated_at_class_level_bind(self):
        class Model:
            def __init__(self, scale):
                self.scale = scale

            @bounded_jit(max_traces=2, static_argnums=0)
            def apply(self, x):
                return x * self.scale

            @batched_jit(in_axes=(None, 0), max_traces=1, static_argnums=0)
            def each(self, x):
                return x + 1

            def __hash__(self):
                return hash(self.scale)

            def __eq__(self, other):
                return isinstance(other, Model) and other.scale == self.scale

        model = Model(2.0)
        np.testing.assert_array_equal(model.apply(jnp.ones(2)), np.full(2, 2.0))
        np.testing.assert_array_equal(model.each(jnp.zeros(3)), np.ones(3))
        Model(3.0).apply(jnp.ones(2))
        with pytest.raises(TraceBudgetError) as caught:
            Model(4.0).apply(jnp.ones(2))
        assert any("self" in line and "(static" in line for line in str(caught.value).splitlines())


# --- the behaviours JAX's own JitTest checks for these options ------------------------------
# Each runs under jax.jit and under bounded_jit(max_traces=1000): both must pass alike.


def _budgeted(function=None, **options):
    if function is None:
        return lambda f: bounded_jit(f, max_traces=1000, **options)
    return bounded_jit(function, max_traces=1000, **options)


JITS = [pytest.param(jax.jit, id="jax.jit"), pytest.param(_budgeted, id="bounded_jit")]


@pytest.mark.parametrize("jit", JITS)
class TestAsJitTest:
    def test_donated_arguments_after_static_ones_are_deleted(self, jit):
        step = jit(
            lambda a, b, c, d, e: (a + b + c, a + b + d, a + b + e),
            static_argnums=(0, 1),
            donate_argnames=("d", "e"),
        )
        c, d, e = jnp.full(2, 2.0), jnp.ones(4), jnp.full(4, 3.0)
        f, g, h = step(1, 2, c, d=d, e=e)
        np.testing.assert_allclose(g, np.full(4, 4.0))
        np.testing.assert_allclose(f, np.full(2, 5.0))
        np.testing.assert_allclose(h, np.full(4, 6.0))
        assert not c.is_deleted() and d.is_deleted() and e.is_deleted()

    def test_donate_argnums_and_argnames_together(self, jit):
        @jit(donate_argnums=0, donate_argnames=("inp2", "inp3"))
        def f(inp1, inp2, inp3):
            return inp1 * 2, inp2 * 2, inp3 * 2

        x, y, z = jnp.ones((2, 5)), jnp.ones((2, 5)), jnp.ones((2, 5))
        f(x, inp2=y, inp3=z)
        assert x.is_deleted() and y.is_deleted() and z.is_deleted()

    def test_a_donated_argnum_passed_by_keyword_is_donated(self, jit):
        @jit(donate_argnums=0)
        def f(inp1):
            return inp1 * 2

        x = jnp.ones((2, 5))
        f(inp1=x)
        assert x.is_deleted()

    @pytest.mark.parametrize(
        "options", [{"donate_argnames": ("z", "y")}, {"donate_argnums": (0, 1)}]
    )
    def test_args_info_marks_donated_leaves(self, jit, options):
        @jit(**options)
        def f(z, y, x):
            return z, y, x

        args_info, kwargs_info = f.lower({"c": 3.0}, y={"b": 2.0}, x={"a": 1.0}).args_info
        assert args_info[0]["c"].donated and kwargs_info["y"]["b"].donated
        assert not kwargs_info["x"]["a"].donated

    def test_static_argnums_and_static_argnames_both_ways(self, jit):
        def f(x):
            assert x == "foo"
            return 1

        for static in ({"static_argnums": 0}, {"static_argnames": "x"}):
            jitted = jit(f, **static)
            assert jitted("foo") == 1 and jitted(x="foo") == 1

    def test_a_static_argnum_with_a_default(self, jit):
        assert jit(lambda x=4: x, static_argnums=0)() == 4

    def test_static_arguments_require_type_equality(self, jit):
        traces = []

        @jit(static_argnums=(0,))
        def f(k):
            traces.append(type(k))
            return 0

        f(1)
        f(1.0)
        f(True)
        assert traces == [int, float, bool]

    def test_a_python_builtin_with_a_static_argnum(self, jit):
        import operator

        assert int(jit(operator.add, static_argnums=(1,))(1, 2)) == 3

    def test_an_invalid_compiler_option_fails_when_compiled(self, jit):
        f = jit(lambda x: x + 1, compiler_options={"invalid_key": "invalid_value"})
        with pytest.raises(Exception, match=r"invalid_key|No such compile option"):
            f.lower(1.0).compile()

    def test_keep_unused_keeps_arguments_in_the_lowered_program(self, jit):
        lowered = jit(lambda x, y: x, keep_unused=True).lower(1.0, 2.0)
        assert len(lowered.compile().input_shardings[0]) == 2

    def test_an_unhashable_static_argument_fails_on_the_call(self, jit):
        f = jit(lambda x, y: x, static_argnums=(1,))
        with pytest.raises(ValueError, match="Non-hashable static arguments"):
            f(1.0, [2])


# --- the rest of tinax, with options -------------------------------------------------------


def test_testing_arguments_keep_a_static_argnum_fixed():
    from hypothesis import given, settings

    from tinax.testing import arguments, no_new_traces

    step = bounded_jit(scaled, max_traces=1, static_argnums=1, donate_argnums=2)
    step(jnp.ones(3), 2, jnp.ones(3))

    @settings(max_examples=10, deadline=None)
    @given(call=arguments(step))
    def check(call):
        args, kwargs = call
        assert args[1] == 2
        with no_new_traces(step):
            step(*args, **kwargs)

    check()


def test_the_registry_and_logging_see_objects_with_options(caplog):
    import logging

    from tinax.jit import budgets

    step = bounded_jit(scaled, max_traces=2, static_argnums=1, keep_unused=True)
    with caplog.at_level(logging.INFO, logger="tinax"):
        step(jnp.ones(2), 1, jnp.ones(2))
        step(jnp.ones(2), 2, jnp.ones(2))
    assert any("n: 1 -> 2 (static argument value)" in r.getMessage() for r in caplog.records)
    assert any(obj is step and obj.traces_used == 2 for obj in budgets())


def test_a_partition_spec_in_in_shardings_resolves_against_a_bound_auto_mesh(mesh8):
    step = bounded_jit(lambda x: x * 2, max_traces=1, mesh=mesh8, in_shardings=P("x"))
    out = step(jnp.arange(16.0))
    np.testing.assert_array_equal(out, np.arange(16.0) * 2)
    lowered = step.lower(jnp.arange(16.0))
    assert "x" in str(lowered.compile().input_shardings[0][0])
    assert step.traces_used == 1
