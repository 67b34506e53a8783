#!/usr/bin/env python3
"""``kernel_ops.matmul`` against ``torch.matmul`` (cuBLAS / cuBLASLt) in one
process, on the same tensors: ``c = a @ b.T`` with a ``M x K`` and b ``N x
K`` iid N(0, 1), float16 and bfloat16, at the issue's shapes (square and
LLM projection shapes, then the decode rows M = 64, 128, 256 against 4096-
to 14336-wide weights).

Contenders per shape and dtype, outputs given (``out=``, allocated once):

* ``kernel_ops.matmul``: the library's own choice of instance (the built-in
  choice for the shape class: the tuning cache is a fresh file,
  ``OUT_DIR/matmul_tune.tsv``, removed at the start, so no winner of an
  earlier run is used);
* ``kernel_ops.matmul tune=True``: the same call, into the same output,
  after one ``kernel_ops.matmul(a, b, tune=True)`` outside the timing (the
  sweep over every instance, its progress bar on stderr when that is a
  terminal; the winner and the TFLOP/s the sweep measured are written to
  ``OUT_DIR/matmul_tune.tsv``);
* ``torch.matmul (cuBLAS)``: ``torch.matmul(a, b.T, out=c)``.

Once a shape is tuned every ``kernel_ops.matmul`` call of it runs the
winner, so each shape is timed in two phases: ``--rounds`` interleaved
rounds of torch and the default call, then the tuning call, then
``--rounds`` interleaved rounds of torch and the tuned call. Each timing
warms the contender for ``--warmup-ms`` (default 300) so the GPU holds its
steady clock, then brackets each of ``--iters`` (default 50) back-to-back
runs with CUDA events and takes the median; a contender's figure is the
median over its rounds. ``ratio_vs_torch`` is torch's ms over the
contender's (above 1: faster than torch), torch's of the same phase (the
torch row itself: the median over both phases). The SM clock
(MHz) and board power (W) are read with ``nvidia-smi`` right after each
timing; their medians over the rounds are written beside the figures.

Correctness: each kernel_ops output is compared with torch's output in
float32 (relative Frobenius error), torch's own with the float32 product
(TF32 off); an error over 1e-2 prints FAIL at once and makes the script exit
with status 1 after the CSV is written.

Writes OUT_DIR/matmul_bench.csv (date, device, dtype, m, n, k, contender,
ms, tflops, ratio_vs_torch, rel_err, sm_mhz, power_w) and prints a Markdown
table.

    python3 matmul_bench.py OUT_DIR [--warmup-ms MS] [--iters N] [--rounds N]
                            [--dtype f16|bf16|both] [--shape MxNxK ...]
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

import torch

import kernel_ops
from torch_bench import gpu_ms, rel  # the timing and error every Python bench here shares

SHAPES = [(4096, 8192, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (8192, 14336, 4096), (16896, 512, 640)] + [
    (m, n, k) for m in (64, 128, 256) for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192))
]
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
MAX_REL_ERR = 1e-2
TORCH = "torch.matmul (cuBLAS)"
OURS = "kernel_ops.matmul"
TUNED = "kernel_ops.matmul tune=True"


class Smi:
    """One ``nvidia-smi`` reading of the SM clock (MHz) and board power (W)
    of torch's current GPU (selected by UUID where torch reports one, else
    the first GPU listed); NaNs when nvidia-smi cannot be run."""

    QUERY = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"]

    def __init__(self):
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        uuid = getattr(props, "uuid", None)
        self.select = [f"--id=GPU-{uuid}"] if uuid is not None else []

    def read(self):
        for select in (self.select, []):
            try:
                out = subprocess.run(self.QUERY + select, capture_output=True, text=True, timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                return float("nan"), float("nan")
            line = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
            try:
                mhz, watts = (float(x) for x in line.split(","))
                return mhz, watts
            except ValueError:
                continue
        return float("nan"), float("nan")


def timed_rounds(contenders, args, smi, samples):
    """`args.rounds` interleaved rounds (every contender once per round, in
    turn): appends `(ms, sm_mhz, power_w)` per timing to `samples[name]`."""
    for _ in range(args.rounds):
        for name, fn in contenders:
            ms = gpu_ms(fn, args.warmup_ms, args.iters)
            samples[name].append((ms,) + smi.read())


def bench_shape(dtype_name, m, n, k, args, smi, seed):
    """The rows `(contender, ms, tflops, ratio, rel_err, sm_mhz, power_w)`
    of one shape and dtype."""
    dt = DTYPES[dtype_name]
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(m, k, device=dev, dtype=dt, generator=gen)
    b = torch.randn(n, k, device=dev, dtype=dt, generator=gen)
    # One output for both kernel_ops contenders (the same buffers, so the
    # tuned instance is the only difference), one for torch.
    c_ours, c_torch = torch.empty(m, n, device=dev, dtype=dt), torch.empty(m, n, device=dev, dtype=dt)
    run = {
        TORCH: lambda: torch.matmul(a, b.T, out=c_torch),
        OURS: lambda: kernel_ops.matmul(a, b, out=c_ours),
        TUNED: lambda: kernel_ops.matmul(a, b, out=c_ours, tune=True),
    }
    errs = {TORCH: rel(run[TORCH](), a.float() @ b.float().T)}
    errs[OURS] = rel(run[OURS](), c_torch)
    # Phase 1: torch and the built-in choice.
    phase1 = {TORCH: [], OURS: []}
    timed_rounds([(TORCH, run[TORCH]), (OURS, run[OURS])], args, smi, phase1)
    # The sweep (or nothing, if this shape is already tuned), outside the timing.
    errs[TUNED] = rel(run[TUNED](), c_torch)
    # Phase 2: torch and the tuned winner.
    phase2 = {TORCH: [], TUNED: []}
    timed_rounds([(TORCH, run[TORCH]), (TUNED, run[TUNED])], args, smi, phase2)

    def med(samples):
        return [statistics.median(col) for col in zip(*samples)]

    rows = []
    # Each kernel_ops figure against torch's of the same phase; torch's own
    # row is the median over both phases.
    for name, phase in ((OURS, phase1), (TUNED, phase2), (TORCH, {TORCH: phase1[TORCH] + phase2[TORCH]})):
        ms, mhz, watts = med(phase[name])
        torch_ms = med(phase[TORCH])[0]
        rows.append((name, ms, 2 * m * n * k / ms / 1e9, torch_ms / ms, errs[name], mhz, watts))
    return rows


def timing_args(p):
    """The timing options every benchmark of this directory takes."""
    p.add_argument("--warmup-ms", type=float, default=300.0, help="warm-up before each timing (default 300)")
    p.add_argument("--iters", type=int, default=50, help="timed runs per timing, median taken (default 50)")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds, median taken (default 2)")


def start(p, args, script):
    """Refuses counts below 1 and a machine without CUDA (as `script`),
    makes `args.out_dir`, turns TF32 off (the float32 references are
    float32) and returns `(device name, UTC date, Smi())`."""
    if args.iters < 1 or args.rounds < 1:
        p.error("--iters and --rounds must be at least 1")
    if not torch.cuda.is_available():
        sys.exit(f"{script} needs a CUDA GPU (torch.cuda.is_available() is False)")
    os.makedirs(args.out_dir, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch.cuda.get_device_name(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), Smi()


def write_csv(path, header, rows, bad, max_rel_err, note=""):
    """Writes `rows` under `header` to `path`, then, when outputs were over
    `max_rel_err` (`bad`), lists them and exits with status 1."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    print(f"\nwrote {path}{note}")
    if bad:
        print(f"FAIL: {len(bad)} output(s) over the relative error {max_rel_err:g}:\n  " + "\n  ".join(bad), file=sys.stderr)
        sys.exit(1)


