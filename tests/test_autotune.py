"""tlx.autotune / tlx.Config / tlx.heuristics, with Triton's semantics, on the CPU: kernels really
run (the interpreter serves their launch surface, tests/cpu_launch.py) and a fake timer stands in
for the GPU's clock, answering the time each test gives the config it saw launched."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import tlx
import tlx.language as tl
from tlx.autotune import AutotuneError
from cpu_launch import CPULaunch

HERE = Path(__file__).resolve().parent
THIS_FILE = os.path.basename(__file__)


@tlx.jit
def add_block(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + BLOCK, mask=m)


@tlx.jit
def add_two(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EXTRA: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + BLOCK + EXTRA, mask=m)


@tlx.jit
def accumulate(x_ptr, acc_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(acc_ptr + offs, tl.load(acc_ptr + offs, mask=m) + tl.load(x_ptr + offs, mask=m), mask=m)


@tlx.jit
def copy_rows(in_desc, out_ptr, n_rows, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tile = in_desc.load([pid * BLOCK, 0])
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, 16)
    tl.store(out_ptr + rows[:, None] * 16 + cols[None, :], tile, mask=rows[:, None] < n_rows)


def grid(META):
    return (tlx.cdiv(META["n"], META["BLOCK"]),)


class FakeTimer:
    """The autotuner's `do_bench(kernel_call, quantiles)`: runs the call `calls` times, as a real
    timer does, and answers [t, 0.9 t, 1.1 t] with t the time `ms` gives the BLOCK it saw launched."""

    def __init__(self, kernel: CPULaunch, ms, calls: int = 2, after_call=None):
        self.kernel, self.ms, self.calls, self.after_call = kernel, ms, calls, after_call
        self.timed = []

    def __call__(self, kernel_call, quantiles):
        assert tuple(quantiles) == (0.5, 0.2, 0.8)
        first = len(self.kernel.launches)
        for _ in range(self.calls):
            kernel_call()
            if self.after_call is not None:
                self.after_call()
        blocks = {launch["BLOCK"] for launch in self.kernel.launches[first:]}
        assert len(blocks) == 1, blocks
        block = blocks.pop()
        self.timed.append(block)
        t = self.ms[block]
        return [t, 0.9 * t, 1.1 * t]


def never_called(kernel_call, quantiles):
    raise AssertionError("the timer ran")


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test tunes into its own cache folder, with no interpreter or printing switched on."""
    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TLX_INTERPRET", raising=False)
    monkeypatch.delenv("TLX_PRINT_AUTOTUNING", raising=False)


def ints(n, dtype=np.float32, seed=0):
    """Integer-valued data: sums of them are exact in every dtype used here."""
    return np.random.default_rng(seed).integers(-1000, 1000, n).astype(dtype)


def poisoned(like):
    return np.full_like(like, np.nan) if like.dtype.kind == "f" else np.full_like(like, -777)


# ---- choosing --------------------------------------------------------------------------------------

@pytest.mark.parametrize("ms,want", [({32: 3.0, 64: 1.0}, 64), ({32: 1.0, 64: 3.0}, 32)])
def test_every_config_is_timed_and_the_fastest_launches(ms, want):
    k = CPULaunch(add_block)
    configs = [tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64}, num_warps=2)]
    timer = FakeTimer(k, ms)
    tuned = tlx.autotune(configs, key=["n"], do_bench=timer)(k)
    x = ints(200)
    out = poisoned(x)
    tuned[grid](x, out, 200)
    assert sorted(timer.timed) == [32, 64]
    np.testing.assert_array_equal(out.astype(np.float64), x.astype(np.float64) + want)
    best = configs[0] if want == 32 else configs[1]
    assert tuned.best_config is best
    assert tuned.cache == {(200, "float32", "float32"): best}
    assert tuned.configs_timings[best] == (1.0, 0.9, 1.1)
    assert k.launches[-1] == {"BLOCK": want, "num_warps": 4 if want == 32 else 2, "num_ctas": 1, "num_stages": 3}


