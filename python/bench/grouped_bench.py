#!/usr/bin/env python3
"""kernel_ops's grouped GEMM (mixture of experts, the contiguous layout)
against ``torch._grouped_mm`` (CUTLASS's grouped GEMM in torch) and a loop
of ``torch.matmul`` per expert, in one process, on the same tensors:
``c[rows of g] = a[rows of g] @ b[g].T``, a ``M x K`` (the tokens, grouped
by expert, ``sizes[g]`` rows for expert ``g`` in order), b ``G x N x K``,
iid N(0, 1), bfloat16 by default, at the issue's problems.

The group sizes are ragged, as a router makes them: expert ``g`` gets a
share of the ``M`` tokens drawn uniformly from [0.5, 1.5) and normalised,
in multiples of 16 rows, the same for every contender.

Contenders per problem, outputs allocated once where the API allows:

* ``kernel_ops.grouped_matmul(a, b, sizes, out=c, check=False)``: the
  sizes stay on the device (int32); ``check=False`` leaves the launch
  asynchronous (``check=True`` waits to check the sizes' sum);
* ``torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)``: the same
  bytes, ``offs`` the groups' int32 end rows on the device; it allocates
  its output, as callers use it. Skipped with a note where this torch or
  GPU has no ``_grouped_mm`` (tried once);
* ``torch.matmul loop``: one ``torch.matmul(a[s:e], b[g].T, out=c[s:e])``
  per non-empty group, the group bounds on the host (what a model without
  a grouped kernel runs).

Timing is ``matmul_bench.py``'s (imported: ``timed_rounds`` and its
``gpu_ms``, ``Smi``): each contender warmed for ``--warmup-ms`` so the GPU
holds its steady clock, then ``--iters`` back-to-back runs each between its
own CUDA events, the median; ``--rounds`` interleaved rounds, the median
over them. ``vs_grouped_mm`` and ``vs_loop`` are the other contender's ms
over this one's (above 1: this one is faster).

Correctness: each output against the float32 product, group by group
(relative Frobenius error over the whole output); over 1e-2 prints FAIL at
once and makes the script exit with status 1 after the CSV is written.

Writes OUT_DIR/grouped_bench.csv (date, device, dtype, groups, m, n, k,
contender, ms, tflops, vs_grouped_mm, vs_loop, rel_err, sm_mhz, power_w)
and prints a Markdown table.

    python3 grouped_bench.py OUT_DIR [--warmup-ms MS] [--iters N] [--rounds N]
                             [--dtype bf16|f16] [--problem GxMxNxK ...]
"""
import argparse
import os
import statistics
import sys

import torch

import kernel_ops
from matmul_bench import DTYPES, start, timed_rounds, timing_args, write_csv

# (experts, tokens M, N, K): the grouped problems.
PROBLEMS = [(64, 16384, 4096, 7168), (64, 8192, 2048, 4096), (8, 16384, 4096, 4096), (8, 4096, 7168, 2048)]
MAX_REL_ERR = 1e-2
OURS, TORCH, LOOP = "kernel_ops.grouped_matmul", "torch._grouped_mm", "torch.matmul loop"


