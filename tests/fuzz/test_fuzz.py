"""The kernel fuzzer in CI: a bounded campaign (TLX_FUZZ_CASES seeds from TLX_FUZZ_START, by
default 200 from 0: 25-45 s on two busy cores) must end with no bug; and the fuzzer's own checks
are shown to fail where they must (a wrong output, an error at another line, a hang, a crash,
an unexpected hazard). The long campaign is `python -m tests.fuzz --cases 100000`."""

from __future__ import annotations

import os

import numpy as np
import pytest

from .campaign import Pool, campaign
from .case import Case, Check, Expect
from .families import FAMILIES
from .generate import generate
from .runner import run_case

CI_CASES = int(os.environ.get("TLX_FUZZ_CASES", "200"))
CI_START = int(os.environ.get("TLX_FUZZ_START", "0"))


def test_bounded_campaign_finds_no_bug():
    tally = campaign(range(CI_START, CI_START + CI_CASES), jobs=2)
    print(tally.summary())
    details = "\n\n".join(f"seed {o.seed} ({o.family}, {o.mutation}): {o.status}\n{o.detail}" for o in tally.bugs)
    assert not tally.bugs, f"{tally.summary()}\n\n{details}\n(replay one: python -m tests.fuzz --seed N --show)"
    assert tally.total == CI_CASES


def test_a_seed_is_one_kernel():
    a, b = generate(1234), generate(1234)
    assert a.source == b.source and a.expect == b.expect and a.grid == b.grid
    assert generate(1235).source != a.source


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_mutation_of_every_family_has_sites(family):
    """Each listed mutation fires for some seed of its family (else it is dead code)."""
    for mutation in FAMILIES[family][1]:
        assert any(generate(seed, family, mutation).mutation == mutation for seed in range(60)), mutation


def _case(tmp_path, src_body, params, expect=Expect(), checks=(), grid=(1,), seed=0):
    src = "import tlx\nimport tlx.language as tl\n\n\n@tlx.jit\ndef kernel(" + ", ".join(
        n + ("" if s else ": tl.constexpr") for n, s, _ in params) + "):\n" + src_body
    return Case(seed, "test", None, src, list(params), grid, 4, expect, list(checks))


COPY = "    offs = tl.arange(0, 64)\n    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2.0)\n"


def test_the_runner_reports_a_wrong_output(tmp_path):
    x = np.arange(64, dtype=np.float32)
    y = np.full(64, np.nan, np.float32)
    case = _case(tmp_path, COPY, [("x_ptr", "*fp32", x), ("y_ptr", "*fp32", y)],
                 checks=[Check("y_ptr", x.astype(np.float64) * 3.0)])
    out = run_case(case, str(tmp_path))
    assert out.status == "wrong_result", out.detail
    good = _case(tmp_path, COPY, [("x_ptr", "*fp32", x), ("y_ptr", "*fp32", np.full(64, np.nan, np.float32))],
                 checks=[Check("y_ptr", x.astype(np.float64) * 2.0)])
    assert run_case(good, str(tmp_path)).status == "ok"


def test_a_result_past_the_output_types_range_is_expected_as_inf(tmp_path):
    # campaign seed 1047327: an fp16 sum of 205006 is stored as inf, as it must be; the oracle
    # compared it with the float64 value. A finite wrong value there is still wrong.
    x = np.full(64, 4096.0, np.float32)
    big = x.astype(np.float64) * 32.0  # 131072: past fp16's 65504
    for k, want in (("32.0", "ok"), ("0.5", "wrong_result")):
        body = f"    offs = tl.arange(0, 64)\n    tl.store(y_ptr + offs, (tl.load(x_ptr + offs) * {k}).to(tl.float16))\n"
        case = _case(tmp_path, body, [("x_ptr", "*fp32", x), ("y_ptr", "*fp16", np.full(64, np.nan, np.float16))],
                     checks=[Check("y_ptr", big)])
        out = run_case(case, str(tmp_path))
        assert out.status == want, (k, out.detail)


def test_an_expected_line_may_be_any_of_two():
    # campaign seed 1042146: a store-wait hazard's second access is whichever of an if/else's two
    # stores the next iteration runs
    from .runner import _lines_match

    assert _lines_match((25, 24), (25, (22, 24))) and _lines_match((25, 22), (25, (22, 24)))
    assert not _lines_match((25, 23), (25, (22, 24))) and not _lines_match((26, 24), (25, (22, 24)))


