"""Kernels with one mistake each. The line marked `# ERR: <text>` is where the TLXCompileError must
point, and <text> must appear in its message. Used by tests/test_frontend_errors.py."""

import math

import tlx
import tlx.language as tl

SIG_P = {"x_ptr": "*fp32", "n": "i32"}


@tlx.jit
def unknown_tlx_function(x_ptr, n):
    buf = tlx.local_allocate((64, 64), tl.float16, 2)  # ERR: has no attribute 'local_allocate'


@tlx.jit
def wrong_argument_count(x_ptr, n):
    r = tl.arange(0)  # ERR: bad call


@tlx.jit
def shape_mismatch(x_ptr, n):
    r = tl.arange(0, 64) + tl.arange(0, 32)  # ERR: incompatible shapes


@tlx.jit
def dot_dtype_mismatch(x_ptr, n):
    a = tl.zeros((64, 64), dtype=tl.float16)
    b = tl.zeros((64, 64), dtype=tl.float32)
    c = tl.dot(a, b)  # ERR: must have one dtype


@tlx.jit
def runtime_num_buffers(x_ptr, n):
    num = 2
    buf = tlx.local_alloc((64, 64), tl.float16, num)  # ERR: the number of buffers of local_alloc must be a compile-time constant


@tlx.jit
def kernel_returns_value(x_ptr, n):
    return n + 1  # ERR: cannot return a value


@tlx.jit
def uses_break(x_ptr, n):
    for i in range(0, n):
        break  # ERR: `break` is not supported


@tlx.jit
def bad_fence_scope(x_ptr, n):
    tlx.fence("cta")  # ERR: unknown fence scope 'cta'


@tlx.jit
def arange_not_power_of_two(x_ptr, n):
    r = tl.arange(0, 48)  # ERR: power-of-two


@tlx.jit
def carried_value_changes_type(x_ptr, n):
    acc = tl.zeros((64,), dtype=tl.float32)
    for i in range(0, n):
        acc = (acc + 1.0).to(tl.float16)  # ERR: changes type in the loop


@tlx.jit
def undefined_name(x_ptr, n):
    y = n + not_defined_anywhere  # ERR: name 'not_defined_anywhere' is not defined


@tlx.jit
def undefined_function(x_ptr, n):
    y = helper_that_was_never_imported(n)  # ERR: name 'helper_that_was_never_imported' is not defined


@tlx.jit
def name_bound_only_in_a_loop(x_ptr, n):
    for i in range(0, n):
        last = i
    tl.store(x_ptr, last)  # ERR: name 'last' is not defined


@tlx.jit
def if_on_block_tensor(x_ptr, n):
    x = tl.arange(0, 64)
    if x > 3:  # ERR: its truth is ambiguous
        tl.store(x_ptr, 1.0)


@tlx.jit
def constexpr_reassigned_in_loop(x_ptr, n, BLOCK: tl.constexpr):
    for i in range(0, n):  # ERR: compile-time value (constexpr) that the loop body reassigns
        BLOCK = BLOCK * 2


@tlx.jit
def chained_runtime_compare(x_ptr, n):
    r = tl.arange(0, 64)
    m = 0 < r < n  # ERR: chained comparisons


@tlx.jit
def python_function_on_runtime_value(x_ptr, n):
    y = math.sqrt(n)  # ERR: cannot pass runtime values to the Python function 'sqrt'


@tlx.jit
def local_store_dtype_mismatch(x_ptr, n):
    buf = tlx.local_alloc((64,), tl.float16, 1)
    tlx.local_store(buf[0], tl.zeros((64,), dtype=tl.float32))  # ERR: local_store of fp32 into a fp16 buffer


@tlx.jit
def async_dot_small_m(x_ptr, n):
    a = tlx.local_alloc((32, 64), tl.float16, 1)
    b = tlx.local_alloc((64, 64), tl.float16, 1)
    acc = tlx.async_dot(a[0], b[0])  # ERR: multiple of 64


@tlx.jit
def expect_bytes_runtime_size(x_ptr, n):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], n * 2)  # ERR: barrier_expect_bytes' size must be a compile-time constant


@tlx.jit
def tensor_integer_index(x_ptr, n):
    r = tl.arange(0, 64)
    y = r[0]  # ERR: unsupported tensor index


@tlx.jit
def store_to_non_pointer(x_ptr, n):
    tl.store(n, 1)  # ERR: needs a pointer


@tlx.jit
def load_other_without_mask(x_ptr, n):
    x = tl.load(x_ptr, other=0.0)  # ERR: `other` cannot be given without `mask`


@tlx.jit
def async_task_list_form(x_ptr, n):
    with tlx.async_tasks():
        with tlx.async_task([0]):  # ERR: list form
            tl.store(x_ptr, 1.0)


@tlx.jit
def async_tasks_without_default(x_ptr, n):
    with tlx.async_tasks():  # ERR: exactly one async_task('default')
        with tlx.async_task(num_warps=4):
            tl.store(x_ptr, 1.0)


@tlx.jit
def registers_not_multiple_of_8(x_ptr, n):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(x_ptr, 1.0)
        with tlx.async_task(num_warps=4, registers=100):  # ERR: multiple of 8
            tl.store(x_ptr, 2.0)


@tlx.jit
def return_inside_loop(x_ptr, n):
    for i in range(0, n):
        return  # ERR: `return` inside a loop


