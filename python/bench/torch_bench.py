#!/usr/bin/env python3
"""kernel_ops from Python on the GPU, in one process with torch, on the same
tensors: host overhead per call (a tiny RMS norm through the torch custom
op, through the plain DLPack call, and torch's own op), and our matmul,
RMS norm and attention against torch's (cuBLAS, torch RMS norm, SDPA
cuDNN), each warmed to the steady clock (`--warmup-ms`, default 300) before
each timing, CUDA events, median of many runs, in `--rounds` (default 1)
interleaved rounds whose median is reported, outputs checked. Writes
OUT_DIR/python_bench.csv.

    python3 torch_bench.py OUT_DIR [--warmup-ms MS] [--rounds N]
"""
import math
import os
import statistics
import sys
import time

import torch

import kernel_ops
import kernel_ops.torch_ops  # noqa: F401


def host_us_per_call(fn, calls=200, reps=15):
    """Median host time of one call: `calls` calls queued back to back,
    median over `reps` loops. Only the calls are timed: the device is
    synchronized between loops, outside the timed span, so the launch queue
    never fills and the GPU's own time per tiny kernel does not enter."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def _noop_py(x):
    return None


def _floor_op():
    """An operator that does nothing, registered as the ops of
    ``kernel_ops.torch_ops`` are (``Library.define``/``impl``, a Python
    implementation): what torch's dispatcher alone costs per call."""
    lib = torch.library.Library("kernel_ops_floor", "DEF")
    lib.define("noop(Tensor x) -> ()")
    lib.impl("noop", lambda x: None, "CUDA")
    return lib, torch.ops.kernel_ops_floor.noop


def gpu_ms(fn, warmup_ms=300, iters=50):
    """Median GPU milliseconds of one `fn()`, timed as the Rust benchmarks
    time (`kernel_host::time_at_steady_clock`): `warmup_ms` of runs so the
    GPU holds its steady clock, then `iters` runs queued back to back, each
    between its own pair of CUDA events, one synchronization at the end (so
    the host's launch time overlaps the previous run, as in a program)."""
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < warmup_ms:
        for _ in range(4):
            fn()
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in events:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in events)


def rel(got, want):
    return float((got.float() - want.float()).norm() / want.float().norm())


