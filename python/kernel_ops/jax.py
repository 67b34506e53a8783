"""kernel_ops inside ``jax.jit``: the ops as XLA FFI custom calls.

``import kernel_ops.jax`` registers the package's XLA FFI targets with JAX
once (``kernel_ops_<op>`` for the ``cpu`` and ``CUDA`` platforms, typed FFI,
``api_version=1``) and offers the ops as functions of ``jax.Array``\\ s that
trace into a jitted computation (``jax.ffi.ffi_call``):

* on a CUDA device the op's kernels are queued on the GPU on XLA's own
  stream, on XLA's buffers (no copy, no host synchronization);
* on the CPU the op runs on the project's CPU emulator, on the host
  buffers XLA hands over: slow, for tests and small shapes.

Every shape and dtype rule is checked at trace time: a call that breaks
one raises ``TypeError`` (dtype) or ``ValueError`` (shape) naming the rule,
the values and the fix, before anything is compiled. The Rust handlers
check them again (and the kernels' own rules, alignment included) and
fail the computation otherwise, with JAX's runtime error (``JaxRuntimeError``,
``XlaRuntimeError`` in older JAX) whose message starts
``kernel_ops.jax.<op>:``.

``attention`` is differentiable (``jax.custom_vjp``: the backward pass is
the ``kernel_ops_attention_backward`` target); the other ops have no
derivative rule (JAX refuses ``jax.grad`` of them with its own error).
Under ``jax.vmap`` every op runs once per batch element, in a loop
(``vmap_method="sequential"``).

``import kernel_ops`` does not import JAX; this module needs it (``jax >=
0.5``, whose ``jax.ffi`` it uses).
"""
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from . import _native

__all__ = ["matmul", "softmax", "layer_norm", "rms_norm", "attention", "attention_with_lse", "TARGETS"]

#: The registered FFI target of each op: ``kernel_ops_<op>``.
TARGETS = {op: f"kernel_ops_{op}" for op in _native._xla_ffi_targets()}


def _register():
    # The handlers answer XLA's metadata query with FFI API version 0.1,
    # which every jaxlib from 0.5 on accepts. Registering for "CUDA"
    # without a CUDA plugin is kept by JAX for a plugin loaded later, and
    # costs nothing.
    for op, (cpu, cuda) in _native._xla_ffi_targets().items():
        jax.ffi.register_ffi_target(TARGETS[op], cpu, platform="cpu", api_version=1)
        jax.ffi.register_ffi_target(TARGETS[op], cuda, platform="CUDA", api_version=1)


_register()

_HALF = (jnp.float16, jnp.bfloat16)
_NORM = (jnp.float16, jnp.bfloat16, jnp.float32)
_MAX_COLS = 65536
_HEAD_DIMS = (64, 128, 256)
_BWD_HEAD_DIMS = (64, 128)


def _call(op, results):
    """The FFI call of ``op``'s target with ``results`` (shapes and dtypes).
    Under ``jax.vmap`` it runs once per batch element (``sequential``: a
    loop of calls of the unbatched op, whose shapes the trace-time checks
    saw)."""
    return jax.ffi.ffi_call(TARGETS[op], results, vmap_method="sequential")


def _names(dtypes):
    return " or ".join(np.dtype(d).name for d in dtypes)


def _dtype(op, arrays, allowed):
    """The one dtype of ``arrays`` (name -> array), one of ``allowed``;
    TypeError naming the array otherwise."""
    (n0, a0), *rest = arrays.items()
    if a0.dtype not in [np.dtype(d) for d in allowed]:
        raise TypeError(f"kernel_ops.jax.{op}: `{n0}` has dtype {a0.dtype}; the op takes {_names(allowed)}: "
                        f"cast it (`{n0}.astype(jnp.float16)`)")
    for n, a in rest:
        if a.dtype != a0.dtype:
            raise TypeError(f"kernel_ops.jax.{op}: `{n0}` is {a0.dtype} and `{n}` is {a.dtype}: every array of the "
                            f"op has one dtype; cast `{n}` to {a0.dtype}")
    return a0.dtype


