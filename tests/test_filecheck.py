"""Unit tests of tests/filecheck.py: each directive accepts what it should and rejects what it should."""

import pytest

from filecheck import FileCheckError, filecheck

TEXT = """\
func @a
  %0 = alloc
  fence {origin = "user"}
  tma_store %0
func @b
  %1 = alloc
  wgmma %1, %1
end
"""


def ok(checks):
    filecheck(TEXT, checks)


def bad(checks, match=None):
    with pytest.raises(FileCheckError, match=match):
        filecheck(TEXT, checks)


def test_check_in_order():
    ok("// CHECK: alloc\n// CHECK: fence\n// CHECK: wgmma")
    bad("// CHECK: wgmma\n// CHECK: fence", "not found")


def test_check_next():
    ok("// CHECK: %0 = alloc\n// CHECK-NEXT: fence\n// CHECK-NEXT: tma_store")
    bad("// CHECK: %0 = alloc\n// CHECK-NEXT: tma_store", "next line")


def test_check_same():
    ok("// CHECK: fence\n// CHECK-SAME: origin = \"user\"")
    bad("// CHECK: fence\n// CHECK-SAME: tma_store", "after the previous match")


def test_check_not_between_matches_and_at_end():
    ok("// CHECK: alloc\n// CHECK-NOT: wgmma\n// CHECK: tma_store")
    bad("// CHECK: %0 = alloc\n// CHECK-NOT: fence\n// CHECK: tma_store", "between")
    bad("// CHECK: tma_store\n// CHECK-NOT: wgmma", "after the last match")
    ok("// CHECK: wgmma\n// CHECK-NOT: fence")


def test_check_label_confines_the_block():
    ok("// CHECK-LABEL: func @a\n// CHECK: fence\n// CHECK-LABEL: func @b\n// CHECK-NOT: fence\n// CHECK: wgmma")
    # the fence of @a is outside @b's block
    bad("// CHECK-LABEL: func @a\n// CHECK-LABEL: func @b\n// CHECK: fence", "not found")
    # a CHECK-NOT in @a's block does not see @b's lines
    ok("// CHECK-LABEL: func @a\n// CHECK-NOT: wgmma\n// CHECK-LABEL: func @b")
    bad("// CHECK-LABEL: func @c", "label not found")


def test_regex_and_variables():
    ok("// CHECK: %[[BUF:[0-9]+]] = alloc\n// CHECK: tma_store %[[BUF]]")
    bad("// CHECK: %[[BUF:[0-9]+]] = alloc\n// CHECK: wgmma %[[BUF]]")
    ok("// CHECK: {{fence|barrier}} {origin")


def test_whitespace_is_flexible_and_count():
    ok("// CHECK: wgmma     %1,    %1")
    ok("// CHECK-COUNT-2: alloc")
    bad("// CHECK-COUNT-3: alloc", "occurrence 3 of 3")


def test_no_directives_is_an_error():
    bad("nothing here", "no CHECK")
