"""The compiler pauses Python's cyclic garbage collector while it runs (compiler/gc_pause.py) and
leaves it as it found it: on after a compile that found it on, off after one that found it off,
on again only when the last of several concurrent compiles ends, and also after a pass raises."""

import gc
import threading

import pytest

from fence_ir import module
from tlx.compiler.gc_pause import gc_paused
from tlx.compiler.ir import parse_module
from tlx.compiler.passes.manager import Pass
from tlx.compiler.pipeline import compile_module

IR = module("""
    %x = tlx.local_alloc : !smem<64x64xf16, mutable>
    tlx.local_store %x, %t""", "%t: tensor<64x64xf16>")


@pytest.fixture(autouse=True)
def restore_gc():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def _compile_with_probe(seen: list, fail: bool = False) -> None:
    def probe(mod, ctx) -> None:
        seen.append(gc.isenabled())
        if fail:
            raise RuntimeError("a pass failed")
    compile_module(parse_module(IR), passes=[Pass("probe", probe)], snapshots=False)


def test_a_compile_runs_with_the_collector_paused_and_switches_it_back_on():
    gc.enable()
    seen: list = []
    _compile_with_probe(seen)
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_the_user_switched_off_stays_off():
    gc.disable()
    seen: list = []
    _compile_with_probe(seen)
    assert seen == [False]
    assert not gc.isenabled()


def test_a_failing_pass_still_switches_the_collector_back_on():
    gc.enable()
    with pytest.raises(RuntimeError, match="a pass failed"):
        _compile_with_probe([], fail=True)
    assert gc.isenabled()


def test_nested_pauses_end_with_the_outermost():
    gc.enable()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_concurrent_compiles_share_one_pause_ended_by_the_last():
    gc.enable()
    inside, release_first, first_done = threading.Event(), threading.Event(), threading.Event()
    states = {}

    def first() -> None:
        with gc_paused():
            inside.set()
            release_first.wait(10)
        states["after first"] = gc.isenabled()
        first_done.set()

    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(10)
    with gc_paused():
        release_first.set()
        assert first_done.wait(10)
        states["inside second"] = gc.isenabled()
    t.join(10)
    assert states == {"after first": False, "inside second": False}
    assert gc.isenabled()
