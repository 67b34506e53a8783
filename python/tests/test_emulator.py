"""kernel_ops on NumPy arrays: the CPU emulator through DLPack. Each op
against a NumPy reference; each bad input refused with its rule; a race
report raised as EmulatorReport. No GPU or torch needed."""
import numpy as np
import pytest

import kernel_ops
from kernel_ops import _native

rng = np.random.default_rng(7)


def randn(*shape, dtype=np.float16):
    return rng.standard_normal(shape).astype(dtype)


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def test_matmul_matches_numpy_at_a_ragged_shape():
    a, b = randn(70, 72), randn(40, 72)
    c = kernel_ops.matmul(a, b)
    assert c.shape == (70, 40) and c.dtype == np.float16
    assert rel_err(c, a.astype(np.float32) @ b.astype(np.float32).T) < 2e-3


def test_matmul_tune_is_accepted_and_ignored_on_the_emulator():
    # tune=True sweeps the instances on a GPU; the emulator cannot time
    # kernels, so there it runs the built-in choice and raises nothing.
    a, b = randn(70, 72), randn(40, 72)
    c = kernel_ops.matmul(a, b, tune=True)
    assert c.shape == (70, 40) and c.dtype == np.float16
    assert rel_err(c, a.astype(np.float32) @ b.astype(np.float32).T) < 2e-3


def test_matmul_takes_bfloat16():
    torch = pytest.importorskip("torch")  # CPU bfloat16 tensors (NumPy has no bfloat16)
    a, b = torch.randn(70, 72, dtype=torch.bfloat16), torch.randn(40, 72, dtype=torch.bfloat16)
    c = kernel_ops.matmul(a, b)
    want = a.double() @ b.double().T
    assert c.shape == (70, 40) and c.dtype == torch.bfloat16
    assert float((c.double() - want).norm() / want.norm()) < 8e-3
    with pytest.raises(TypeError, match="differ in dtype: they must be the same"):
        kernel_ops.matmul(a, b.half())


def test_bfloat16_numpy_arrays_of_ml_dtypes():
    # NumPy has no bfloat16 of its own, and its __dlpack__ refuses
    # ml_dtypes' (a dtype of kind 'V'): they are read through
    # __array_interface__, so bfloat16 runs on the emulator without torch.
    # (tools/python-venv.sh installs ml_dtypes; a machine without it skips
    # this test visibly.)
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    a, b = randn(70, 72, dtype=bf16), randn(40, 72, dtype=bf16)
    c = kernel_ops.matmul(a, b)
    assert c.shape == (70, 40) and c.dtype == bf16
    assert rel_err(c, a.astype(np.float64) @ b.astype(np.float64).T) < 8e-3
    x, g = randn(3, 1024, dtype=bf16), randn(1024, dtype=bf16)
    xf = x.astype(np.float64)
    rms = xf / np.sqrt((xf ** 2).mean(-1, keepdims=True) + 1e-6) * g.astype(np.float64)
    assert rel_err(kernel_ops.rms_norm(x, g), rms) < 8e-3
    with pytest.raises(TypeError, match="differ in dtype: they must be the same"):
        kernel_ops.matmul(a, b.astype(np.float16))
    with pytest.raises(ValueError, match="not row-major"):
        kernel_ops.rms_norm(randn(3, 2048, dtype=bf16)[:, ::2], g)


def test_reduce_scatter_and_all_reduce_matmuls_on_two_emulated_devices():
    # One emulator run of 2 devices per call, under the race detector:
    # device d receives row block d of sum_j a[j] @ b[j].T.
    a = [randn(256, 64) for _ in range(2)]
    b = [randn(136, 64) for _ in range(2)]
    c = kernel_ops.reduce_scatter_matmul(a, b)
    want = sum(x.astype(np.float64) @ y.astype(np.float64).T for x, y in zip(a, b))
    assert [x.shape for x in c] == [(128, 136)] * 2
    for d in range(2):
        assert rel_err(c[d], want[128 * d:128 * (d + 1)]) < 2e-3
    c = kernel_ops.all_reduce_matmul(a, b)
    for d in range(2):
        assert c[d].shape == (256, 136) and rel_err(c[d], want) < 2e-3
    with pytest.raises(ValueError, match="multiple of 256"):
        kernel_ops.reduce_scatter_matmul([randn(192, 64)] * 2, b)
    with pytest.raises(ValueError, match="one array per device"):
        kernel_ops.reduce_scatter_matmul(a, b + [b[0]])