def timed(contenders, warmup_ms, rounds):
    """Median over `rounds` interleaved rounds (every contender once per
    round, in turn) of each contender's `gpu_ms`."""
    times = {name: [] for name, _ in contenders}
    for _ in range(rounds):
        for name, fn in contenders:
            times[name].append(gpu_ms(fn, warmup_ms))
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    args = sys.argv[1:]
    opt = lambda flag, default: type(default)(args[args.index(flag) + 1]) if flag in args else default
    warmup_ms, rounds = opt("--warmup-ms", 300.0), opt("--rounds", 1)
    out = args[0] if args and not args[0].startswith("--") else "."
    os.makedirs(out, exist_ok=True)
    dev = torch.device("cuda")
    rows = []

    # Host overhead: a tiny op.
    x = torch.randn(8, 1024, device=dev, dtype=torch.float16)
    g = torch.randn(1024, device=dev, dtype=torch.float16)
    y = torch.empty_like(x)
    raw_stream = torch.cuda.current_stream().cuda_stream
    _floor_lib, floor_noop = _floor_op()
    over = [
        ("kernel_ops.rms_norm (plain DLPack call, out= given)", lambda: kernel_ops.rms_norm(x, g, out=y)),
        ("kernel_ops.rms_norm (plain DLPack call, allocating)", lambda: kernel_ops.rms_norm(x, g)),
        ("torch.ops.kernel_ops.rms_norm (custom op)", lambda: torch.ops.kernel_ops.rms_norm(x, g, 1e-6)),
        ("torch.nn.functional.rms_norm (torch's own)", lambda: torch.nn.functional.rms_norm(x, (1024,), g, 1e-6)),
        # Where the plain call's time goes: its native part alone (the
        # arrays read, checked and launched from Rust), and the stream
        # lookup the Python wrapper adds.
        ("kernel_ops._native.rms_norm (native part alone, out= and stream given)", lambda: kernel_ops._native.rms_norm(x, g, y, 1e-6, raw_stream)),
        ("torch._C._cuda_getCurrentRawStream (stream lookup alone)", lambda: torch._C._cuda_getCurrentRawStream(0)),
        # Floors on this host: a Python call of an empty function, torch's
        # dispatcher into an empty Python implementation, one allocation,
        # and one launch through torch (its own one-kernel op).
        ("floor: an empty Python function", lambda: _noop_py(x)),
        ("floor: an empty torch operator (Library.define/impl, Python impl)", lambda: floor_noop(x)),
        ("floor: torch.empty_like (one allocation)", lambda: torch.empty_like(x)),
        ("floor: y.add_(0) (one torch kernel launch)", lambda: y.add_(0)),
    ]
    print("| call | host us per call |\n|---|---:|")
    for name, fn in over:
        us = host_us_per_call(fn)
        rows.append(("overhead", name, "8x1024 f16", us, float("nan"), float("nan")))
        print(f"| {name} | {us:.2f} |")

    # Same-process comparisons.
    print("\n| op | contender | shape | ms | TFLOP/s or GB/s | rel. error |\n|---|---|---|---:|---:|---:|")
    m = n = k = 4096
    a = torch.randn(m, k, device=dev, dtype=torch.float16)
    b = torch.randn(n, k, device=dev, dtype=torch.float16)
    ref = a.float() @ b.float().T
    c = torch.empty(m, n, device=dev, dtype=torch.float16)
    # Outputs given (`out=`), as the Rust benchmarks' are allocated once.
    contenders = (("kernel_ops.matmul", lambda: kernel_ops.matmul(a, b, out=c)), ("torch.matmul (cuBLAS)", lambda: torch.matmul(a, b.T, out=c)))
    errs = {name: rel(fn(), ref) for name, fn in contenders}
    mss = timed(contenders, warmup_ms, rounds)
    for name, _ in contenders:
        err, ms = errs[name], mss[name]
        rows.append(("matmul", name, f"{m}x{n}x{k}", ms, 2 * m * n * k / ms / 1e9, err))
        print(f"| matmul | {name} | {m}x{n}x{k} | {ms:.4f} | {2 * m * n * k / ms / 1e9:.1f} TFLOP/s | {err:.2e} |")
    # norms_bench's problem at 4096 columns: 2^25 elements.
    x = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)
    g = torch.randn(4096, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    ref = torch.nn.functional.rms_norm(x.float(), (4096,), g.float(), 1e-6)
    nbytes = 2 * x.numel() * 2
    contenders = (("kernel_ops.rms_norm", lambda: kernel_ops.rms_norm(x, g, out=y)), ("torch rms_norm", lambda: torch.nn.functional.rms_norm(x, (4096,), g, 1e-6)))
    errs = {name: rel(fn(), ref) for name, fn in contenders}
    mss = timed(contenders, warmup_ms, rounds)
    for name, _ in contenders:
        err, ms = errs[name], mss[name]
        rows.append(("rms_norm", name, "8192x4096 bf16", ms, nbytes / ms / 1e6, err))
        print(f"| rms_norm | {name} | 8192x4096 bf16 | {ms:.4f} | {nbytes / ms / 1e6:.0f} GB/s | {err:.2e} |")
    q = torch.randn(4, 4096, 16, 128, device=dev, dtype=torch.float16)
    kk, vv = torch.randn_like(q), torch.randn_like(q)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, kk, vv))
    ref = torch.nn.functional.scaled_dot_product_attention(qt.float(), kt.float(), vt.float()).transpose(1, 2)
    flops = 4 * 4 * 16 * 4096 * 4096 * 128
    from torch.nn.attention import SDPBackend, sdpa_kernel
    contenders = (("kernel_ops.attention", lambda: kernel_ops.attention(q, kk, vv)[0]), ("torch SDPA (cuDNN)", lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt).transpose(1, 2)))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        errs = {name: rel(fn(), ref) for name, fn in contenders}
        mss = timed(contenders, warmup_ms, rounds)
    for name, _ in contenders:
        err, ms = errs[name], mss[name]
        rows.append(("attention", name, "4x4096x16x128 f16", ms, flops / ms / 1e9, err))
        print(f"| attention | {name} | 4x4096x16x128 f16 | {ms:.4f} | {flops / ms / 1e9:.1f} TFLOP/s | {err:.2e} |")

    with open(f"{out}/python_bench.csv", "w") as f:
        f.write("date,device,kind,contender,shape,value,throughput,rel_err\n")
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for r in rows:
            f.write(f"{date},{torch.cuda.get_device_name()},{r[0]},{r[1]},{r[2]},{r[3]:.5f},{r[4]:.1f},{r[5]:.3e}\n")
    bad = [r for r in rows if r[0] != "overhead" and not r[5] < 1e-2]
    if bad:
        print(f"FAIL: {bad}")
        sys.exit(1)


if __name__ == "__main__":
    main()