def test_a_new_key_value_or_dtype_tunes_again_and_a_known_one_does_not():
    k = CPULaunch(add_block)
    timer = FakeTimer(k, {32: 3.0, 64: 1.0})
    tuned = tlx.autotune([tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})], key=["n"], do_bench=timer)(k)
    x = ints(300)
    tuned[grid](x, poisoned(x), 200)
    assert len(timer.timed) == 2
    out = poisoned(x)
    tuned[grid](x, out, 200)  # same key: no timing, the chosen config launches
    assert len(timer.timed) == 2 and k.launches[-1]["BLOCK"] == 64
    np.testing.assert_array_equal(out[:200], x[:200] + 64)
    tuned[grid](x, poisoned(x), 300)  # another n
    assert len(timer.timed) == 4
    xi = ints(200, np.int32)
    out_i = poisoned(xi)
    tuned[grid](xi, out_i, 200)  # another dtype
    assert len(timer.timed) == 6
    np.testing.assert_array_equal(out_i, xi + 64)
    assert set(tuned.cache) == {(200, "float32", "float32"), (300, "float32", "float32"), (200, "int32", "int32")}


def test_the_grid_function_gets_the_arguments_and_the_config():
    k = CPULaunch(add_block)
    metas = []

    def record_grid(META):
        metas.append(dict(META))
        return (tlx.cdiv(META["n"], META["BLOCK"]),)

    tuned = tlx.autotune([tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 128})], key=["n"],
                         do_bench=FakeTimer(k, {32: 2.0, 128: 1.0}, calls=1))(k)
    x = ints(250)
    out = poisoned(x)
    tuned[record_grid](x, out, n=250)
    assert [m["BLOCK"] for m in metas] == [32, 128, 128]  # timed 32, timed 128, the launch of 128
    assert all(set(m) == {"x_ptr", "out_ptr", "n", "BLOCK"} and m["n"] == 250 for m in metas)
    np.testing.assert_array_equal(out, x + 128)  # 2 programs of 128 cover 250: the grid saw BLOCK


def test_a_single_config_or_a_single_survivor_launches_without_timing():
    k = CPULaunch(add_block)
    hooks = []
    one = tlx.Config({"BLOCK": 64}, pre_hook=lambda nargs: hooks.append(nargs["BLOCK"]))
    tuned = tlx.autotune([one], key=["n"], do_bench=never_called)(k)
    x = ints(100)
    out = poisoned(x)
    tuned[grid](x, out, 100)
    np.testing.assert_array_equal(out, x + 64)
    assert hooks == [64] and tuned.best_config is one
    pruned = tlx.autotune([tlx.Config({"BLOCK": 32}), one], key=["n"], do_bench=never_called,
                          prune_configs_by={"early_config_prune": lambda cs, nargs, **kw: cs[1:]})(k)
    out = poisoned(x)
    pruned[grid](x, out, 100)
    np.testing.assert_array_equal(out, x + 64)


# ---- the disk cache ------------------------------------------------------------------------------------

TUNE_SCRIPT = """
import os, sys
sys.path.insert(0, {tests!r})
import numpy as np
import tlx
import tlx.language as tl
from cpu_launch import CPULaunch


@tlx.jit
def add_block(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + BLOCK{edit}, mask=m)


k = CPULaunch(add_block)


def timer(kernel_call, quantiles):
    if os.environ["MODE"] == "serve":
        sys.exit("the timer ran: the choice was not served from the disk cache")
    kernel_call()
    return {{32: 3.0, 64: 1.0, 128: 2.0, 256: 4.0}}[k.launches[-1]["BLOCK"]]


blocks = [int(b) for b in os.environ["BLOCKS"].split(",")]
tuned = tlx.autotune([tlx.Config({{"BLOCK": b}}) for b in blocks], key=["n"], do_bench=timer)(k)
x = np.arange(500, dtype=np.float32)
out = np.full_like(x, np.nan)
tuned[lambda META: (tlx.cdiv(META["n"], META["BLOCK"]),)](x, out, 500)
assert np.array_equal(out, x + tuned.best_config.kwargs["BLOCK"])
print("chose", tuned.best_config.kwargs, "timings", sorted(t[0] for t in tuned.configs_timings.values()))
"""


