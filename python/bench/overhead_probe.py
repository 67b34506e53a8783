#!/usr/bin/env python3
"""Where the host time of one ``kernel_ops.rms_norm`` call goes (8 x 1024
float16 torch CUDA tensors), on a GPU machine with torch and a wheel built
with the ``testing`` feature (``_native._probe_rms_norm``: the same native
call stopped after nothing, after the three arrays' import, or just before
the launch).

Every row is timed in each of ROUNDS interleaved rounds (2000 calls, the
device synchronized untimed between rows); the table gives the median of
the rounds' mean host microseconds per call. Writes OUT_DIR/overhead_probe.md.

    python3 overhead_probe.py OUT_DIR
"""
import os
import statistics
import sys
import time

import torch

import kernel_ops
from kernel_ops import _native

ROUNDS = 7
CALLS = 2000


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    x = torch.randn(8, 1024, device="cuda", dtype=torch.float16)
    g = torch.randn(1024, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    probe = getattr(_native, "_probe_rms_norm", None)
    if probe is None:
        sys.exit("overhead_probe: this wheel has no _probe_rms_norm (build it with --features testing)")
    rows = [
        ("native call, returns at once (the interpreter's call of 5 arguments)", lambda: probe(x, g, y, 1e-6, None, 0)),
        ("native call, after the 3 tensors' import", lambda: probe(x, g, y, 1e-6, None, 1)),
        ("native call, up to the launch (checks, buffers, stream found)", lambda: probe(x, g, y, 1e-6, None, 2)),
        ("_native.rms_norm (stream looked up)", lambda: _native.rms_norm(x, g, y, 1e-6, None)),
        ("_native.rms_norm (stream=0 given)", lambda: _native.rms_norm(x, g, y, 1e-6, 0)),
        ("kernel_ops.rms_norm(x, g, out=y)", lambda: kernel_ops.rms_norm(x, g, out=y)),
        ("kernel_ops.rms_norm(x, g) (allocating)", lambda: kernel_ops.rms_norm(x, g)),
        ("torch.nn.functional.rms_norm (torch's own)", lambda: torch.nn.functional.rms_norm(x, (1024,), g, 1e-6)),
        ("y.add_(0) (one torch launch)", lambda: y.add_(0)),
        ("torch.empty_like(x)", lambda: torch.empty_like(x)),
        ("x.is_cuda", lambda: x.is_cuda),
        ("x.get_device()", lambda: x.get_device()),
        ("x.dtype", lambda: x.dtype),
        ("x.shape", lambda: x.shape),
        ("x.is_contiguous()", lambda: x.is_contiguous()),
        ("x.data_ptr()", lambda: x.data_ptr()),
        ("type(x).__module__", lambda: type(x).__module__),
    ]
    for _, fn in rows:
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    times = {name: [] for name, _ in rows}
    for _ in range(ROUNDS):
        for name, fn in rows:
            t0 = time.perf_counter()
            for _ in range(CALLS):
                fn()
            times[name].append((time.perf_counter() - t0) / CALLS * 1e6)
            torch.cuda.synchronize()
    lines = [
        f"# host us per call, {torch.cuda.get_device_name()}, torch {torch.__version__}: median of {ROUNDS} interleaved rounds of {CALLS} calls",
        "",
        "| call | host us | rounds' min - max |",
        "|---|---:|---:|",
    ]
    for name, _ in rows:
        t = times[name]
        lines.append(f"| {name} | {statistics.median(t):.2f} | {min(t):.2f} - {max(t):.2f} |")
    text = "\n".join(lines)
    print(text)
    with open(f"{out}/overhead_probe.md", "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
