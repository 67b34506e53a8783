#!/usr/bin/env python3
"""kernel_ops's FP8 GEMMs against ``torch._scaled_mm`` (cuBLASLt's FP8
path) in one process, on the same bytes and scales: ``c = scales * a @
b.T``, a ``M x K`` and b ``N x K`` e4m3 (iid N(0, 1) quantized), c float16,
at the issue's shapes.

Contenders per shape, kernel_ops's outputs given (``out=``, allocated
once; ``torch._scaled_mm`` allocates its own, as callers use it):

* ``kernel_ops.matmul_fp8``: per-tensor scales, both in one float32
  ``[2]`` array on the GPU (``scale_b=None``: no array made per call);
* ``torch._scaled_mm``: the same bytes, ``scale_a`` and ``scale_b`` 0-d
  float32 tensors, b passed column-major (``b.T``);
* ``kernel_ops.matmul_fp8_rowwise``: a scale per row of a (M) and of b (N);
* ``torch._scaled_mm rowwise``: the same bytes with ``scale_a`` ``M x 1``
  and ``scale_b`` ``1 x N``, where this torch and GPU support it (tried
  once; otherwise a note is printed and the row-wise pair has no torch
  figure: ``ratio_vs_torch`` empty).

Timing is ``matmul_bench.py``'s (imported: ``timed_rounds`` and its ``gpu_ms``,
``Smi``): each contender warmed for ``--warmup-ms`` so the GPU holds its
steady clock, then ``--iters`` back-to-back runs each between its own CUDA
events, the median; ``--rounds`` interleaved rounds, the median over them.
``ratio_vs_torch`` is torch's ms over the contender's (above 1: faster than
torch) for the same scaling (per-tensor or row-wise).

Correctness: each output against the float32 product of the dequantized
inputs (FP8 values are exact in float32; TF32 off), relative Frobenius
error; over 1e-2 prints FAIL at once and makes the script exit with status
1 after the CSV is written.

Writes OUT_DIR/fp8_bench.csv (date, device, scaling, m, n, k, contender,
ms, tflops, ratio_vs_torch, rel_err, sm_mhz, power_w) and prints a Markdown
table.

    python3 fp8_bench.py OUT_DIR [--warmup-ms MS] [--iters N] [--rounds N]
                         [--shape MxNxK ...]
"""
import argparse
import os
import statistics
import sys

import torch

import kernel_ops
from matmul_bench import parse_shape, rel, start, timed_rounds, timing_args, write_csv

