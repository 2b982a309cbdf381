"""The canonical Hopper TMA-store pattern written for the real TLX: TMA loads into SMEM, wgmma,
the result stored to SMEM from registers, an explicit async-shared fence, a TMA store and its
wait. Our own kernel, in the style of TLX's test_async_dot_local_store."""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def tma_dot_store_kernel(a_desc, b_desc, c_desc, BLOCK: tl.constexpr):
    a_buf = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 1)
    b_buf = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 1)
    c_buf = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], BLOCK * BLOCK * 2)
    tlx.async_descriptor_load(a_desc, a_buf[0], [0, 0], bars[0])
    tlx.barrier_expect_bytes(bars[1], BLOCK * BLOCK * 2)
    tlx.async_descriptor_load(b_desc, b_buf[0], [0, 0], bars[1])
    tlx.barrier_wait(bars[0], 0)
    tlx.barrier_wait(bars[1], 0)
    acc = tlx.async_dot(a_buf[0], b_buf[0])
    acc = tlx.async_dot_wait(0, acc)
    tlx.local_store(c_buf[0], acc.to(tl.float16))
    tlx.fence("async_shared")
    tlx.async_descriptor_store(c_desc, c_buf[0], [0, 0])
    tlx.async_descriptor_store_wait(0)
