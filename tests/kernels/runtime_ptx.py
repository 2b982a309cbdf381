"""Hand-written PTX kernels for the runtime's GPU tests (tests/gpu/test_runtime_gpu.py): they test
`tlx.runtime.Launcher` alone, with no frontend and no code generator. tests/test_runtime_ptx_kernels.py
assembles each with ptxas for sm_90a and checks its ABI against the PTX entry on the CPU."""

from __future__ import annotations

from typing import Any, Dict

PTX_HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n\n"

# out[i] = x[i] + alpha * y[i] for i < n
PTX_ADD = PTX_HEADER + """
.visible .entry add(.param .u64 x, .param .u64 y, .param .u64 out, .param .u32 n,
                    .param .f32 alpha)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<5>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    ld.param.u32 %r1, [n];
    ld.param.f32 %f1, [alpha];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    mul.wide.u32 %rd4, %r5, 4;
    add.u64 %rd5, %rd1, %rd4;
    add.u64 %rd6, %rd2, %rd4;
    add.u64 %rd7, %rd3, %rd4;
    ld.global.f32 %f2, [%rd5];
    ld.global.f32 %f3, [%rd6];
    fma.rn.f32 %f4, %f1, %f3, %f2;
    st.global.f32 [%rd7], %f4;
DONE:
    ret;
}
"""

# out[ctaid.x] = cluster_ctarank | clusterid.x << 8 | cluster_nctarank << 16
PTX_CLUSTER = PTX_HEADER + """
.visible .entry cluster_ids(.param .u64 out)
{
    .reg .pred %p;
    .reg .b32 %r<7>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    setp.ne.u32 %p, %r2, 0;
    @%p bra DONE;
    mov.u32 %r3, %cluster_ctarank;
    mov.u32 %r4, %clusterid.x;
    mov.u32 %r5, %cluster_nctarank;
    shl.b32 %r4, %r4, 8;
    or.b32 %r3, %r3, %r4;
    shl.b32 %r5, %r5, 16;
    or.b32 %r3, %r3, %r5;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
DONE:
    ret;
}
"""

# One 32x32 fp32 tile per CTA: TMA (no swizzle) into dynamic smem at offset 64 KB (so the
# kernel needs the >48 KB attribute), mbarrier wait, then a generic copy smem -> out[rows, cols]
# for the in-bounds elements. Checks the descriptor's dims/strides order directly.
PTX_TMA_READ = PTX_HEADER + """
.extern .shared .align 1024 .b8 dsmem[];

.visible .entry tma_read(.param .align 64 .b8 desc[128], .param .u64 out, .param .u32 rows,
                         .param .u32 cols)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .reg .f32 %f1;
    mov.b64 %rd1, desc;
    cvta.param.u64 %rd2, %rd1;
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd3, %rd3;
    ld.param.u32 %r1, [rows];
    ld.param.u32 %r2, [cols];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ctaid.y;
    shl.b32 %r6, %r4, 5;
    shl.b32 %r7, %r5, 5;
    mov.u32 %r8, dsmem;
    add.u32 %r9, %r8, 65536;
    setp.eq.u32 %p1, %r3, 0;
    @!%p1 bra INIT_DONE;
    mbarrier.init.shared::cta.b64 [%r8], 1;
    fence.mbarrier_init.release.cluster;
    fence.proxy.async.shared::cta;
INIT_DONE:
    bar.sync 0;
    @!%p1 bra ISSUED;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd4, [%r8], 4096;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r9], [%rd2, {%r6, %r7}], [%r8];
ISSUED:
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r8], 0;
    @!%p2 bra WAIT;
    mov.u32 %r10, 0;
COPY:
    mad.lo.u32 %r11, %r10, 128, %r3;
    shr.u32 %r12, %r11, 5;
    and.b32 %r13, %r11, 31;
    add.u32 %r14, %r7, %r12;
    add.u32 %r15, %r6, %r13;
    setp.ge.u32 %p3, %r14, %r1;
    setp.ge.or.u32 %p3, %r15, %r2, %p3;
    shl.b32 %r16, %r11, 2;
    add.u32 %r16, %r9, %r16;
    ld.shared.f32 %f1, [%r16];
    @%p3 bra SKIP;
    mad.lo.u32 %r17, %r14, %r2, %r15;
    mul.wide.u32 %rd5, %r17, 4;
    add.u64 %rd6, %rd3, %rd5;
    st.global.f32 [%rd6], %f1;
SKIP:
    add.u32 %r10, %r10, 1;
    setp.lt.u32 %p3, %r10, 8;
    @%p3 bra COPY;
    ret;
}
"""

