"""The norms' backwards and the fused residual norms on NumPy arrays (the
CPU emulator), against NumPy float64 references, which are themselves
checked against finite differences; the torch autograd of the norm ops
on CPU tensors (the emulator) where torch is installed (skipped visibly
otherwise: the CI venv has no torch; ``test_torch_cuda.py`` checks the same
on the GPU)."""
import numpy as np
import pytest

import kernel_ops

rng = np.random.default_rng(11)

# Normwise relative tolerances of dx (a difference of terms of dy's size:
# twice the forward's) and of the float32 weight gradients.
DX_TOL = {"float16": 8e-3, "bfloat16": 4e-2, "float32": 4e-5}
W_TOL = 5e-5


def dtypes():
    out = [np.float16, np.float32]
    try:
        import ml_dtypes

        out.append(ml_dtypes.bfloat16)
    except ImportError:
        pass
    return out


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).max() / np.abs(want).max())


def rms_bwd_ref(x, g, dy, eps):
    x, g, dy = (np.asarray(a, np.float64) for a in (x, g, dy))
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    w = dy * g
    dx = r * w - x * r ** 3 * (w * x).mean(-1, keepdims=True)
    return dx, (dy * x * r).reshape(-1, x.shape[-1]).sum(0)


def ln_bwd_ref(x, g, dy, eps):
    x, g, dy = (np.asarray(a, np.float64) for a in (x, g, dy))
    mu = x.mean(-1, keepdims=True)
    r = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    xhat, w = (x - mu) * r, dy * g
    dx = r * (w - w.mean(-1, keepdims=True) - xhat * (w * xhat).mean(-1, keepdims=True))
    cols = x.shape[-1]
    return dx, (dy * xhat).reshape(-1, cols).sum(0), dy.reshape(-1, cols).sum(0)


def rms_ref(x, g, eps):
    x = np.asarray(x, np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * np.asarray(g, np.float64)


def ln_ref(x, g, b, eps):
    x = np.asarray(x, np.float64)
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * np.asarray(g, np.float64) + np.asarray(b, np.float64)


def test_numpy_references_match_finite_differences():
    x, g, b, dy = rng.standard_normal((2, 6)) + 0.3, 1 + rng.standard_normal(6) / 2, rng.standard_normal(6), rng.standard_normal((2, 6))
    eps, h = 1e-3, 1e-6

    def grad(f, v):
        out = np.zeros_like(v)
        for i in np.ndindex(v.shape):
            p, m = v.copy(), v.copy()
            p[i] += h
            m[i] -= h
            out[i] = (f(p) - f(m)) / (2 * h)
        return out

    dx, dg = rms_bwd_ref(x, g, dy, eps)
    np.testing.assert_allclose(dx, grad(lambda v: (rms_ref(v, g, eps) * dy).sum(), x), atol=1e-6)
    np.testing.assert_allclose(dg, grad(lambda v: (rms_ref(x, v, eps) * dy).sum(), g), atol=1e-6)
    dx, dg, db = ln_bwd_ref(x, g, dy, eps)
    np.testing.assert_allclose(dx, grad(lambda v: (ln_ref(v, g, b, eps) * dy).sum(), x), atol=1e-6)
    np.testing.assert_allclose(dg, grad(lambda v: (ln_ref(x, v, b, eps) * dy).sum(), g), atol=1e-6)
    np.testing.assert_allclose(db, grad(lambda v: (ln_ref(x, g, v, eps) * dy).sum(), b), atol=1e-6)


@pytest.mark.parametrize("dtype", dtypes(), ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(17, 8), (3, 768), (2, 3, 1000), (1, 4096), (5, 13), (2, 1025)])
def test_norm_backwards_match_numpy(dtype, shape):
    name = np.dtype(dtype).name
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    g = (1 + rng.standard_normal(shape[-1]) / 4).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    dx, dg = kernel_ops.rms_norm_backward(x, g, dy, eps=1e-6)
    assert dx.shape == x.shape and dx.dtype == x.dtype and dg.dtype == np.float32 and dg.shape == (shape[-1],)
    want_dx, want_dg = rms_bwd_ref(x, g, dy, 1e-6)
    assert rel_err(dx, want_dx) < DX_TOL[name]
    assert rel_err(dg, want_dg) < W_TOL
    dx, dg, db = kernel_ops.layer_norm_backward(x, g, dy, eps=1e-5)
    want_dx, want_dg, want_db = ln_bwd_ref(x, g, dy, 1e-5)
    assert rel_err(dx, want_dx) < DX_TOL[name]
    assert rel_err(dg, want_dg) < W_TOL and rel_err(db, want_db) < W_TOL


