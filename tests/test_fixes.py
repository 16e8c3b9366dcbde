"""Every fix a budget error names under "How to fix:", followed literally, runs: the program
then runs as under `jax.jit`, and the retrace is gone (or the budget the fix names covers it)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import tinax
from tinax.jit import TraceBudgetError, bounded_jit, pad_to_bucket
from tinax.testing import no_new_traces


def fix_for(step, calls, kind):
    """Runs every call but the last through ``step``: the one line under "How to fix:"
    for ``kind`` of the budget error the last call raises."""
    *earlier, last = calls
    for args in earlier:
        step(*args)
    with pytest.raises(TraceBudgetError) as info:
        step(*last)
    text = str(info.value).splitlines()
    fixes = text[text.index("How to fix:") + 1 :]
    found = [line for line in fixes if line.startswith(f"  {kind}: ")]
    assert len(found) == 1, "\n".join(text)
    return found[0]


def runs_as_jax_jit(step, reference, calls, *, traces=1):
    """The program after the fix: every call runs and gives ``reference``'s result (a
    `jax.jit` of the same function), in ``traces`` traces."""
    for args in calls:
        np.testing.assert_array_equal(step(*args), reference(*args))
    assert step.traces_used == traces


def scale(x, n):
    return x * n


def pick(x, train):
    return x * 2 if train else x - 1  # a mode flag read by a Python if


def fixes_of(step, *args):
    """The lines under "How to fix:" of the error ``step(*args)`` raises."""
    with pytest.raises(TraceBudgetError) as info:
        step(*args)
    text = str(info.value).splitlines()
    return [line for line in text[text.index("How to fix:") + 1 :] if line.startswith("  ")]


def run_the_code(line, namespace=None, **names):
    """Runs the code a fix line writes (``pad ... before the call: <code> (length: ...)``)
    in ``namespace`` with ``tinax`` and ``names``; returns the namespace."""
    namespace = {} if namespace is None else namespace
    namespace.update(names, tinax=tinax)
    code = line.split(" before the call: ", 1)[1].rsplit(" (length: ", 1)[0]
    exec(code, namespace)
    return namespace


class TestFixesFollowedLiterallyRun:
    """Each fix the diagnosis gives names a change; made, the program runs as under
    `jax.jit` and the retrace is gone (or the budget the fix names covers it)."""

    def test_shape_pad_to_one_shape(self):
        def total(x):
            return x.sum(0)

        fix = fix_for(
            bounded_jit(total, max_traces=1), [(jnp.ones((8, 3)),), (jnp.ones((5, 3)),)], "shape"
        )
        assert (
            "pad or bucket inputs to a few fixed shapes (declare them with buckets= and pad "
            "with tinax.jit.pad_to_bucket; pad or drop a last, partial batch)" in fix
        )
        padded = [(jnp.ones((8, 3)),), (jnp.pad(jnp.ones((5, 3)), ((0, 3), (0, 0))),)]
        runs_as_jax_jit(bounded_jit(total, max_traces=1), jax.jit(total), padded)
        assert (
            float(jax.jit(total)(jnp.ones((5, 3)))[0])
            == 5.0
            == float(bounded_jit(total, max_traces=1)(padded[1][0])[0])
        )  # zero padding leaves the sum as it was

    def test_shape_declared_buckets_and_padding_to_them(self):
        """The shape fix's pointer followed: the sizes declared with ``buckets=`` (and a
        budget for them), each input padded with ``pad_to_bucket``; the lengths that
        retraced before run in the declared traces, with jax.jit's results."""

        def total(x):
            return x.sum(0)

        calls = [(jnp.ones((8, 3)),), (jnp.ones((5, 3)),), (jnp.ones((3, 3)),)]
        fix = fix_for(bounded_jit(total, max_traces=1), calls[:2], "shape")
        assert "declare them with buckets= and pad with tinax.jit.pad_to_bucket" in fix
        sizes = (4, 8)
        step = bounded_jit(total, max_traces=len(sizes), buckets={"x": {0: sizes}})
        padded = [(pad_to_bucket(x, sizes)[0],) for (x,) in calls]
        runs_as_jax_jit(step, jax.jit(total), padded, traces=2)
        for (x,), (bucketed,) in zip(calls, padded, strict=True):
            np.testing.assert_array_equal(step(bucketed), jax.jit(total)(x))  # zeros add 0

    def test_shape_outside_the_buckets_padded_by_the_code_the_error_writes(self):
        """An object with buckets, called outside them: the error's fix and explain's are
        the same code, naming the argument, its buckets and its axis; run as written, it
        pads to the named bucket, which runs in a declared trace with jax.jit's result."""

        def total(x):
            return x.sum(0)

        step = bounded_jit(total, max_traces=3, buckets={"x": {0: (4, 8, 16)}})
        step(jnp.ones((4, 3)))
        x = jnp.arange(15.0).reshape(5, 3)
        explained = [line for line in str(step.explain(x)).splitlines() if "  shape: " in line]
        assert "pad or bucket inputs" not in str(step.explain(x))
        fix = fixes_of(step, x)
        assert [line.replace("  shape: ", "  ") for line in explained] == fix[:1]
        namespace = run_the_code(fix[0], x=x)
        assert namespace["x"].shape == (8, 3) and namespace["length"] == 5
        np.testing.assert_array_equal(step(namespace["x"]), jax.jit(total)(x))  # zeros add 0
        assert step.traces_used == 2
        assert fix[1] == "  or add the size to buckets= and raise max_traces with it"

    def test_shape_outside_the_buckets_arrays_of_one_key_padded_to_one_bucket(self):
        """Arrays under one key whose sizes differ: each fix line, run as written, pads
        one of them to the bucket that holds the largest, and the call runs."""

        def total(batch):
            return (batch["tokens"][:, :16] * batch["mask"][:, :16]).sum()

        step = bounded_jit(total, max_traces=3, buckets={"batch": {1: (16, 32, 64)}})
        batch = {"tokens": jnp.ones((2, 16)), "mask": jnp.ones((2, 20))}
        fix = fixes_of(step, batch)
        assert len(fix) == 3 and fix[2].startswith("  or, where those arrays' sizes differ by")
        namespace = {"batch": dict(batch)}
        for line in fix[:2]:
            assert line.startswith("  pad to 32, one bucket for the arrays under batch before")
            run_the_code(line, namespace)
        assert {key: value.shape for key, value in namespace["batch"].items()} == {
            "tokens": (2, 32),
            "mask": (2, 32),
        }
        np.testing.assert_array_equal(step(namespace["batch"]), jax.jit(total)(batch))

    def test_shape_larger_than_the_largest_bucket_split_into_pieces(self):
        """Larger than the largest bucket: split into pieces of at most that size, as the
        fix says; each piece pads to a bucket and the pieces' sums add up to jax.jit's."""

        def total(x):
            return x.sum(0)

        step = bounded_jit(total, max_traces=3, buckets={"x": {0: (4, 8, 16)}})
        x = jnp.arange(40.0)
        [fix] = fixes_of(step, x)
        assert fix == (
            "  x, axis 0: split the input into pieces of at most 16 (the largest bucket), or "
            "add a larger bucket to buckets= and raise max_traces with it"
        )
        explained = str(step.explain(x))
        assert fix.replace("  x, axis", "  shape: x, axis") in explained.splitlines()
        pieces = [pad_to_bucket(x[start : start + 16], (4, 8, 16))[0] for start in (0, 16, 32)]
        assert sum(float(step(piece)) for piece in pieces) == float(jax.jit(total)(x))
        assert step.traces_used == 2  # 16 and 8

    def test_shape_a_bucket_not_yet_compiled_compiled_ahead(self):
        """A call at a bucket that traces inside no_new_traces: the fix is to compile the
        buckets ahead with precompile_buckets; done, no bucket traces."""

        def total(x):
            return x.sum(0)

        step = bounded_jit(total, max_traces=3, buckets={"x": {0: (4, 8, 16)}})
        step(jnp.ones(4))
        with pytest.raises(AssertionError) as info, no_new_traces(step):
            step(jnp.ones(8))
        [fix] = [line for line in str(info.value).splitlines() if "shape: " in line]
        assert fix == (
            "    shape: this call's sizes (x axis 0: 8) are buckets, each combination traced "
            "once: compile them all ahead with the object's precompile_buckets(*example_args), "
            "and no call inside them traces"
        )
        assert "pad or bucket inputs" not in str(info.value)
        assert step.precompile_buckets(jnp.ones(4)) == 1  # 16: 4 and 8 are traced
        with no_new_traces(step):
            for size in (4, 8, 16):
                step(jnp.ones(size))

    def test_dtype_cast_before_the_call(self):
        fix = fix_for(
            bounded_jit(jnp.sin, max_traces=1), [(jnp.ones(3),), (jnp.arange(3),)], "dtype"
        )
        assert fix == "  dtype: cast inputs to one dtype before the call"
        cast = [(jnp.ones(3),), (jnp.arange(3).astype(jnp.float32),)]
        runs_as_jax_jit(bounded_jit(jnp.sin, max_traces=1), jax.jit(jnp.sin), cast)

    def test_weak_type_one_way_of_passing_the_scalar(self):
        calls = [(jnp.ones(2), 0.1), (jnp.ones(2), jnp.float32(0.2))]
        fix = fix_for(bounded_jit(scale, max_traces=1), calls, "weak type")
        assert "always a Python number, or always an array of one dtype (jnp.float32(lr), " in fix
        for one_way in ([0.1, 0.2], [jnp.float32(0.1), jnp.float32(0.2)]):
            calls = [(jnp.ones(2), lr) for lr in one_way]
            runs_as_jax_jit(bounded_jit(scale, max_traces=1), jax.jit(scale), calls)
        step = bounded_jit(scale, max_traces=1)  # "not jnp.asarray(lr)": that one is weak
        step(jnp.ones(2), jnp.asarray(0.1))
        assert step.explain(jnp.ones(2), jnp.float32(0.2)).retraces

    def test_two_python_number_types_one_python_type(self):
        fix = fix_for(
            bounded_jit(scale, max_traces=1), [(jnp.ones(2), 1), (jnp.ones(2), 2.0)], "dtype"
        )
        assert "pass one Python type on every call (1.0, not 1), or an array of one dtype" in fix
        for one_type in ([1.0, 2.0], [jnp.float32(1), jnp.float32(2)]):
            calls = [(jnp.ones(2), n) for n in one_type]
            runs_as_jax_jit(bounded_jit(scale, max_traces=1), jax.jit(scale), calls)

    def test_sharding_device_put_the_named_spec(self, explicit_mesh8):
        double = lambda x: x * 2  # noqa: E731
        with jax.set_mesh(explicit_mesh8):
            split = jax.device_put(jnp.ones((8, 3)), P("x"))
            whole = jax.device_put(jnp.ones((8, 3)), P())
            fix = fix_for(bounded_jit(double, max_traces=1), [(split,), (whole,)], "sharding")
            assert fix.endswith("jax.device_put(x, NamedSharding(mesh, P('x', None)))")
            placed = jax.device_put(whole, NamedSharding(explicit_mesh8, P("x", None)))
            runs_as_jax_jit(
                bounded_jit(double, max_traces=1), jax.jit(double), [(split,), (placed,)]
            )

    def test_mesh_one_mesh_or_bound_with_mesh(self, mesh8):
        double = lambda x: x * 2  # noqa: E731
        x, y = jnp.ones(8), jnp.arange(8.0)  # made outside the mesh: on one device either way
        step = bounded_jit(double, max_traces=1)
        step(x)
        with jax.set_mesh(mesh8), pytest.raises(TraceBudgetError) as info:
            step(x)
        assert (
            "  mesh: the ambient mesh is part of JAX's cache key: call under one mesh, or bind "
            "one with mesh="
        ) in str(info.value).splitlines()
        step = bounded_jit(double, max_traces=1)
        with jax.set_mesh(mesh8):
            runs_as_jax_jit(step, jax.jit(double), [(x,), (y,)])
        bound = bounded_jit(double, max_traces=1, mesh=mesh8)
        runs_as_jax_jit(bound, jax.jit(double), [(x,)])
        with jax.set_mesh(mesh8):
            runs_as_jax_jit(bound, jax.jit(double), [(y,)])

    def test_config_set_once_around_every_call(self):
        square = lambda x: x @ x  # noqa: E731
        step = bounded_jit(square, max_traces=1)
        step(jnp.ones((2, 2)))
        with jax.default_matmul_precision("highest"), pytest.raises(TraceBudgetError) as info:
            step(jnp.ones((2, 2)))
        if not info.value.signature.config:  # JAX < 0.10 does not name its config options
            return
        assert "set it once, around every call" in str(info.value)
        with jax.default_matmul_precision("highest"):
            calls = [(jnp.ones((2, 2)),), (jnp.eye(2),)]
            runs_as_jax_jit(bounded_jit(square, max_traces=1), jax.jit(square), calls)

    def test_static_number_passed_as_an_array(self):
        static = bounded_jit(scale, max_traces=1, static_argnums=1)
        fix = fix_for(static, [(jnp.ones(2), 2), (jnp.ones(2), 3)], "static value")
        assert fix.endswith("do not mark it static and pass it as an array")
        calls = [(jnp.ones(2), jnp.asarray(2)), (jnp.ones(2), jnp.asarray(3))]
        runs_as_jax_jit(bounded_jit(scale, max_traces=1), jax.jit(scale), calls)

    def test_static_string_a_trace_per_value(self):
        def act(x, name):
            return jnp.tanh(x) if name == "tanh" else jax.nn.relu(x)

        calls = [(jnp.ones(2), "tanh"), (jnp.ones(2), "relu")]
        fix = fix_for(bounded_jit(act, max_traces=1, static_argnums=1), calls, "static value")
        assert fix.endswith("or allow a trace per value (max_traces at least the count of values)")
        assert "array" not in fix  # jnp.asarray("relu") raises: no such advice
        step = bounded_jit(act, max_traces=2, static_argnums=1)
        runs_as_jax_jit(step, jax.jit(act, static_argnums=1), calls * 2, traces=2)

    def test_static_bool_a_trace_per_mode_or_an_object_per_mode(self):
        calls = [(jnp.ones(2), True), (jnp.ones(2), False)]
        fix = fix_for(bounded_jit(pick, max_traces=1, static_argnums=1), calls, "static value")
        assert fix == (
            "  static value: a bool read by a Python if cannot be traced "
            "(TracerBoolConversionError): allow a trace per mode (max_traces=2, twice what one "
            "mode needs), or wrap the function once per mode"
        )
        reference = jax.jit(pick, static_argnums=1)
        step = bounded_jit(pick, max_traces=2, static_argnums=1)
        runs_as_jax_jit(step, reference, calls * 2, traces=2)
        for call in calls:  # one object per mode, each with the budget one mode needs
            runs_as_jax_jit(
                bounded_jit(pick, max_traces=1, static_argnums=1), reference, [call] * 2
            )
        with pytest.raises(jax.errors.TracerBoolConversionError):  # why not as an array
            bounded_jit(pick, max_traces=1)(jnp.ones(2), jnp.asarray(True))

    def test_static_field_number_made_an_array_data_field(self):
        import dataclasses

        @jax.tree_util.register_dataclass
        @dataclasses.dataclass
        class Meta:
            w: jax.Array
            scale: float = dataclasses.field(metadata={"static": True})

        @jax.tree_util.register_dataclass
        @dataclasses.dataclass
        class Data:
            w: jax.Array
            scale: jax.Array

        apply = lambda layer: layer.w * layer.scale  # noqa: E731
        fix = fix_for(
            bounded_jit(apply, max_traces=1),
            [(Meta(jnp.ones(2), 1.0),), (Meta(jnp.ones(2), 2.0),)],
            "static field",
        )
        assert fix.endswith("make it an array data field")
        calls = [(Data(jnp.ones(2), jnp.asarray(1.0)),), (Data(jnp.ones(2), jnp.asarray(2.0)),)]
        runs_as_jax_jit(bounded_jit(apply, max_traces=1), jax.jit(apply), calls)

    def test_static_equality_by_value_or_the_same_object(self):
        import dataclasses

        from helpers.statics import ByIdentity

        @dataclasses.dataclass(frozen=True)
        class ByValue:
            n: int

        times = lambda x, c: x * c.n  # noqa: E731
        calls = [(jnp.ones(2), ByIdentity(2)), (jnp.ones(2), ByIdentity(2))]
        fix = fix_for(bounded_jit(times, max_traces=1, static_argnums=1), calls, "static equality")
        assert "(e.g. @dataclass(frozen=True)), or pass the same object on every call" in fix
        reference = jax.jit(times, static_argnums=1)
        by_value = [(jnp.ones(2), ByValue(2)), (jnp.arange(2.0), ByValue(2))]
        runs_as_jax_jit(bounded_jit(times, max_traces=1, static_argnums=1), reference, by_value)
        one = ByIdentity(2)
        same = [(jnp.ones(2), one), (jnp.arange(2.0), one)]
        runs_as_jax_jit(bounded_jit(times, max_traces=1, static_argnums=1), reference, same)

    def test_a_dataclass_with_eq_false_drops_it(self):
        import dataclasses

        @dataclasses.dataclass(frozen=True, eq=False)
        class Opaque:
            n: int

        @dataclasses.dataclass(frozen=True)
        class Plain:
            n: int

        times = lambda x, c: x * c.n  # noqa: E731
        calls = [(jnp.ones(2), Opaque(2)), (jnp.ones(2), Opaque(2))]
        fix = fix_for(bounded_jit(times, max_traces=1, static_argnums=1), calls, "static equality")
        assert "drop eq=False (frozen=True then also hashes by value)" in fix
        plain = [(jnp.ones(2), Plain(2)), (jnp.arange(2.0), Plain(2))]
        step = bounded_jit(times, max_traces=1, static_argnums=1)
        runs_as_jax_jit(step, jax.jit(times, static_argnums=1), plain)

    def test_a_rebuilt_function_built_once(self):
        apply = lambda x, f: f(x)  # noqa: E731
        calls = [(jnp.ones(2), lambda v: v + 1), (jnp.ones(2), lambda v: v + 1)]
        fix = fix_for(bounded_jit(apply, max_traces=1, static_argnums=1), calls, "static equality")
        assert "build it (the optax transformation, the lambda) once, outside the step" in fix
        once = lambda v: v + 1  # noqa: E731
        built = [(jnp.ones(2), once), (jnp.arange(2.0), once)]
        step = bounded_jit(apply, max_traces=1, static_argnums=1)
        runs_as_jax_jit(step, jax.jit(apply, static_argnums=1), built)

    def test_a_static_nan_passed_as_an_array(self):
        nan = float("nan")
        calls = [(jnp.ones(2), nan), (jnp.ones(2), float("nan"))]
        fix = fix_for(bounded_jit(scale, max_traces=1, static_argnums=1), calls, "static equality")
        assert "or pass the number as an array (jnp.asarray) to trace it" in fix
        arrays = [(jnp.ones(2), jnp.asarray(nan)), (jnp.ones(2), jnp.asarray(2.0))]
        runs_as_jax_jit(bounded_jit(scale, max_traces=1), jax.jit(scale), arrays)

    def test_tree_structure_kept_fixed(self):
        masked = lambda x, mask: x if mask is None else x * mask  # noqa: E731
        calls = [(jnp.ones(2), None), (jnp.ones(2), jnp.zeros(2))]
        fix = fix_for(bounded_jit(masked, max_traces=1), calls, "tree structure")
        assert "keep the tree structure fixed between calls" in fix
        fixed = [(jnp.ones(2), jnp.ones(2)), (jnp.ones(2), jnp.zeros(2))]
        runs_as_jax_jit(bounded_jit(masked, max_traces=1), jax.jit(masked), fixed)

    def test_passing_one_way(self):
        add = lambda x, y: x + y  # noqa: E731
        step = bounded_jit(add, max_traces=1)
        step(jnp.ones(2), jnp.ones(2))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(2), y=jnp.ones(2))
        assert "  passing: pass each argument the same way on every call, positionally" in str(
            info.value
        )
        calls = [(jnp.ones(2), jnp.ones(2)), (jnp.ones(2), jnp.zeros(2))]
        runs_as_jax_jit(bounded_jit(add, max_traces=1), jax.jit(add), calls)

    def test_a_default_passed_on_every_call(self):
        def shift(x, by=1.0):
            return x + by

        step = bounded_jit(shift, max_traces=1)
        step(jnp.ones(2))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(2), by=2.0)
        assert "a default passed explicitly is a new argument" in str(info.value)
        step = bounded_jit(shift, max_traces=1)
        for by in (1.0, 2.0):
            np.testing.assert_array_equal(
                step(jnp.ones(2), by=by), jax.jit(shift)(jnp.ones(2), by=by)
            )
        assert step.traces_used == 1

    def test_keys_one_api_and_one_implementation(self):
        draw = lambda key: jax.random.uniform(key, (2,))  # noqa: E731
        calls = [(jax.random.key(0),), (jax.random.PRNGKey(1),)]
        fix = fix_for(bounded_jit(draw, max_traces=1), calls, "key")
        assert "typed keys (jax.random.key) everywhere" in fix
        typed = [(jax.random.key(0),), (jax.random.key(1),)]
        runs_as_jax_jit(bounded_jit(draw, max_traces=1), jax.jit(draw), typed)
        calls = [(jax.random.key(0),), (jax.random.key(1, impl="rbg"),)]
        fix = fix_for(bounded_jit(draw, max_traces=1), calls, "key")
        assert "jax.random.key(seed, impl=...) with the same impl" in fix
        one_impl = [(jax.random.key(0, impl="rbg"),), (jax.random.key(1, impl="rbg"),)]
        runs_as_jax_jit(bounded_jit(draw, max_traces=1), jax.jit(draw), one_impl)

    def test_a_bool_and_an_int_one_type(self):
        calls = [(jnp.ones(2), True), (jnp.ones(2), 1)]
        fix = fix_for(bounded_jit(scale, max_traces=1), calls, "dtype")
        assert "pass one type on every call (True/False or 0/1), or an array of one dtype" in fix
        for one_type in ([True, False], [0, 1], [jnp.int32(0), jnp.int32(1)]):
            calls = [(jnp.ones(2), n) for n in one_type]
            runs_as_jax_jit(bounded_jit(scale, max_traces=1), jax.jit(scale), calls)

    def test_a_placement_on_auto_axes_the_first_spec(self):
        mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
        double = lambda x: x * 2  # noqa: E731
        placed = jax.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P("data")))
        calls = [(placed,), (np.ones((8, 4), np.float32),)]
        fix = fix_for(bounded_jit(double, max_traces=1), calls, "sharding")
        assert "NamedSharding(mesh, spec)), with the spec x had when traced first" in fix
        again = jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), placed.sharding)
        runs_as_jax_jit(bounded_jit(double, max_traces=1), jax.jit(double), [(placed,), (again,)])

    def test_a_class_whose_own_eq_is_false_passes_the_same_object(self):
        class Never:
            def __eq__(self, other):
                return False

            def __hash__(self):
                return 1

            def __repr__(self):
                return "Never()"

        plus = lambda x, c: x + 1  # noqa: E731
        calls = [(jnp.ones(2), Never()), (jnp.ones(2), Never())]
        fix = fix_for(bounded_jit(plus, max_traces=1, static_argnums=1), calls, "static equality")
        assert fix.endswith("or pass the same object on every call")
        one = Never()  # found by identity first, as JAX's cache does
        same = [(jnp.ones(2), one), (jnp.arange(2.0), one)]
        runs_as_jax_jit(
            bounded_jit(plus, max_traces=1, static_argnums=1), jax.jit(plus, static_argnums=1), same
        )

    def test_a_method_wrapped_per_instance_has_a_budget_per_instance(self):
        import functools

        class Shared:
            def __init__(self, bias):
                self.bias = bias

            @functools.partial(bounded_jit, max_traces=1, static_argnames="self")
            def step(self, x):
                return x + self.bias

        Shared(1.0).step(jnp.ones(2))
        with pytest.raises(TraceBudgetError) as info:
            Shared(2.0).step(jnp.ones(2))
        assert "wrap the bound method in __init__: self.step = bounded_jit(self._step, ...)" in str(
            info.value
        )

        class Own:
            def __init__(self, bias):
                self.bias = bias
                self.step = bounded_jit(self._step, max_traces=1)

            def _step(self, x):
                return x + self.bias

        for bias in (1.0, 2.0):
            model = Own(bias)
            runs_as_jax_jit(model.step, jax.jit(model._step), [(jnp.ones(2),), (jnp.zeros(2),)])
