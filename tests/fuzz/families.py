"""The kernel families: each writes one random kernel through a `Gen` — its source, parameters,
numpy references — and offers mutation sites (`g.mutate(kind)`): a site that fires writes the
broken statement instead and records the outcome it must have. `FAMILIES` maps each family's
name to its generator and the mutations it has sites for.

Values computed by a kernel are tracked as `Val`s whose reference covers every program of the
grid at once (a leading program axis, or the whole padded array a grid of tiles covers), so one
element-wise reference serves all programs.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

from .case import Gen
from .fam_compute import elementwise, reduction
from .fam_control import control
from .fam_memory import bulk, cp_async, smem, tma
from .fam_mma import register_dot, wgmma
from .fam_ws import warp_specialized

FAMILIES: Dict[str, Tuple[Callable[[Gen], None], Tuple[str, ...]]] = {
    "elementwise": (elementwise, ("undefined_name", "arange_not_pow2", "shape_mismatch", "store_out_of_bounds")),
    "reduction": (reduction, ("undefined_name", "reduce_axis", "broadcast_mismatch")),
    "smem": (smem, ("undefined_name", "local_store_shape", "local_store_dtype", "local_store_unindexed",
                    "index_out_of_range", "runtime_index_out_of_range", "slice_out_of_range")),
    "tma": (tma, ("expect_bytes_wrong", "missing_expect", "expect_runtime_size", "tma_buffer_shape", "missing_wait",
                  "wrong_phase", "wait_on_array", "missing_fence", "missing_store_wait", "desc_inner_stride")),
    "cp_async": (cp_async, ("cp_dtype", "cp_other_nonzero", "missing_cp_wait", "wrong_pendings")),
    "bulk": (bulk, ("missing_bulk_wait", "missing_fence", "bulk_size_not_16")),
    "wgmma": (wgmma, ("overwrite_in_flight", "missing_fence", "dot_small_m", "dot_inner", "dot_dtype", "dot_register_b",
                      "missing_dot_wait")),
    "register_dot": (register_dot, ("dot_operand_dtypes", "dot_inner_shape")),
    "control": (control, ("carried_type_change", "static_range_runtime_bound", "constexpr_reassigned", "if_on_block",
                          "branch_type_mismatch", "return_in_loop", "break_in_loop")),
    "warp_specialized": (warp_specialized, ("ws_outer_tensor", "ws_missing_fence", "ws_missing_full_arrive",
                                            "ws_expect_wrong", "ws_wrong_phase", "ws_release_before_wait",
                                            "ws_missing_arrive", "ws_over_arrive")),
}