def test_norm_backward_refusals_name_the_rule():
    x, g = rng.standard_normal((2, 4099)).astype(np.float16), np.ones(4099, np.float16)
    with pytest.raises(ValueError, match="cols = 4099.*wider than 4096 columns only at a multiple of 8"):
        kernel_ops.rms_norm_backward(x, g, x)
    x32 = rng.standard_normal((1, 8196)).astype(np.float32)
    with pytest.raises(ValueError, match="f32 rows of at most 8192"):
        kernel_ops.layer_norm_backward(x32, np.ones(8196, np.float32), x32)
    x = rng.standard_normal((2, 64)).astype(np.float16)
    with pytest.raises(TypeError, match="`dgamma` .*the op takes float32"):
        kernel_ops.rms_norm_backward(x, np.ones(64, np.float16), x, dgamma=np.zeros(64, np.float16))
    with pytest.raises(ValueError):
        kernel_ops.rms_norm_backward(x, np.ones(64, np.float16), x[:1])


@pytest.mark.parametrize("dtype", [d for d in dtypes() if np.dtype(d).itemsize == 2], ids=lambda d: np.dtype(d).name)
def test_fused_residual_norms_match_numpy(dtype):
    x, res = rng.standard_normal((3, 1024)).astype(dtype), rng.standard_normal((3, 1024)).astype(dtype)
    g, b = (1 + rng.standard_normal(1024) / 4).astype(dtype), rng.standard_normal(1024).astype(dtype)
    tol = 4e-3 if np.dtype(dtype).name == "float16" else 2e-2
    s = (x.astype(np.float32) + res.astype(np.float32)).astype(dtype)
    y, new_res = kernel_ops.add_rms_norm(x, res, g, eps=1e-6)
    assert y.dtype == x.dtype and np.array_equal(new_res.astype(np.float32), s.astype(np.float32))
    assert rel_err(y, rms_ref(s, g, 1e-6)) < tol
    y, new_res = kernel_ops.add_layer_norm(x, res, g, b, eps=1e-5)
    assert np.array_equal(new_res.astype(np.float32), s.astype(np.float32))
    assert rel_err(y, ln_ref(s, g, b, 1e-5)) < tol
    with pytest.raises(ValueError, match="multiple of 8"):
        kernel_ops.add_rms_norm(x[:, :1004].copy(), res[:, :1004].copy(), g[:1004].copy())
    with pytest.raises(TypeError, match="the op takes float16 or bfloat16"):
        kernel_ops.add_rms_norm(x.astype(np.float32), res.astype(np.float32), g.astype(np.float32))


# ------------------------------------------------ torch autograd (CPU: the emulator)

def _torch():
    return pytest.importorskip("torch", reason="torch is not installed (the CI venv has none): autograd is checked by test_torch_cuda.py on the GPU")


def _torch_refs(torch):
    def rms(x, g, eps):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * g

    def ln(x, g, b, eps):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, eps)

    return rms, ln


