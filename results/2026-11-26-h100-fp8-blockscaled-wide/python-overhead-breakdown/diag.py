import time, statistics, torch, kernel_ops
from kernel_ops import _native
dev = "cuda"
x = torch.randn(8, 1024, device=dev, dtype=torch.float16)
g = torch.randn(1024, device=dev, dtype=torch.float16)
y = torch.empty_like(x)
def us(fn, calls=2000, reps=9):
    for _ in range(200): fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls): fn()
        t.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(t)
rows = [
 ("native rms_norm", lambda: _native.rms_norm(x, g, y, 1e-6, 0)),
 ("native rms_norm again", lambda: _native.rms_norm(x, g, y, 1e-6, 0)),
 ("plain rms_norm out=", lambda: kernel_ops.rms_norm(x, g, out=y)),
 ("torch rms_norm", lambda: torch.nn.functional.rms_norm(x, (1024,), g, 1e-6)),
 ("torch x.add_(0) (1 launch)", lambda: y.add_(0)),
 ("x.data_ptr()", lambda: x.data_ptr()),
 ("x.stride()", lambda: x.stride()),
 ("x.shape", lambda: x.shape),
 ("str(x.dtype)", lambda: str(x.dtype)),
 ("x.is_cuda", lambda: x.is_cuda),
 ("x.device.index", lambda: x.device.index),
 ("hasattr __dlpack__", lambda: hasattr(x, "__dlpack__")),
]
for n, f in rows:
    print(f"{n:40s} {us(f):8.3f} us", flush=True)
