#!/usr/bin/env python3
"""Decode attention (one new query token per sequence against a K/V cache)
in one process with torch, on the same memory: ``kernel_ops.attention_decode``
beside torch SDPA's cuDNN and FlashAttention-2 backends and a copy of K and V
(the bandwidth a kernel that reads the cache once can approach).

The cache is ``[batch, max_len, kv_heads, head_dim]`` (bf16, the layout
vLLM's FlashAttention backend and ``kernel_ops`` read); torch's contenders get
the query as ``[batch, heads, 1, d]`` and K/V as transposed views of the same
cache (``[batch, kv_heads, len, d]``, no copy) with ``enable_gqa=True``.
Every sequence has the full length (SDPA takes no per-sequence lengths).
GB/s = K and V bytes read per second (the copy's row counts bytes read and
written). Each contender is warmed to the steady clock (``--warmup-ms``,
default 400) before each timing, CUDA events around each of ``--iters``
runs, median; ``--rounds`` interleaved rounds (median reported); the SM
clock and board power are sampled by ``nvidia-smi`` during every timing and
their medians written beside the figures. Outputs are checked against an
f32 torch reference. Rows: the issue's shapes (32 query heads, head dim
128) with our FP8 e4m3 K/V at each, then paged (page 16/64/256, a shuffled
block table) and 4 speculative tokens at 8 x 8 x 8192 (ours only, beside our
contiguous bf16 decode).

    python3 decode_bench.py OUT_DIR [--warmup-ms MS] [--iters N] [--rounds N] [--quick] [--graph]

Each timing brackets one call with CUDA events, so a call whose host work
outlasts the previous call's kernel is timed with that host work (the
GPU idles between the events): what an eager Python loop gets. With
``--graph`` every contender is timed as 20 calls captured in a CUDA graph
and replayed (time per call), as servers run decode steps.

Writes OUT_DIR/decode_bench.csv and prints a Markdown table.
"""
import math
import os
import statistics
import subprocess
import sys
import time

import torch

try:
    import kernel_ops
    HAVE_OURS = hasattr(kernel_ops, "attention_decode")
except ImportError:  # the baselines alone (no wheel installed)
    kernel_ops, HAVE_OURS = None, False

HEADS, D = 32, 128
SHAPES = [(8, 8, 8192), (64, 8, 2048), (8, 4, 8192), (1, 8, 32768), (128, 8, 1024)]


class Sampler:
    """nvidia-smi's SM clock (MHz) and power (W) every 50 ms, in the
    background; ``window(t0, t1)`` gives the medians of the samples taken
    between two ``time.time()`` stamps."""

    def __init__(self):
        self.samples = []
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "50"],
                stdout=subprocess.PIPE, text=True)
        except OSError:
            self.proc = None
        import threading
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        if self.proc is None:
            return
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            try:
                self.samples.append((time.time(), float(parts[1]), float(parts[2])))
            except (ValueError, IndexError):
                pass

    def window(self, t0, t1):
        s = [(c, p) for t, c, p in self.samples if t0 <= t <= t1]
        if not s:
            return float("nan"), float("nan")
        return statistics.median(c for c, _ in s), statistics.median(p for _, p in s)

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()


def gpu_ms(fn, warmup_ms, iters):
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < warmup_ms:
        for _ in range(8):
            fn()
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    t_start = time.time()
    for a, b in events:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in events), t_start - 0.2, time.time()


PER_GRAPH = 20


