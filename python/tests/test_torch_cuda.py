"""kernel_ops on torch CUDA tensors (the GPU machine; skipped visibly
without torch or a GPU): results against torch's own ops on the same
tensors, the custom ops through torch.compile with no graph break, a
non-default stream, and the errors for mixed devices."""
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import kernel_ops  # noqa: E402
import kernel_ops.torch_ops  # noqa: E402,F401  (registers torch.ops.kernel_ops.*)


def rel(got, want):
    return float((got.float() - want.float()).norm() / want.float().norm())


def test_matmul_matches_torch():
    a = torch.randn(1000, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(520, 1024, device="cuda", dtype=torch.float16)
    assert rel(kernel_ops.matmul(a, b), a.float() @ b.float().T) < 2e-3


def test_bfloat16_matmul_matches_torch():
    a = torch.randn(1000, 1024, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(520, 1024, device="cuda", dtype=torch.bfloat16)
    want = a.float() @ b.float().T
    c = kernel_ops.matmul(a, b)
    assert c.dtype == torch.bfloat16 and rel(c, want) < 8e-3
    assert rel(torch.ops.kernel_ops.matmul(a, b), want) < 8e-3


def test_grouped_matmul_matches_a_loop_of_torch_matmuls():
    sizes = torch.tensor([300, 0, 129, 1000, 7], device="cuda", dtype=torch.int32)
    m, n, k = int(sizes.sum()), 512, 256
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(len(sizes), n, k, device="cuda", dtype=torch.float16)
    want = torch.cat([x.float() @ b[g].float().T for g, x in enumerate(a.split(sizes.tolist()))])
    assert rel(kernel_ops.grouped_matmul(a, b, sizes), want) < 2e-3
    assert rel(torch.ops.kernel_ops.grouped_matmul(a, b, sizes), want) < 2e-3
    with pytest.raises(ValueError, match="do not add up to M"):
        kernel_ops.grouped_matmul(a, b, sizes - 1)


def test_norms_match_torch():
    x = torch.randn(300, 4096, device="cuda", dtype=torch.bfloat16)
    g = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    want = torch.nn.functional.rms_norm(x.float(), (4096,), g.float(), eps=1e-6)
    assert rel(kernel_ops.rms_norm(x, g), want) < 1e-2
    want = torch.nn.functional.layer_norm(x.float(), (4096,), g.float(), b.float(), eps=1e-5)
    assert rel(kernel_ops.layer_norm(x, g, b), want) < 1e-2
    assert rel(kernel_ops.softmax(x), torch.softmax(x.float(), -1)) < 1e-2


def _rms_ref(x, g, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * g


def _grads_of(f, args, dys):
    """The gradients of ``sum(f(*args) * dy)`` (each output with its dy)
    with respect to args."""
    for a in args:
        a.grad = None
    outs = f(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    sum((o.double() * d.double()).sum() for o, d in zip(outs, dys)).backward()
    return [a.grad for a in args]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(4100, 1000), (300, 4096), (33, 16384)])
def test_norm_autograd_matches_float64_autograd(dtype, shape):
    if dtype == torch.float32 and shape[-1] > 8192:
        x = torch.ones(shape, device="cuda")
        with pytest.raises(ValueError, match="f32 rows of at most 8192"):
            kernel_ops.rms_norm_backward(x, torch.ones(shape[-1], device="cuda"), x)
        return
    cols = shape[-1]
    x = (torch.randn(shape, device="cuda") * 2 + 0.5).to(dtype).requires_grad_()
    g = (1 + torch.randn(cols, device="cuda") / 4).to(dtype).requires_grad_()
    b = torch.randn(cols, device="cuda").to(dtype).requires_grad_()
    dy = torch.randn(shape, device="cuda").to(dtype)
    f64 = [a.detach().double().requires_grad_() for a in (x, g, b)]
    dx_tol = {torch.float16: 1e-2, torch.bfloat16: 4e-2, torch.float32: 1e-4}[dtype]
    got = _grads_of(lambda x, g: torch.ops.kernel_ops.rms_norm(x, g, 1e-6), [x, g], [dy])
    want = _grads_of(lambda x, g: _rms_ref(x, g, 1e-6), f64[:2], [dy])
    assert got[0].dtype == dtype and got[1].dtype == dtype
    assert rel(got[0], want[0]) < dx_tol and rel(got[1], want[1]) < max(dx_tol, 1e-3)
    got = _grads_of(lambda x, g, b: torch.ops.kernel_ops.layer_norm(x, g, b, 1e-5), [x, g, b], [dy])
    want = _grads_of(lambda x, g, b: torch.nn.functional.layer_norm(x, (cols,), g, b, 1e-5), f64, [dy])
    for a, w in zip(got, want):
        assert rel(a, w) < max(dx_tol, 1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fused_residual_norm_autograd_matches_float64_autograd(dtype):
    shape, cols = (700, 2048), 2048
    tol = {torch.float16: 1e-2, torch.bfloat16: 4e-2}[dtype]
    for layer in (False, True):
        x = torch.randn(shape, device="cuda", dtype=dtype).requires_grad_()
        r = torch.randn(shape, device="cuda", dtype=dtype).requires_grad_()
        g = (1 + torch.randn(cols, device="cuda") / 4).to(dtype).requires_grad_()
        b = torch.randn(cols, device="cuda", dtype=dtype).requires_grad_()
        dy, dres = torch.randn(shape, device="cuda", dtype=dtype), torch.randn(shape, device="cuda", dtype=dtype)
        args = [x, r, g, b] if layer else [x, r, g]
        op = (lambda *a: torch.ops.kernel_ops.add_layer_norm(*a, 1e-5)) if layer else (lambda *a: torch.ops.kernel_ops.add_rms_norm(*a, 1e-6))
        y, nr = op(*args)
        s = x.double() + r.double()
        want_y = torch.nn.functional.layer_norm(s, (cols,), g.double(), b.double(), 1e-5) if layer else _rms_ref(s, g.double(), 1e-6)
        assert rel(y, want_y) < tol and rel(nr, s) < 1e-2
        got = _grads_of(op, args, [dy, dres])

        def ref(x, r, g, b=None):
            s = x + r
            y = torch.nn.functional.layer_norm(s, (cols,), g, b, 1e-5) if layer else _rms_ref(s, g, 1e-6)
            return y, s
        want = _grads_of(ref, [a.detach().double().requires_grad_() for a in args], [dy, dres])
        for a, w in zip(got, want):
            assert rel(a, w) < tol


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_sdpa(causal):
    q = torch.randn(2, 1000, 4, 128, device="cuda", dtype=torch.float16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    o, lse = kernel_ops.attention(q, k, v, causal=causal)
    want = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2).float() for t in (q, k, v)), is_causal=causal).transpose(1, 2)
    assert rel(o, want) < 5e-3
    s = (q.transpose(1, 2).float() @ k.transpose(1, 2).float().transpose(-1, -2)) / math.sqrt(128)
    if causal:
        s = s.masked_fill(torch.ones(1000, 1000, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    assert (lse - torch.logsumexp(s, -1)).abs().max() < 5e-3


def test_attention_variants_match_torch():
    # Causal with a 256-key window, a soft-cap of 20 and sinks, bf16, D 64.
    q = torch.randn(1, 1000, 4, 64, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    sinks = torch.linspace(-2, 2, 4, device="cuda", dtype=torch.float32)
    o, lse = kernel_ops.attention(q, k, v, causal=True, window=(255, 0), softcap=20.0, sinks=sinks)
    s = (q.transpose(1, 2).float() @ k.transpose(1, 2).float().transpose(-1, -2)) / math.sqrt(64)
    s = 20.0 * torch.tanh(s / 20.0)
    i = torch.arange(1000, device="cuda")
    s = s.masked_fill((i[None, :] > i[:, None]) | (i[None, :] < i[:, None] - 255), float("-inf"))
    s = torch.cat([s, sinks[None, :, None, None].expand(1, 4, 1000, 1)], -1)
    p = torch.softmax(s, -1)[..., :1000]
    want = (p @ v.transpose(1, 2).float()).transpose(1, 2)
    assert rel(o, want) < 1e-2
    assert (lse - torch.logsumexp(s, -1)).abs().max() < 5e-3


@pytest.mark.parametrize("causal", [False, True])
def test_attention_autograd_matches_sdpa(causal):
    # GQA (4 Q heads over 2 K/V heads), a ragged length, head_dim 128.
    q = torch.randn(2, 700, 4, 128, device="cuda", dtype=torch.float16, requires_grad=True)
    k = torch.randn(2, 700, 2, 128, device="cuda", dtype=torch.float16, requires_grad=True)
    v = torch.randn(2, 700, 2, 128, device="cuda", dtype=torch.float16, requires_grad=True)
    d_o = torch.randn(2, 700, 4, 128, device="cuda", dtype=torch.float16)
    o, _ = torch.ops.kernel_ops.attention(q, k, v, causal)
    grads = torch.autograd.grad(o, (q, k, v), d_o)
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(qf.transpose(1, 2), kf.transpose(1, 2), vf.transpose(1, 2), is_causal=causal, enable_gqa=True).transpose(1, 2)
    wants = torch.autograd.grad(want, (qf, kf, vf), d_o.float())
    for g, w in zip(grads, wants):
        assert g.shape == w.shape and g.dtype == torch.float16
        assert rel(g, w) < 1e-2


def variant_reference(q, k, v, causal, window, softcap, sinks):
    """Attention with variants, straightforwardly (for float64 autograd):
    q ``[b, s, h, d]``, k, v ``[b, s, kv_heads, d]``; ``window`` ``(left,
    right)`` (-1: no bound), ``softcap`` (0: none) as ``cap tanh(x / cap)``
    of the scaled scores, ``sinks`` ``[h]`` an extra logit column dropped
    after the softmax."""
    b, s, h, d = q.shape
    g = h // k.shape[2]
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).repeat_interleave(g, 1), v.transpose(1, 2).repeat_interleave(g, 1)
    x = qt @ kt.transpose(-1, -2) / math.sqrt(d)
    if softcap > 0:
        x = softcap * torch.tanh(x / softcap)
    i = torch.arange(s, device=q.device)
    j, i = i[None, :], i[:, None]
    hidden = (j > i) if causal else torch.zeros(s, s, dtype=torch.bool, device=q.device)
    if window[0] >= 0:
        hidden = hidden | (j < i - window[0])
    if window[1] >= 0:
        hidden = hidden | (j > i + window[1])
    x = x.masked_fill(hidden, float("-inf"))
    if sinks is not None:
        x = torch.cat([x, sinks.to(x.dtype)[None, :, None, None].expand(b, h, s, 1)], -1)
    p = torch.softmax(x, -1)[..., :s]
    return (p @ vt).transpose(1, 2)


VARIANTS = {
    "causal window 100 + soft-cap 3 + sinks": (True, (99, -1), 3.0, True),
    "window (64, 32) + sinks": (False, (64, 32), 0.0, True),
    "causal soft-cap 3": (True, (-1, -1), 3.0, False),
    "causal window 128": (True, (127, 0), 0.0, False),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_attention_variant_autograd_matches_float64_autograd(variant, dtype):
    # A ragged length (300), GQA (4 Q heads over 2 K/V heads), head_dim 64.
    causal, window, softcap, with_sinks = VARIANTS[variant]
    torch.manual_seed(0)
    b, s, h, kvh, d = 2, 300, 4, 2, 64
    q = torch.randn(b, s, h, d, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(b, s, kvh, d, device="cuda", dtype=dtype, requires_grad=True)
    v = torch.randn(b, s, kvh, d, device="cuda", dtype=dtype, requires_grad=True)
    sinks = torch.linspace(-1, 2, h, device="cuda", dtype=torch.float32).requires_grad_() if with_sinks else None
    d_o = torch.randn(b, s, h, d, device="cuda", dtype=dtype)
    o, lse = kernel_ops.torch_ops.attention_variant(q, k, v, causal, -1.0, window, softcap, sinks)
    inputs = (q, k, v) + ((sinks,) if with_sinks else ())
    grads = torch.autograd.grad(o, inputs, d_o)
    ref_in = [t.detach().double().requires_grad_() for t in inputs]
    want = variant_reference(*ref_in[:3], causal, window, softcap, ref_in[3] if with_sinks else None)
    wants = torch.autograd.grad(want, ref_in, d_o.double())
    tol = 1e-2 if dtype == torch.float16 else 2e-2
    assert o.dtype == dtype and rel(o.detach(), want.detach()) < tol
    for got, w in zip(grads, wants):
        assert got.shape == w.shape and got.dtype == (torch.float32 if got.dim() == 1 else dtype)
        assert rel(got, w) < tol, variant
    # The plain call's (dq, dk, dv), and d_sinks too with sinks.
    assert len(kernel_ops.attention_backward(q.detach(), k.detach(), v.detach(), o.detach(), lse, d_o, causal=causal, window=window,
                                             softcap=softcap or None, sinks=sinks.detach() if with_sinks else None)) == 3 + with_sinks


def test_attention_variant_compiles_forward_and_backward():
    # torch.compile(fullgraph=True) through the op and its autograd (the
    # backward op's fake implementation), with and without sinks.
    q = torch.randn(1, 300, 4, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, 300, 2, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, 300, 2, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    sinks = torch.zeros(4, device="cuda", dtype=torch.float32, requires_grad=True)

    def f(q, k, v, sinks):
        o, _ = torch.ops.kernel_ops.attention_variant(q, k, v, True, -1.0, [127, 0], 20.0, sinks)
        o2, _ = torch.ops.kernel_ops.attention_variant(q, k, v, causal=True, softcap=10.0)
        return (o.float() ** 2).sum() + (o2.float() * 0.5).sum()

    compiled = torch.compile(f, fullgraph=True)  # fullgraph: a graph break is an error
    got = torch.autograd.grad(compiled(q, k, v, sinks), (q, k, v, sinks))
    want = torch.autograd.grad(f(q, k, v, sinks), (q, k, v, sinks))
    for g, w in zip(got, want):
        assert rel(g, w) < 1e-3


def test_runs_in_order_on_a_side_stream():
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a2 = a * 2  # queued on s before the op: the op must see it
        c = kernel_ops.matmul(a2, b)
        d = c + 1  # queued on s after the op: must see c
    torch.cuda.synchronize()
    assert rel(d - 1, (2 * a.float()) @ b.float().T) < 2e-3


def test_custom_ops_compile_without_graph_breaks():
    def f(a, b, x, g):
        return torch.ops.kernel_ops.matmul(a, b).sum() + torch.ops.kernel_ops.rms_norm(x, g, 1e-6).float().sum()

    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    x = torch.randn(8, 1024, device="cuda", dtype=torch.float16)
    g = torch.ones(1024, device="cuda", dtype=torch.float16)
    compiled = torch.compile(f, fullgraph=True)  # fullgraph: a graph break is an error
    assert torch.allclose(compiled(a, a, x, g), f(a, a, x, g), rtol=1e-2)


def test_mixed_devices_are_refused():
    a = torch.randn(16, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(8, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="different devices"):
        kernel_ops.matmul(a, b)


def decode_reference(q, k, v, lens, scale):
    b, t, h, d = q.shape
    g = h // k.shape[2]
    out = torch.zeros(b, t, h, d, device=q.device)
    for i in range(b):
        n = int(lens[i])
        kk = k[i, :n].float().permute(1, 0, 2).repeat_interleave(g, 0)
        vv = v[i, :n].float().permute(1, 0, 2).repeat_interleave(g, 0)
        s = torch.einsum("thd,hnd->htn", q[i].float(), kk) * scale
        mask = torch.arange(n, device=q.device)[None, :] >= (n - t + 1 + torch.arange(t, device=q.device))[:, None]
        out[i] = torch.einsum("htn,hnd->thd", torch.softmax(s.masked_fill(mask[None], float("-inf")), -1), vv)
    return out


def test_decode_matches_torch_and_replays_in_a_cuda_graph():
    b, h, kvh, d, max_len = 4, 32, 8, 128, 3000
    q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, max_len, kvh, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    lens = torch.tensor([1, 700, 2999, 3000], device="cuda", dtype=torch.int32)
    want = decode_reference(q, k, v, lens, 1 / math.sqrt(d))
    o, _ = torch.ops.kernel_ops.attention_decode(q, k, v, lens)
    assert rel(o, want) < 1e-2
    # Captured (the plan exists after the first call), then replayed with
    # new lengths and a new query written into the captured buffers.
    o_g, lse_g = kernel_ops.attention_decode(q, k, v, lens)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        kernel_ops.attention_decode(q, k, v, lens, out=o_g, lse=lse_g)
    torch.cuda.current_stream().wait_stream(s)
    # Captured on the stream the plan was made on (plans are per stream).
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        kernel_ops.attention_decode(q, k, v, lens, out=o_g, lse=lse_g)
    q.copy_(torch.randn_like(q))
    lens.copy_(torch.tensor([3000, 5, 64, 1234], device="cuda", dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    assert rel(o_g, decode_reference(q, k, v, lens, 1 / math.sqrt(d))) < 1e-2


def test_decode_fp8_cache_and_paged():
    b, h, kvh, d, page, per = 2, 16, 2, 128, 64, 20
    q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, page * per, kvh, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    lens = torch.tensor([1000, 1280], device="cuda", dtype=torch.int32)
    ks, vs = float(k.abs().max()) / 448, float(v.abs().max()) / 448
    k8, v8 = (k.float() / ks).to(torch.float8_e4m3fn), (v.float() / vs).to(torch.float8_e4m3fn)
    scales = torch.tensor([ks, vs], device="cuda")
    want = decode_reference(q, (k8.float() * ks), (v8.float() * vs), lens, 1 / math.sqrt(d))
    o, _ = kernel_ops.attention_decode(q, k8, v8, lens, kv_scales=scales)
    assert rel(o, want) < 1e-2
    perm = torch.randperm(b * per, device="cuda", dtype=torch.int32)
    table = perm.view(b, per)
    kp, vp = torch.empty(b * per, page, kvh, d, device="cuda", dtype=torch.bfloat16), torch.empty(b * per, page, kvh, d, device="cuda", dtype=torch.bfloat16)
    kp[perm.long()] = k.view(b * per, page, kvh, d)
    vp[perm.long()] = v.view(b * per, page, kvh, d)
    o2, _ = kernel_ops.attention_decode(q, kp, vp, lens, block_table=table, check=True)
    assert rel(o2, decode_reference(q, k, v, lens, 1 / math.sqrt(d))) < 1e-2


def test_varlen_autograd_matches_per_sequence_sdpa():
    lens = [1, 300, 129, 1000]
    cu = torch.tensor([0] + list(__import__("itertools").accumulate(lens)), device="cuda", dtype=torch.int32)
    total, h, kvh, d = sum(lens), 4, 2, 128
    q = torch.randn(total, h, d, device="cuda", dtype=torch.float16, requires_grad=True)
    k = torch.randn(total, kvh, d, device="cuda", dtype=torch.float16, requires_grad=True)
    v = torch.randn(total, kvh, d, device="cuda", dtype=torch.float16, requires_grad=True)
    d_o = torch.randn(total, h, d, device="cuda", dtype=torch.float16)
    o, _ = torch.ops.kernel_ops.attention_varlen(q, k, v, cu, cu, max(lens), max(lens), True)
    grads = torch.autograd.grad(o, (q, k, v), d_o)
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    outs = []
    for a, z in zip(cu[:-1].tolist(), cu[1:].tolist()):
        sdpa = torch.nn.functional.scaled_dot_product_attention
        outs.append(sdpa(qf[a:z].transpose(0, 1), kf[a:z].transpose(0, 1), vf[a:z].transpose(0, 1), is_causal=True, enable_gqa=True).transpose(0, 1))
    want = torch.cat(outs)
    assert rel(o, want) < 5e-3
    wants = torch.autograd.grad(want, (qf, kf, vf), d_o.float())
    for g, w in zip(grads, wants):
        assert rel(g, w) < 1e-2


def test_matmul_norm_and_attention_replay_in_a_cuda_graph():
    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(384, 256, device="cuda", dtype=torch.float16)
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    g = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(1, 300, 4, 64, device="cuda", dtype=torch.float16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    c, y, o = torch.empty(512, 384, device="cuda", dtype=torch.float16), torch.empty_like(x), torch.empty_like(q)
    lse = torch.empty(1, 4, 300, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # first calls (plans, tuning) outside the capture
        for _ in range(2):
            kernel_ops.matmul(a, b, out=c)
            kernel_ops.rms_norm(x, g, 1e-6, out=y)
            kernel_ops.attention(q, k, v, causal=True, out=o, lse=lse)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        kernel_ops.matmul(a, b, out=c)
        kernel_ops.rms_norm(x, g, 1e-6, out=y)
        kernel_ops.attention(q, k, v, causal=True, out=o, lse=lse)
    for t in (a, x, q):
        t.copy_(torch.randn_like(t))
    graph.replay()
    torch.cuda.synchronize()
    assert rel(c, a.float() @ b.float().T) < 2e-3
    assert rel(y, torch.nn.functional.rms_norm(x.float(), (4096,), g.float(), 1e-6)) < 1e-2
    want = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2).float() for t in (q, k, v)), is_causal=True).transpose(1, 2)
    assert rel(o, want) < 5e-3


# FP8 GEMMs: each op against the float32 product of the dequantized
# inputs (FP8 values are exact in float32; the error is the float16
# rounding of c).
FP8_TOL = 2e-3


def _fp8(x, scale, dtype=torch.float8_e4m3fn):
    """``x / scale`` rounded to FP8 (``scale`` broadcast over x)."""
    return (x / scale).to(dtype)


def _block_scales(x, rows_per_block):
    """Scales ``amax / 448`` per ``rows_per_block x 128`` block of x
    (``[ceil(rows / rows_per_block), ceil(K / 128)]``, the last blocks
    partial) and their expansion to x's shape."""
    r, k = x.shape
    rp, kp = -r % rows_per_block, -k % 128
    blocks = torch.nn.functional.pad(x.float().abs(), (0, kp, 0, rp))
    s = blocks.view((r + rp) // rows_per_block, rows_per_block, (k + kp) // 128, 128).amax((1, 3)) / 448
    full = s.repeat_interleave(rows_per_block, 0).repeat_interleave(128, 1)[:r, :k]
    return s.contiguous(), full


def test_matmul_fp8_matches_torch_and_scaled_mm():
    m, n, k = 1008, 528, 1024
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(n, k, device="cuda")
    sa, sb = a.abs().max() / 448, b.abs().max() / 448  # float32, 0-d, on the GPU
    a8, b8 = _fp8(a, sa), _fp8(b, sb)
    want = (a8.float() @ b8.float().T) * (sa * sb)
    c = kernel_ops.matmul_fp8(a8, b8, sa, sb)
    assert c.dtype == torch.float16 and c.shape == (m, n) and rel(c, want) < FP8_TOL
    assert rel(kernel_ops.matmul_fp8(a8, b8, float(sa), float(sb)), want) < FP8_TOL
    assert rel(torch.ops.kernel_ops.matmul_fp8(a8, b8, sa.reshape(1), sb.reshape(1)), want) < FP8_TOL
    if hasattr(torch, "_scaled_mm"):
        # cuBLASLt's FP8 GEMM on the same bytes and scales (b column-major).
        ref = torch._scaled_mm(a8, b8.T, scale_a=sa, scale_b=sb, out_dtype=torch.float16)
        assert rel(c, ref) < FP8_TOL


def test_matmul_fp8_mixes_e5m2_with_e4m3():
    m, n, k = 1000, 520, 1024
    a, b = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
    s4a, s4b = a.abs().max() / 448, b.abs().max() / 448
    s5a, s5b = a.abs().max() / 57344, b.abs().max() / 57344
    a4, b4 = _fp8(a, s4a), _fp8(b, s4b)
    a5, b5 = _fp8(a, s5a, torch.float8_e5m2), _fp8(b, s5b, torch.float8_e5m2)
    assert rel(kernel_ops.matmul_fp8(a5, b4, s5a, s4b), (a5.float() @ b4.float().T) * (s5a * s4b)) < FP8_TOL
    assert rel(torch.ops.kernel_ops.matmul_fp8(a4, b5, s4a, s5b), (a4.float() @ b5.float().T) * (s4a * s5b)) < FP8_TOL
    with pytest.raises(NotImplementedError, match="two e5m2 operands"):
        kernel_ops.matmul_fp8(a5, b5, s5a, s5b)


def test_matmul_fp8_rowwise_matches_torch():
    m, n, k = 1000, 520, 1024
    a = torch.randn(m, k, device="cuda") * torch.logspace(-3, 3, m, base=2, device="cuda")[:, None]
    b = torch.randn(n, k, device="cuda") * torch.logspace(3, -3, n, base=2, device="cuda")[:, None]
    sa = a.abs().amax(1, keepdim=True) / 448  # M x 1
    sb = (b.abs().amax(1) / 448).reshape(1, n)  # 1 x N
    a8, b8 = _fp8(a, sa), _fp8(b, sb.T)
    want = (a8.float() @ b8.float().T) * sa * sb
    c = kernel_ops.matmul_fp8_rowwise(a8, b8, sa, sb)
    assert c.dtype == torch.float16 and rel(c, want) < FP8_TOL
    assert rel(torch.ops.kernel_ops.matmul_fp8_rowwise(a8, b8, sa.reshape(m), sb.reshape(n)), want) < FP8_TOL


def test_matmul_fp8_blockscaled_matches_torch():
    m, n, k = 1000, 520, 1040  # partial last blocks in N (520 = 4 x 128 + 8) and K (1040 = 8 x 128 + 16)
    a = torch.randn(m, k, device="cuda") * torch.logspace(-4, 4, k, base=2, device="cuda")[None, :]
    b = torch.randn(n, k, device="cuda") * torch.logspace(2, -2, n, base=2, device="cuda")[:, None]
    sa, sa_full = _block_scales(a, 1)
    sb, sb_full = _block_scales(b, 128)
    a8, b8 = _fp8(a, sa_full), _fp8(b, sb_full)
    want = (a8.float() * sa_full) @ (b8.float() * sb_full).T
    a_scales = sa.T.contiguous()  # [ceil(K / 128), M]: K-block-major
    c = kernel_ops.matmul_fp8_blockscaled(a8, b8, a_scales, sb)
    assert c.dtype == torch.float16 and rel(c, want) < FP8_TOL
    assert rel(torch.ops.kernel_ops.matmul_fp8_blockscaled(a8, b8, a_scales, sb), want) < FP8_TOL


def test_grouped_matmul_fp8_blockscaled_matches_a_loop_of_torch_matmuls():
    sizes = torch.tensor([300, 0, 129, 1000, 7], device="cuda", dtype=torch.int32)
    m, n, k, g = int(sizes.sum()), 512, 256, len(sizes)
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(g, n, k, device="cuda") * torch.logspace(-3, 3, g, base=2, device="cuda")[:, None, None]
    sa, sa_full = _block_scales(a, 1)
    a8 = _fp8(a, sa_full)
    experts = [_block_scales(b[e], 128) for e in range(g)]
    b8 = torch.stack([_fp8(b[e], full) for e, (_, full) in enumerate(experts)])
    sb = torch.stack([s for s, _ in experts])  # [G, N / 128, K / 128]
    a_deq = a8.float() * sa_full
    want = torch.cat([x @ (b8[e].float() * experts[e][1]).T for e, x in enumerate(a_deq.split(sizes.tolist()))])
    a_scales = sa.T.contiguous()
    c = kernel_ops.grouped_matmul_fp8_blockscaled(a8, b8, a_scales, sb, sizes)
    assert c.dtype == torch.float16 and rel(c, want) < FP8_TOL
    assert rel(torch.ops.kernel_ops.grouped_matmul_fp8_blockscaled(a8, b8, a_scales, sb, sizes), want) < FP8_TOL
    with pytest.raises(ValueError, match="do not add up to M"):
        kernel_ops.grouped_matmul_fp8_blockscaled(a8, b8, a_scales, sb, sizes - 1)


def test_matmul_fp8_compiles_without_graph_breaks():
    def f(a8, b8, sa, sb):
        return torch.ops.kernel_ops.matmul_fp8(a8, b8, sa, sb).float().sum(1)

    a, b = torch.randn(256, 512, device="cuda"), torch.randn(384, 512, device="cuda")
    sa, sb = (a.abs().max() / 448).reshape(1), (b.abs().max() / 448).reshape(1)
    a8, b8 = _fp8(a, sa), _fp8(b, sb)
    compiled = torch.compile(f, fullgraph=True)  # fullgraph: a graph break is an error
    assert torch.allclose(compiled(a8, b8, sa, sb), f(a8, b8, sa, sb), rtol=1e-3, atol=1e-2)


two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs with peer access")


@two_gpus
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_collective_matmuls_on_every_gpu_match_torch(dtype):
    # Every GPU of the machine (2, 4, ...); entry d of each list on GPU d.
    p = torch.cuda.device_count()
    tol = 8e-3 if dtype == torch.bfloat16 else 2e-3
    dev = [torch.device("cuda", d) for d in range(p)]
    current = torch.cuda.current_device()
    # All-gather matmul: forwarding kernels (m = 256) and copy engines (m = 72).
    for m in (256, 72):
        a = [torch.randn(m, 512, device=dev[d], dtype=dtype) for d in range(p)]
        b = [torch.randn(384, 512, device=dev[d], dtype=dtype) for d in range(p)]
        gathered, c = kernel_ops.all_gather_matmul(a, b)
        # The call leaves the caller's current device as it was.
        assert torch.cuda.current_device() == current
        for d in range(p):
            full = torch.cat([x.to(dev[d]) for x in a])
            assert torch.equal(gathered[d], full)
            assert rel(c[d], full.float() @ b[d].float().T) < tol
    # Reduce-scatter matmul, queued on a side stream of each device.
    a = [torch.randn(128 * p, 256, device=dev[d], dtype=dtype) for d in range(p)]
    b = [torch.randn(520, 256, device=dev[d], dtype=dtype) for d in range(p)]
    streams = [torch.cuda.Stream(device=dev[d]) for d in range(p)]
    with torch.cuda.stream(streams[0]):
        c = kernel_ops.reduce_scatter_matmul(a, b)
    torch.cuda.synchronize()
    want = sum(a[d].float().cpu() @ b[d].float().cpu().T for d in range(p))
    for d in range(p):
        assert c[d].device == dev[d]
        assert rel(c[d].cpu(), want[128 * d:128 * (d + 1)]) < tol
    # All-reduce matmul: every device ends with the whole sum.
    c = kernel_ops.all_reduce_matmul(a, b)
    torch.cuda.synchronize()
    for d in range(p):
        assert c[d].device == dev[d] and rel(c[d].cpu(), want) < tol