def _tune_in_a_new_process(tmp_path, mode, blocks="32,64,128", edit=""):
    script = tmp_path / f"tune_{abs(hash(edit))}.py"
    script.write_text(TUNE_SCRIPT.format(tests=str(HERE), edit=edit))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TLX_")}
    env.update(MODE=mode, BLOCKS=blocks, TLX_CACHE_DIR=str(tmp_path / "shared_cache"))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)


def test_the_disk_cache_serves_the_choice_to_another_process(tmp_path):
    tuned = _tune_in_a_new_process(tmp_path, "tune")
    assert tuned.returncode == 0, tuned.stderr
    assert "chose {'BLOCK': 64} timings [1.0, 2.0, 3.0]" in tuned.stdout
    assert len(list((tmp_path / "shared_cache" / "autotune").glob("*.json"))) == 1
    served = _tune_in_a_new_process(tmp_path, "serve")  # its timer exits if called
    assert served.returncode == 0, served.stderr
    assert "chose {'BLOCK': 64} timings [1.0, 2.0, 3.0]" in served.stdout
    # what the choice depends on: another config list, another kernel source -> tuned again
    more = _tune_in_a_new_process(tmp_path, "serve", blocks="32,64,128,256")
    assert more.returncode != 0 and "the timer ran" in more.stderr
    edited = _tune_in_a_new_process(tmp_path, "serve", edit=" + 0")
    assert edited.returncode != 0 and "the timer ran" in edited.stderr


def test_a_corrupt_cache_file_is_tuned_again(tmp_path):
    k = CPULaunch(add_block)
    configs = [tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})]
    x = ints(100)
    tlx.autotune(configs, key=["n"], do_bench=FakeTimer(k, {32: 2.0, 64: 1.0}))(k)[grid](x, poisoned(x), 100)
    (path,) = (tmp_path / "cache" / "autotune").glob("*.json")
    assert tlx.autotune(configs, key=["n"], do_bench=never_called)(k)[grid](x, poisoned(x), 100) is not None
    path.write_text('{"format": 1, "configs": ')  # cut short
    timer = FakeTimer(k, {32: 1.0, 64: 2.0})
    out = poisoned(x)
    tlx.autotune(configs, key=["n"], do_bench=timer)(k)[grid](x, out, 100)
    assert sorted(timer.timed) == [32, 64]
    np.testing.assert_array_equal(out, x + 32)


# ---- hooks ---------------------------------------------------------------------------------------------

def test_config_pre_hook_gets_every_argument_and_the_config_and_sets_block_shapes(monkeypatch):
    """The tutorials' pattern: descriptors made with a dummy block shape, set per config in its
    pre_hook. Compiles run in a pool, each on its own copy of the descriptors."""
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    seen = []

    def set_block_shape(nargs):
        seen.append(sorted(nargs))
        nargs["in_desc"].block_shape = [nargs["BLOCK"], 16]

    k = CPULaunch(copy_rows)
    configs = [tlx.Config({"BLOCK": 16}, pre_hook=set_block_shape),
               tlx.Config({"BLOCK": 32}, num_warps=2, pre_hook=set_block_shape)]
    tuned = tlx.autotune(configs, key=["n_rows"], do_bench=FakeTimer(k, {16: 2.0, 32: 1.0}))(k)
    x = ints(100 * 16).reshape(100, 16)
    desc = tlx.TensorDescriptor(x, [100, 16], [16, 1], [1, 1])
    out = poisoned(x)
    tuned[lambda META: (tlx.cdiv(META["n_rows"], META["BLOCK"]),)](desc, out, n_rows=100)
    np.testing.assert_array_equal(out, x)
    assert seen[0] == sorted(["in_desc", "out_ptr", "n_rows", "BLOCK", "num_warps", "num_ctas", "num_stages"])
    assert {c[2]["BLOCK"]: c[1]["in_desc"] for c in k.compiles} == {16: [16, 16], 32: [32, 16]}
    assert all(c[0].startswith("tlx-autotune") for c in k.compiles)  # compiled in the pool
    assert desc.block_shape == [32, 16]  # the chosen config's hook ran last, on the real descriptor


