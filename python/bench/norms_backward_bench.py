#!/usr/bin/env python3
"""The norms' backward beside torch's, in one process on the same tensors:
``kernel_ops.rms_norm_backward`` / ``layer_norm_backward`` (dx, dgamma and,
for layer norm, dbeta from x, gamma and dy) against torch autograd's
backward of ``torch.nn.functional.rms_norm`` / ``layer_norm`` (the graph
built once, ``torch.autograd.grad`` timed with ``retain_graph``), and a
copy of dy (``copy_``: each byte read and written once, the scale of
bandwidth-bound kernels). Rows such that each problem is 2^25 elements.
Each contender warmed ``--warmup-ms`` (default 200) before its timing, CUDA
events around each of ``--iters`` runs, median. dx checked against torch's
in float32 (relative Frobenius error). GB/s counts x and dy read and dx
written (3 bytes-per-element passes).

    python3 norms_backward_bench.py OUT_DIR [--warmup-ms MS] [--iters N] [--dtype bf16,f32] [--widths 768,16384]

Writes OUT_DIR/norms_backward_bench.csv and prints a Markdown table.
"""
import os
import statistics
import sys
import time

import torch

import kernel_ops

WIDTHS = [768, 1024, 2048, 4096, 5120, 8192, 12288, 16384]
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def timed(fn, warmup_ms, iters):
    end = time.time() + warmup_ms / 1000
    while time.time() < end:
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def rel(a, b):
    a, b = a.float(), b.float()
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b).clamp_min(1e-30)).item()


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    out_dir = args[0]

    def opt(name, default):
        return args[args.index(name) + 1] if name in args else default

    warmup, iters = float(opt("--warmup-ms", "200")), int(opt("--iters", "30"))
    dtypes = opt("--dtype", "bf16,f32").split(",")
    widths = [int(w) for w in opt("--widths", ",".join(map(str, WIDTHS))).split(",")]
    os.makedirs(out_dir, exist_ok=True)
    dev = torch.device("cuda")
    rows_out = []
    print(f"# {torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    print("| op | dtype | width | rows | contender | ms | GB/s | vs torch | dx rel. err |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|")
    for dn in dtypes:
        dt = DTYPES[dn]
        for w in widths:
            if dn == "f32" and w > 8192:
                continue  # the f32 backward takes rows of up to 8192 columns
            rows = max(1, (1 << 25) // w)
            g = torch.Generator(device=dev).manual_seed(w)
            x = torch.randn(rows, w, device=dev, dtype=dt, generator=g)
            dy = torch.randn(rows, w, device=dev, dtype=dt, generator=g)
            gamma = (1 + 0.1 * torch.randn(w, device=dev, dtype=torch.float32, generator=g)).to(dt)
            beta = (0.1 * torch.randn(w, device=dev, dtype=torch.float32, generator=g)).to(dt)
            nbytes = 3 * x.numel() * x.element_size()
            cp = torch.empty_like(dy)
            ms = timed(lambda: cp.copy_(dy), warmup, iters)
            rows_out.append(("copy", dn, w, rows, "dy.copy_", ms, 2 * x.numel() * x.element_size() / ms / 1e6, float("nan"), float("nan")))
            print(f"| copy | {dn} | {w} | {rows} | dy.copy_ | {ms:.4f} | {rows_out[-1][6]:.0f} | | |")
            for op in ["rms_norm", "layer_norm"]:
                xt, gt, bt = x.clone().requires_grad_(), gamma.clone().requires_grad_(), beta.clone().requires_grad_()
                if op == "rms_norm":
                    y = torch.nn.functional.rms_norm(xt, (w,), gt, eps=1e-6)
                    inputs = (xt, gt)
                    ours = lambda: kernel_ops.rms_norm_backward(x, gamma, dy, 1e-6)
                else:
                    y = torch.nn.functional.layer_norm(xt, (w,), gt, bt, eps=1e-5)
                    inputs = (xt, gt, bt)
                    ours = lambda: kernel_ops.layer_norm_backward(x, gamma, dy, 1e-5)
                theirs = lambda: torch.autograd.grad(y, inputs, dy, retain_graph=True)
                want = theirs()[0]
                got = ours()[0]
                err = rel(got, want)
                t_ours = timed(ours, warmup, iters)
                t_torch = timed(theirs, warmup, iters)
                for who, t in (("kernel_ops", t_ours), ("torch autograd", t_torch)):
                    gbs = nbytes / t / 1e6
                    ratio = t_torch / t
                    rows_out.append((op, dn, w, rows, who, t, gbs, ratio, err))
                    print(f"| {op} | {dn} | {w} | {rows} | {who} | {t:.4f} | {gbs:.0f} | {ratio:.2f} | {err:.1e} |")
    with open(os.path.join(out_dir, "norms_backward_bench.csv"), "w") as f:
        f.write("device,op,dtype,width,rows,contender,ms,GB_per_s,speedup_vs_torch,dx_rel_err\n")
        name = torch.cuda.get_device_name()
        for r in rows_out:
            f.write(f"{name},{r[0]},{r[1]},{r[2]},{r[3]},{r[4]},{r[5]:.5f},{r[6]:.1f},{r[7]:.3f},{r[8]:.2e}\n")


if __name__ == "__main__":
    main()
