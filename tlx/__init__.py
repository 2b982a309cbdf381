"""tlx: write NVIDIA Hopper (sm_90a) kernels in Python, TLX-style.

`import tlx.language as tl` is the Triton core language; `import tlx` holds the TLX extensions
(shared memory, TMA, mbarriers, wgmma, fences, warp specialization), `tlx.jit`, `tlx.compile`, the
host `tlx.TensorDescriptor`, and Triton's host helpers `tlx.autotune`, `tlx.Config`,
`tlx.heuristics`, `tlx.testing.do_bench` and `tlx.cdiv`.
"""

from tlx.compiler.errors import TLXCompileError, TLXError

from . import language, testing
from .autotune import Config, autotune, heuristics
from .barrier import (alloc_barriers, alloc_warp_barrier, barrier_arrive, barrier_expect_bytes, barrier_wait,
                      clc_consumer, clc_create_context, clc_producer, cluster_barrier, fence_mbarrier_init_cluster,
                      named_barrier_arrive, named_barrier_wait)
from .compile import CompiledKernel, compile
from .display import show
from .interpreter import interpret
from .jit import JITFunction, jit
from .language.core import (async_token, buffered_tensor, constexpr, dtype, mbarrier, tensor,
                            tensor_descriptor, tensor_descriptor_ptr)
from .layouts import (amd_mfma_layout, layout, layout_encoding, nv_mma_shared_layout_encoding,
                      padded_shared_layout_encoding, shared_layout_encoding, shared_linear_layout_encoding,
                      swizzled_layout, swizzled_shared_layout_encoding)
from .mem_ops import (allocate_tensor_descriptor, reinterpret_tensor_descriptor, update_tensor_descriptor,
                      async_descriptor_load, async_descriptor_prefetch_tensor, async_descriptor_store,
                      async_descriptor_store_wait, async_load, async_load_commit_group, async_load_wait_group,
                      async_remote_shmem_copy, async_remote_shmem_store, async_store, fence, fence_async_shared, local_alloc, local_gather, local_load,
                      local_reinterpret, local_reshape, local_scatter, local_slice, local_store, local_trans,
                      local_view, make_tensor_descriptor, prefetch, remote_shmem_store, remote_view, storage_kind,
                      subslice)
from .mma_ops import async_dot, async_dot_wait
from .storage_alias import (reuse_group, reuse_group_type, storage_alias_spec, storage_alias_spec_type,
                            storage_alias_spec_type_class)
from .utility import (async_task_replica_id, clock64, cluster_cta_rank, cluster_size_1d, dtype_of, dump_layout,
                      get_fp8_format_name, size_of, thread_id)
from .warp_ops import vote_ballot_sync, warp_redux
from .tasks import async_task, async_tasks
from . import warp_spec
from tlx.runtime import TensorDescriptor, TLXRuntimeError, host_copy, set_allocator

__version__ = "0.1.0"


def cdiv(x: int, y: int) -> int:
    """Ceiling division on the host (also usable inside kernels)."""
    return (x + y - 1) // y


cdiv.__tlx_builtin__ = True  # type: ignore[attr-defined]

__all__ = [
    "TLXError", "TLXCompileError", "jit", "JITFunction", "compile", "CompiledKernel", "cdiv", "language",
    "alloc_barriers", "alloc_warp_barrier", "barrier_arrive", "barrier_expect_bytes", "barrier_wait",
    "named_barrier_arrive", "named_barrier_wait", "cluster_barrier", "fence_mbarrier_init_cluster",
    "async_descriptor_load", "async_descriptor_prefetch_tensor", "async_descriptor_store",
    "async_descriptor_store_wait", "async_load", "async_load_commit_group", "async_load_wait_group", "async_store",
    "fence", "fence_async_shared", "local_alloc", "local_load", "local_reinterpret", "local_reshape", "local_slice",
    "local_store", "local_trans", "local_view", "make_tensor_descriptor", "storage_kind", "async_dot",
    "async_dot_wait", "async_task_replica_id", "clock64", "cluster_cta_rank", "dtype_of", "dump_layout",
    "get_fp8_format_name",
    "size_of", "thread_id", "async_task", "async_tasks", "buffered_tensor", "mbarrier", "tensor",
    "tensor_descriptor", "async_token", "constexpr", "dtype", "interpret", "show", "TensorDescriptor",
    "TLXRuntimeError", "host_copy", "set_allocator", "autotune", "Config", "heuristics", "testing",
    "cluster_size_1d", "clc_create_context", "clc_producer", "clc_consumer", "remote_view", "remote_shmem_store", "async_remote_shmem_store", "async_remote_shmem_copy",
    "local_gather", "local_scatter", "prefetch", "subslice", "vote_ballot_sync", "warp_redux", "layout",
    "amd_mfma_layout", "layout_encoding", "shared_layout_encoding", "swizzled_shared_layout_encoding", "swizzled_layout",
    "nv_mma_shared_layout_encoding", "padded_shared_layout_encoding", "shared_linear_layout_encoding",
    "storage_alias_spec", "storage_alias_spec_type", "storage_alias_spec_type_class", "reuse_group",
    "reuse_group_type", "allocate_tensor_descriptor", "reinterpret_tensor_descriptor", "update_tensor_descriptor",
    "tensor_descriptor_ptr",
]