SHAPES = [(4096, 8192, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (64, 4096, 4096), (128, 8192, 8192)]
MAX_REL_ERR = 1e-2
E4M3 = torch.float8_e4m3fn
OURS, TORCH = "kernel_ops.matmul_fp8", "torch._scaled_mm"
OURS_RW, TORCH_RW = "kernel_ops.matmul_fp8_rowwise", "torch._scaled_mm rowwise"


def scaled_mm(a8, b8, sa, sb):
    """``torch._scaled_mm`` of ``a8 @ b8.T`` in float16 (b column-major,
    as cuBLASLt's FP8 "TN" layout needs it)."""
    return torch._scaled_mm(a8, b8.T, scale_a=sa, scale_b=sb, out_dtype=torch.float16)


def rowwise_note(a8, b8, sa, sb):
    """None when ``torch._scaled_mm`` takes row-wise scales here, else why
    not (printed once)."""
    try:
        scaled_mm(a8[:16], b8[:16], sa[:16], sb[:, :16])
        torch.cuda.synchronize()
        return None
    except (RuntimeError, TypeError, ValueError) as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"


def bench_shape(m, n, k, args, smi, seed, notes):
    """The rows `(scaling, contender, ms, tflops, ratio, rel_err, sm_mhz,
    power_w)` of one shape."""
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(m, k, device=dev, generator=gen)
    b = torch.randn(n, k, device=dev, generator=gen)
    # Per-tensor: amax / 448 (0-d float32 on the GPU), and both in one [2].
    sa, sb = a.abs().max() / 448, b.abs().max() / 448
    a8, b8 = (a / sa).to(E4M3), (b / sb).to(E4M3)
    pair = torch.stack([sa, sb])
    # Row-wise: M x 1 and 1 x N.
    ra, rb = a.abs().amax(1, keepdim=True) / 448, (b.abs().amax(1) / 448).reshape(1, n)
    ra8, rb8 = (a / ra).to(E4M3), (b / rb.T).to(E4M3)
    del a, b
    c_ours = torch.empty(m, n, device=dev, dtype=torch.float16)
    run = {
        OURS: lambda: kernel_ops.matmul_fp8(a8, b8, pair, out=c_ours),
        TORCH: lambda: scaled_mm(a8, b8, sa, sb),
        OURS_RW: lambda: kernel_ops.matmul_fp8_rowwise(ra8, rb8, ra, rb, out=c_ours),
        TORCH_RW: lambda: scaled_mm(ra8, rb8, ra, rb),
    }
    if "rowwise" not in notes:
        notes["rowwise"] = rowwise_note(ra8, rb8, ra, rb)
        if notes["rowwise"]:
            print(f"note: torch._scaled_mm with row-wise scales is not supported here ({notes['rowwise']}): "
                  "the row-wise kernel_ops figures have no torch anchor\n", flush=True)
    want = (a8.float() @ b8.float().T) * (sa * sb)
    want_rw = (ra8.float() @ rb8.float().T) * ra * rb
    errs = {OURS: rel(run[OURS](), want), TORCH: rel(run[TORCH](), want), OURS_RW: rel(run[OURS_RW](), want_rw)}
    del want
    pairs = [("tensor", OURS, TORCH), ("row", OURS_RW, TORCH_RW if not notes["rowwise"] else None)]
    if pairs[1][2]:
        errs[TORCH_RW] = rel(run[TORCH_RW](), want_rw)
    del want_rw
    samples = {name: [] for name in run}
    contenders = [(name, run[name]) for _, ours, theirs in pairs for name in (ours, theirs) if name]
    timed_rounds(contenders, args, smi, samples)

    def med(name):
        return [statistics.median(col) for col in zip(*samples[name])]

    rows = []
    for scaling, ours, theirs in pairs:
        torch_ms = med(theirs)[0] if theirs else float("nan")
        for name in (ours, theirs):
            if name:
                ms, mhz, watts = med(name)
                rows.append((scaling, name, ms, 2 * m * n * k / ms / 1e9, torch_ms / ms, errs[name], mhz, watts))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir", help="where fp8_bench.csv goes")
    timing_args(p)
    p.add_argument("--shape", type=parse_shape, nargs="+", metavar="MxNxK", help="shapes to run (default: the issue's list)")
    args = p.parse_args()
    if not hasattr(torch, "_scaled_mm"):
        sys.exit(f"fp8_bench.py needs torch._scaled_mm (torch {torch.__version__} has none)")
    device, date, smi = start(p, args, "fp8_bench.py")
    rows, bad, notes = [], [], {}
    print(f"{device}, torch {torch.__version__}, warm-up {args.warmup_ms:g} ms, {args.iters} iters, {args.rounds} rounds\n")
    print("| scales | M | N | K | contender | ms | TFLOP/s | vs torch | rel. err | SM MHz | W |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|", flush=True)
    for i, (m, n, k) in enumerate(args.shape or SHAPES):
        for scaling, name, ms, tflops, ratio, err, mhz, watts in bench_shape(m, n, k, args, smi, i, notes):
            ratio_text = "" if ratio != ratio else f"{ratio:.3f}"  # NaN: no torch anchor
            rows.append((date, device, scaling, m, n, k, name, f"{ms:.5f}", f"{tflops:.1f}", ratio_text, f"{err:.3e}", f"{mhz:.0f}", f"{watts:.0f}"))
            print(f"| {scaling} | {m} | {n} | {k} | {name} | {ms:.4f} | {tflops:.1f} | {ratio_text or '-'} | {err:.2e} | {mhz:.0f} | {watts:.0f} |", flush=True)
            if not err <= MAX_REL_ERR:
                bad.append(f"{m}x{n}x{k} {name}: rel. error {err:.3e} > {MAX_REL_ERR:g}")
                print(f"FAIL: {bad[-1]}", file=sys.stderr, flush=True)

    header = ("date", "device", "scaling", "m", "n", "k", "contender", "ms", "tflops", "ratio_vs_torch", "rel_err", "sm_mhz", "power_w")
    write_csv(os.path.join(args.out_dir, "fp8_bench.csv"), header, rows, bad, MAX_REL_ERR)


if __name__ == "__main__":
    main()
