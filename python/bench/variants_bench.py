#!/usr/bin/env python3
"""Attention variants (sliding window, logit soft-cap, attention sinks) in
one process with torch, on the same tensors: ``kernel_ops``'s variant op
(``torch.ops.kernel_ops.attention_variant``, forward and forward +
backward through its autograd) beside torch's ``flex_attention`` compiled
with ``torch.compile``, and beside our plain causal attention
(``kernel_ops::attention``) at the same shape (the cost of the variant).

Shape: batch 1, ``--seq`` (16384) tokens, ``--heads`` (32) heads (as many
K/V heads), head dim 64, float16. Cases, all causal:

* ``causal window 4096``: query ``i`` sees keys ``i - 4095 ..= i`` (ours:
  ``window=[4095, 0]``; flex: a block mask of ``q_idx - kv_idx`` in
  ``0..=4095``, made once outside the timing);
* ``causal soft-cap 50``: scores ``50 tanh(s / 50)`` of the scaled scores
  ``s`` (flex: ``score_mod`` returning ``cap * tanh(score / cap)``, the
  causal block mask);
* ``causal sinks``: one learned logit ``sink[h]`` per head, one more term of
  each row's softmax with no value. flex has no sink: its causal output
  ``out`` and ``lse`` (``return_lse=True``, natural log) are combined as

      out_sink = out * sigmoid(lse - sink[h])

  since ``softmax([s_1 .. s_n, sink]) [v; 0] = Σ e^{s_j} v_j / (Z +
  e^{sink}) = out · Z / (Z + e^{sink}) = out / (1 + e^{sink - lse})`` with
  ``Z = Σ e^{s_j} = e^{lse}``; the gradient flows through ``out`` and
  ``lse``. Before timing, this combination is checked at a small shape
  against float64 softmax with an extra sink logit column (printed).

Each row is one contender in one mode (``fwd``, or ``fwd+bwd``: the
forward and the gradients of q, k, v (and the sinks) for a random
``d_o``). Every contender's output, and in ``fwd+bwd`` every gradient, is
checked against flex's (``rel. err``: the largest over o, dq, dk, dv,
d_sinks of ``max |got - flex| / max |flex|``); our plain attention computes
something else and is not checked (``n/a``). TFLOP/s counts ``4 · D ·
(visible query-key pairs)`` per head for the forward and 3.5 times that for
forward + backward (FlashAttention's convention), the same count for every
contender of a case.

Timing: each contender is warmed to the steady clock (``--warmup-ms``,
default 400) before each timing, CUDA events around each of ``--iters``
(30) calls, median; ``--rounds`` (3) interleaved rounds, median of the
medians. The SM clock and board power are sampled every 50 ms during every
timing (``nvidia-smi``, or pynvml when nvidia-smi cannot be run) and their
medians written beside the figures. Each call is timed with its host work
(an eager loop's view); no CUDA-graph mode: flex's compiled backward and
autograd are not captured here.

    python3 variants_bench.py [--out DIR] [--seq N] [--heads N] [--warmup-ms MS] [--iters N] [--rounds N]

Writes DIR/variants_bench.csv (DIR defaults to .) and prints a Markdown
table. Exits 1 when a checked error is above 2e-2.
"""
import math
import os
import statistics
import subprocess
import sys
import threading
import time

import torch

import kernel_ops
import kernel_ops.torch_ops  # noqa: F401  (registers torch.ops.kernel_ops.*)

D = 64
WINDOW, CAP = 4096, 50.0


class Sampler:
    """The SM clock (MHz) and board power (W) every 50 ms in the background
    (nvidia-smi, else pynvml); ``window(t0, t1)`` gives the medians of the
    samples taken between two ``time.time()`` stamps."""

    def __init__(self):
        self.samples, self.proc, self.stop_flag = [], None, False
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "50",
                 "-i", str(torch.cuda.current_device())],
                stdout=subprocess.PIPE, text=True)
            target = self._read_smi
        except OSError:
            target = self._read_nvml
        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def _read_smi(self):
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            try:
                self.samples.append((time.time(), float(parts[1]), float(parts[2])))
            except (ValueError, IndexError):
                pass

    def _read_nvml(self):
        try:
            import pynvml
            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        except Exception:  # no clock readings: NaN in the table
            return
        while not self.stop_flag:
            try:
                clk = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
                pw = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
                self.samples.append((time.time(), float(clk), pw))
            except Exception:
                pass
            time.sleep(0.05)

    def window(self, t0, t1):
        s = [(c, p) for t, c, p in self.samples if t0 <= t <= t1]
        if not s:
            return float("nan"), float("nan")
        return statistics.median(c for c, _ in s), statistics.median(p for _, p in s)

    def stop(self):
        self.stop_flag = True
        if self.proc is not None:
            self.proc.terminate()


def gpu_ms(fn, warmup_ms, iters):
    """Warms ``fn`` for ``warmup_ms`` (to the steady clock), then the
    median of ``iters`` calls each bracketed by CUDA events; returns it and
    the wall-clock span of the timed calls (for the clock samples)."""
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < warmup_ms:
        for _ in range(4):
            fn()
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    t_start = time.time()
    for a, b in events:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in events), t_start - 0.1, time.time()


