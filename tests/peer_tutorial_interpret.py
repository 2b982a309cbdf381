"""Child process of tests/test_peer_tutorials_interpret.py: run one converted FA tutorial's
`attention(q, k, v, sm_scale)` under TLX_INTERPRET=1 on torch CPU tensors and compare it with
softmax(q k^T sm_scale) v in float64.

    TLX_INTERPRET=1 python tests/peer_tutorial_interpret.py CONVERTED_TUTORIALS_DIR STEM Z H N_CTX HEAD_DIM

Uninitialized torch memory is filled with NaN (`torch.utils.deterministic.fill_uninitialized_memory`),
so the output the tutorial allocates with `torch.empty_like` starts poisoned. Prints one line
`PEER-INTERPRET {json}`: the shape, the max abs error, the reference's max abs value, NaN count."""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peer_tutorials  # noqa: E402


def main() -> int:
    tutorials, stem = Path(sys.argv[1]), sys.argv[2]
    z, h, n_ctx, d = (int(x) for x in sys.argv[3:7])
    res = {"tutorial": stem, "shape": [z, h, n_ctx, d], "error": ""}
    t0 = time.perf_counter()
    try:
        import torch

        torch.use_deterministic_algorithms(True)
        torch.utils.deterministic.fill_uninitialized_memory = True  # torch.empty* -> NaN
        peer_tutorials.stand_ins()
        mod = peer_tutorials.load_tutorial(tutorials, stem)
        gen = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn((z, h, n_ctx, d), generator=gen, dtype=torch.float32).to(torch.float16)
                   for _ in range(3))
        sm_scale = 1.0 / d ** 0.5
        out = mod.attention(q, k, v, sm_scale)
        q64, k64, v64 = (t.to(torch.float64) for t in (q, k, v))
        ref = torch.softmax(q64 @ k64.transpose(-1, -2) * sm_scale, dim=-1) @ v64
        got = out.to(torch.float64)
        res.update(max_abs_err=float((got - ref).abs().nan_to_num(float("inf")).max()),
                   ref_max_abs=float(ref.abs().max()), nans=int(got.isnan().sum()), dtype=str(out.dtype),
                   out_shape=list(out.shape))
    except Exception:  # noqa: BLE001
        res["error"] = traceback.format_exc()[-3000:]
    res["seconds"] = round(time.perf_counter() - t0, 1)
    print("PEER-INTERPRET " + json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
