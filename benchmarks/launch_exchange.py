"""The native dispatcher's two ways of reading torch tensors, side by side on the GPU: a four-argument
`kernel[grid](...)` whose dispatcher was made while torch.Tensor had no DLPack C exchange API
(tensors read through is_cuda / data_ptr(), the stream through a Python call) and one made with
it (native_dispatch.c), and one made with the exchange API but no dtype table (each tensor's dtype
read with its getter, as before the table), interleaved, best of 12 rounds of 5000 launches; plus
the once-per-launch TorchFunctionMode check and the three tensors' getters alone. Needs a GPU and torch >= 2.10:
`python benchmarks/launch_exchange.py`."""
import time, torch, tlx
import tlx.launch as tlx_launch

def make():
    @tlx.jit
    def four(x_ptr, y_ptr, z_ptr, n):
        pass
    return four

a, b, c = (torch.empty(4096, device="cuda") for _ in range(3))
g = (1,)
saved = torch.Tensor.__dlpack_c_exchange_api__
torch.Tensor.__dlpack_c_exchange_api__ = None
off = make(); off[g](a, b, c, 4096)
del torch.Tensor.__dlpack_c_exchange_api__
if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
    torch.Tensor.__dlpack_c_exchange_api__ = saved
on = make(); on[g](a, b, c, 4096)
samples = tlx_launch._dtype_samples
tlx_launch._dtype_samples = lambda torch: ()
notable = make(); notable[g](a, b, c, 4096)
tlx_launch._dtype_samples = samples
for name, k in (("off", off), ("on", on), ("no table", notable)):
    print(name, k._dispatch.native.stats())
mode = torch._C._is_torch_function_mode_enabled
fo, fn, ft = off[g], on[g], notable[g]
rows = {"getters": lambda: fo(a, b, c, 4096), "exchange": lambda: fn(a, b, c, 4096),
        "exchange, dtype getter": lambda: ft(a, b, c, 4096),
        "dtype getter x3": lambda: (a.dtype, b.dtype, c.dtype),
        "mode check": mode, "getters x3": lambda: (a.is_cuda, a.data_ptr(), b.is_cuda, b.data_ptr(), c.is_cuda, c.data_ptr())}
best = {k: 1e9 for k in rows}
n = 5000
for r in range(12):
    for k, f in rows.items():
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        torch.cuda.synchronize()
        best[k] = min(best[k], (time.perf_counter() - t0) / n * 1e6)
for k, v in best.items():
    print(f"{k:24s} {v:6.2f} us")
