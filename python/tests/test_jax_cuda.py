"""kernel_ops.jax on a CUDA GPU: the ops as XLA FFI custom calls inside
jax.jit, their kernels queued on XLA's stream over XLA's device buffers.
Each op against a float64 reference; jax.grad of attention; chains of
jitted jnp ops and kernel_ops ops with no explicit synchronization (the
stream order is the only thing that makes them right). Skips visibly
without a CUDA JAX device (the CPU machines of CI)."""
import os

import numpy as np
import pytest

# JAX takes 75% of a GPU's memory at its first use unless told not to: the
# torch tests of the same pytest run need theirs.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
kj = pytest.importorskip("kernel_ops.jax")

from test_emulator import attention_backward_reference, attention_reference, norm_references, rel_err  # noqa: E402


def _gpu():
    try:
        return jax.devices("cuda")[0]
    except RuntimeError:
        return None


GPU = _gpu()
pytestmark = pytest.mark.skipif(GPU is None, reason="no CUDA JAX device (jax.devices('cuda') is empty)")
rng = np.random.default_rng(5)


def randn(*shape, dtype=np.float16):
    return rng.standard_normal(shape).astype(dtype)


def put(*xs):
    return [jax.device_put(x, GPU) for x in xs]


@pytest.mark.parametrize("dtype, tol", [(np.float16, 2e-3), ("bfloat16", 8e-3)])
def test_matmul_on_the_gpu(dtype, tol):
    dt = jnp.bfloat16 if dtype == "bfloat16" else dtype
    a, b = randn(1000, 1024, dtype=np.float32), randn(520, 1024, dtype=np.float32)
    ga, gb = (jax.device_put(jnp.asarray(x, dt), GPU) for x in (a, b))
    c = jax.jit(kj.matmul)(ga, gb)
    assert c.devices() == {GPU} and c.dtype == dt and c.shape == (1000, 520)
    want = np.asarray(ga, np.float64) @ np.asarray(gb, np.float64).T
    assert rel_err(np.asarray(c, np.float32), want) < tol


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float16, 2e-3), ("bfloat16", 8e-3)])
@pytest.mark.parametrize("cols", [13, 4096, 20000])
def test_norms_on_the_gpu(dtype, tol, cols):
    dt = jnp.bfloat16 if dtype == "bfloat16" else dtype
    x, g, b = (jax.device_put(jnp.asarray(v, dt), GPU) for v in (randn(64, cols, dtype=np.float32), randn(cols, dtype=np.float32), randn(cols, dtype=np.float32)))
    sm, ln, rms = norm_references(*(np.asarray(v, np.float32) for v in (x, g, b)))
    got = jax.jit(lambda x, g, b: (kj.softmax(x), kj.layer_norm(x, g, b), kj.rms_norm(x, g)))(x, g, b)
    for name, y, want in zip(("softmax", "layer_norm", "rms_norm"), got, (sm, ln, rms)):
        assert y.dtype == dt and y.shape == x.shape
        err = rel_err(np.asarray(y, np.float32), want)
        assert err < tol, f"{name} {dt} cols {cols}: {err}"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_attention_on_the_gpu(causal, d):
    q, k, v = randn(2, 300, 4, d), randn(2, 300, 2, d), randn(2, 300, 2, d)
    o, lse = jax.jit(lambda q, k, v: kj.attention_with_lse(q, k, v, causal=causal))(*put(q, k, v))
    want_o, want_lse = attention_reference(q, k, v, causal, 1 / np.sqrt(d))
    assert rel_err(np.asarray(o), want_o) < 5e-3
    assert np.abs(np.asarray(lse) - want_lse).max() < 5e-3


def test_bfloat16_attention_on_the_gpu():
    # bfloat16 inputs (rounded from float32), the float64 reference of the
    # rounded values; test_torch_cuda's bfloat16 tolerance.
    q, k, v = (jnp.asarray(randn(1, 1000, 4 if i == 0 else 2, 64, dtype=np.float32), jnp.bfloat16) for i in range(3))
    o, lse = jax.jit(lambda q, k, v: kj.attention_with_lse(q, k, v, causal=True))(*put(q, k, v))
    want_o, want_lse = attention_reference(*(np.asarray(x, np.float32) for x in (q, k, v)), True, 1 / 8)
    assert o.dtype == jnp.bfloat16 and rel_err(np.asarray(o, np.float32), want_o) < 1e-2
    assert np.abs(np.asarray(lse) - want_lse).max() < 5e-3


@pytest.mark.parametrize("d", [64, 128])
def test_attention_gradient_on_the_gpu(d):
    q, k, v, w = randn(1, 300, 4, d), randn(1, 300, 2, d), randn(1, 300, 2, d), randn(1, 300, 4, d)

    def loss(q, k, v):
        return jnp.sum(kj.attention(q, k, v, causal=True).astype(jnp.float32) * jnp.asarray(w, jnp.float32))

    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*put(q, k, v))
    want = attention_backward_reference(q, k, v, w, True, 1 / np.sqrt(d))
    for name, got, ref in zip(("dq", "dk", "dv"), grads, want):
        assert got.dtype == jnp.float16 and rel_err(np.asarray(got), ref) < 1e-2, f"{name}: {rel_err(np.asarray(got), ref)}"


def test_the_op_runs_in_order_with_xlas_stream():
    # In one jitted computation a long jnp computation makes the op's
    # input and jnp ops consume its output; 20 rounds, each round's input
    # the previous round's output, with no synchronization until the end:
    # the kernels must wait for XLA's work on its stream, and XLA's work
    # must wait for them. Each round also computes jax.nn.softmax of the
    # same tensor, in the same computation: the reference.
    a = jax.device_put(jnp.asarray(randn(2048, 2048, dtype=np.float32) / 45), GPU)
    x = jax.device_put(jnp.asarray(randn(256, 2048, dtype=np.float32)), GPU)

    @jax.jit
    def step(x):
        for _ in range(4):
            x = jnp.tanh(x @ a)
        s = x * 8
        return kj.softmax(s) * 2048, jax.nn.softmax(s, axis=-1) * 2048

    pairs = []
    for _ in range(20):
        ours, ref = step(x)
        pairs.append((ours, ref))
        x = ours
    for i, (got, want) in enumerate(pairs):
        got, want = np.asarray(got), np.asarray(want)
        assert np.isfinite(got).all() and rel_err(got, want) < 1e-4, f"round {i}: {rel_err(got, want)}"


def test_a_jitted_call_twice_gives_the_same_result():
    x, g = put(randn(128, 4096), randn(4096))
    f = jax.jit(lambda x, g: kj.rms_norm(x, g) * 3)
    assert np.array_equal(np.asarray(f(x, g)), np.asarray(f(x, g)))