def test_restore_value_restores_the_argument_after_every_timed_launch():
    x = ints(100)
    for restore, runs in ((["acc_ptr"], 1), (None, 2 * 3 + 1)):
        k = CPULaunch(accumulate)
        acc0 = ints(100, seed=1)
        acc = acc0.copy()
        tuned = tlx.autotune([tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})], key=["n"],
                             restore_value=restore, do_bench=FakeTimer(k, {32: 1.0, 64: 2.0}, calls=3),
                             cache_results=False)(k)  # tune both times: the first choice is on disk
        tuned[grid](x, acc, 100)
        np.testing.assert_array_equal(acc, acc0 + runs * x)  # without restore_value: every launch counted


def test_reset_to_zero_zeroes_the_argument_before_every_timed_launch_and_the_real_one():
    x = ints(100)
    acc = np.full(100, 5.0, np.float32)
    k = CPULaunch(accumulate)

    def after_call():  # each timed launch started from zero
        np.testing.assert_array_equal(acc, x)

    tuned = tlx.autotune([tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})], key=["n"], reset_to_zero=["acc_ptr"],
                         do_bench=FakeTimer(k, {32: 1.0, 64: 2.0}, calls=3, after_call=after_call))(k)
    tuned[grid](x, acc, 100)
    np.testing.assert_array_equal(acc, x)


def test_user_pre_and_post_hooks_replace_the_defaults():
    calls = []
    k = CPULaunch(add_block)
    tuned = tlx.autotune([tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})], key=["n"],
                         reset_to_zero=["out_ptr"],  # replaced by the user's hooks
                         pre_hook=lambda nargs, reset_only=False: calls.append(("pre", reset_only, nargs["BLOCK"])),
                         post_hook=lambda nargs, exception=None: calls.append(("post", exception)),
                         do_bench=FakeTimer(k, {32: 2.0, 64: 1.0}, calls=1))(k)
    x = ints(100)
    out = poisoned(x)
    tuned[grid](x, out, 100)
    assert calls == [("pre", False, 32), ("post", None), ("pre", False, 64), ("post", None), ("pre", True, 64)]
    np.testing.assert_array_equal(out, x + 64)


def test_a_config_that_does_not_compile_counts_as_infinitely_slow():
    k = CPULaunch(add_block)
    posts = []
    bad = tlx.Config({"BLOCK": 48})  # tl.arange needs a power of two
    timer = FakeTimer(k, {32: 5.0, 64: 9.0}, calls=1)
    tuned = tlx.autotune([bad, tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})], key=["n"], do_bench=timer,
                         post_hook=lambda nargs, exception=None: posts.append(type(exception).__name__))(k)
    x = ints(100)
    out = poisoned(x)
    tuned[grid](x, out, 100)
    np.testing.assert_array_equal(out, x + 32)
    assert list(tuned.failures) == [bad] and "power-of-two" in str(tuned.failures[bad])
    assert tuned.configs_timings[bad][0] == float("inf")
    assert sorted(timer.timed) == [32, 64]
    # compiled before timing: the failing config is never launched, the two others get their post_hook
    assert posts == ["NoneType"] * 2


def test_when_no_config_compiles_the_error_lists_each_reason():
    k = CPULaunch(add_block)
    tuned = tlx.autotune([tlx.Config({"BLOCK": 48}), tlx.Config({"BLOCK": 96})], key=["n"], do_bench=never_called)(k)
    x = ints(100)
    with pytest.raises(AutotuneError) as e:
        tuned[grid](x, poisoned(x), 100)
    text = str(e.value)
    assert "none of its 2 configs could run" in text and "BLOCK: 48" in text and "BLOCK: 96" in text
    assert THIS_FILE in text and "power-of-two" in text


# ---- heuristics and pruning ------------------------------------------------------------------------------

def test_heuristics_compute_meta_parameters_from_the_arguments():
    k = CPULaunch(add_block)
    tuned = tlx.heuristics({"BLOCK": lambda args: 1 << (args["n"] - 1).bit_length()})(k)
    x = ints(100)
    out = poisoned(x)
    tuned[grid](x, out, 100)
    np.testing.assert_array_equal(out, x + 128)
    assert tuned.fn is k


