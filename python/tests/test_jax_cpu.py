"""kernel_ops.jax on JAX's CPU backend: the ops as XLA FFI custom calls
inside jax.jit, run by the Rust handlers on the CPU emulator over XLA's
host buffers. Each op against a float64 NumPy reference with the
tolerances of test_emulator.py; the attention gradient (jax.grad through
the custom VJP) against a float64 reference; the trace-time checks; an
error of a handler raised through XLA. Tiny shapes: the emulator is slow.
Skips visibly without JAX (tools/python-venv.sh installs it)."""
import os

import numpy as np
import pytest

# JAX takes 75% of a GPU's memory at its first use unless told not to: the
# torch tests of the same pytest run need theirs.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
pytest.importorskip("jax.ffi")
kj = pytest.importorskip("kernel_ops.jax")

from test_emulator import attention_backward_reference, attention_reference, norm_references, rel_err  # noqa: E402

CPU = jax.devices("cpu")[0]
rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def on_the_cpu():
    # Every array and computation on JAX's CPU backend, also where a GPU
    # is JAX's default (the GPU machine runs this file too).
    with jax.default_device(CPU):
        yield


def randn(*shape, dtype=np.float16):
    return rng.standard_normal(shape).astype(dtype)


def put(*xs):
    return [jax.device_put(x, CPU) for x in xs]


def test_every_op_has_a_target_and_registering_again_is_harmless():
    assert kj.TARGETS == {op: f"kernel_ops_{op}" for op in
                          ("matmul", "softmax", "layer_norm", "rms_norm", "attention", "attention_backward")}
    # The import registered them; XLA takes the same handlers (same
    # metadata, same addresses) again without complaint.
    kj._register()


def test_matmul_under_jit_matches_float64():
    a, b = randn(24, 40), randn(16, 40)
    c = jax.jit(kj.matmul)(*put(a, b))
    assert c.shape == (24, 16) and c.dtype == jnp.float16
    assert rel_err(np.asarray(c), a.astype(np.float64) @ b.astype(np.float64).T) < 2e-3


def test_matmul_takes_bfloat16():
    a, b = (jnp.asarray(x, jnp.bfloat16) for x in (randn(8, 16, dtype=np.float32), randn(8, 16, dtype=np.float32)))
    c = jax.jit(kj.matmul)(a, b)
    want = np.asarray(a, np.float64) @ np.asarray(b, np.float64).T
    assert c.dtype == jnp.bfloat16 and rel_err(np.asarray(c, np.float32), want) < 8e-3


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float16, 2e-3), ("bfloat16", 8e-3)])
def test_norms_under_jit_match_float64(dtype, tol):
    dt = jnp.bfloat16 if dtype == "bfloat16" else dtype
    # 3 rows of 13 columns: not a multiple of 8, every alignment.
    x, g, b = (jnp.asarray(v, dt) for v in (randn(3, 13, dtype=np.float32), randn(13, dtype=np.float32), randn(13, dtype=np.float32)))
    xs, gs, bs = (np.asarray(v, np.float32) for v in (x, g, b))
    sm, ln, rms = norm_references(xs, gs, bs)
    got = jax.jit(lambda x, g, b: (kj.softmax(x), kj.layer_norm(x, g, b), kj.rms_norm(x, g)))(x, g, b)
    for name, y, want in zip(("softmax", "layer_norm", "rms_norm"), got, (sm, ln, rms)):
        assert y.dtype == x.dtype and y.shape == x.shape
        assert rel_err(np.asarray(y, np.float32), want) < tol, f"{name} {dt}: {rel_err(np.asarray(y, np.float32), want)}"


def test_norm_eps_reaches_the_kernel():
    # With x = 2 everywhere and eps = 12 the RMS norm is 2 / sqrt(4 + 12)
    # = 0.5 per column (gamma = 1); the default eps would give ~1.
    x = jnp.full((2, 8), 2.0, jnp.float32)
    y = jax.jit(lambda x: kj.rms_norm(x, jnp.ones(8, jnp.float32), eps=12.0))(x)
    np.testing.assert_allclose(np.asarray(y), 0.5, rtol=1e-6)