@pytest.mark.parametrize("m", [128, 40])
def test_all_gather_matmul_on_two_emulated_devices(m):
    # m = 128: the kernels forward the shards by TMA (race detector on);
    # m = 40: copies and a matmul per shard.
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    a = [randn(m, 64, dtype=bf16) for _ in range(2)]
    b = [randn(72, 64, dtype=bf16) for _ in range(2)]
    gathered, c = kernel_ops.all_gather_matmul(a, b)
    full = np.concatenate(a).astype(np.float64)
    for d in range(2):
        assert np.array_equal(gathered[d].astype(np.float32), full.astype(np.float32))
        assert c[d].shape == (2 * m, 72) and c[d].dtype == bf16
        assert rel_err(c[d], full @ b[d].astype(np.float64).T) < 8e-3


def test_grouped_matmul_matches_numpy_with_ragged_groups():
    sizes = np.array([37, 0, 150, 5], dtype=np.int32)
    m, n, k = int(sizes.sum()), 136, 72
    a, b = randn(m, k), randn(len(sizes), n, k)
    c = kernel_ops.grouped_matmul(a, b, sizes)
    assert c.shape == (m, n) and c.dtype == np.float16
    want = np.zeros((m, n))
    row = 0
    for g, mg in enumerate(sizes):
        want[row:row + mg] = a[row:row + mg].astype(np.float64) @ b[g].astype(np.float64).T
        row += mg
    assert rel_err(c, want) < 2e-3


def test_grouped_matmul_takes_bfloat16():
    torch = pytest.importorskip("torch")  # CPU bfloat16 tensors (NumPy has no bfloat16)
    sizes = torch.tensor([20, 44], dtype=torch.int32)
    a, b = torch.randn(64, 64, dtype=torch.bfloat16), torch.randn(2, 64, 64, dtype=torch.bfloat16)
    c = kernel_ops.grouped_matmul(a, b, sizes)
    want = torch.cat([a[:20].double() @ b[0].double().T, a[20:].double() @ b[1].double().T])
    assert c.dtype == torch.bfloat16
    assert float((c.double() - want).norm() / want.norm()) < 8e-3


def test_grouped_matmul_refuses_sizes_that_do_not_add_up():
    a, b = randn(64, 64), randn(2, 64, 64)
    with pytest.raises(ValueError, match="do not add up to M"):
        kernel_ops.grouped_matmul(a, b, np.array([40, 40], dtype=np.uint32))
    with pytest.raises(TypeError, match="int32"):
        kernel_ops.grouped_matmul(a, b, np.array([32, 32], dtype=np.int64))


def test_norms_match_numpy():
    x, g, b = randn(3, 1024), randn(1024), randn(1024)
    xf = x.astype(np.float64)
    rms = xf / np.sqrt((xf ** 2).mean(-1, keepdims=True) + 1e-6) * g
    assert rel_err(kernel_ops.rms_norm(x, g), rms) < 2e-3
    mu, var = xf.mean(-1, keepdims=True), xf.var(-1, keepdims=True)
    assert rel_err(kernel_ops.layer_norm(x, g, b), (xf - mu) / np.sqrt(var + 1e-5) * g + b) < 2e-3
    e = np.exp(xf - xf.max(-1, keepdims=True))
    assert rel_err(kernel_ops.softmax(x), e / e.sum(-1, keepdims=True)) < 2e-3


NORM_WIDTHS = [768, 1024, 2048, 2560, 4096, 5120, 7168, 8192, 12288, 16384]