def test_heuristics_under_autotune_see_the_config():
    k = CPULaunch(add_two)
    inner = tlx.heuristics({"EXTRA": lambda args: args["BLOCK"] * 10})(k)
    tuned = tlx.autotune([tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})], key=["n"],
                         do_bench=FakeTimer(k, {32: 2.0, 64: 1.0}))(inner)
    x = ints(100)
    out = poisoned(x)
    tuned[grid](x, out, 100)
    np.testing.assert_array_equal(out, x + 64 + 640)
    assert {c[2]["EXTRA"] for c in k.compiles} == {320, 640}  # compiled through the heuristics' warmup


@pytest.mark.parametrize("top_k", [2, 0.5])
def test_prune_configs_by_early_prune_then_perf_model_top_k(top_k):
    k = CPULaunch(add_block)
    seen = {}

    def early(configs, nargs, **kwargs):
        seen["early"] = (len(configs), sorted(nargs), sorted(kwargs))
        return [c for c in configs if c.kwargs["BLOCK"] != 16]

    def perf(**kwargs):
        seen.setdefault("perf", set()).add(tuple(sorted(kwargs)))
        return {32: 3.0, 64: 1.0, 128: 2.0, 256: 5.0}[kwargs["BLOCK"]]

    configs = [tlx.Config({"BLOCK": b}) for b in (16, 32, 64, 128, 256)]
    timer = FakeTimer(k, {64: 2.0, 128: 1.0})
    tuned = tlx.autotune(configs, key=["n"], do_bench=timer,
                         prune_configs_by={"early_config_prune": early, "perf_model": perf, "top_k": top_k})(k)
    x = ints(300)
    out = poisoned(x)
    tuned[grid](x, out, n=300)
    assert sorted(timer.timed) == [64, 128]  # 4 left by early_config_prune, the best 2 by the model
    np.testing.assert_array_equal(out, x + 128)
    assert seen["early"] == (5, ["out_ptr", "x_ptr"], ["n"])  # positional arguments by name, then keywords
    assert seen["perf"] == {("BLOCK", "n", "num_ctas", "num_stages", "num_warps", "out_ptr", "x_ptr")}


# ---- the interpreter, kernel.fn, printing ----------------------------------------------------------------

def test_under_the_interpreter_the_first_config_runs_and_a_warning_says_so_once(monkeypatch):
    monkeypatch.setenv("TLX_INTERPRET", "1")
    tuned = tlx.autotune([tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})], key=["n"],
                         do_bench=never_called)(add_block)
    x = ints(100)
    out = poisoned(x)
    with pytest.warns(RuntimeWarning, match="cannot time it; it uses the first of its 2 configs: BLOCK: 32"):
        tuned[grid](x, out, 100)
    np.testing.assert_array_equal(out, x + 32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x150 = ints(150)
        out = poisoned(x150)
        tuned[grid](x150, out, 150)  # a new key: the first config again, no second warning
    np.testing.assert_array_equal(out, x150 + 32)
    assert tuned.fn is add_block
    out = poisoned(x)
    tuned.fn[grid](x, out, 100, BLOCK=64, num_warps=2)  # the harness's kernel.fn[grid](..., **config)
    np.testing.assert_array_equal(out, x + 64)


def test_tlx_print_autotuning_prints_each_time_and_the_choice(monkeypatch, capsys):
    monkeypatch.setenv("TLX_PRINT_AUTOTUNING", "1")
    k = CPULaunch(add_block)
    tuned = tlx.autotune([tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64}), tlx.Config({"BLOCK": 48})],
                         key=["n"], do_bench=FakeTimer(k, {32: 3.0, 64: 1.5}))(k)
    x = ints(100)
    tuned[grid](x, poisoned(x), 100)
    text = capsys.readouterr().out
    assert "tlx autotune add_block: key (100, 'float32', 'float32'): 3 configs" in text
    assert "3.0000 ms (p20 2.7000, p80 3.3000)  BLOCK: 32," in text
    assert "1.5000 ms (p20 1.3500, p80 1.6500)  BLOCK: 64," in text
    assert "failed     BLOCK: 48," in text and "power-of-two" in text
    assert "chose BLOCK: 64, num_warps: 4" in text