def test_norms_of_three_dimensions_are_rows_of_the_last():
    x, g = randn(2, 3, 16, dtype=np.float32), randn(16, dtype=np.float32)
    y = jax.jit(kj.rms_norm)(*put(x, g))
    want = norm_references(x.reshape(6, 16), g, g)[2].reshape(2, 3, 16)
    assert rel_err(np.asarray(y), want) < 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_attention_under_jit_matches_float64(causal):
    q, k, v = randn(1, 20, 2, 64), randn(1, 20, 1, 64), randn(1, 20, 1, 64)
    scale = 0.1
    o, lse = jax.jit(lambda q, k, v: kj.attention_with_lse(q, k, v, causal=causal, scale=scale))(*put(q, k, v))
    want_o, want_lse = attention_reference(q, k, v, causal, scale)
    assert o.shape == q.shape and o.dtype == jnp.float16 and lse.shape == (1, 2, 20) and lse.dtype == jnp.float32
    assert rel_err(np.asarray(o), want_o) < 5e-3
    assert np.abs(np.asarray(lse) - want_lse).max() < 5e-3
    o2 = jax.jit(lambda q, k, v: kj.attention(q, k, v, causal=causal, scale=scale))(*put(q, k, v))
    assert np.array_equal(np.asarray(o2), np.asarray(o))


def test_attention_gradient_matches_float64():
    # GQA, causal, ragged (20 rows of a 128-row block): dq, dk, dv of
    # loss = sum(o * w), so d_o = w.
    q, k, v, w = randn(1, 20, 2, 64), randn(1, 20, 1, 64), randn(1, 20, 1, 64), randn(1, 20, 2, 64)

    def loss(q, k, v):
        return jnp.sum(kj.attention(q, k, v, causal=True).astype(jnp.float32) * w.astype(np.float32))

    dq, dk, dv = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*put(q, k, v))
    want = attention_backward_reference(q, k, v, w, True, 1 / 8)
    for name, got, ref in zip(("dq", "dk", "dv"), (dq, dk, dv), want):
        assert got.shape == ref.shape and got.dtype == jnp.float16
        assert rel_err(np.asarray(got), ref) < 1e-2, f"{name}: {rel_err(np.asarray(got), ref)}"


def test_a_jitted_call_twice_gives_the_same_result_and_chains_with_jnp():
    x, g = randn(4, 32), randn(32)
    f = jax.jit(lambda x, g: kj.softmax(kj.rms_norm(x * 2, g)) + 1)
    y1, y2 = f(*put(x, g)), f(*put(x, g))
    assert np.array_equal(np.asarray(y1), np.asarray(y2))
    xf = x.astype(np.float64) * 2
    r = xf / np.sqrt((xf ** 2).mean(-1, keepdims=True) + 1e-6) * g
    e = np.exp(r - r.max(-1, keepdims=True))
    assert rel_err(np.asarray(y1), e / e.sum(-1, keepdims=True) + 1) < 2e-3


def test_vmap_runs_the_op_per_batch_element():
    # gamma batched too (one per element), and a matmul with b shared:
    # each element is the unbatched op's result.
    x, g = randn(3, 2, 16, dtype=np.float32), randn(3, 16, dtype=np.float32)
    y = jax.jit(jax.vmap(kj.rms_norm))(*put(x, g))
    for i in range(3):
        want = norm_references(x[i], g[i], g[i])[2]
        assert rel_err(np.asarray(y[i]), want) < 1e-5
    a, b = randn(2, 8, 16), randn(8, 16)
    c = jax.jit(jax.vmap(kj.matmul, in_axes=(0, None)))(*put(a, b))
    want = np.einsum("imk,nk->imn", a.astype(np.float64), b.astype(np.float64))
    assert c.shape == (2, 8, 8) and rel_err(np.asarray(c), want) < 2e-3