def norm_references(x, g, b):
    """softmax, layer norm (eps 1e-5) and RMS norm (eps 1e-6) of x in float64."""
    xf = x.astype(np.float64)
    gf, bf = g.astype(np.float64), b.astype(np.float64)
    e = np.exp(xf - xf.max(-1, keepdims=True))
    mu, var = xf.mean(-1, keepdims=True), xf.var(-1, keepdims=True)
    return (e / e.sum(-1, keepdims=True),
            (xf - mu) / np.sqrt(var + 1e-5) * gf + bf,
            xf / np.sqrt((xf ** 2).mean(-1, keepdims=True) + 1e-6) * gf)


def check_norms(rows, cols, dtype, tol):
    x, g, b = randn(rows, cols, dtype=dtype), randn(cols, dtype=dtype), randn(cols, dtype=dtype)
    sm, ln, rms = norm_references(x, g, b)
    for name, got, want in [("softmax", kernel_ops.softmax(x), sm),
                            ("layer_norm", kernel_ops.layer_norm(x, g, b), ln),
                            ("rms_norm", kernel_ops.rms_norm(x, g), rms)]:
        assert got.dtype == x.dtype and got.shape == x.shape
        assert rel_err(got, want) < tol, f"{name} {np.dtype(dtype).name} {rows} x {cols}: {rel_err(got, want)}"


@pytest.mark.parametrize("cols", NORM_WIDTHS)
def test_norms_match_float64_at_every_listed_width_in_float32_and_float16(cols):
    check_norms(2 if cols <= 2048 else 1, cols, np.float32, 1e-5)
    check_norms(1, cols, np.float16, 2e-3)


@pytest.mark.parametrize("cols", [1, 7, 13, 1001])
def test_norms_take_widths_that_are_not_a_multiple_of_8(cols):
    # Row r starts at element r * cols: every alignment, one element per access.
    check_norms(3, cols, np.float32, 1e-5)
    check_norms(3, cols, np.float16, 2e-3)
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    check_norms(2, cols, bf16, 8e-3)


@pytest.mark.parametrize("cols", [16385, 65536])
def test_norms_take_rows_split_over_a_cluster(cols):
    # Above 16384 columns a row is split over a cluster of 4 CTAs (the
    # emulator runs 2048 threads per row: one row).
    check_norms(1, cols, np.float32, 1e-5)


