"""Warp specialization: `with tlx.async_tasks():` holding `with tlx.async_task(...):` blocks.
The tracer turns them into one `tlx.warp_specialize` op (see tlx/tracer.py)."""

from __future__ import annotations

from typing import Any, Optional

from tlx.compiler.errors import TLXCompileError, TLXValueError

from .language.core import builtin, unwrap


class AsyncTasks:
    """The marker `with tlx.async_tasks():` opens."""

    def __init__(self, exclusive: Any = False, no_ending_cluster_sync: Any = False,
                 mbarrier_try_wait_suspend_ns: Any = None, warp_specialize: Any = True):
        self.exclusive = unwrap(exclusive)
        if unwrap(warp_specialize) is not True:
            raise TLXValueError(f"async_tasks(warp_specialize={unwrap(warp_specialize)!r}): an async_tasks region is "
                                "always warp-specialized", hint="leave warp_specialize out (or pass True)")


class AsyncTask:
    """One task of an async_tasks block: the default task (the kernel's `num_warps` warps) or a
    worker of `num_warps` warps, instantiated `replicate` times, optionally with a register budget
    (`registers=` or its other name `num_regs=`: registers per thread, `setmaxnreg`). Replicas of
    the default task after the first run as extra partitions of the kernel's `num_warps` warps."""

    def __init__(self, *args: Any, num_warps: Any = None, num_regs: Any = None, registers: Any = None,
                 replicate: Any = 1, warp_group_start_id: Any = None):
        self.is_default = False
        if args:
            a = unwrap(args[0])
            if isinstance(a, (list, tuple)):
                raise TLXCompileError("the list form async_task([...]) is not supported",
                                      hint='use async_task("default") or async_task(num_warps=..., replicate=...)')
            if a != "default" or len(args) > 1:
                raise TLXCompileError(f"async_task takes 'default' or keyword arguments, got {args!r}")
            self.is_default = True
        regs = unwrap(registers) if registers is not None else unwrap(num_regs)
        if regs is not None:
            if not isinstance(regs, int) or regs % 8:
                raise TLXValueError(f"num_regs must be divisible by 8, got {regs!r}",
                                    hint="setmaxnreg takes a multiple of 8 registers per thread (24 to 256)")
            if not 24 <= regs <= 256:
                raise TLXValueError(f"num_regs must be between 24 and 256, got {regs}",
                                    hint="setmaxnreg takes a multiple of 8 registers per thread (24 to 256)")
        self.registers: Optional[int] = regs
        self.replicate = unwrap(replicate)
        if not isinstance(self.replicate, int) or isinstance(self.replicate, bool) or self.replicate < 1:
            raise TLXValueError(f"replicate must be a positive compile-time integer, got {self.replicate!r}")
        nw = unwrap(num_warps)
        if self.is_default:
            if nw is not None:
                raise TLXCompileError("the default task runs on the kernel's num_warps; do not pass num_warps")
        else:
            if nw is None:
                raise TLXCompileError("a worker async_task needs num_warps=")
            if nw not in (1, 2, 4, 8):
                raise TLXValueError(f"async_task num_warps must be 1, 2, 4 or 8, got {nw!r}")
        self.num_warps = nw
        self.warp_group_start_id = unwrap(warp_group_start_id)

    @property
    def num_regs(self) -> Optional[int]:
        """The register budget per thread (the real TLX's name for `registers`)."""
        return self.registers


@builtin
def async_tasks(exclusive: Any = False, no_ending_cluster_sync: Any = False,
                mbarrier_try_wait_suspend_ns: Any = None, warp_specialize: Any = True) -> AsyncTasks:
    """Open a warp-specialized region (use as `with tlx.async_tasks():`). `warp_specialize=True`
    is accepted as the real TLX's kernels spell it (the region is warp-specialized either way)."""
    return AsyncTasks(exclusive, no_ending_cluster_sync, mbarrier_try_wait_suspend_ns, warp_specialize)


@builtin
def async_task(*args: Any, **kwargs: Any) -> AsyncTask:
    """One task of a warp-specialized region (use as `with tlx.async_task(...):`)."""
    return AsyncTask(*args, **kwargs)
