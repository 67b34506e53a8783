#!/usr/bin/env python3
"""Norms and softmax at the hidden sizes models use, in one process with
torch, on the same tensors: ``kernel_ops.rms_norm``, ``layer_norm`` and
``softmax`` beside torch's own ops and a copy (``y.copy_(x)``: the rate a
kernel that reads and writes each element once can approach). The widths
of issue 41 (768 .. 16384), 32768 and 65536 (a cluster per row), 1001 and
50257 (not a multiple of 8: peeled 16-byte accesses); bfloat16, float16 and
float32 (``--dtype``, comma-separated); rows such that each problem is 2^25
elements (at least 1 row). Each contender warmed to the steady clock
(``--warmup-ms``, default 300) before each timing, CUDA events around each
of ``--iters`` runs, median; outputs checked against float32 torch (float64
for float32 inputs). GB/s counts bytes read and written.

    python3 norms_bench.py OUT_DIR [--warmup-ms MS] [--iters N] [--dtype bf16,f16,f32] [--widths 768,65536]

Writes OUT_DIR/norms_bench.csv and prints a Markdown table.
"""
import os
import statistics
import sys
import time

import torch

import kernel_ops

WIDTHS = [768, 1024, 2048, 2560, 4096, 5120, 7168, 8192, 12288, 16384, 32768, 65536, 1001, 50257]
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
# rel_err (a Frobenius-norm ratio) accepted per dtype.
TOLERANCE = {"bf16": 2e-2, "f16": 4e-3, "f32": 1e-4}


def gpu_ms(fn, warmup_ms, iters):
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < warmup_ms:
        for _ in range(4):
            fn()
        torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


def rel(got, want):
    return float((got.float() - want.float()).norm() / want.float().norm())


def main():
    args = sys.argv[1:]
    opt = lambda flag, default: type(default)(args[args.index(flag) + 1]) if flag in args else default
    warmup_ms, iters = opt("--warmup-ms", 300.0), opt("--iters", 50)
    dtypes = opt("--dtype", "bf16,f16,f32").split(",")
    widths = [int(w) for w in opt("--widths", ",".join(map(str, WIDTHS))).split(",")]
    flags = {"--warmup-ms", "--iters", "--dtype", "--widths"}
    pos = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] not in flags)]
    out_dir = pos[0] if pos else "."
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    rows = []
    name = torch.cuda.get_device_name()
    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"# {name}, {date}\n")
    print("| op | dtype | width | rows | contender | ms | GB/s | vs torch | rel. err |\n|---|---|---:|---:|---|---:|---:|---:|---:|")
    for dname in dtypes:
        dt = DTYPES[dname]
        ref_dt = torch.float64 if dt == torch.float32 else torch.float32
        for w in widths:
            n = max(1, (1 << 25) // w)
            x = torch.randn(n, w, device="cuda", dtype=dt)
            g = torch.randn(w, device="cuda", dtype=dt)
            b = torch.randn(w, device="cuda", dtype=dt)
            y = torch.empty_like(x)
            nbytes = 2 * x.numel() * x.element_size()
            xf = x.to(ref_dt)
            cases = {
                "rms_norm": ([("kernel_ops", lambda: kernel_ops.rms_norm(x, g, 1e-6, out=y)),
                              ("torch", lambda: torch.nn.functional.rms_norm(x, (w,), g, 1e-6))],
                             torch.nn.functional.rms_norm(xf, (w,), g.to(ref_dt), 1e-6)),
                "layer_norm": ([("kernel_ops", lambda: kernel_ops.layer_norm(x, g, b, 1e-5, out=y)),
                                ("torch", lambda: torch.nn.functional.layer_norm(x, (w,), g, b, 1e-5))],
                               torch.nn.functional.layer_norm(xf, (w,), g.to(ref_dt), b.to(ref_dt), 1e-5)),
                "softmax": ([("kernel_ops", lambda: kernel_ops.softmax(x, out=y)),
                             ("torch", lambda: torch.softmax(x, -1))],
                            torch.softmax(xf, -1)),
            }
            copy_ms = gpu_ms(lambda: y.copy_(x), warmup_ms, iters)
            rows.append(("copy", dname, w, n, "y.copy_(x)", copy_ms, nbytes / copy_ms / 1e6, float("nan"), 0.0))
            print(f"| copy | {dname} | {w} | {n} | y.copy_(x) | {copy_ms:.4f} | {nbytes / copy_ms / 1e6:.0f} | | |", flush=True)
            for op, (contenders, want) in cases.items():
                res = {}
                for cname, fn in contenders:
                    try:
                        err = rel(fn(), want)
                    except Exception as e:  # a width or dtype our op refuses
                        print(f"| {op} | {dname} | {w} | {n} | {cname} | refused | | | {type(e).__name__}: {str(e)[:70]} |")
                        continue
                    res[cname] = (gpu_ms(fn, warmup_ms, iters), err)
                t_torch = res.get("torch", (float("nan"), 0))[0]
                for cname, (ms, err) in res.items():
                    rows.append((op, dname, w, n, cname, ms, nbytes / ms / 1e6, t_torch / ms, err))
                    print(f"| {op} | {dname} | {w} | {n} | {cname} | {ms:.4f} | {nbytes / ms / 1e6:.0f} | {t_torch / ms:.2f} | {err:.1e} |", flush=True)
            del x, g, b, y, xf, cases
    with open(f"{out_dir}/norms_bench.csv", "w") as f:
        f.write("date,device,op,dtype,width,rows,contender,ms,GB_per_s_rw,speedup_vs_torch,rel_err\n")
        for r in rows:
            f.write(f"{date},{name},{r[0]},{r[1]},{r[2]},{r[3]},{r[4]},{r[5]:.5f},{r[6]:.1f},{r[7]:.3f},{r[8]:.2e}\n")
    bad = [r for r in rows if not r[8] < TOLERANCE[r[1]]]
    if bad:
        print(f"FAIL (error): {bad}")
        sys.exit(1)


if __name__ == "__main__":
    main()