@pytest.mark.parametrize("call, exc, rule", [
    (lambda: kj.matmul(jnp.zeros((8, 16), jnp.float32), jnp.zeros((8, 16), jnp.float32)), TypeError, "the op takes float16 or bfloat16"),
    (lambda: kj.matmul(jnp.zeros((8, 16), jnp.float16), jnp.zeros((8, 16), jnp.bfloat16)), TypeError, "every array of the op has one dtype"),
    (lambda: kj.matmul(jnp.zeros((8, 16), jnp.float16), jnp.zeros((8, 24), jnp.float16)), ValueError, "K differs"),
    (lambda: kj.matmul(jnp.zeros((8, 12), jnp.float16), jnp.zeros((8, 12), jnp.float16)), ValueError, "K = 12 is not a multiple of 8"),
    (lambda: kj.matmul(jnp.zeros((8, 16), jnp.float16), jnp.zeros((4, 16), jnp.float16)), ValueError, "N = 4 is not a multiple of 8"),
    (lambda: kj.rms_norm(jnp.zeros((2, 16)), jnp.zeros(8)), ValueError, "`gamma` has shape (8,); (16,) expected"),
    (lambda: kj.rms_norm(jnp.zeros(16), jnp.zeros(16)), ValueError, "at least 2 dimensions"),
    (lambda: kj.softmax(jnp.zeros((1, 65537))), ValueError, "rows of 1 to 65536 columns"),
    (lambda: kj.softmax(jnp.zeros((0, 8))), ValueError, "every dimension must be at least 1"),
    (lambda: kj.softmax(jnp.zeros((2, 8), jnp.int32)), TypeError, "float16 or bfloat16 or float32"),
    (lambda: kj.attention(*(jnp.zeros((1, 16, 2, 96), jnp.float16),) * 3), ValueError, "head_dim = 96"),
    (lambda: kj.attention(jnp.zeros((1, 16, 3, 64), jnp.float16), *(jnp.zeros((1, 16, 2, 64), jnp.float16),) * 2), ValueError, "kv_heads must divide heads"),
    (lambda: kj.attention(jnp.zeros((1, 16, 2, 64), jnp.float16), *(jnp.zeros((1, 17, 2, 64), jnp.float16),) * 2), ValueError, "q's batch, seq and head_dim"),
    (lambda: kj.attention(*(jnp.zeros((1, 16, 2, 64), jnp.float16),) * 3, scale=-1.0), ValueError, "finite and positive"),
    (lambda: jax.grad(lambda q: kj.attention(q, q, q).astype(jnp.float32).sum())(jnp.zeros((1, 16, 1, 256), jnp.float16)),
     ValueError, "attention_backward: head_dim = 256"),
])
def test_bad_inputs_are_refused_at_trace_time(call, exc, rule):
    # Under jax.jit the check runs while tracing: nothing is compiled.
    with pytest.raises(exc) as e:
        jax.jit(call)()
    assert rule in str(e.value), str(e.value)


def test_a_handler_error_names_the_op_and_the_rule():
    # The target called by hand, past the Python checks: the Rust handler
    # refuses the shape and XLA raises its message.
    x, g = jnp.zeros((2, 16), jnp.float32), jnp.zeros(8, jnp.float32)
    call = jax.ffi.ffi_call(kj.TARGETS["rms_norm"], jax.ShapeDtypeStruct(x.shape, x.dtype))
    with pytest.raises(Exception) as e:
        jax.block_until_ready(jax.jit(lambda x, g: call(x, g, eps=np.float32(1e-6)))(x, g))
    assert "kernel_ops.jax.rms_norm: `gamma` is float32[8]: shape [16] expected" in str(e.value), str(e.value)
    with pytest.raises(Exception) as e:
        jax.block_until_ready(jax.jit(lambda x, g: call(x, g))(x, jnp.zeros(16, jnp.float32)))
    assert "kernel_ops.jax.rms_norm: attribute `eps` is missing" in str(e.value), str(e.value)


def test_importing_kernel_ops_does_not_import_jax():
    import subprocess
    import sys
    code = "import sys, kernel_ops; assert 'jax' not in sys.modules, 'kernel_ops imported jax'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.skipif(__import__("ctypes.util").util.find_library("cuda") is not None,
                    reason="libcuda is present: a CUDA handler on host buffers would reach the GPU")
def test_a_cuda_handler_without_a_gpu_fails_naming_the_op():
    # The CUDA handler of rms_norm registered for the CPU under another
    # name: it cannot open a GPU here, and says so through XLA (the message
    # of kernel_py's device error is read with the GIL, from XLA's thread,
    # while the caller waits: no deadlock, no crash).
    from kernel_ops import _native
    jax.ffi.register_ffi_target("kernel_ops_test_cuda_rms_norm_on_cpu", _native._xla_ffi_targets()["rms_norm"][1],
                                platform="cpu", api_version=1)
    x, g = jnp.ones((2, 16), jnp.float32), jnp.ones(16, jnp.float32)
    call = jax.ffi.ffi_call("kernel_ops_test_cuda_rms_norm_on_cpu", jax.ShapeDtypeStruct(x.shape, x.dtype))
    with pytest.raises(Exception) as e:
        jax.block_until_ready(jax.jit(lambda x, g: call(x, g, eps=np.float32(1e-6)))(x, g))
    assert "kernel_ops.jax.rms_norm:" in str(e.value) and "no CUDA GPU found" in str(e.value), str(e.value)