def group_sizes(groups, m, gen):
    """Ragged group sizes summing to ``m`` (a multiple of 16): shares drawn
    uniformly from [0.5, 1.5), rounded down to 16 rows, the rows left over
    dealt 16 at a time to the first groups."""
    w = torch.rand(groups, generator=gen) + 0.5
    sizes = [int(x) // 16 * 16 for x in (w / w.sum() * m).tolist()]
    # Each group lost under 16 rows: fewer than `groups` 16-row pieces left.
    for g in range((m - sum(sizes)) // 16):
        sizes[g] += 16
    return sizes


def grouped_mm_note(a, b, offs):
    """None when ``torch._grouped_mm`` runs here, else why not."""
    if not hasattr(torch, "_grouped_mm"):
        return f"torch {torch.__version__} has no torch._grouped_mm"
    try:
        torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)
        torch.cuda.synchronize()
        return None
    except (RuntimeError, TypeError, ValueError) as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"


def grouped_rel(c, a, b, sizes):
    """Relative Frobenius error of ``c`` against the float32 product, one
    group at a time (the float32 copy of all of ``b`` would not fit)."""
    num = den = 0.0
    start = 0
    for g, s in enumerate(sizes):
        if s:
            want = a[start:start + s].float() @ b[g].float().T
            num += (c[start:start + s].float() - want).pow(2).sum().item()
            den += want.pow(2).sum().item()
        start += s
    return (num / den) ** 0.5 if den else 0.0


def bench_problem(dtype_name, groups, m, n, k, args, smi, seed, notes):
    """The rows `(contender, ms, tflops, vs_grouped_mm, vs_loop, rel_err,
    sm_mhz, power_w)` of one problem."""
    dt = DTYPES[dtype_name]
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(seed)
    sizes = group_sizes(groups, m, gen)
    gdev = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(m, k, device=dev, dtype=dt, generator=gdev)
    b = torch.randn(groups, n, k, device=dev, dtype=dt, generator=gdev)
    sizes_dev = torch.tensor(sizes, device=dev, dtype=torch.int32)
    offs = torch.cumsum(sizes_dev, 0, dtype=torch.int32)
    bounds = []
    start = 0
    for g, s in enumerate(sizes):
        if s:
            bounds.append((g, start, start + s))
        start += s
    c_ours, c_loop = torch.empty(m, n, device=dev, dtype=dt), torch.empty(m, n, device=dev, dtype=dt)

    def loop():
        for g, s, e in bounds:
            torch.matmul(a[s:e], b[g].T, out=c_loop[s:e])
        return c_loop

    run = {
        OURS: lambda: kernel_ops.grouped_matmul(a, b, sizes_dev, out=c_ours, check=False),
        TORCH: lambda: torch._grouped_mm(a, b.transpose(-2, -1), offs=offs),
        LOOP: loop,
    }
    key = f"grouped_mm {dtype_name}"
    if key not in notes:
        notes[key] = grouped_mm_note(a, b, offs)
        if notes[key]:
            print(f"note: torch._grouped_mm does not run here in {dtype_name} ({notes[key]}): no torch._grouped_mm figures\n", flush=True)
    names = [name for name in (OURS, TORCH, LOOP) if name != TORCH or not notes[key]]
    # The sizes are checked once (check=True), then the timed calls skip it.
    kernel_ops.grouped_matmul(a, b, sizes_dev, out=c_ours, check=True)
    errs = {name: grouped_rel(run[name](), a, b, sizes) for name in names}
    samples = {name: [] for name in names}
    timed_rounds([(name, run[name]) for name in names], args, smi, samples)

    def med(name):
        return [statistics.median(col) for col in zip(*samples[name])]

    torch_ms = med(TORCH)[0] if TORCH in names else float("nan")
    loop_ms = med(LOOP)[0]
    rows = []
    for name in names:
        ms, mhz, watts = med(name)
        rows.append((name, ms, 2 * m * n * k / ms / 1e9, torch_ms / ms, loop_ms / ms, errs[name], mhz, watts))
    return rows


def parse_problem(text):
    try:
        g, m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"problem {text!r}: expected GxMxNxK (experts x tokens x N x K), e.g. 8x4096x7168x2048") from None
    if min(g, m, n, k) < 1 or m % 16 or n % 8 or k % 8:
        raise argparse.ArgumentTypeError(f"problem {text!r}: G, M, N, K at least 1, M a multiple of 16 (the groups are), N and K of 8")
    return g, m, n, k


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir", help="where grouped_bench.csv goes")
    timing_args(p)
    p.add_argument("--dtype", choices=tuple(DTYPES), default="bf16", help="element type (default bf16)")
    p.add_argument("--problem", type=parse_problem, nargs="+", metavar="GxMxNxK", help="problems to run (default: the issue's list)")
    args = p.parse_args()
    device, date, smi = start(p, args, "grouped_bench.py")
    rows, bad, notes = [], [], {}
    print(f"{device}, torch {torch.__version__}, {args.dtype}, warm-up {args.warmup_ms:g} ms, {args.iters} iters, {args.rounds} rounds\n")
    print("| G | M | N | K | contender | ms | TFLOP/s | vs _grouped_mm | vs loop | rel. err | SM MHz | W |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    for i, (g, m, n, k) in enumerate(args.problem or PROBLEMS):
        for name, ms, tflops, vs_t, vs_l, err, mhz, watts in bench_problem(args.dtype, g, m, n, k, args, smi, i, notes):
            vs_t_text = "" if vs_t != vs_t else f"{vs_t:.3f}"  # NaN: no torch._grouped_mm
            rows.append((date, device, args.dtype, g, m, n, k, name, f"{ms:.5f}", f"{tflops:.1f}", vs_t_text, f"{vs_l:.3f}", f"{err:.3e}", f"{mhz:.0f}", f"{watts:.0f}"))
            print(f"| {g} | {m} | {n} | {k} | {name} | {ms:.4f} | {tflops:.1f} | {vs_t_text or '-'} | {vs_l:.3f} | {err:.2e} | {mhz:.0f} | {watts:.0f} |", flush=True)
            if not err <= MAX_REL_ERR:
                bad.append(f"{g}x{m}x{n}x{k} {name}: rel. error {err:.3e} > {MAX_REL_ERR:g}")
                print(f"FAIL: {bad[-1]}", file=sys.stderr, flush=True)

    header = ("date", "device", "dtype", "groups", "m", "n", "k", "contender", "ms", "tflops", "vs_grouped_mm", "vs_loop", "rel_err", "sm_mhz", "power_w")
    write_csv(os.path.join(args.out_dir, "grouped_bench.csv"), header, rows, bad, MAX_REL_ERR)


if __name__ == "__main__":
    main()