def attention_reference(q, k, v, causal, scale):
    b, s, h, d = q.shape
    group = h // k.shape[2]
    o = np.zeros(q.shape)
    lse = np.zeros((b, h, s))
    for bi in range(b):
        for hi in range(h):
            qq = q[bi, :, hi].astype(np.float64)
            kk = k[bi, :, hi // group].astype(np.float64)
            vv = v[bi, :, hi // group].astype(np.float64)
            sc = qq @ kk.T * scale
            if causal:
                sc = np.where(np.arange(s)[None, :] > np.arange(s)[:, None], -np.inf, sc)
            m = sc.max(-1, keepdims=True)
            p = np.exp(sc - m)
            o[bi, :, hi] = p @ vv / p.sum(-1, keepdims=True)
            lse[bi, hi] = (m[:, 0] + np.log(p.sum(-1)))
    return o, lse


def test_attention_matches_numpy_causal_gqa_ragged():
    q, k, v = randn(1, 150, 2, 64), randn(1, 150, 1, 64), randn(1, 150, 1, 64)
    o, lse = kernel_ops.attention(q, k, v, causal=True)
    want_o, want_lse = attention_reference(q, k, v, True, 1 / 8)
    assert o.shape == q.shape and lse.shape == (1, 2, 150) and lse.dtype == np.float32
    assert rel_err(o, want_o) < 5e-3
    assert np.abs(lse - want_lse).max() < 5e-3


def test_attention_variants_match_numpy():
    # A sliding window (left 20, causal), a soft-cap, sinks; GQA; head dim 64.
    b, s, h, d = 1, 90, 2, 64
    q, k, v = randn(b, s, h, d), randn(b, s, 1, d), randn(b, s, 1, d)
    sinks = np.array([0.5, -2.0], np.float32)
    o, lse = kernel_ops.attention(q, k, v, causal=True, window=(20, -1), softcap=1.5, sinks=sinks)
    scale = 1 / 8
    for hi in range(h):
        qq, kk, vv = (x.astype(np.float64) for x in (q[0, :, hi], k[0, :, 0], v[0, :, 0]))
        sc = 1.5 * np.tanh(qq @ kk.T * scale / 1.5)
        i, j = np.arange(s)[:, None], np.arange(s)[None, :]
        sc = np.where((j > i) | (j < i - 20), -np.inf, sc)
        m = np.maximum(sc.max(-1, keepdims=True), sinks[hi])
        p = np.exp(sc - m)
        tot = p.sum(-1, keepdims=True) + np.exp(sinks[hi] - m)
        assert rel_err(o[0, :, hi], p @ vv / tot) < 5e-3
        assert np.abs(lse[0, hi] - (m + np.log(tot))[:, 0]).max() < 5e-3
    with pytest.raises(ValueError, match="a bound must be >= 0"):
        kernel_ops.attention(q, k, v, window=(-3, 0))
    with pytest.raises(ValueError, match="the soft-cap must be finite and positive"):
        kernel_ops.attention(q, k, v, softcap=0.0)


def attention_backward_reference(q, k, v, d_o, causal, scale):
    b, s, h, d = q.shape
    group = h // k.shape[2]
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for bi in range(b):
        for hi in range(h):
            kh = hi // group
            qq, kk, vv, g = (x.astype(np.float64) for x in (q[bi, :, hi], k[bi, :, kh], v[bi, :, kh], d_o[bi, :, hi]))
            sc = qq @ kk.T * scale
            if causal:
                sc = np.where(np.arange(s)[None, :] > np.arange(s)[:, None], -np.inf, sc)
            p = np.exp(sc - sc.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            dp = g @ vv.T
            ds = p * (dp - (p * dp).sum(-1, keepdims=True))
            dq[bi, :, hi] = ds @ kk * scale
            dk[bi, :, kh] += ds.T @ qq * scale
            dv[bi, :, kh] += p.T @ g
    return dq, dk, dv


def test_attention_backward_matches_numpy_causal_gqa_ragged():
    q, k, v, d_o = randn(1, 70, 2, 64), randn(1, 70, 1, 64), randn(1, 70, 1, 64), randn(1, 70, 2, 64)
    o, lse = kernel_ops.attention(q, k, v, causal=True)
    dq, dk, dv = kernel_ops.attention_backward(q, k, v, o, lse, d_o, causal=True)
    want = attention_backward_reference(q, k, v, d_o, True, 1 / 8)
    for got, w in zip((dq, dk, dv), want):
        assert got.shape == w.shape and got.dtype == np.float16
        assert rel_err(got, w) < 1e-2


def attention_variant_reference(q, k, v, d_o, causal, scale, window=None, softcap=None, sinks=None):
    """float64 NumPy forward and backward of attention with variants: the
    window ``(left, right)`` (None: no bound), scores ``cap tanh(x / cap)``
    of the scaled dot products x, the sinks an extra logit column (no value)
    dropped after the softmax. Returns ``(o, lse, dq, dk, dv, d_sinks)``."""
    b, s, h, d = q.shape
    group = h // k.shape[2]
    o, lse = np.zeros(q.shape), np.zeros((b, h, s))
    dq, dk, dv, d_sinks = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape), np.zeros(h)
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    hidden = (j > i) if causal else np.zeros((s, s), bool)
    if window is not None:
        left, right = window
        if left is not None:
            hidden |= j < i - left
        if right is not None:
            hidden |= j > i + right
    for bi in range(b):
        for hi in range(h):
            kh = hi // group
            qq, kk, vv, g = (x.astype(np.float64) for x in (q[bi, :, hi], k[bi, :, kh], v[bi, :, kh], d_o[bi, :, hi]))
            x = qq @ kk.T * scale
            t, dt_dx = (softcap * np.tanh(x / softcap), 1 - np.tanh(x / softcap) ** 2) if softcap else (x, np.ones_like(x))
            t = np.where(hidden, -np.inf, t)
            sink = np.full((s, 1), -np.inf if sinks is None else float(sinks[hi]))
            full = np.concatenate([t, sink], 1)
            m = full.max(-1, keepdims=True)
            e = np.exp(full - m)
            l = m + np.log(e.sum(-1, keepdims=True))
            p = np.exp(full - l)
            pk, ps = p[:, :s], p[:, s]
            out = pk @ vv
            o[bi, :, hi], lse[bi, hi] = out, l[:, 0]
            dp = g @ vv.T
            rowsum = (g * out).sum(-1, keepdims=True)  # = sum_j P dP over the keys
            dx = pk * (dp - rowsum) * dt_dx
            dq[bi, :, hi] = dx @ kk * scale
            dk[bi, :, kh] += dx.T @ qq * scale
            dv[bi, :, kh] += pk.T @ g
            d_sinks[hi] = -(ps * rowsum[:, 0]).sum()
    return o, lse, dq, dk, dv, d_sinks


def test_the_variant_reference_matches_finite_differences():
    # The reference's gradients against central differences of its own
    # float64 forward (loss = sum(o * d_o)), at a few coordinates.
    r = np.random.default_rng(3)
    q, k, v, g = (r.standard_normal((1, 12, 2, 8)) for _ in range(4))
    k, v = k[:, :, :1], v[:, :, :1]
    sinks = np.array([0.3, -1.0])
    args = dict(causal=True, scale=0.4, window=(4, None), softcap=1.2)
    _, _, dq, dk, dv, ds = attention_variant_reference(q, k, v, g, sinks=sinks, **args)
    loss = lambda q, k, v, sinks: float((attention_variant_reference(q, k, v, g, sinks=sinks, **args)[0] * g).sum())
    eps = 1e-6
    for which, grad, at in ((0, dq, (0, 7, 1, 3)), (1, dk, (0, 5, 0, 2)), (2, dv, (0, 9, 0, 6)), (3, ds, (1,))):
        xs = [q, k, v, sinks]
        plus, minus = [x.copy() for x in xs], [x.copy() for x in xs]
        plus[which][at] += eps
        minus[which][at] -= eps
        assert abs((loss(*plus) - loss(*minus)) / (2 * eps) - grad[at]) < 1e-6


def test_attention_variant_backward_matches_numpy_window_softcap_sinks():
    # A two-sided window (left 30, right 10, not causal), a soft-cap of 1.5,
    # sinks; GQA (2 Q heads over 1 K/V head); a ragged length; f16.
    b, s, h, d = 1, 100, 2, 64
    q, k, v, d_o = randn(b, s, h, d), randn(b, s, 1, d), randn(b, s, 1, d), randn(b, s, h, d)
    sinks = np.array([0.5, -2.0], np.float32)
    kw = dict(window=(30, 10), softcap=1.5, sinks=sinks)
    o, lse = kernel_ops.attention(q, k, v, **kw)
    got = kernel_ops.attention_backward(q, k, v, o, lse, d_o, **kw)
    assert len(got) == 4
    want = attention_variant_reference(q, k, v, d_o, False, 1 / 8, **kw)
    for g, w in zip(got[:3], want[2:5]):
        assert g.shape == w.shape and g.dtype == np.float16
        assert rel_err(g, w) < 1e-2
    assert got[3].shape == (h,) and got[3].dtype == np.float32
    assert np.abs(got[3] - want[5]).max() < 1e-2 * np.abs(want[5]).max()
    # d_sinks= given: written in place and returned.
    ds = np.full(h, 7.0, np.float32)
    assert kernel_ops.attention_backward(q, k, v, o, lse, d_o, **kw, d_sinks=ds)[3] is ds
    assert np.abs(ds - want[5]).max() < 1e-2 * np.abs(want[5]).max()


def test_attention_variant_backward_matches_numpy_causal_window_bfloat16():
    # Causal with a 33-key window (left 32), no sinks: the plain return
    # (dq, dk, dv); bfloat16 through ml_dtypes; a length of 130.
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    b, s, h, d = 1, 130, 1, 64
    q, k, v, d_o = (randn(b, s, h, d, dtype=bf16) for _ in range(4))
    o, lse = kernel_ops.attention(q, k, v, causal=True, window=(32, None))
    got = kernel_ops.attention_backward(q, k, v, o, lse, d_o, causal=True, window=(32, -1))
    assert len(got) == 3
    want = attention_variant_reference(q, k, v, d_o, True, 1 / 8, window=(32, None))
    assert rel_err(o, want[0]) < 1e-2
    for g, w in zip(got, want[2:5]):
        assert g.shape == w.shape and g.dtype == bf16
        assert rel_err(g, w) < 2e-2


def test_attention_variant_backward_refusals():
    b, s, h, d = 1, 16, 2, 64
    q, k, v, d_o = randn(b, s, h, d), randn(b, s, h, d), randn(b, s, h, d), randn(b, s, h, d)
    o, lse = randn(b, s, h, d), np.zeros((b, h, s), np.float32)
    dq, dk, dv = (np.empty_like(x) for x in (q, k, v))
    sinks, ds = np.zeros(h, np.float32), np.zeros(h, np.float32)
    native = _native.attention_variant_backward
    with pytest.raises(ValueError, match="`d_sinks` given without sinks"):
        native(q, k, v, o, lse, d_o, dq, dk, dv, ds)
    with pytest.raises(ValueError, match="`d_sinks` given without sinks"):
        kernel_ops.attention_backward(q, k, v, o, lse, d_o, window=(4, 0), d_sinks=ds)
    with pytest.raises(ValueError, match="sinks given without `d_sinks`"):
        native(q, k, v, o, lse, d_o, dq, dk, dv, sinks=sinks)
    with pytest.raises(ValueError, match=r"shape \[2\] expected"):
        native(q, k, v, o, lse, d_o, dq, dk, dv, np.zeros(3, np.float32), sinks=sinks)
    with pytest.raises(TypeError, match="float32"):
        native(q, k, v, o, lse, d_o, dq, dk, dv, np.zeros(h, np.float16), sinks=sinks)
    with pytest.raises(ValueError, match="a bound must be >= 0"):
        kernel_ops.attention_backward(q, k, v, o, lse, d_o, window=(-3, 0))
    with pytest.raises(ValueError, match="the soft-cap must be finite and positive"):
        kernel_ops.attention_backward(q, k, v, o, lse, d_o, softcap=-1.0)
    big = [randn(b, s, h, 128) for _ in range(4)]
    with pytest.raises(ValueError, match=r"head_dim = 128: the variants' backward is built for head_dim in \[64\]"):
        kernel_ops.attention_backward(*big[:3], big[0], lse, big[3], softcap=5.0)


def test_outputs_can_be_given():
    a, b = randn(16, 64), randn(8, 64)
    c = np.full((16, 8), 7.0, np.float16)
    assert kernel_ops.matmul(a, b, out=c) is c
    assert rel_err(c, a.astype(np.float32) @ b.astype(np.float32).T) < 2e-3


@pytest.mark.parametrize("call, exc, rule", [
    (lambda: kernel_ops.matmul(randn(16, 64, dtype=np.float32), randn(8, 64, dtype=np.float32)), TypeError, "the op takes float16 or bfloat16"),
    (lambda: kernel_ops.matmul(randn(16, 64), randn(8, 32)), ValueError, "K differs (64 vs 32)"),
    (lambda: kernel_ops.matmul(randn(16, 64), randn(8, 64), out=np.empty((16, 9), np.float16)), ValueError, "shape [16, 8] expected"),
    (lambda: kernel_ops.matmul(randn(16, 128)[:, ::2], randn(8, 64)), ValueError, "not row-major (C-contiguous)"),
    (lambda: kernel_ops.matmul(np.empty(16 * 64 + 1, np.float16)[1:].reshape(16, 64), randn(8, 64)), ValueError, "not a multiple of 16 bytes"),
    (lambda: kernel_ops.matmul([[1.0]], randn(8, 64)), TypeError, "is not an array with `__dlpack__`"),
    # With out= given the wrapper allocates nothing: the native call names the argument.
    (lambda: kernel_ops.rms_norm([[1.0] * 1024], randn(1024), out=randn(1, 1024)), TypeError, "`x`: a list is not an array with `__dlpack__`"),
    (lambda: kernel_ops.matmul(randn(16, 64), "b", out=randn(16, 8)), TypeError, "`b`: a str is not an array with `__dlpack__`"),
    (lambda: kernel_ops.rms_norm(randn(3, 1024), randn(512)), ValueError, "shape [1024] expected"),
    (lambda: kernel_ops.rms_norm(randn(1, 65537), randn(65537)), ValueError, "rows of 1 to 65536 columns"),
    (lambda: kernel_ops.rms_norm(randn(3, 64, dtype=np.float32), randn(64)), TypeError, "differ in dtype"),
    (lambda: kernel_ops.softmax(randn(3, 64, dtype=np.float64)), TypeError, "float32"),
    (lambda: kernel_ops.attention(randn(1, 16, 3, 64), randn(1, 16, 2, 64), randn(1, 16, 2, 64)), ValueError, "kv_heads must divide heads"),
    (lambda: kernel_ops.attention(randn(1, 16, 2, 96), randn(1, 16, 2, 96), randn(1, 16, 2, 96)), ValueError, "head_dim = 96"),
    (lambda: kernel_ops.attention_backward(*(randn(1, 16, 2, 256) for _ in range(4)), np.zeros((1, 2, 16), np.float32), randn(1, 16, 2, 256)), ValueError, "the backward pass is built for head_dim in [64, 128]"),
    (lambda: kernel_ops.attention(randn(1, 16, 2, 64), randn(1, 17, 2, 64), randn(1, 17, 2, 64)), ValueError, "shape [1, 16, 2, 64] expected"),
])
def test_bad_inputs_raise_naming_the_rule(call, exc, rule):
    with pytest.raises(exc) as e:
        call()
    assert rule in str(e.value), str(e.value)


@pytest.mark.skipif(not hasattr(_native, "_testing_transpose"), reason="wheel built without the `testing` feature")
def test_a_race_report_is_an_emulator_report_exception():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    _native._testing_transpose(x, y, racy=False)
    assert (y == x.reshape(8, 8).T.reshape(-1)).all()
    with pytest.raises(kernel_ops.EmulatorReport) as e:
        _native._testing_transpose(x, np.zeros(64, np.float32), racy=True)
    assert "race" in str(e.value).lower(), str(e.value)


@pytest.mark.skipif(not hasattr(_native, "_probe_rms_norm"), reason="wheel built without the `testing` feature")
def test_the_overhead_probe_stops_before_the_launch():
    # python/bench/overhead_probe.py times these stages: none may launch.
    x, g = randn(2, 1024), randn(1024)
    y = np.full((2, 1024), np.nan, np.float16)
    for stage in (0, 1, 2):
        assert _native._probe_rms_norm(x, g, y, 1e-6, None, stage) is None
        assert np.isnan(y).all(), f"stage {stage} wrote the output"
    with pytest.raises(ValueError, match="stage: 0, 1 or 2"):
        _native._probe_rms_norm(x, g, y, 1e-6, None, 3)
    # Stage 1 imports the arrays, so a non-array is refused there, naming it.
    with pytest.raises(TypeError, match="`gamma`: a list is not an array"):
        _native._probe_rms_norm(x, [1.0], y, 1e-6, None, 1)


def decode_reference(q, k, v, lens, scale):
    """O and lse of decode: q [B, T, H, D], cache [B, L, KVH, D]."""
    b, t, h, d = q.shape
    group = h // k.shape[2]
    o, lse = np.zeros(q.shape), np.full((b, h, t), -np.inf)
    for bi in range(b):
        n = int(lens[bi])
        for hi in range(h):
            kk, vv = k[bi, :n, hi // group].astype(np.float64), v[bi, :n, hi // group].astype(np.float64)
            for ti in range(t):
                seen = n - t + 1 + ti
                if seen <= 0:
                    continue
                s = kk[:seen] @ q[bi, ti, hi].astype(np.float64) * scale
                m = s.max()
                p = np.exp(s - m)
                o[bi, ti, hi] = p @ vv[:seen] / p.sum()
                lse[bi, hi, ti] = m + np.log(p.sum())
    return o, lse


def test_decode_matches_numpy_contiguous_and_paged():
    b, t, h, kvh, d, max_len = 3, 2, 4, 1, 64, 96
    q = randn(b, t, h, d)
    k, v = randn(b, max_len, kvh, d), randn(b, max_len, kvh, d)
    lens = np.array([1, 70, 96], np.int32)
    o, lse = kernel_ops.attention_decode(q, k, v, lens)
    want_o, want_lse = decode_reference(q, k, v, lens, 1 / 8)
    assert o.shape == q.shape and lse.shape == (b, h, t)
    assert rel_err(o, want_o) < 5e-3
    fin = np.isfinite(want_lse)
    assert np.array_equal(np.isfinite(lse), fin) and np.abs(lse[fin] - want_lse[fin]).max() < 5e-3
    # The same cache in pages of 16 keys, the pages shuffled.
    page, per = 16, max_len // 16
    perm = rng.permutation(b * per).astype(np.int32)
    table = perm.reshape(b, per)
    kp, vp = np.empty((b * per, page, kvh, d), np.float16), np.empty((b * per, page, kvh, d), np.float16)
    kp[perm] = k.reshape(b * per, page, kvh, d)
    vp[perm] = v.reshape(b * per, page, kvh, d)
    o2, _ = kernel_ops.attention_decode(q, kp, vp, lens, block_table=table)
    assert rel_err(o2, want_o) < 5e-3


def test_decode_reports_a_length_above_the_cache():
    q, k = randn(1, 1, 2, 64), randn(1, 40, 1, 64)
    with pytest.raises(ValueError, match="max_len = 40"):
        kernel_ops.attention_decode(q, k, k, np.array([41], np.int32), check=True)


def test_varlen_matches_numpy_causal_bottom_right():
    cu_q, cu_k = np.array([0, 5, 5, 75], np.int32), np.array([0, 9, 12, 82], np.int32)
    h, kvh, d = 2, 1, 64
    q, k, v = randn(75, h, d), randn(82, kvh, d), randn(82, kvh, d)
    o, lse = kernel_ops.attention_varlen(q, k, v, cu_q, cu_k, 70, 70, causal=True)
    assert o.shape == q.shape and lse.shape == (h, 75)
    for s in range(3):
        q0, q1, k0, k1 = cu_q[s], cu_q[s + 1], cu_k[s], cu_k[s + 1]
        if q1 == q0:
            continue
        lq, lk = q1 - q0, k1 - k0
        for hi in range(h):
            sc = q[q0:q1, hi].astype(np.float64) @ k[k0:k1, 0].astype(np.float64).T / 8
            sc = np.where(np.arange(lk)[None, :] > np.arange(lq)[:, None] + lk - lq, -np.inf, sc)
            p = np.exp(sc - sc.max(-1, keepdims=True))
            want = (p / p.sum(-1, keepdims=True)) @ v[k0:k1, 0].astype(np.float64)
            assert rel_err(o[q0:q1, hi], want) < 5e-3