def test_the_runner_reports_a_poison_left_or_overwritten(tmp_path):
    x = np.arange(64, dtype=np.float32)
    ref = x.astype(np.float64) * 2.0
    ref[5] = np.nan  # this element must keep its poison, but the kernel writes it
    case = _case(tmp_path, COPY, [("x_ptr", "*fp32", x), ("y_ptr", "*fp32", np.full(64, np.nan, np.float32))],
                 checks=[Check("y_ptr", ref)])
    out = run_case(case, str(tmp_path))
    assert out.status == "wrong_result" and "1 poison overwritten" in out.detail, out.detail


def test_the_runner_reports_an_error_at_another_line(tmp_path):
    body = "    offs = tl.arange(0, 48)\n"
    params = [("x_ptr", "*fp32", np.zeros(4, np.float32))]
    assert run_case(_case(tmp_path, body, params, Expect("compile_error", line=7, text="power-of-two")),
                    str(tmp_path)).status == "compile_error"
    out = run_case(_case(tmp_path, body, params, Expect("compile_error", line=8, text="power-of-two")), str(tmp_path))
    assert out.status == "unexpected_outcome" and "line 8" in out.detail
    out = run_case(_case(tmp_path, body, params), str(tmp_path))  # a well-formed case may not fail to compile
    assert out.status == "rejected_well_formed"


def test_the_runner_reports_a_hazard_in_a_well_formed_kernel(tmp_path):
    # the fence passes off and no user fence: the interpreter sees the raw hazard
    body = ("    r = tl.arange(0, 64)\n    buf = tlx.local_alloc((64, 64), tl.float16, 1)\n"
            "    tlx.local_store(buf[0], tl.load(x_ptr + r[:, None] * 64 + r[None, :]))\n"
            "    tlx.async_descriptor_store(y_desc, buf[0], [0, 0])\n    tlx.async_descriptor_store_wait(0)\n")
    import tlx

    x = np.ones((64, 64), np.float16)
    y = np.zeros((64, 64), np.float16)
    params = [("x_ptr", "*fp16", x),
              ("y_desc", "tensordesc<fp16[64, 64]>", tlx.TensorDescriptor(y, [64, 64], [64, 1], [64, 64]))]
    case = _case(tmp_path, body, params, checks=[Check("y_desc", np.ones((64, 64)))])
    case.fence_passes = False
    out = run_case(case, str(tmp_path))
    assert out.status == "hazard_in_well_formed" and "ProxyHazard" in out.detail, out.detail
    case.expect = Expect("hazard", kinds=("raw",), lines=(9, 10))
    assert run_case(case, str(tmp_path)).status == "hazard"


def test_a_stage_past_its_cpu_time_is_a_hang(tmp_path):
    body = "    i = 0\n    while i < n:\n        i += 1\n    tl.store(x_ptr, i)\n"
    case = _case(tmp_path, body, [("x_ptr", "*i32", np.zeros(1, np.int32)), ("n", "i32", 10 ** 8)])
    out = run_case(case, str(tmp_path), hang_seconds=0.3)
    assert out.status == "hang", out.detail


def test_a_worker_that_dies_is_a_crash_and_is_replaced(monkeypatch):
    from . import campaign as camp

    real = camp.run_seed

    def dying(seed, *args):
        if seed == 1:
            os._exit(3)
        return real(seed, *args)

    monkeypatch.setattr(camp, "run_seed", dying)
    pool = Pool(jobs=1, hang_seconds=2.0, wall_seconds=60.0, recycle=100, family="control", mutation="none")
    try:
        outs = {o.seed: o for o in pool.run([0, 1, 2])}
    finally:
        pool.close()
    assert outs[1].status == "crash" and "exit code 3" in outs[1].detail
    assert outs[0].status == "ok" and outs[2].status == "ok"


def test_a_crash_inside_a_builtin_is_an_internal_error_even_at_a_line(tmp_path, monkeypatch):
    # the tracer reports any exception of a builtin at the kernel's line (a TLXCompileError);
    # one that wraps something other than a TypeError is the compiler's fault, not the kernel's
    from tlx.language import semantic

    def broken_arange(start, end):
        raise KeyError("an internal table is missing an entry")

    monkeypatch.setattr(semantic, "arange", broken_arange)
    x = np.arange(64, dtype=np.float32)
    case = _case(tmp_path, COPY, [("x_ptr", "*fp32", x), ("y_ptr", "*fp32", x.copy())])
    out = run_case(case, str(tmp_path))
    assert out.status == "internal_error" and "wrapping KeyError" in out.detail, out.detail
