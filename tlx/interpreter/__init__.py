"""A CPU interpreter for tlx IR with a proxy-hazard and synchronization checker.

`run(module, grid, args, raise_on_hazard=True)` executes a kernel's IR — as traced, or after the
fence passes (before layouts) — with numpy, for every program of the grid. Warp-specialized
partitions run as interleaved coroutines that block on mbarriers and named barriers; async
operations complete late (at the wait that guarantees them); shared memory carries per-byte
proxy and in-flight state, so a missing `fence.proxy.async` or a missing wait is reported with
both source lines (`ProxyHazard`, `SyncHazard`), and a wait that can never complete raises
`DeadlockError` naming the barrier, the phase, the lines and the partitions.

`interpret(kernel, grid, *args, fence_passes=True, raise_on_hazard=True, **constexprs)` (`entry.py`,
public as `tlx.interpret`) traces a `@tlx.jit` kernel for host arguments, runs the pre-layout
passes and then `run`.

See `api.py` for the argument conventions, `hazards.py` for the model, docs/interpreter.md.
"""

from .api import run
from .entry import interpret, prepare_module
from .hazards import DeadlockError, Hazard, ProxyHazard, SyncHazard
from .memory import InterpreterError

__all__ = ["run", "interpret", "prepare_module", "Hazard", "ProxyHazard", "SyncHazard", "DeadlockError",
           "InterpreterError"]
