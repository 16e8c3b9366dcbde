"""The examples run, end to end, as a newcomer would run them; the docs show their output."""

import re

from helpers.pages import ROOT, assert_page_shows, untimed
from helpers.processes import run_example


def test_quickstart_runs_and_shows_the_budget_error():
    out = run_example("quickstart.py")
    assert "TraceBudgetError: step (examples/quickstart.py:" in out
    assert "this call would exceed the trace budget: max_traces=1, traces_used=1" in out
    assert out.count("      batch['x']: f32[16,3] -> f32[10,3] (shape)\n") == 2  # explain, error
    assert "      shape: every new shape is a new trace: pad or bucket inputs" in out
    assert "    batch['x']   f32[16,3]\n" in out  # the history table
    assert "per-example losses match plain jax.vmap" in out


def test_debugging_retraces_page_shows_the_real_output():
    """Each section the script prints is the page's next ``text`` block, verbatim but for
    durations."""
    out = run_example("retraces.py")
    assert_page_shows(out, "debugging-retraces.md", 9, normalize=untimed)
    assert (
        "traces_used=1, compiles_used=1\nthe same update as the unpadded batch of 20: True" in out
    )


def bucket_order_masked(text):
    """``text`` untimed, with the order in which ``precompile_buckets``' threads finished
    masked: its log lines' progress count and sizes, and the sizes of its traces (which
    ``#n`` is which bucket) where the budgets table and ``explain`` name them."""
    text = untimed(text)
    text = re.sub(
        r"bucket \d of 4 compiled in <time> \(batch axis 1: (16|32|64|128)\)", "<b>", text
    )
    return re.sub(r"([if]32)\[4,(16|32|64|128)\]", r"\1[4,<bucket>]", text)


def test_serving_page_shows_the_real_output():
    """As for the retraces page, but for the order of the start-up compiles; the facts the
    page states are asserted too."""
    out = run_example("serving.py")
    assert_page_shows(out, "serving.md", 9, normalize=bucket_order_masked)
    logged = re.findall(r"bucket \d+ of 4 compiled in .* \(batch axis 1: (\d+)\)", out)
    assert sorted(map(int, logged)) == [16, 32, 64, 128]
    assert "\n4\nfunction " in out  # precompile_buckets' count, then the table
    assert re.search(r"serve +examples/serving.py:\d+ +4/4 +4 +0 .* 4/4 \(", out)
    assert "compiles_used: 4 before the loop, 4 after\nTrue\n" in out
    assert "x has size 200 on axis 1 (shape (4, 200)), and no bucket in sizes holds it" in out
    assert out.count("  batch, axis 1: 40 is no bucket of (16, 32, 64, 128): pad it to 64") == 2
    loss, unpadded = re.findall(r"mean loss (\S+), unpadded (\S+)", out)[0]
    assert loss == unpadded
    assert "100 tokens decoded, to length 103\ntraces_used=4, compiles_used=4" in out


def test_serving_page_ragged_batches_code_runs_as_pasted(capsys):
    """The ragged-batches section's code block, run alone as a reader pastes it, prints
    its text block (the example runs the same code after the page's other sections)."""
    page = (ROOT / "docs" / "serving.md").read_text()
    start = page.index("\n## Ragged batches")
    code = re.search(r"```python\n(.*?)```", page[start:], flags=re.DOTALL).group(1)
    shown = re.search(r"```text\n(.*?)```", page[start:], flags=re.DOTALL).group(1)
    body = code.partition("pad_ragged\n\n")[2]  # the example has the imports at its top
    assert body and body in (ROOT / "examples" / "serving.py").read_text()
    exec(compile(code, "pasted.py", "exec"), {"__name__": "pasted"})
    assert capsys.readouterr().out == shown


def test_porting_page_shows_the_real_output():
    """As for the retraces page: each printed section is the page's next ``text`` block."""
    out = run_example("porting.py")
    assert_page_shows(out, "porting.md", 4)
    assert "same numbers as jax.jit: True" in out
    assert "donated input deleted: True" in out
    assert "  n: 2 -> 3 (static argument value)" in out


def test_models_page_nnx_section_shows_the_real_output():
    """As for the retraces page, within the page's ``## flax.nnx`` section only (the
    page has a section per library)."""
    out = run_example("models_nnx.py")
    assert_page_shows(out, "models.md", 5, section="flax.nnx")
    assert "same weights and statistics as nnx.jit: True" in out
    assert "  graphdef.temperature: 1.0 -> 2.0 (static argument value" in out
    assert "  model.bn.use_running_average: False -> True (static field of BatchNorm)" in out


