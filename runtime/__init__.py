"""tlx.runtime: load and launch compiled kernels through numba.cuda's driver layer, with TMA
descriptors, array interop and the compile cache.

Importing it never touches the CUDA driver (numba.cuda and cuda.bindings are imported at the
first load), so it works on machines without a GPU; launching there raises a
`NoCUDADeviceError` (a `TLXRuntimeError`) that says so.

The API the frontend uses (each module's docstring has the details):

* `Launcher(abi, ptx=None, cubin=None, name=None)` (``launcher``) with
  ``.launch(grid, args, stream=None)``, ``.load()`` and ``.fast`` (the native launch and its
  spec, which the frontend calls itself) — one per kernel specialization;
* `describe(arg)` / `pointer_and_dtype(arg)` (``arrays``) — device arrays read without copies;
* `TensorDescriptor` (``tma``) — the host TMA descriptor, re-exported as ``tlx.TensorDescriptor``;
* `host_copy(array, write_back=True)` (``arrays``) — the explicit opt-in for host numpy arrays;
* `set_allocator(fn)` (``scratch``) — where kernels' global scratch comes from (Triton's API);
* `stream_handle(stream)` (``streams``) — torch/CuPy/numba/cuda.core streams or raw handles;
* `Cache`, `CacheEntry`, `default_cache()` (``cache``) — the specialization store;
* `TLXRuntimeError`, `NoCUDADeviceError`, `TMARuleError` — what goes wrong, said plainly.
"""

from .arrays import HostCopy, describe, host_copy, pointer_and_dtype
from .cache import Cache, CacheEntry, CacheInfo, default_cache
from .errors import NoCUDADeviceError, TLXRuntimeError
from .launcher import Launcher
from .scratch import get_allocator, set_allocator
from .streams import stream_handle
from .tma import TensorDescriptor, TMARuleError

__all__ = [
    "Cache", "CacheEntry", "CacheInfo", "HostCopy", "Launcher", "NoCUDADeviceError", "TLXRuntimeError",
    "TMARuleError", "TensorDescriptor", "default_cache", "describe", "get_allocator", "host_copy",
    "pointer_and_dtype", "set_allocator", "stream_handle",
]
