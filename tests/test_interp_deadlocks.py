"""Deadlock reports of the interpreter on two-partition hand-offs: each blocked wait names its
barrier, the phase it waits for and its line, with the barrier's last signal (or who could still
send one), so a missing arrive and a wrong phase read as what they are."""

import numpy as np
import pytest

import tlx
import tlx.language as tl
from tlx.interpreter import DeadlockError

HERE = __file__.rsplit("/", 1)[-1]


@tlx.jit
def handoff(x_ptr, y_ptr, N_PRODUCE: tl.constexpr, N_CONSUME: tl.constexpr, BLOCK: tl.constexpr,
            ARRIVE: tl.constexpr, FIRST_EMPTY_PARITY: tl.constexpr):
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    full = tlx.alloc_barriers(1, arrive_count=1)
    empty = tlx.alloc_barriers(1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):  # producer
            offs = tl.arange(0, BLOCK)
            for i in range(N_PRODUCE):
                tlx.barrier_wait(empty[0], (i & 1) ^ FIRST_EMPTY_PARITY)  # LINE_PRODUCER_WAIT
                tlx.local_store(buf[0], tl.load(x_ptr + i * BLOCK + offs))
                if ARRIVE:
                    tlx.barrier_arrive(full[0])  # LINE_PRODUCER_ARRIVE
        with tlx.async_task(num_warps=4):  # consumer
            offs = tl.arange(0, BLOCK)
            for i in range(N_CONSUME):
                tlx.barrier_wait(full[0], i & 1)  # LINE_CONSUMER_WAIT
                v = tlx.local_load(buf[0])
                tlx.barrier_arrive(empty[0])  # LINE_CONSUMER_ARRIVE
                tl.store(y_ptr + i * BLOCK + offs, v)


def _line(tag: str) -> int:
    src = open(__file__).read().splitlines()
    return next(i + 1 for i, text in enumerate(src) if text.rstrip().endswith("# " + tag))


def _deadlock(**kw) -> str:
    x = np.arange(256, dtype=np.float32)
    y = np.full_like(x, np.nan)
    args = dict(N_PRODUCE=2, N_CONSUME=2, BLOCK=128, ARRIVE=True, FIRST_EMPTY_PARITY=1)
    args.update(kw)
    with pytest.raises(DeadlockError) as e:
        tlx.interpret(handoff, (1,), x, y, **args)
    return str(e.value)


def test_the_correct_handoff_runs():
    x = np.arange(256, dtype=np.float32)
    y = np.full_like(x, np.nan)
    tlx.interpret(handoff, (1,), x, y, N_PRODUCE=2, N_CONSUME=2, BLOCK=128, ARRIVE=True, FIRST_EMPTY_PARITY=1)
    np.testing.assert_array_equal(y, x)


def test_a_missing_arrive_names_the_barrier_the_phase_the_wait_and_that_nothing_signals_it():
    msg = _deadlock(ARRIVE=False)
    wait = _line("LINE_CONSUMER_WAIT")
    assert (f"tlx.barrier_wait at {HERE}:{wait} (iteration 0 of the loop at {HERE}:{wait - 1}) waits for "
            f"phase 0 of %full[0]") in msg, msg
    assert "(wait parity 0)" in msg
    assert (f"%full[0]: nothing in the kernel arrives on it (no barrier_arrive or barrier_expect_bytes names "
            f"%full), so the wait at {HERE}:{wait} can never pass") in msg, msg
    # the producer, blocked on its second wait for a free slot, needs the consumer's arrive
    assert (f"%empty[0]: the wait at {HERE}:{_line('LINE_PRODUCER_WAIT')} needs a signal from tlx.barrier_arrive "
            f"at {HERE}:{_line('LINE_CONSUMER_ARRIVE')}") in msg, msg


def test_a_wrong_first_phase_is_reported_as_a_circular_wait_with_both_lines():
    msg = _deadlock(FIRST_EMPTY_PARITY=0)  # the producer's first wait for a free slot blocks
    pw, ca = _line("LINE_PRODUCER_WAIT"), _line("LINE_CONSUMER_ARRIVE")
    cw, pa = _line("LINE_CONSUMER_WAIT"), _line("LINE_PRODUCER_ARRIVE")
    assert f"tlx.barrier_wait at {HERE}:{pw} (iteration 0 of the loop at {HERE}:{pw - 1}) waits for phase 0 of %empty[0]" in msg
    assert f"%empty[0]: the wait at {HERE}:{pw} needs a signal from tlx.barrier_arrive at {HERE}:{ca}" in msg, msg
    assert f"%full[0]: the wait at {HERE}:{cw} needs a signal from tlx.barrier_arrive at {HERE}:{pa}" in msg, msg
    assert "a circular wait" in msg and "a producer's first wait for a free slot (empty[i]) uses parity 1" in msg


def test_a_wait_for_a_phase_nobody_completes_names_the_last_arrive():
    msg = _deadlock(N_PRODUCE=1)  # the consumer's second wait: the producer has finished
    cw, pa = _line("LINE_CONSUMER_WAIT"), _line("LINE_PRODUCER_ARRIVE")
    assert (f"tlx.barrier_wait at {HERE}:{cw} (iteration 1 of the loop at {HERE}:{cw - 1}) waits for phase 1 of "
            f"%full[0]") in msg and "(wait parity 1)" in msg, msg
    assert (f"its last signal: tlx.barrier_arrive at {HERE}:{pa} (partition default, iteration 0 of the loop at "
            f"{HERE}:{_line('LINE_PRODUCER_WAIT') - 1}), in phase 0") in msg, msg
    assert "partition default: tlx.warp_specialize" in msg and "waits for the worker partitions to finish" in msg
