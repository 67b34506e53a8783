"""cuDNN's attention backward (torch SDPA), run for a profiler: the same
problem as `attention_bench --backward` (f16, iid N(0, 1) q, k, v, dO in
[batch, seq, heads, head_dim]), a few hundred ms of warm-up calls, then
`--calls` more, so that `ncu -k regex:bprop -s <warm-up launches> -c 1`
profiles one launch at the steady clock.

    ncu --clock-control none -k regex:bprop -s 50 -c 1 \\
        python3 cudnn_attention_bwd_profile.py --seq 16384 --head-dim 128
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=16384)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--warmup-ms", type=float, default=500.0)
    ap.add_argument("--calls", type=int, default=5)
    a = ap.parse_args()
    # FlashAttention-3's setting: 16k tokens, hidden 2048.
    b, s, d = 16384 // a.seq, a.seq, a.head_dim
    h = 2048 // d
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v, do = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16, generator=g) for _ in range(4))
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
        step = lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
        end = time.perf_counter() + a.warmup_ms / 1e3
        n = 0
        while time.perf_counter() < end:
            step()
            torch.cuda.synchronize()
            n += 1
        for _ in range(a.calls):
            step()
        torch.cuda.synchronize()
    print(f"cuDNN backward B{b} S{s} H{h} D{d} causal={a.causal}: {n} warm-up calls, {a.calls} more")


if __name__ == "__main__":
    main()
