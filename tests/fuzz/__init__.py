"""The kernel fuzzer (`python -m tests.fuzz`): random TLX kernels, well-formed and deliberately
broken, through every layer — trace, the passes with the IR verifier after each, PTX, ptxas, the
CPU interpreter — each of which must end in success (outputs equal to numpy's within a bound
suited to the dtype, no hazard with the fence passes on), a `TLXCompileError` naming the line of
the generated kernel that holds the mistake, or the interpreter report the mistake causes; never
another exception, a crash, a hang, or PTX that ptxas rejects.

* `case.py` — a case (source, parameters, checks, expected outcome) and the generator state `Gen`;
* `exprs.py` — random element-wise computations with a float64 reference and error bounds;
* `families.py` — the registry of kernel families and their mutations; the families are in
  `fam_compute.py` (element-wise, reductions), `fam_memory.py` (shared-memory views, TMA, cp.async),
  `fam_mma.py` (wgmma chains, tl.dot), `fam_control.py` (if / for / while), `fam_ws.py` (warp
  specialization), with `common.py` for what they share;
* `generate.py` — seed -> case;
* `runner.py` — one case through every layer, and the verdict;
* `campaign.py` — many seeds on worker processes, with hang and crash guards, and the counts.
"""