def _nonempty(op, name, x):
    if any(int(d) == 0 for d in x.shape):
        raise ValueError(f"kernel_ops.jax.{op}: `{name}` has shape {tuple(x.shape)}, with a dimension of 0: "
                         "every dimension must be at least 1 (skip the call for an empty array)")


def matmul(a, b):
    """``c = a @ b.T``: a ``M x K``, b ``N x K``, float16 or bfloat16 (both
    alike), f32 accumulation; c ``M x N`` in their dtype. K and N must be
    multiples of 8 (the kernels' TMA row strides are multiples of 16
    bytes)."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    dt = _dtype("matmul", {"a": a, "b": b}, _HALF)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"kernel_ops.jax.matmul: `a` has shape {a.shape} and `b` {b.shape}: two matrices "
                         "(a M x K, b N x K) expected; reshape batched inputs to 2 dimensions")
    (m, k), (n, kb) = a.shape, b.shape
    if k != kb:
        raise ValueError(f"kernel_ops.jax.matmul: K differs: `a` is {a.shape} (M x K, K = {k}) and `b` is {b.shape} "
                         f"(N x K, K = {kb}); c = a @ b.T takes b as N x K (pass b.T if b is K x N)")
    _nonempty("matmul", "a", a)
    _nonempty("matmul", "b", b)
    for dim, v, what in (("K", k, "`a` and `b`"), ("N", n, "`c`")):
        if v % 8:
            raise ValueError(f"kernel_ops.jax.matmul: {dim} = {v} is not a multiple of 8: the rows of {what} must be "
                             f"multiples of 16 bytes (TMA); pad {dim} with zeros to {-(-v // 8) * 8}")
    return _call("matmul", jax.ShapeDtypeStruct((m, n), dt))(a, b)


def _rows(op, x):
    if x.ndim < 2:
        raise ValueError(f"kernel_ops.jax.{op}: `x` has shape {x.shape}: at least 2 dimensions (rows x columns) "
                         "expected; add a leading axis (`x[None]`)")
    _nonempty(op, "x", x)
    cols = x.shape[-1]
    if cols > _MAX_COLS:
        raise ValueError(f"kernel_ops.jax.{op}: the last dimension is {cols}: rows of 1 to {_MAX_COLS} columns are "
                         "implemented; split wider rows and combine their statistics")
    return cols


def _vector(op, name, v, cols):
    if tuple(v.shape) != (cols,):
        raise ValueError(f"kernel_ops.jax.{op}: `{name}` has shape {tuple(v.shape)}; ({cols},) expected "
                         f"(one entry per column of x)")


def softmax(x):
    """``softmax(x)`` over the last dimension (float16, bfloat16 or
    float32; the last dimension 1 to 65536; at least 2 dimensions)."""
    x = jnp.asarray(x)
    _dtype("softmax", {"x": x}, _NORM)
    _rows("softmax", x)
    return _call("softmax", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def layer_norm(x, gamma, beta, eps=1e-5):
    """Layer norm over the last dimension, scaled by gamma and shifted by
    beta (float16, bfloat16 or float32, gamma and beta ``[cols]`` in x's
    dtype)."""
    x, gamma, beta = jnp.asarray(x), jnp.asarray(gamma), jnp.asarray(beta)
    _dtype("layer_norm", {"x": x, "gamma": gamma, "beta": beta}, _NORM)
    cols = _rows("layer_norm", x)
    _vector("layer_norm", "gamma", gamma, cols)
    _vector("layer_norm", "beta", beta, cols)
    return _call("layer_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(
        x, gamma, beta, eps=np.float32(eps))


def rms_norm(x, gamma, eps=1e-6):
    """RMS norm over the last dimension, scaled by gamma (float16, bfloat16
    or float32, gamma ``[cols]`` in x's dtype)."""
    x, gamma = jnp.asarray(x), jnp.asarray(gamma)
    _dtype("rms_norm", {"x": x, "gamma": gamma}, _NORM)
    cols = _rows("rms_norm", x)
    _vector("rms_norm", "gamma", gamma, cols)
    return _call("rms_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, gamma, eps=np.float32(eps))


def _attention_checks(op, q, k, v, scale, head_dims):
    dt = _dtype(op, {"q": q, "k": k, "v": v}, _HALF)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim != 4:
            raise ValueError(f"kernel_ops.jax.{op}: `{name}` has shape {x.shape}: 4 dimensions "
                             "[batch, seq, heads, head_dim] expected")
        _nonempty(op, name, x)
    b, s, h, d = q.shape
    kvh = k.shape[2]
    if tuple(k.shape) != (b, s, kvh, d) or tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"kernel_ops.jax.{op}: q is {q.shape}, k is {k.shape}, v is {v.shape}: k and v must be "
                         f"[batch, seq, kv_heads, head_dim] = [{b}, {s}, kv_heads, {d}] (q's batch, seq and head_dim), "
                         "and alike")
    if d not in head_dims:
        raise ValueError(f"kernel_ops.jax.{op}: head_dim = {d}: the kernels are built for head_dim in {head_dims}; "
                         "pad the heads with zeros to the next one")
    if h % kvh:
        raise ValueError(f"kernel_ops.jax.{op}: heads = {h}, kv_heads = {kvh}: kv_heads must divide heads "
                         "(each K/V head serves heads / kv_heads Q heads)")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"kernel_ops.jax.{op}: scale = {scale}: the softmax scale must be finite and positive")
    return dt, np.float32(scale)