def parse_shape(text):
    try:
        m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected MxNxK, e.g. 4096x8192x4096") from None
    if min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"shape {text!r}: M, N and K must be at least 1")
    return m, n, k


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir", help="where matmul_bench.csv and the tuning cache matmul_tune.tsv go")
    timing_args(p)
    p.add_argument("--dtype", choices=("f16", "bf16", "both"), default="both")
    p.add_argument("--shape", type=parse_shape, nargs="+", metavar="MxNxK", help="shapes to run (default: the issue's list)")
    args = p.parse_args()
    device, date, smi = start(p, args, "matmul_bench.py")
    # A fresh tuning cache, set before the first kernel_ops.matmul call
    # (each thread reads it then): the default contender must not run a
    # winner tuned by an earlier run.
    cache = os.path.join(args.out_dir, "matmul_tune.tsv")
    if os.path.exists(cache):
        os.remove(cache)
    os.environ["KERNEL_OPS_CACHE"] = cache

    shapes = args.shape or SHAPES
    dtypes = ("f16", "bf16") if args.dtype == "both" else (args.dtype,)
    rows, bad = [], []
    print(f"{device}, torch {torch.__version__}, warm-up {args.warmup_ms:g} ms, {args.iters} iters, {args.rounds} rounds\n")
    print("| dtype | M | N | K | contender | ms | TFLOP/s | vs torch | rel. err | SM MHz | W |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|", flush=True)
    for dtype_name in dtypes:
        for i, (m, n, k) in enumerate(shapes):
            for name, ms, tflops, ratio, err, mhz, watts in bench_shape(dtype_name, m, n, k, args, smi, seed=i):
                rows.append((date, device, dtype_name, m, n, k, name, f"{ms:.5f}", f"{tflops:.1f}", f"{ratio:.3f}", f"{err:.3e}", f"{mhz:.0f}", f"{watts:.0f}"))
                print(f"| {dtype_name} | {m} | {n} | {k} | {name} | {ms:.4f} | {tflops:.1f} | {ratio:.3f} | {err:.2e} | {mhz:.0f} | {watts:.0f} |", flush=True)
                if not err <= MAX_REL_ERR:
                    bad.append(f"{dtype_name} {m}x{n}x{k} {name}: rel. error {err:.3e} > {MAX_REL_ERR:g}")
                    print(f"FAIL: {bad[-1]}", file=sys.stderr, flush=True)

    header = ("date", "device", "dtype", "m", "n", "k", "contender", "ms", "tflops", "ratio_vs_torch", "rel_err", "sm_mhz", "power_w")
    write_csv(os.path.join(args.out_dir, "matmul_bench.csv"), header, rows, bad, MAX_REL_ERR, f" (tuned winners: {cache})")


if __name__ == "__main__":
    main()