def max_rel(got, want):
    """``max |got - want| / max |want|`` (float32)."""
    got, want = got.float(), want.float()
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))


def visible_pairs(seq, window):
    """Query-key pairs a causal (windowed: ``window`` keys up to the
    diagonal) attention computes."""
    if window is None or window >= seq:
        return seq * (seq + 1) // 2
    return window * (window + 1) // 2 + (seq - window) * window


def check_sink_formula(flex_attention, create_block_mask, dev):
    """flex's causal out and lse combined as ``out * sigmoid(lse - sink)``
    against float64 softmax with an extra sink logit column, at a small
    shape: returns the largest relative error (o and lse)."""
    b, h, s = 1, 4, 256
    q, k, v = (torch.randn(b, h, s, D, device=dev, dtype=torch.float32) for _ in range(3))
    sink = torch.linspace(-2, 3, h, device=dev)
    mask = create_block_mask(lambda b_, h_, qi, ki: qi >= ki, None, None, s, s, device=dev)
    out, lse = flex_attention(q, k, v, block_mask=mask, return_lse=True)
    got = out * torch.sigmoid(lse - sink[None, :, None])[..., None]
    got_lse = torch.logaddexp(lse, sink[None, :, None].expand_as(lse))
    x = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(D)
    x = x.masked_fill(torch.ones(s, s, dtype=torch.bool, device=dev).triu(1), float("-inf"))
    x = torch.cat([x, sink.double()[None, :, None, None].expand(b, h, s, 1)], -1)
    want = torch.softmax(x, -1)[..., :s] @ v.double()
    return max(max_rel(got, want), max_rel(got_lse, torch.logsumexp(x, -1)))