def test_torch_autograd_of_the_norms_matches_float64_autograd():
    torch = _torch()
    import kernel_ops.torch_ops  # noqa: F401

    rms, ln = _torch_refs(torch)
    x = (torch.randn(5, 256, dtype=torch.float32) * 2 + 0.5).requires_grad_()
    g = (1 + torch.randn(256) / 4).requires_grad_()
    b = torch.randn(256).requires_grad_()
    dy = torch.randn(5, 256)

    def grads(f, *args):
        for a in args:
            a.grad = None
        (f(*args) * dy).sum().backward()
        return [a.grad.clone() for a in args]

    def f64(*args):
        return [a.detach().double().requires_grad_() for a in args]

    for got, want in [
        (grads(lambda x, g: torch.ops.kernel_ops.rms_norm(x, g, 1e-6), x, g), grads(lambda x, g: rms(x, g, 1e-6), *f64(x, g))),
        (grads(lambda x, g, b: torch.ops.kernel_ops.layer_norm(x, g, b, 1e-5), x, g, b), grads(lambda x, g, b: ln(x, g, b, 1e-5), *f64(x, g, b))),
    ]:
        for a, w in zip(got, want):
            assert rel_err(a.numpy(), w.numpy()) < 4e-5


def test_torch_autograd_of_the_fused_residual_norms():
    torch = _torch()
    import kernel_ops.torch_ops  # noqa: F401

    rms, ln = _torch_refs(torch)
    for layer in (False, True):
        x = torch.randn(3, 512, dtype=torch.float16).requires_grad_()
        r = torch.randn(3, 512, dtype=torch.float16).requires_grad_()
        g = (1 + torch.randn(512) / 4).half().requires_grad_()
        b = torch.randn(512).half().requires_grad_()
        dy, dres = torch.randn(3, 512).half(), torch.randn(3, 512).half()
        args = (x, r, g, b) if layer else (x, r, g)
        y, nr = (torch.ops.kernel_ops.add_layer_norm(*args, 1e-5) if layer else torch.ops.kernel_ops.add_rms_norm(*args, 1e-6))
        ((y * dy).float().sum() + (nr * dres).float().sum()).backward()
        ref = [a.detach().double().requires_grad_() for a in args]
        s = ref[0] + ref[1]
        yr = ln(s, ref[2], ref[3], 1e-5) if layer else rms(s, ref[2], 1e-6)
        ((yr * dy.double()).sum() + (s * dres.double()).sum()).backward()
        for a, w in zip(args, ref):
            assert rel_err(a.grad.float().numpy(), w.grad.numpy()) < 1e-2


def test_fused_residual_norms_fp8_output():
    ml_dtypes = pytest.importorskip("ml_dtypes")  # e4m3 bytes to floats
    x, res = rng.standard_normal((3, 768)).astype(np.float16), rng.standard_normal((3, 768)).astype(np.float16)
    g, b = (1 + rng.standard_normal(768) / 4).astype(np.float16), rng.standard_normal(768).astype(np.float16)
    s = (x.astype(np.float32) + res.astype(np.float32)).astype(np.float16)
    for layer, want in ((False, rms_ref(s, g, 1e-6)), (True, ln_ref(s, g, b, 1e-5))):
        for mode, scale in (("row", None), ("tensor", float(np.abs(want).max()) / 400), ("dynamic", None)):
            args = (x, res, g, b) if layer else (x, res, g)
            (q, scales), new_res = (kernel_ops.add_layer_norm if layer else kernel_ops.add_rms_norm)(*args, fp8=mode, scale=scale)
            assert q.dtype == np.uint8 and q.shape == x.shape and np.array_equal(new_res, s)
            assert scales.shape == ((3,) if mode == "row" else (1,))
            deq = q.view(ml_dtypes.float8_e4m3fn).astype(np.float64) * (scales[:, None] if mode == "row" else scales[0])
            want_scale = {"row": np.abs(want).max(-1) / 448, "tensor": scale, "dynamic": np.abs(want).max() / 448}[mode]
            np.testing.assert_allclose(scales if mode == "row" else scales[0], want_scale, rtol=1e-2)
            for r in range(3):
                assert rel_err(deq[r], want[r]) < 0.07, (layer, mode, r)
    with pytest.raises(ValueError, match="fp8 = 'bad'"):
        kernel_ops.add_rms_norm(x, res, g, fp8="bad")
    with pytest.raises(ValueError, match="takes scale="):
        kernel_ops.add_rms_norm(x, res, g, fp8="tensor")
