"""Blocks as linked lists of ops (compiler/ir/core.py): inserting and removing an op touch only
its neighbours, iteration survives the edits the passes make while they walk, and position
comparisons stay right through any sequence of edits."""

from __future__ import annotations

import random

import pytest

from tlx.compiler.ir import parse_module, print_module, verify_module
from tlx.compiler.ir import types as T
from tlx.compiler.ir.core import Block, BlockOps, Operation, preorder


def _const(k: int) -> Operation:
    return Operation("arith.constant", [], [T.i32], {"value": k})


def _values(blk: Block) -> list:
    return [op.attrs["value"] for op in blk.ops]


def _block(n: int) -> Block:
    blk = Block()
    for k in range(n):
        blk.append(_const(k))
    return blk


def _links_are_consistent(blk: Block) -> None:
    """Forward and backward chains visit the same ops, every op's parent is the block, and the
    length matches."""
    fwd, op = [], blk.first_op
    while op is not None:
        assert op.parent is blk
        fwd.append(op)
        op = op.next_op
    bwd, op = [], blk.last_op
    while op is not None:
        bwd.append(op)
        op = op.prev_op
    assert fwd == bwd[::-1] and len(blk.ops) == len(fwd)


@pytest.fixture
def no_scans(monkeypatch):
    """Make any iteration over a block's ops fail: the edits under test must not look for the op."""
    def scan(self):
        raise AssertionError("the edit scanned the block")
    monkeypatch.setattr(BlockOps, "__iter__", scan)
    monkeypatch.setattr(BlockOps, "__reversed__", scan)


def test_insert_before_after_and_erase_touch_only_the_neighbours(no_scans):
    blk = _block(1000)  # appending: no scan either
    middle = blk.first_op
    for _ in range(500):
        middle = middle.next_op
    before, after = _const(-1), _const(-2)
    blk.insert_before(middle, before)
    blk.insert_after(middle, after)
    assert (before.prev_op.attrs["value"], before.next_op, middle.next_op, after.next_op.attrs["value"]) == \
        (499, middle, after, 501)
    nxt = middle.next_op
    middle.erase()
    assert middle.parent is None and before.next_op is nxt and nxt.prev_op is before
    moved = blk.first_op
    moved.move_after(blk.last_op)
    assert blk.last_op is moved and blk.first_op.attrs["value"] == 1
    assert len(blk.ops) == 1001


def test_edits_keep_order_length_and_indexing():
    blk = _block(6)
    ops = list(blk.ops)
    blk.insert_before(ops[0], _const(10))
    blk.insert_after(ops[5], _const(11))
    blk.insert(3, _const(12))
    ops[2].erase()
    ops[4].move_before(ops[1])
    assert _values(blk) == [10, 0, 4, 1, 12, 3, 5, 11]
    assert [o.attrs["value"] for o in reversed(blk.ops)] == [11, 5, 3, 12, 1, 4, 0, 10]
    assert blk.ops[0].attrs["value"] == 10 and blk.ops[-1].attrs["value"] == 11 and blk.ops[5].attrs["value"] == 3
    assert [o.attrs["value"] for o in blk.ops[1:-1]] == [0, 4, 1, 12, 3, 5]
    assert blk.index(ops[3]) == 5 and ops[3].parent is blk and ops[2].parent is None
    _links_are_consistent(blk)
    with pytest.raises(IndexError):
        blk.ops[8]


def test_an_op_in_a_block_cannot_be_inserted_again_and_anchors_must_be_in_the_block():
    blk, other = _block(2), _block(1)
    with pytest.raises(ValueError, match="already in a block"):
        other.append(blk.first_op)
    with pytest.raises(ValueError, match="not in this block"):
        other.insert_before(blk.first_op, _const(9))
    with pytest.raises(ValueError, match="not in this block"):
        other.remove(blk.first_op)
    _links_are_consistent(blk)
    _links_are_consistent(other)


def test_iteration_survives_erasing_the_current_op():
    blk = _block(10)
    for op in blk.ops:
        if op.attrs["value"] % 2:
            op.erase()
    assert _values(blk) == [0, 2, 4, 6, 8]


def test_ops_inserted_around_the_current_op_while_iterating_are_not_visited():
    # a pass that rewrites every op into two new ones (before it, and after it) while walking
    blk = _block(4)
    seen = []
    for op in blk.ops:
        seen.append(op.attrs["value"])
        blk.insert_before(op, _const(100 + op.attrs["value"]))
        blk.insert_after(op, _const(200 + op.attrs["value"]))
        op.erase()
    assert seen == [0, 1, 2, 3]
    assert _values(blk) == [100, 200, 101, 201, 102, 202, 103, 203]
    _links_are_consistent(blk)


def test_reverse_iteration_survives_erasing_the_current_op():
    blk = _block(5)
    for op in reversed(blk.ops):
        if op.attrs["value"] != 2:
            op.erase()
    assert _values(blk) == [2]


def test_positions_compare_right_through_random_edits():
    rnd = random.Random(7)
    blk = _block(20)
    for step in range(600):  # many insertions at one place exhaust the gaps: the block renumbers
        ops = list(blk.ops)
        anchor = ops[0] if step % 3 == 0 else rnd.choice(ops)
        r = rnd.random()
        if r < 0.45:
            blk.insert_before(anchor, _const(1000 + step))
        elif r < 0.8:
            blk.insert_after(anchor, _const(1000 + step))
        elif len(ops) > 2:
            anchor.erase()
        ops = list(blk.ops)
        a, b = rnd.sample(range(len(ops)), 2)
        assert ops[a].is_before_in_block(ops[b]) == (a < b)
    _links_are_consistent(blk)
    with pytest.raises(ValueError, match="not in one block"):
        blk.first_op.is_before_in_block(_const(0))


NESTED = """
module {
  tt.func @k(%n: i32) {
    %c0 = arith.constant {value = 0} : i32
    %c1 = arith.constant {value = 1} : i32
    scf.for %c0, %n, %c1 {
    ^body(%i: i32):
      %a = arith.addi %i, %c1 : i32
      scf.yield
    }
    %b = arith.addi %c0, %c1 : i32
    tt.return
  }
}
"""


def test_preorder_visits_regions_before_the_rest_and_is_a_snapshot_the_caller_may_edit_under():
    m = parse_module(NESTED)
    assert [op.name for op in preorder(m.body)] == ["arith.constant", "arith.constant", "scf.for", "arith.addi",
                                                     "scf.yield", "arith.addi", "tt.return"]
    for op in m.ops():
        if op.name == "arith.addi":
            op.erase()
    verify_module(m)
    assert "arith.addi" not in print_module(m)
    assert [op.name for op in m.ops()] == ["arith.constant", "arith.constant", "scf.for", "scf.yield", "tt.return"]