def main():
    args = sys.argv[1:]
    opt = lambda flag, default: type(default)(args[args.index(flag) + 1]) if flag in args else default
    out_dir = opt("--out", ".")
    seq, heads = opt("--seq", 16384), opt("--heads", 32)
    warmup_ms, iters, rounds = opt("--warmup-ms", 400.0), opt("--iters", 30), opt("--rounds", 3)
    os.makedirs(out_dir, exist_ok=True)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    flex = torch.compile(flex_attention)
    name = torch.cuda.get_device_name()
    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"# {name}, {date}, torch {torch.__version__}: batch 1, seq {seq}, {heads} heads, D {D}, float16\n")
    print(f"flex sinks as out * sigmoid(lse - sink) vs float64 softmax with a sink column: max rel. err "
          f"{check_sink_formula(flex, create_block_mask, dev):.2e}\n")

    # Ours: [1, seq, heads, D]; flex: [1, heads, seq, D] contiguous copies of
    # the same values (made once, outside the timing).
    q, k, v, d_o = (torch.randn(1, seq, heads, D, device=dev, dtype=torch.float16) for _ in range(4))
    qf, kf, vf, d_of = (t.transpose(1, 2).contiguous() for t in (q, k, v, d_o))
    for t in (q, k, v, qf, kf, vf):
        t.requires_grad_()
    sinks = torch.linspace(-1.0, 2.0, heads, device=dev, dtype=torch.float32)
    sinks_ours, sinks_flex = sinks.clone().requires_grad_(), sinks.clone().requires_grad_()
    o_buf, lse_buf = torch.empty_like(q), torch.empty(1, heads, seq, device=dev, dtype=torch.float32)
    causal_mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, seq, seq, device=dev)
    window_mask = create_block_mask(lambda b, h, qi, ki: (qi >= ki) & (qi - ki < WINDOW), None, None, seq, seq, device=dev)

    def softcap_mod(score, b, h, qi, ki):
        return CAP * torch.tanh(score / CAP)

    # (name, our op's keywords, flex's keywords, with sinks, the window for the FLOP count)
    cases = [
        (f"causal window {WINDOW}", dict(window=[WINDOW - 1, 0]), dict(block_mask=window_mask), False, WINDOW),
        (f"causal soft-cap {CAP:g}", dict(softcap=CAP), dict(block_mask=causal_mask, score_mod=softcap_mod), False, None),
        ("causal sinks", {}, dict(block_mask=causal_mask), True, None),
    ]
    sampler = Sampler()
    rows = []
    print("| case | mode | contender | ms | TFLOP/s | vs flex | SM MHz | W | rel. err |\n|---|---|---|---:|---:|---:|---:|---:|---:|")
    for case, ours_kw, flex_kw, with_sinks, window in cases:
        fwd_flops = 4.0 * D * heads * visible_pairs(seq, window)
        sk_o, sk_f = (sinks_ours, sinks_flex) if with_sinks else (None, None)

        def ours_fwd():
            return kernel_ops.attention(q, k, v, causal=True, out=o_buf, lse=lse_buf, sinks=sk_o.detach() if with_sinks else None,
                                        **{kk: (tuple(vv) if kk == "window" else vv) for kk, vv in ours_kw.items()})[0]

        def ours_op():
            return torch.ops.kernel_ops.attention_variant(q, k, v, causal=True, sinks=sk_o, **ours_kw)[0]

        def flex_op():
            if with_sinks:
                out, lse = flex(qf, kf, vf, return_lse=True, **flex_kw)
                out = out * torch.sigmoid(lse - sk_f[None, :, None])[..., None]
            else:
                out = flex(qf, kf, vf, **flex_kw)
            return out.transpose(1, 2)

        def plain_fwd():
            return kernel_ops.attention(q, k, v, causal=True, out=o_buf, lse=lse_buf)[0]

        def plain_op():
            return torch.ops.kernel_ops.attention(q, k, v, True)[0]

        def no_grad(op):
            def f():
                with torch.no_grad():
                    return (op(),)
            return f

        def with_grad(op, inputs):
            def f():
                o = op()
                return (o,) + torch.autograd.grad(o, inputs, d_o)
            return f

        ours_in = (q, k, v) + ((sinks_ours,) if with_sinks else ())
        flex_in = (qf, kf, vf) + ((sinks_flex,) if with_sinks else ())
        modes = [
            ("fwd", [("kernel_ops.attention_variant", no_grad(ours_fwd)), ("flex_attention (compiled)", no_grad(flex_op)),
                     ("kernel_ops.attention (plain causal)", no_grad(plain_fwd))]),
            ("fwd+bwd", [("kernel_ops.attention_variant", with_grad(ours_op, ours_in)),
                         ("flex_attention (compiled)", with_grad(flex_op, flex_in)),
                         ("kernel_ops.attention (plain causal)", with_grad(plain_op, (q, k, v)))]),
        ]
        for mode, contenders in modes:
            flops = fwd_flops * (3.5 if mode == "fwd+bwd" else 1.0)
            results, live = {}, []
            for cname, fn in contenders:
                try:
                    results[cname] = [t.detach().clone() for t in fn()]
                    torch.cuda.synchronize()
                    live.append((cname, fn))
                except Exception as e:  # a contender that refuses the case
                    print(f"| {case} | {mode} | {cname} | n/a | | | | | {type(e).__name__}: {str(e)[:100]} |", flush=True)
            # flex's gradients of q, k, v are [1, heads, seq, D]: ours' layout.
            if "flex_attention (compiled)" in results:
                res = results["flex_attention (compiled)"]
                results["flex_attention (compiled)"] = res[:1] + [g.transpose(1, 2) if g.dim() == 4 else g for g in res[1:]]
            want = results.get("flex_attention (compiled)")
            errs = {}
            for cname, _ in live:
                if "plain" in cname or want is None:
                    errs[cname] = float("nan")
                    continue
                errs[cname] = max(max_rel(a, b) for a, b in zip(results[cname], want))
            del results
            times = {c: [] for c, _ in live}
            clocks = {c: [] for c, _ in live}
            for _ in range(rounds):
                for cname, fn in live:
                    ms, t0, t1 = gpu_ms(fn, warmup_ms, iters)
                    times[cname].append(ms)
                    clocks[cname].append(sampler.window(t0, t1))
            base = statistics.median(times["flex_attention (compiled)"]) if "flex_attention (compiled)" in times else float("nan")
            for cname, _ in live:
                ms = statistics.median(times[cname])
                clk = statistics.median(c for c, _ in clocks[cname])
                pw = statistics.median(p for _, p in clocks[cname])
                # The plain row's TFLOP/s counts its own (causal, full) pairs.
                fl = 4.0 * D * heads * visible_pairs(seq, None) * (3.5 if mode == "fwd+bwd" else 1.0) if "plain" in cname else flops
                row = (case, mode, cname, ms, fl / ms / 1e9, base / ms, clk, pw, errs[cname])
                rows.append(row)
                print(f"| {case} | {mode} | {cname} | {ms:.3f} | {row[4]:.0f} | {row[5]:.2f} | {clk:.0f} | {pw:.0f} | "
                      + ("n/a" if math.isnan(errs[cname]) else f"{errs[cname]:.2e}") + " |", flush=True)
    sampler.stop()
    path = os.path.join(out_dir, "variants_bench.csv")
    with open(path, "w") as f:
        f.write("date,device,torch,seq,heads,head_dim,case,mode,contender,ms,tflops,speed_vs_flex,sm_mhz,power_w,max_rel_err_vs_flex\n")
        for r in rows:
            f.write(f"{date},{name},{torch.__version__},{seq},{heads},{D},{r[0]},{r[1]},{r[2]},{r[3]:.4f},{r[4]:.1f},{r[5]:.4f},"
                    f"{r[6]:.0f},{r[7]:.0f},{r[8]:.3e}\n")
    print(f"\nwrote {path}")
    bad = [r for r in rows if r[8] > 2e-2]
    if bad:
        print(f"FAIL (error above 2e-2): {bad}")
        sys.exit(1)


if __name__ == "__main__":
    main()