def test_warmup_compiles_every_config_without_launching():
    k = CPULaunch(add_block)
    tuned = tlx.autotune([tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})], key=["n"], do_bench=never_called)(k)
    x = ints(100)
    modules = tuned.warmup(x, poisoned(x), 100, grid=grid)
    assert len(modules) == 2 and not k.launches
    assert sorted(c[2]["BLOCK"] for c in k.compiles) == [32, 64]


# ---- errors ------------------------------------------------------------------------------------------------

def _plain(x_ptr, n):
    pass


CONFIG_ERRORS = {
    "not a dict": (lambda: tlx.Config([("BLOCK", 1)]), "takes a dict of meta-parameters first"),
    "num_warps": (lambda: tlx.Config({}, num_warps=3), "num_warps must be a power of two from 1 to 32"),
    "num_ctas": (lambda: tlx.Config({}, num_ctas=0), "num_ctas must be an int from 1 up"),
    "ctas_per_cga": (lambda: tlx.Config({}, ctas_per_cga=(2, 1)), "must be three positive ints"),
    "pre_hook": (lambda: tlx.Config({}, pre_hook=5), "is not callable"),
    "a typo": (lambda: tlx.Config({}, num_warp=4), "did you mean num_warps"),
    "Triton's own compiler": (lambda: tlx.Config({}, pingpongAutoWS=True), "an option of Triton's own compiler"),
}
CONFIGS = [tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})]
DECORATION_ERRORS = {
    "key": (lambda: tlx.autotune(CONFIGS, key=["m"])(add_block), "key names 'm', which is not a parameter"),
    "key typo": (lambda: tlx.autotune(CONFIGS, key=["nn"])(add_block), "did you mean 'n'"),
    "key string": (lambda: tlx.autotune(CONFIGS, key="n")(add_block), "key must be a list of parameter names"),
    "config param": (lambda: tlx.autotune([tlx.Config({"BLOK": 32})], key=["n"])(add_block),
                     "configs[0] sets 'BLOK', which is not a parameter of kernel add_block"),
    "not a Config": (lambda: tlx.autotune([{"BLOCK": 32}], key=["n"])(add_block), "not a tlx.Config"),
    "reset_to_zero": (lambda: tlx.autotune(CONFIGS, key=["n"], reset_to_zero=["acc"])(add_block),
                      "reset_to_zero names 'acc'"),
    "prune fields": (lambda: tlx.autotune(CONFIGS, key=["n"], prune_configs_by={"topk": 2})(add_block),
                     "give a dict with perf_model, top_k, early_config_prune"),
    "top_k": (lambda: tlx.autotune(CONFIGS, key=["n"], prune_configs_by={"top_k": 0})(add_block),
              "top_k=0 must be an int >= 1"),
    "not a kernel": (lambda: tlx.autotune(CONFIGS, key=["n"])(_plain), "decorates a @tlx.jit kernel"),
    "heuristic name": (lambda: tlx.heuristics({"BLOK": lambda a: 1})(add_block), "values names 'BLOK'"),
    "heuristic value": (lambda: tlx.heuristics({"BLOCK": 5})(add_block), "not a function"),
}


@pytest.mark.parametrize("case", sorted({**CONFIG_ERRORS, **DECORATION_ERRORS}))
def test_bad_arguments_are_a_clear_error_at_the_users_line(case):
    make, message = {**CONFIG_ERRORS, **DECORATION_ERRORS}[case]
    with pytest.raises(AutotuneError) as e:
        make()
    assert isinstance(e.value, tlx.TLXError)
    assert message in str(e.value)
    assert f"{THIS_FILE}:" in str(e.value)  # the Config's line, or the kernel's


