"""A user's program that type-checks with `jax.jit` type-checks with tinax, in pyright's
strict mode, and tinax's types find the wrong calls that `jax.jit`'s let through.

One pyright run (about 5 s) checks a small program written for `jax.jit` (functions,
decorators with and without options, a method, a staticmethod, a `jax.vmap`, ``lower``
and ``trace``), the same program with tinax's factories in their places, that program
with wrong calls added, and ``tests/typecheck.py``, against the JAX installed here (CI
runs the suite on its oldest, its usual and the newest JAX). `jax.jit`'s own types are
partly unknown (its call returns ``Unknown``), so its program is checked as a strict
user of JAX must check it, with pyright's ``reportUnknown*`` rules off; the tinax
program passes strict in full.
"""

import json
import pathlib
import sys

import pytest

from helpers.processes import Module, run_program

pytest.importorskip("pyright", reason="pyright (the test extra) checks the programs")

ROOT = pathlib.Path(__file__).resolve().parents[1]
TYPECHECK = ROOT / "tests" / "typecheck.py"

STRICT_AS_FOR_JAX = (
    "# pyright: strict, reportUnknownMemberType=false, reportUnknownVariableType=false, "
    "reportUnknownArgumentType=false"
)

JAX_PROGRAM = f'''{STRICT_AS_FOR_JAX}
"""A user's program."""

import dataclasses
from functools import partial

import jax


def step(x: jax.Array, n: int) -> jax.Array:
    return x * n


fast_step = jax.jit(step, static_argnames="n")


@jax.jit
def double(x: jax.Array) -> jax.Array:
    return x * 2


@partial(jax.jit, static_argnums=1)
def scale(x: jax.Array, factor: float) -> jax.Array:
    return x * factor


def squared_norm(v: jax.Array) -> jax.Array:
    return v @ v


squared_norms = jax.jit(jax.vmap(squared_norm))


@dataclasses.dataclass(frozen=True)
class Scaler:
    factor: float

    @partial(jax.jit, static_argnums=0)
    def apply(self, x: jax.Array) -> jax.Array:
        return x * self.factor

    @staticmethod
    @jax.jit
    def triple(x: jax.Array) -> jax.Array:
        return x * 3


def train(x: jax.Array, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    y: jax.Array = fast_step(x, n=2)
    z = double(y)
    w = scale(z, 0.5)
    text: str = fast_step.lower(x, n=2).as_text()
    print(text, fast_step.trace(x, n=2))
    scaler = Scaler(2.0)
    out = scaler.apply(w) + Scaler.apply(scaler, w) + Scaler.triple(w) + scaler.triple(w)
    return out, squared_norms(rows)
'''

# Each `jax.jit` spelling and tinax's in its place, as a user ports the program.
PORTED = (
    (STRICT_AS_FOR_JAX, "# pyright: strict"),
    ("import jax\n", "import jax\n\nfrom tinax.jit import batched_jit, bounded_jit\n"),
    (
        'jax.jit(step, static_argnames="n")',
        'bounded_jit(step, max_traces=1, static_argnames="n")',
    ),
    ("@jax.jit\n", "@bounded_jit(max_traces=1)\n"),
    ("partial(jax.jit, static_argnums=", "partial(bounded_jit, max_traces=1, static_argnums="),
    ("jax.jit(jax.vmap(squared_norm))", "batched_jit(squared_norm, max_traces=1)"),
)

# Wrong calls, each on its own line, and the rule pyright reports it under with tinax.
WRONG = (
    ('fast_step(x, n="2")', "reportArgumentType"),
    ("fast_step(x)", "reportCallIssue"),
    ('double("x")', "reportArgumentType"),
    ('Scaler(2.0).apply("x")', "reportArgumentType"),
    ("Scaler(2.0).apply(Scaler(2.0), x)", "reportCallIssue"),
    ('Scaler.triple("x")', "reportArgumentType"),
    ("squared_norms(x, x)", "reportCallIssue"),
)


def ported(program):
    """``program`` with tinax's factories in the places of `jax.jit` (every one found)."""
    for jax_text, tinax_text in PORTED:
        assert jax_text in program, f"the program no longer has {jax_text!r}"
        program = program.replace(jax_text, tinax_text)
    assert "jax.jit" not in program
    return program


def with_wrong_calls(program):
    """``program`` and a function making the `WRONG` calls; the first one's line number."""
    lines = program.splitlines()
    calls = [f"    {call}" for call, _ in WRONG]
    return "\n".join([*lines, "", "", "def wrong(x: jax.Array) -> None:", *calls, ""]), len(
        lines
    ) + 4


@pytest.fixture(scope="module")
def diagnostics(tmp_path_factory):
    """pyright's diagnostics (``--outputjson``) for each program, by its file's name."""
    folder = tmp_path_factory.mktemp("typing")
    tinax_program = ported(JAX_PROGRAM)
    wrong_program, _ = with_wrong_calls(tinax_program)
    programs = {
        "with_jax_jit.py": JAX_PROGRAM,
        "with_tinax.py": tinax_program,
        "with_tinax_wrong.py": wrong_program,
        "with_jax_jit_wrong.py": with_wrong_calls(JAX_PROGRAM)[0],
    }
    for name, text in programs.items():
        (folder / name).write_text(text)
    # tinax is this checkout's: the environment puts its src first on the path pyright reads.
    done = run_program(
        Module("pyright"),
        *("--outputjson", "--pythonpath", sys.executable, *programs, TYPECHECK),
        cwd=folder,
        timeout=120,
        returncode=None,
    )
    report = json.loads(done.stdout)
    found = {name: [] for name in (*programs, TYPECHECK.name)}
    for diagnostic in report["generalDiagnostics"]:
        found[pathlib.Path(diagnostic["file"]).name].append(diagnostic)
    assert report["summary"]["filesAnalyzed"] == len(found), done.stdout
    return found


def shown(diagnostics):
    return "\n".join(
        f"{d['range']['start']['line'] + 1}: {d.get('rule', '')} {d['message']}"
        for d in diagnostics
    )


class TestStrictTyping:
    def test_the_jax_jit_program_type_checks(self, diagnostics):
        assert not diagnostics["with_jax_jit.py"], shown(diagnostics["with_jax_jit.py"])

    def test_the_same_program_with_tinax_type_checks_when_strict(self, diagnostics):
        assert not diagnostics["with_tinax.py"], shown(diagnostics["with_tinax.py"])

    def test_jax_jit_lets_every_wrong_call_through(self, diagnostics):
        found = diagnostics["with_jax_jit_wrong.py"]
        assert not found, shown(found)

    def test_tinax_finds_every_wrong_call(self, diagnostics):
        _, first = with_wrong_calls(ported(JAX_PROGRAM))
        errors = [d for d in diagnostics["with_tinax_wrong.py"] if d["severity"] == "error"]
        found = [(d["range"]["start"]["line"] + 1 - first, d.get("rule")) for d in errors]
        assert found == [(index, rule) for index, (_, rule) in enumerate(WRONG)], shown(errors)

    def test_typecheck_file_passes_on_this_jax(self, diagnostics):
        assert not diagnostics[TYPECHECK.name], shown(diagnostics[TYPECHECK.name])