def gpu_ms_graph(fn, warmup_ms, iters):
    """As ``gpu_ms``, with ``PER_GRAPH`` calls captured in one CUDA graph
    and the graph replayed: the time per call without the host's per-call
    work (how a server runs its decode steps), for every contender alike.
    The capture stream gets three calls first (a plan is made at the first
    call of a shape on a stream)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(PER_GRAPH):
            fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < warmup_ms:
        g.replay()
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    t_start = time.time()
    for a, b in events:
        a.record()
        g.replay()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in events) / PER_GRAPH, t_start - 0.2, time.time()


def rel(got, want):
    return float((got.float() - want.float()).norm() / want.float().norm())


def reference(q, k, v, lens, scale, t_spec=1):
    """f32 reference of one decode step: q [B, T, H, D], cache [B, L, KVH, D]."""
    b, t, h, d = q.shape
    kvh = k.shape[2]
    g = h // kvh
    out = torch.empty(b, t, h, d, device=q.device, dtype=torch.float32)
    for i in range(b):
        n = int(lens[i])
        kk = k[i, :n].float().permute(1, 0, 2).repeat_interleave(g, 0)  # [H, n, D]
        vv = v[i, :n].float().permute(1, 0, 2).repeat_interleave(g, 0)
        s = torch.einsum("thd,hnd->htn", q[i].float(), kk) * scale
        # Speculative token j sees keys < n - t + 1 + j.
        mask = torch.arange(n, device=q.device)[None, :] >= (n - t + 1 + torch.arange(t, device=q.device))[:, None]
        s = s.masked_fill(mask[None], float("-inf"))
        out[i] = torch.einsum("htn,hnd->thd", torch.softmax(s, -1), vv)
    return out


def main():
    args = sys.argv[1:]
    opt = lambda flag, default: type(default)(args[args.index(flag) + 1]) if flag in args else default
    warmup_ms, iters, rounds = opt("--warmup-ms", 400.0), opt("--iters", 50), opt("--rounds", 3)
    quick = "--quick" in args
    global gpu_ms
    if "--graph" in args:
        gpu_ms = gpu_ms_graph
    out_dir = args[0] if args and not args[0].startswith("--") else "."
    os.makedirs(out_dir, exist_ok=True)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sampler = Sampler()
    rows = []
    name = torch.cuda.get_device_name()
    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"# {name}, {date}\n")
    print("| case | contender | ms | GB/s | vs cuDNN | SM MHz | W | rel. err |\n|---|---|---:|---:|---:|---:|---:|---:|")

    def emit(case, contender, ms, kv_bytes, err, clk, pw, base_ms):
        gbs = kv_bytes / ms / 1e6
        ratio = base_ms / ms if base_ms else float("nan")
        rows.append((case, contender, ms, gbs, ratio, clk, pw, err))
        print(f"| {case} | {contender} | {ms:.4f} | {gbs:.0f} | {ratio:.3f} | {clk:.0f} | {pw:.0f} | {err:.2e} |", flush=True)

    shapes = SHAPES[:2] if quick else SHAPES
    for (batch, kvh, length) in shapes:
        case = f"{batch}x{kvh}x{length} bf16 G={HEADS // kvh}" + (" [graph]" if "--graph" in args else "")
        q = torch.randn(batch, 1, HEADS, D, device=dev, dtype=torch.bfloat16)
        k = torch.randn(batch, length, kvh, D, device=dev, dtype=torch.bfloat16)
        v = torch.randn(batch, length, kvh, D, device=dev, dtype=torch.bfloat16)
        lens = torch.full((batch,), length, device=dev, dtype=torch.int32)
        scale = 1.0 / math.sqrt(D)
        kv_bytes = 2 * k.numel() * 2
        # torch's views: q [B, H, 1, D], K/V [B, KVH, L, D] (transposed, no copy).
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        ref_rows = min(batch, 4)
        want = reference(q[:ref_rows], k[:ref_rows], v[:ref_rows], lens[:ref_rows], scale)
        o = torch.empty_like(q)
        lse = torch.empty(batch, HEADS, 1, device=dev, dtype=torch.float32)
        kc, vc = torch.empty_like(k), torch.empty_like(v)

        def ours():
            return kernel_ops.attention_decode(q, k, v, lens, scale=scale, out=o, lse=lse)[0]

        def sdpa(backend):
            def f():
                with sdpa_kernel(backend):
                    return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, scale=scale, enable_gqa=True).transpose(1, 2)
            return f

        def copy():
            kc.copy_(k)
            vc.copy_(v)
            return None

        contenders = [("kernel_ops.attention_decode", ours), ("SDPA cuDNN", sdpa(SDPBackend.CUDNN_ATTENTION)),
                      ("SDPA FlashAttention-2", sdpa(SDPBackend.FLASH_ATTENTION)), ("copy of K and V", copy)]
        if not HAVE_OURS:
            contenders = contenders[1:]
        errs, live = {}, []
        for cname, fn in contenders:
            try:
                got = fn()
                torch.cuda.synchronize()
                errs[cname] = rel(got[:ref_rows], want) if got is not None else 0.0
                live.append((cname, fn))
            except Exception as e:  # a backend that refuses the shape
                print(f"| {case} | {cname} | n/a | | | | | {type(e).__name__}: {str(e)[:80]} |")
        times = {c: [] for c, _ in live}
        clocks = {c: [] for c, _ in live}
        for _ in range(rounds):
            for cname, fn in live:
                ms, t0, t1 = gpu_ms(fn, warmup_ms, iters)
                times[cname].append(ms)
                clocks[cname].append(sampler.window(t0, t1))
        base = statistics.median(times["SDPA cuDNN"]) if "SDPA cuDNN" in times else None
        for cname, _ in live:
            ms = statistics.median(times[cname])
            clk = statistics.median(c for c, _ in clocks[cname])
            pw = statistics.median(p for _, p in clocks[cname])
            nbytes = 2 * kv_bytes if cname.startswith("copy") else kv_bytes
            emit(case, cname, ms, nbytes, errs[cname], clk, pw, base)

        if HAVE_OURS:
            ref_ms = statistics.median(times["kernel_ops.attention_decode"])
            # FP8 e4m3 K/V with a per-tensor scale (ours): half the bytes, at
            # every shape, beside our bf16 decode.
            ks = float(k.abs().max()) / 448.0
            vs = float(v.abs().max()) / 448.0
            k8 = (k.float() / ks).to(torch.float8_e4m3fn)
            v8 = (v.float() / vs).to(torch.float8_e4m3fn)
            want8 = reference(q[:ref_rows], (k8[:ref_rows].float() * ks).to(torch.bfloat16), (v8[:ref_rows].float() * vs).to(torch.bfloat16), lens[:ref_rows], scale)
            scales = torch.tensor([ks, vs], device=dev, dtype=torch.float32)
            fn = lambda: kernel_ops.attention_decode(q, k8, v8, lens, kv_scales=scales, scale=scale, out=o, lse=lse)[0]
            err = rel(fn()[:ref_rows], want8)
            ms, t0, t1 = gpu_ms(fn, warmup_ms, iters)
            clk, pw = sampler.window(t0, t1)
            emit(f"{case} FP8 e4m3 K/V (tokens/s vs bf16 = ratio)", "kernel_ops.attention_decode", ms, kv_bytes // 2, err, clk, pw, ref_ms)
        if HAVE_OURS and (batch, kvh, length) == (8, 8, 8192):
            # Our variants at this shape: paged, speculative tokens.
            for page in (16, 64, 256):
                pages_per = length // page
                perm = torch.randperm(batch * pages_per, device=dev, dtype=torch.int32)
                table = perm.view(batch, pages_per)
                kp = torch.empty(batch * pages_per, page, kvh, D, device=dev, dtype=torch.bfloat16)
                vp = torch.empty_like(kp)
                kp[table.long().view(-1)] = k.view(batch * pages_per, page, kvh, D)
                vp[table.long().view(-1)] = v.view(batch * pages_per, page, kvh, D)
                fn = lambda: kernel_ops.attention_decode(q, kp, vp, lens, block_table=table, scale=scale, out=o, lse=lse)[0]
                err = rel(fn()[:ref_rows], want)
                ms, t0, t1 = gpu_ms(fn, warmup_ms, iters)
                clk, pw = sampler.window(t0, t1)
                emit(f"{case} paged {page}", "kernel_ops.attention_decode", ms, kv_bytes, err, clk, pw, ref_ms)
            # Four speculative tokens per sequence, causal among themselves.
            q4 = torch.randn(batch, 4, HEADS, D, device=dev, dtype=torch.bfloat16)
            o4 = torch.empty_like(q4)
            lse4 = torch.empty(batch, HEADS, 4, device=dev, dtype=torch.float32)
            want4 = reference(q4[:ref_rows], k[:ref_rows], v[:ref_rows], lens[:ref_rows], scale, t_spec=4)
            fn = lambda: kernel_ops.attention_decode(q4, k, v, lens, scale=scale, out=o4, lse=lse4)[0]
            err = rel(fn()[:ref_rows], want4)
            ms, t0, t1 = gpu_ms(fn, warmup_ms, iters)
            clk, pw = sampler.window(t0, t1)
            emit(f"{case} T=4 speculative", "kernel_ops.attention_decode", ms, kv_bytes, err, clk, pw, ref_ms)

    sampler.stop()
    with open(f"{out_dir}/decode_bench.csv", "w") as f:
        f.write("date,device,case,contender,ms,GB_per_s,ratio_to_baseline,sm_mhz,power_w,rel_err\n")
        for r in rows:
            f.write(f"{date},{name},{r[0]},{r[1]},{r[2]:.5f},{r[3]:.1f},{r[4]:.4f},{r[5]:.0f},{r[6]:.0f},{r[7]:.3e}\n")
    bad = [r for r in rows if not r[7] < 2e-2]
    if bad:
        print(f"FAIL (error): {bad}")
        sys.exit(1)


if __name__ == "__main__":
    main()