@tlx.jit
def partition_uses_outer_block_tensor(x_ptr, n):
    vals = tl.load(x_ptr + tl.arange(0, 128))  # loaded: registers another partition cannot read
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(x_ptr + tl.arange(0, 128), vals)
        with tlx.async_task(num_warps=4):
            tl.store(x_ptr + tl.arange(0, 128), vals + 1.0)  # ERR: computed outside it


@tlx.jit
def loop_over_list(x_ptr, n):
    for i in [1, 2, 3]:  # ERR: loop only over range
        tl.store(x_ptr, 1.0)


@tlx.jit
def static_range_runtime_bound(x_ptr, n):
    for i in tl.static_range(0, n):  # ERR: compile-time integers
        tl.store(x_ptr, 1.0)


@tlx.jit
def static_assert_fails(x_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 128 == 0, "BLOCK must be a multiple of 128")  # ERR: static_assert failed: BLOCK must be a multiple of 128


@tlx.jit
def zeros_not_power_of_two(x_ptr, n):
    z = tl.zeros((64, 100), dtype=tl.float32)  # ERR: not a power of two


@tlx.jit
def tensor_memory_on_hopper(x_ptr, n):
    buf = tlx.local_alloc((128, 128), tl.float32, 1, tlx.storage_kind.tmem)  # ERR: only on Blackwell


@tlx.jit
def tma_store_reduce(x_ptr, n):
    desc = tl.make_tensor_descriptor(x_ptr, shape=[n, 64], strides=[64, 1], block_shape=[64, 64])
    buf = tlx.local_alloc((64, 64), tl.float32, 1)
    tlx.async_descriptor_store(desc, buf[0], [0, 0], store_reduce="add")  # ERR: store_reduce='add' (a TMA reduce into global memory) is not supported by tlx yet


@tlx.jit
def uses_lambda(x_ptr, n):
    f = lambda v: v + 1  # ERR: lambdas are not supported


@tlx.jit
def uses_try(x_ptr, n):
    try:  # ERR: 'Try' is not supported
        tl.store(x_ptr, 1.0)
    except Exception:
        pass


@tlx.jit
def branch_type_mismatch(x_ptr, n):
    if n > 0:  # ERR: different types in the then and else branches
        v = tl.zeros((64,), dtype=tl.float32)
    else:
        v = tl.zeros((64,), dtype=tl.int32)
    tl.store(x_ptr + tl.arange(0, 64), v)


@tlx.jit
def wait_on_barrier_array(x_ptr, n):
    bars = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    tlx.barrier_wait(bars, 0)  # ERR: index it: bars[i]


@tlx.jit
def while_compile_time_condition(x_ptr, n, FLAG: tl.constexpr):
    i = 0
    while FLAG:  # ERR: must be a runtime scalar
        i += 1


@tlx.jit
def nested_function_definition(x_ptr, n):
    def helper(v):  # ERR: 'FunctionDef' is not supported
        return v
    tl.store(x_ptr, 1.0)


@tlx.jit
def dot_too_small(x_ptr, n):
    a = tl.zeros((64, 8), dtype=tl.float16)
    b = tl.zeros((8, 64), dtype=tl.float16)
    c = tl.dot(a, b)  # ERR: needs K >= 16


@tlx.jit
def dot_int8_short_k(x_ptr, n):
    a = tl.zeros((16, 16), dtype=tl.int8)
    c = tl.dot(a, a)  # ERR: needs K >= 32 for int8 operands


@tlx.jit
def dot_unknown_precision(x_ptr, n):
    a = tl.zeros((16, 16), dtype=tl.float32)
    c = tl.dot(a, a, input_precision="tf64")  # ERR: input_precision must be one of


@tlx.jit
def dot_accumulator_dtype(x_ptr, n):
    a = tl.zeros((16, 16), dtype=tl.float16)
    c = tl.dot(a, a, tl.zeros((16, 16), dtype=tl.int32))  # ERR: accumulates in fp32 or fp16, not int32


@tlx.jit
def async_dot_register_b(x_ptr, n):
    a = tlx.local_alloc((64, 64), tl.float16, 1)
    b = tl.zeros((64, 64), dtype=tl.float16)
    acc = tlx.async_dot(a[0], b)  # ERR: B operand must be a shared-memory view


@tlx.jit
def _helper_with_constexpr(v, SCALE: tl.constexpr):
    return v * SCALE


@tlx.jit
def constexpr_param_gets_runtime_value(x_ptr, n):
    y = _helper_with_constexpr(n, n)  # ERR: is a tl.constexpr but got


@tlx.jit
def assign_to_element(x_ptr, n):
    r = tl.arange(0, 64)
    r[0] = 1  # ERR: assignment to an element


@tlx.jit
def local_alloc_shape_runtime(x_ptr, n):
    buf = tlx.local_alloc((n, 64), tl.float16, 1)  # ERR: each dimension of the local_alloc shape must be a compile-time constant


@tlx.jit
def branch_returns_on_one_path_in_loop(x_ptr, n):
    for i in range(0, n):
        if i > 2:  # ERR: compute a flag and guard the rest of the loop body
            return


@tlx.jit
def shape_index_past_rank(x_ptr, n):
    buf = tlx.local_alloc((64, 32), tl.float16, 2)
    tl.store(x_ptr, buf.shape[2])  # ERR: index 2 is out of range for the compile-time tuple (64, 32) (length 2)


ERROR_KERNELS = [v for k, v in list(globals().items()) if isinstance(v, tlx.JITFunction) and not k.startswith("_")]
