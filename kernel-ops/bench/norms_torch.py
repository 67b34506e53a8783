"""torch's softmax, layer norm and RMS norm on the shapes of norms_bench
(2^25 elements per problem, f16 and bf16, the row lengths of norms::BENCH_COLS),
timed with CUDA events (median of 50 runs after 5 warm-up), in GB/s with
the same byte count (input read once, output written once)."""
import torch, statistics

ELEMS = 1 << 25

def timed(f):
    for _ in range(5):
        f()
    times = []
    for _ in range(50):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)

print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
print("| op | dtype | rows x cols | torch median ms | torch GB/s |")
print("|---|---|---|---:|---:|")
for op in ["softmax", "layer_norm", "rms_norm"]:
    for cols in [768, 1024, 2048, 2560, 4096, 5120, 7168, 8192, 12288, 16384, 1000, 24]:
        for dt, name in [(torch.float16, "f16"), (torch.bfloat16, "bf16")]:
            rows = ELEMS // cols
            x = torch.randn(rows, cols, device="cuda", dtype=dt)
            g = torch.randn(cols, device="cuda", dtype=dt)
            b = torch.randn(cols, device="cuda", dtype=dt)
            if op == "softmax":
                f = lambda: torch.softmax(x, dim=-1)
            elif op == "layer_norm":
                f = lambda: torch.nn.functional.layer_norm(x, (cols,), g, b, 1e-5)
            else:
                f = lambda: torch.nn.functional.rms_norm(x, (cols,), g, 1e-5)
            ms = timed(f)
            gbs = 2 * rows * cols * 2 / (ms * 1e-3) / 1e9
            print(f"| {op} | {name} | {rows} x {cols} | {ms:.4f} | {gbs:.0f} |", flush=True)
