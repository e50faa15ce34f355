#!/usr/bin/env python3
"""How much of the SMs' instruction issue rate the exact dot work takes at NT 8, from a
`qkern bench` results.csv (the GPU backends' "device out" rows).

    python3 scripts/issue-bound.py benches/results/<run>/qbench/results.csv [--sms 132] [--ghz 1.98]

The bit-exact dot products (ggml's AVX2 algorithms, REFERENCE.md) cost a fixed number of
instructions a weight and token, whatever the kernel:
- the 32-element formats (q8_0, q5_1, iq4_nl, and nvfp4's 16-element sub-blocks): each AVX2 float
  lane of 4 products is a dp4a, the exact int-to-float add and the lane's fma: 3 / 4 = 0.75;
- the 256-element formats (K-quants, IQ): each lane of 4 products is a dp4a and the integer
  multiply-add by its sub-block scale; the float chain runs once a super-block: 2 / 4 = 0.5.
The issue peak is one warp instruction a clock per scheduler: SMs x 4 x 32 x clock (H100 and H200:
132 SMs, 1980 MHz, `clocks.max.sm` in a run's env.txt). Decoding, loads and addressing come on
top, so no kernel reaches the peak on this work alone.

For each format and backend it prints the NT 8 / NT 1 time ratio, the share of the issue peak the
exact work takes at the measured NT 8 speed, and the share it would take at the NT 8 speed that
meets `--goal` (1.5: CUDA's goal in issue #5; 1.6: wgpu's in #6).
"""
import argparse
import csv
import sys

EXACT = {"q8_0": 0.75, "q5_1": 0.75, "iq4_nl": 0.75, "nvfp4": 0.75}
DEFAULT_EXACT = 0.5


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv")
    p.add_argument("--sms", type=int, default=132)
    p.add_argument("--ghz", type=float, default=1.98)
    p.add_argument("--goal", type=float, default=1.5)
    a = p.parse_args()
    peak = a.sms * 4 * 32 * a.ghz * 1e9
    rows = {}
    try:
        with open(a.csv, newline="") as f:
            for r in csv.DictReader(f):
                if r["op"] != "matmul" or "device out" not in r["backend"]:
                    continue
                bpw = 8 * float(r["bytes"]) / (int(r["rows"]) * int(r["cols"]))
                rows.setdefault((r["format"], r["backend"]), {})[int(r["tokens"])] = (float(r["ours_gbps"]), bpw)
    except OSError as e:
        sys.exit(f"{a.csv}: {e.strerror}")
    except (KeyError, ValueError) as e:
        sys.exit(f"{a.csv}: not a `qkern bench` results.csv ({type(e).__name__}: {e})")
    if not rows:
        sys.exit(f"{a.csv}: no matmul rows with 'device out' backends")
    print(f"issue peak {peak / 1e12:.2f} T thread instructions/s ({a.sms} SMs, {a.ghz} GHz); goal NT 8 <= {a.goal}x NT 1\n")
    print("| format | backend | bits/w | exact instr per weight-token | NT 1 GB/s | NT 8 GB/s | NT 8 / NT 1 time "
          "| exact work at NT 8, % of peak | % of peak at the goal |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (fmt, be), by_nt in rows.items():
        if 1 not in by_nt or 8 not in by_nt:
            continue
        (g1, bpw), (g8, _) = by_nt[1], by_nt[8]
        c = EXACT.get(fmt, DEFAULT_EXACT)
        share = lambda gbps: 100 * gbps * 1e9 * 8 / bpw * 8 * c / peak  # noqa: E731
        print(f"| {fmt} | {be} | {bpw:.4g} | {c} | {g1:.0f} | {g8:.0f} | {g1 / g8:.2f} "
              f"| {share(g8):.0f} % | {share(g1 / a.goal):.0f} % |")


if __name__ == "__main__":
    main()