# One 64x64 fp16 tile per CTA: TMA load with 128B swizzle into smem, then TMA store of the
# same tile through the destination descriptor. Identity on the in-bounds region.
PTX_TMA_ROUNDTRIP = PTX_HEADER + """
.extern .shared .align 1024 .b8 dsmem[];

.visible .entry tma_roundtrip(.param .align 64 .b8 src[128], .param .align 64 .b8 dst[128])
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<6>;
    mov.b64 %rd1, src;
    cvta.param.u64 %rd2, %rd1;
    mov.b64 %rd3, dst;
    cvta.param.u64 %rd4, %rd3;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ctaid.y;
    shl.b32 %r6, %r4, 6;
    shl.b32 %r7, %r5, 6;
    mov.u32 %r8, dsmem;
    add.u32 %r9, %r8, 1024;
    setp.eq.u32 %p1, %r3, 0;
    @!%p1 bra DONE;
    mbarrier.init.shared::cta.b64 [%r8], 1;
    fence.mbarrier_init.release.cluster;
    fence.proxy.async.shared::cta;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r8], 8192;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r9], [%rd2, {%r6, %r7}], [%r8];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r8], 0;
    @!%p2 bra WAIT;
    cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd4, {%r6, %r7}], [%r9];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
DONE:
    ret;
}
"""

PTX = {"add": PTX_ADD, "cluster": PTX_CLUSTER, "tma_read": PTX_TMA_READ, "tma_roundtrip": PTX_TMA_ROUNDTRIP}


def abis() -> Dict[str, Any]:
    """The launch ABI of each entry, as the code generator would describe it."""
    from tlx.compiler.abi import KernelABI, ParamABI, TMAEncoding

    def ptr(n, dt):
        return ParamABI(n, "pointer", dt, 8, 8)

    def sc(n, dt, size=4):
        return ParamABI(n, "scalar", dt, size, size)

    def desc(n, enc):
        return ParamABI(n, "tensordesc", enc.dtype, 128, 64, tma=enc)

    read_enc = TMAEncoding("fp32", 4, (32, 32), (32, 32), 0)
    rt_enc = TMAEncoding("fp16", 2, (64, 64), (64, 64), 128)
    return {
        "add": KernelABI("add", (ptr("x", "fp32"), ptr("y", "fp32"), ptr("out", "fp32"),
                                 sc("n", "u32"), sc("alpha", "fp32")), 128, 4, 0),
        "cluster_ids": KernelABI("cluster_ids", (ptr("out", "i32"),), 32, 1, 0, cluster=(2, 1, 1)),
        "tma_read": KernelABI("tma_read", (desc("desc", read_enc), ptr("out", "fp32"),
                                           sc("rows", "u32"), sc("cols", "u32")),
                              128, 4, 65536 + 4096),
        "tma_roundtrip": KernelABI("tma_roundtrip", (desc("src", rt_enc), desc("dst", rt_enc)),
                                   128, 4, 1024 + 8192),
    }


def launcher(entry: str, ptx_key: str, **kw: Any) -> Any:
    """A `tlx.runtime.Launcher` for `entry` of the PTX `ptx_key`."""
    from tlx.runtime import Launcher

    return Launcher(abis()[entry], ptx=PTX[ptx_key], **kw)