def test_warm_start_page_shows_the_real_output(tmp_path):
    """As for the retraces page: each run the example prints is the page's next ``text``
    block, but for durations. The warm run traces as the cold one does and compiles
    nothing at its first calls (their compiles ran the executables compiled ahead), with
    the cold run's results bit for bit; the run with another batch logs the miss at the
    trace and at the compile, and computes what a cold run of that batch does."""
    out = run_example("warm_start.py", tmp_path)
    assert_page_shows(out, "warm-start.md", 5, section="A real session", normalize=untimed)
    run_1, run_2, _, run_3, results = out.split("\n=== ")[1:]
    assert "no manifest at signatures.json yet" in run_1
    for step in ("train", "eval"):
        assert f"{step}: traces_used=1, compiles_used=1, cache_loads=0" in run_1
        assert f"{step}: traces_used=1, compiles_used=0, cache_loads=0" in run_2  # answered
    assert "holds 2 signature(s) of 2 object(s)" in run_2
    assert "traced a signature the recorded run did not" not in run_2
    assert "is not the one recorded" not in run_2
    assert run_1.split("\n")[3] == run_2.split("\n")[3] == "eval loss 0.0310"
    assert "run 2 (warm) computed what run 1 (cold) did: True" in results
    # run 3: the miss, said at the trace and at the compile; the calls compile, as cold
    assert "  batch['x']: f32[64,32] -> f32[48,32] (shape)" in run_3
    assert run_3.count("traced a signature the recorded run did not") == 2
    assert run_3.count("the call's compile is not the one recorded for") == 2
    assert run_3.count("its lowered module (what the function computes") == 2
    assert "train: traces_used=1, compiles_used=1, cache_loads=0" in run_3
    assert "run 3 (warm start missed) computed what a cold run of batch 48 does: True" in results
    assert (tmp_path / "signatures.modules").is_dir()


def test_warm_start_page_shows_models_restarting_warm(tmp_path):
    """The page's models section shows the equinox and nnx programs' real runs: the
    second run of each traced its step at its first call, as the first did, and that
    call compiled nothing (its compile ran the executable compiled ahead, loaded from
    JAX's cache), with the first run's results bit for bit; an optax transformation built
    inline is named as not written, and its step still starts warm."""
    out = run_example("warm_start_models.py", tmp_path)
    assert_page_shows(out, "warm-start.md", 7, section="Models: equinox and flax.nnx")
    eqx_1, eqx_2, nnx_1, nnx_2, inline_1, inline_2, results = out.split("\n=== ")[1:]
    for cold, warm in ((eqx_1, eqx_2), (nnx_1, nnx_2), (inline_1, inline_2)):
        assert "traced by the first call\ntraces_used=1, compiles_used=1, cache_loads=0" in cold
        assert "traced by the first call\ntraces_used=1, compiles_used=0, cache_loads=0" in warm
        assert "another thread" not in cold + warm  # nothing of the program ran ahead
        assert cold.split("\n")[-2].partition(";")[0] == warm.split("\n")[-2].partition(";")[0]
    for warm in (eqx_2, nnx_2):
        assert "holds 1 signature(s) of 1 object(s)" in warm
    assert "trace 1's signature is not recorded: optimizer.tx.init holds <function init_fn>" in (
        inline_1
    )
    assert results.splitlines()[1:] == [
        f"{library}: run 2 (warm) computed what run 1 (cold) did: True"
        for library in ("equinox", "nnx", "nnx, optax.adamw built inline")
    ]
    assert {"equinox.json", "nnx.json", "inline.json"} <= {path.name for path in tmp_path.iterdir()}


def test_warm_start_page_shows_a_preempted_run_restarting_warm(tmp_path):
    """The page's preemption section shows a run stopped by SIGTERM (no exit handler
    runs) that left its signature and executable on disk, and its restart running that
    executable at its first call, with the stopped run's first step bit for bit."""
    out = run_example("warm_start_preempted.py", tmp_path)
    assert_page_shows(out, "warm-start.md", 2, section="Preemption, and jobs of several processes")
    stopped, restart = out.split("\n=== ")[1:]
    assert "held 1 signature(s) and 1 executable(s) when SIGTERM was sent" in stopped
    assert "exit status -15: stopped by the signal" in stopped
    assert "signatures.json holds 1 signature(s) of 1 object(s)" in restart
    assert "traced by the first call\ntraces_used=1, compiles_used=0, cache_loads=0" in restart
    assert "its first step computed what run 1's did, bit for bit: True" in restart