def test_bad_launches_are_a_clear_error():
    k = CPULaunch(add_block)
    x = ints(100)
    tuned = tlx.autotune(CONFIGS, key=["n"], do_bench=never_called)(k)
    with pytest.raises(AutotuneError, match="'BLOCK' is set by the autotuner's configs and also passed"):
        tuned[grid](x, poisoned(x), 100, BLOCK=64)
    empty = tlx.autotune(CONFIGS, key=["n"], prune_configs_by={"early_config_prune": lambda c, a, **k: []})(k)
    with pytest.raises(AutotuneError, match="early_config_prune kept no config"):
        empty[grid](x, poisoned(x), 100)
    garbage = tlx.autotune(CONFIGS, key=["n"], do_bench=lambda call, quantiles: "fast")(k)
    with pytest.raises(tlx.TLXError, match="the timer returned 'fast'"):
        garbage[grid](x, poisoned(x), 100)
    scalar = tlx.autotune(CONFIGS, key=["n"], reset_to_zero=["n"], do_bench=FakeTimer(k, {32: 1.0, 64: 2.0}))(k)
    with pytest.raises(AutotuneError, match="reset_to_zero names 'n', a int, which tlx cannot zero"):
        scalar[grid](x, poisoned(x), 100)
    with pytest.raises(AutotuneError, match=r"launch it as add_block\[grid\]"):
        tuned(x, x, 100)


def test_tlx_cache_clear_removes_the_autotuning_choices(tmp_path):
    k = CPULaunch(add_block)
    x = ints(100)
    tlx.autotune(CONFIGS, key=["n"], do_bench=FakeTimer(k, {32: 2.0, 64: 1.0}))(k)[grid](x, poisoned(x), 100)
    store = tmp_path / "cache" / "autotune"
    assert len(list(store.glob("*.json"))) == 1
    env = {**os.environ, "TLX_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.run([sys.executable, "-m", "tlx", "cache", "clear"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"removed 1 autotuning choices from {store}" in p.stdout
    assert not list(store.glob("*.json"))


def test_the_command_line_compiles_the_kernel_under_autotune(tmp_path):
    src = tmp_path / "tuned.py"
    src.write_text(textwrap.dedent("""\
        import tlx
        import tlx.language as tl


        @tlx.autotune([tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})], key=["n"])
        @tlx.jit
        def tuned(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
        """))
    p = subprocess.run([sys.executable, "-m", "tlx", "compile", f"{src}::tuned", "-s", "x_ptr=*fp32", "-s", "n=i32",
                        "-c", "BLOCK=32", "--emit", "ir"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "tt.func" in p.stdout and "@tuned" in p.stdout


def test_the_gpu_tests_autotuned_launches_are_checked_against_their_specs():
    """tests/gpu/test_autotune_gpu.py tunes through kernels.autotune.SpecLaunch: a config with a
    Spec (compiled by CI) passes, one without is refused before it could launch."""
    from kernels import autotune as K
    from runtime_fakes import Tensor

    launch = K.SpecLaunch(K.add_one_after_spinning, K.SPIN)
    x = Tensor(0x10000, (K.SPIN_N,), "float32")
    fast = {**K.SPIN[1].constexprs, **tlx.Config({}, num_warps=8).all_kwargs()}
    launch._check((x, x, K.SPIN_N), fast)
    for bad in ({**fast, "num_warps": 4}, {**fast, "SPIN": 7}):
        with pytest.raises(AssertionError, match="no Spec for"):
            launch._check((x, x, K.SPIN_N), bad)
    with pytest.raises(AssertionError, match="specializes as"):
        launch._check((x, x, K.SPIN_N + 1), fast)  # n no longer a multiple of 16
    # the autotuner's precompile step calls warmup: it compiles the checked config, no GPU needed
    compiled = launch.warmup(x, x, K.SPIN_N, grid=(1,), **fast)
    assert compiled.metadata.num_warps == 8 and "cubin" in compiled.asm


@pytest.mark.parametrize("option", ["minRegAutoWS", "maxRegAutoWS"])
def test_a_register_count_option_not_divisible_by_8_is_a_value_error(option):
    with pytest.raises(ValueError, match="divisible by 8") as e:
        tlx.Config({}, **{option: 153})
    assert isinstance(e.value, tlx.TLXError) and "test_autotune.py" in str(e.value)
    with pytest.raises(AutotuneError, match="Triton's own compiler"):  # a multiple of 8 still has no meaning here
        tlx.Config({}, **{option: 152})
