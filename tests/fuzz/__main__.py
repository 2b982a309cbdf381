"""`python -m tests.fuzz`: the kernel fuzzer's command line.

    python -m tests.fuzz --cases 100000            # the long campaign (2 workers)
    python -m tests.fuzz --cases 500 --start 7000  # seeds 7000..7499
    python -m tests.fuzz --seed 1234 --show        # one case: its kernel, what it must do, what it did

Prints the count of every outcome; exits 1 when any case is a bug (and lists their seeds).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from .campaign import campaign
from .runner import run_case


def _numbered(src: str) -> str:
    return "\n".join(f"{i:4d}  {ln}" for i, ln in enumerate(src.splitlines(), 1))


def show(seed: int, hang_seconds: float, family=None, mutation=None, run: bool = True) -> int:
    """Print the case of `seed` and (with `run`) run it in this process."""
    from .generate import generate

    case = generate(seed, family, mutation)
    print(case.describe())
    print(_numbered(case.source))
    for n, s, v in case.params:
        shape = getattr(v, "shape", None)
        print(f"  {n}: {s or 'constexpr'} = {v if shape is None else f'array{list(shape)} {v.dtype}'}")
    if not run:
        return 0
    with tempfile.TemporaryDirectory(prefix="tlx_fuzz_") as d:
        out = run_case(case, d, hang_seconds)
        print(f"outcome: {out.status} ({', '.join(f'{k} {v * 1000:.0f} ms' for k, v in out.times.items())})")
        if out.detail:
            print(out.detail)
    return 1 if out.is_bug else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=int(os.environ.get("TLX_FUZZ_CASES", "1000")),
                    help="how many seeds to run (default $TLX_FUZZ_CASES or 1000)")
    ap.add_argument("--start", type=int, default=int(os.environ.get("TLX_FUZZ_START", "0")),
                    help="the first seed (default $TLX_FUZZ_START or 0)")
    ap.add_argument("--seed", type=int, help="run (or with --show, print and run) this one seed")
    ap.add_argument("--show", action="store_true", help="print the case's kernel and expectation")
    ap.add_argument("--no-run", action="store_true", help="with --show: only print the case")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--hang-seconds", type=float, default=1.0,
                    help="CPU-time limit of each stage (compile, interpret) of a case (default 1 s)")
    ap.add_argument("--wall-seconds", type=float, default=60.0,
                    help="a worker silent this long on one case is killed and the case counts as a hang")
    ap.add_argument("--family", help="only this kernel family")
    ap.add_argument("--mutation", help="only this mutation ('none': only well-formed cases)")
    ap.add_argument("--details", type=int, default=20, help="print the details of this many bugs (default 20)")
    ap.add_argument("--by-mutation", action="store_true", help="also count the outcomes of each mutation")
    args = ap.parse_args(argv)
    if args.seed is not None:
        return show(args.seed, args.hang_seconds, args.family, args.mutation, run=not args.no_run)

    state = {"bugs": 0, "printed": time.perf_counter()}

    def progress(t) -> None:
        """Each new bug as it comes, and the count every 30 s (on stderr)."""
        for b in t.bugs[state["bugs"]:]:
            print(f"  bug: seed {b.seed} ({b.family}, {b.mutation or 'well-formed'}): {b.status}", file=sys.stderr,
                  flush=True)
        state["bugs"] = len(t.bugs)
        if time.perf_counter() - state["printed"] > 30:
            state["printed"] = time.perf_counter()
            print(f"  ... {t.total} cases, {t.seconds:.0f} s, bugs {len(t.bugs)}", file=sys.stderr, flush=True)

    seeds = range(args.start, args.start + args.cases)
    forced = ((f" --family {args.family}" if args.family else "")
              + (f" --mutation {args.mutation}" if args.mutation else ""))
    print(f"python -m tests.fuzz --cases {args.cases} --start {args.start} --jobs {args.jobs}{forced}")
    tally = campaign(seeds, args.jobs, args.hang_seconds, args.wall_seconds, progress=progress,
                     family=args.family, mutation=args.mutation)
    print(tally.summary())
    if args.by_mutation:
        print("by mutation:\n" + tally.mutation_table())
    for out in sorted(tally.bugs, key=lambda o: o.seed)[:args.details]:
        print(f"\n--- seed {out.seed} ({out.family}, {out.mutation or 'well-formed'}): {out.status}")
        print("\n".join(out.detail.splitlines()[-25:]))
    if tally.bugs:
        print("\nbug seeds: " + " ".join(str(o.seed) for o in sorted(tally.bugs, key=lambda o: o.seed)))
        print(f"replay one: python -m tests.fuzz --seed N{forced} --show")
    return 1 if tally.bugs else 0


if __name__ == "__main__":
    sys.exit(main())