def _attention_fwd_call(q, k, v, causal, scale):
    b, s, h, _ = q.shape
    return _call(
        "attention",
        (jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((b, h, s), jnp.float32)),
    )(q, k, v, causal=bool(causal), scale=scale)


def attention_with_lse(q, k, v, causal=False, scale=None):
    """Attention forward returning ``(o, lse)`` (lse ``[batch, heads, seq]``
    float32, natural log), as :func:`kernel_ops.attention`. Not
    differentiable (use :func:`attention` under ``jax.grad``)."""
    q, k, v = jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)
    _, sc = _attention_checks("attention", q, k, v, scale, _HEAD_DIMS)
    return _attention_fwd_call(q, k, v, causal, sc)


def attention(q, k, v, causal=False, scale=None):
    """Attention ``o = softmax(scale q kᵀ [+ causal mask]) v``.

    q ``[batch, seq, heads, head_dim]``; k, v ``[batch, seq, kv_heads,
    head_dim]`` (kv_heads divides heads: GQA/MQA); float16 or bfloat16;
    head_dim 64, 128 or 256 (64 or 128 under ``jax.grad``); ``scale``
    defaults to ``1 / sqrt(head_dim)``. ``causal`` and ``scale`` are Python
    values, static under ``jax.jit`` (a traced one is refused by JAX when
    it is converted). Returns o, like q.

    Differentiable: ``jax.grad`` runs the ``attention_backward`` kernels
    on the forward's saved o and log-sum-exp."""
    q, k, v = jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)
    _, sc = _attention_checks("attention", q, k, v, scale, _HEAD_DIMS)
    return _attention(q, k, v, bool(causal), float(sc))


# causal and scale are static (hashable Python values): nondiff_argnums.
@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _attention(q, k, v, causal, scale):
    return _attention_fwd_call(q, k, v, causal, np.float32(scale))[0]


def _attention_fwd(q, k, v, causal, scale):
    o, lse = _attention_fwd_call(q, k, v, causal, np.float32(scale))
    return o, (q, k, v, o, lse)


def _attention_bwd(causal, scale, res, d_o):
    q, k, v, o, lse = res
    # The backward kernels take fewer head dims than the forward's: refused
    # here, when jax.grad traces the backward pass.
    _attention_checks("attention_backward", q, k, v, scale, _BWD_HEAD_DIMS)
    return tuple(_call(
        "attention_backward",
        (jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct(k.shape, k.dtype),
         jax.ShapeDtypeStruct(v.shape, v.dtype)),
    )(q, k, v, o, lse, d_o.astype(o.dtype), causal=causal, scale=np.float32(scale)))


_attention.defvjp(_attention_fwd, _attention_bwd)
