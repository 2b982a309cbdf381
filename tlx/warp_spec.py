"""`tlx.warp_spec`, the module path TLX kernels import warp-specialization helpers from
(`from tlx.warp_spec import get_bufidx_phase`): the ring-buffer helper, and the task markers
(`tlx/tasks.py`) under their usual names."""

from __future__ import annotations

from . import language as tl
from .jit import jit
from .tasks import AsyncTask, AsyncTasks, async_task, async_tasks

__all__ = ["get_bufidx_phase", "AsyncTask", "AsyncTasks", "async_task", "async_tasks"]


@jit
def get_bufidx_phase(accum_cnt, NUM_BUFFERS: tl.constexpr):
    """The slot and mbarrier phase of the `accum_cnt`-th use of a ring of `NUM_BUFFERS` buffers:
    `(accum_cnt % NUM_BUFFERS, (accum_cnt // NUM_BUFFERS) & 1)`; the phase flips on every pass
    around the ring. A @tlx.jit helper: call it from kernels."""
    buf_idx = accum_cnt % NUM_BUFFERS
    phase = (accum_cnt // NUM_BUFFERS) & 1
    return buf_idx, phase
