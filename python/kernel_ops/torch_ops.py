"""kernel_ops's ops as PyTorch operators (``torch.ops.kernel_ops.*``).

Each op is defined with ``torch.library.Library.define`` (an explicit
schema: no argument mutated, new tensors returned, allocated on the
input's device), implemented for the CUDA and CPU
dispatch keys (CPU tensors run on the emulator), and given a fake
implementation (``torch.library.register_fake``) that only computes the
output's shape and dtype, so ``torch.compile`` traces through it with no
graph break; the backwards of attention (and of its variants,
``attention_variant``: sliding window, soft-cap, sinks), the RMS norm, the layer norm
and the fused residual norms are registered with
``torch.library.register_autograd``. Import this module to register them
(torch >= 2.4)::

    import kernel_ops.torch_ops
    c = torch.ops.kernel_ops.matmul(a, b)      # or kernel_ops.torch_ops.matmul

Why not the ``@torch.library.custom_op`` decorator: it wraps every call in
Python-level checks and dispatch layers that cost tens of microseconds per
call (pytorch/pytorch#139500; 34-64 us per call for a tiny RMS norm on the
H100 machine here, against 10-18 us for the plain call), and these ops are
plain tensor-in, tensor-out kernels that need none of it.
"""
import torch

import kernel_ops as _k

_lib = torch.library.Library("kernel_ops", "DEF")


def _define(schema, impl, fake):
    """Defines ``kernel_ops::<schema>``, implements it with ``impl`` for CUDA
    and CPU tensors and ``fake`` for tracing; returns the op
    (``torch.ops.kernel_ops.<name>``)."""
    name = schema.split("(", 1)[0]
    _lib.define(schema)
    for key in ("CUDA", "CPU"):
        _lib.impl(name, impl, key)
    torch.library.register_fake(f"kernel_ops::{name}", fake, lib=_lib)
    return getattr(torch.ops.kernel_ops, name)


# ``a @ b.T`` (float16 or bfloat16; a ``M x K``, b ``N x K``).
matmul = _define(
    "matmul(Tensor a, Tensor b) -> Tensor",
    lambda a, b: _k.matmul(a, b),
    lambda a, b: a.new_empty((a.shape[0], b.shape[0])),
)

# RMS norm over the last dimension.
rms_norm = _define(
    "rms_norm(Tensor x, Tensor gamma, float eps=1e-06) -> Tensor",
    lambda x, gamma, eps=1e-6: _k.rms_norm(x, gamma, eps),
    lambda x, gamma, eps=1e-6: torch.empty_like(x),
)

# Layer norm over the last dimension.
layer_norm = _define(
    "layer_norm(Tensor x, Tensor gamma, Tensor beta, float eps=1e-05) -> Tensor",
    lambda x, gamma, beta, eps=1e-5: _k.layer_norm(x, gamma, beta, eps),
    lambda x, gamma, beta, eps=1e-5: torch.empty_like(x),
)

# The norms' backwards: ``(dx, dgamma[, dbeta])``, the weights' gradients
# float32 (summed over the rows).
rms_norm_backward = _define(
    "rms_norm_backward(Tensor x, Tensor gamma, Tensor dy, float eps=1e-06) -> (Tensor, Tensor)",
    lambda x, gamma, dy, eps=1e-6: _k.rms_norm_backward(x, gamma, dy.contiguous(), eps),
    lambda x, gamma, dy, eps=1e-6: (torch.empty_like(x), x.new_empty((x.shape[-1],), dtype=torch.float32)),
)

layer_norm_backward = _define(
    "layer_norm_backward(Tensor x, Tensor gamma, Tensor dy, float eps=1e-05) -> (Tensor, Tensor, Tensor)",
    lambda x, gamma, dy, eps=1e-5: _k.layer_norm_backward(x, gamma, dy.contiguous(), eps),
    lambda x, gamma, dy, eps=1e-5: (torch.empty_like(x), x.new_empty((x.shape[-1],), dtype=torch.float32),
                                    x.new_empty((x.shape[-1],), dtype=torch.float32)),
)

# The fused residual norms: ``(y, new_residual)`` with ``new_residual = x +
# residual`` (float16 or bfloat16).
add_rms_norm = _define(
    "add_rms_norm(Tensor x, Tensor residual, Tensor gamma, float eps=1e-06) -> (Tensor, Tensor)",
    lambda x, residual, gamma, eps=1e-6: _k.add_rms_norm(x, residual, gamma, eps),
    lambda x, residual, gamma, eps=1e-6: (torch.empty_like(x), torch.empty_like(x)),
)

add_layer_norm = _define(
    "add_layer_norm(Tensor x, Tensor residual, Tensor gamma, Tensor beta, float eps=1e-05) -> (Tensor, Tensor)",
    lambda x, residual, gamma, beta, eps=1e-5: _k.add_layer_norm(x, residual, gamma, beta, eps),
    lambda x, residual, gamma, beta, eps=1e-5: (torch.empty_like(x), torch.empty_like(x)),
)


def _rms_setup(ctx, inputs, output):
    x, gamma, eps = inputs
    ctx.save_for_backward(x, gamma)
    ctx.eps = eps


def _rms_grad(ctx, dy):
    x, gamma = ctx.saved_tensors
    dx, dgamma = rms_norm_backward(x, gamma, dy, ctx.eps)
    return dx, dgamma.to(gamma.dtype), None


def _ln_setup(ctx, inputs, output):
    x, gamma, _beta, eps = inputs
    ctx.save_for_backward(x, gamma)
    ctx.eps = eps


def _ln_grad(ctx, dy):
    x, gamma = ctx.saved_tensors
    dx, dgamma, dbeta = layer_norm_backward(x, gamma, dy, ctx.eps)
    return dx, dgamma.to(gamma.dtype), dbeta.to(gamma.dtype), None


def _add_setup(ctx, inputs, output):
    # The norm's input is the returned new_residual (x + residual, rounded):
    # the fused op's y is exactly the norm of it.
    gamma, eps = inputs[2], inputs[-1]
    ctx.save_for_backward(output[1], gamma)
    ctx.eps = eps


def _add_grad(ctx, dy, d_new_residual, layer):
    """``d(x) = d(residual) = d_new_residual + norm_backward(dy)``; the
    rounding of ``x + residual`` is taken as the identity."""
    s, gamma = ctx.saved_tensors
    if dy is None:
        ds, dgamma, dbeta = d_new_residual, torch.zeros_like(gamma), torch.zeros_like(gamma)
    elif layer:
        ds, dgamma, dbeta = layer_norm_backward(s, gamma, dy, ctx.eps)
    else:
        (ds, dgamma), dbeta = rms_norm_backward(s, gamma, dy, ctx.eps), None
    if dy is not None and d_new_residual is not None:
        ds = ds + d_new_residual
    grads = (ds, ds, dgamma.to(gamma.dtype))
    return grads + ((dbeta.to(gamma.dtype), None) if layer else (None,))


# Autograd of the norms: the backward kernels (statistics recomputed from
# the saved input).
torch.library.register_autograd("kernel_ops::rms_norm", _rms_grad, setup_context=_rms_setup, lib=_lib)
torch.library.register_autograd("kernel_ops::layer_norm", _ln_grad, setup_context=_ln_setup, lib=_lib)
torch.library.register_autograd("kernel_ops::add_rms_norm", lambda ctx, dy, dr: _add_grad(ctx, dy, dr, False),
                                setup_context=_add_setup, lib=_lib)
torch.library.register_autograd("kernel_ops::add_layer_norm", lambda ctx, dy, dr: _add_grad(ctx, dy, dr, True),
                                setup_context=_add_setup, lib=_lib)

# Softmax over the last dimension.
softmax = _define(
    "softmax(Tensor x) -> Tensor",
    lambda x: _k.softmax(x),
    lambda x: torch.empty_like(x),
)

# Attention forward, ``[batch, seq, heads, head_dim]``: ``(o, lse)``
# (``scale < 0`` means ``1 / sqrt(head_dim)``).
attention = _define(
    "attention(Tensor q, Tensor k, Tensor v, bool causal=False, float scale=-1.0) -> (Tensor, Tensor)",
    lambda q, k, v, causal=False, scale=-1.0: _k.attention(q, k, v, causal=causal, scale=None if scale < 0 else scale),
    lambda q, k, v, causal=False, scale=-1.0: (torch.empty_like(q), q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)),
)

# Attention backward: ``(dq, dk, dv)`` from the forward's inputs, its
# ``(o, lse)`` and ``d_o``.
attention_backward = _define(
    "attention_backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor d_o, bool causal=False, float scale=-1.0)"
    " -> (Tensor, Tensor, Tensor)",
    lambda q, k, v, o, lse, d_o, causal=False, scale=-1.0: _k.attention_backward(
        q, k, v, o, lse, d_o.contiguous(), causal=causal, scale=None if scale < 0 else scale),
    lambda q, k, v, o, lse, d_o, causal=False, scale=-1.0: (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)),
)


def _attention_setup(ctx, inputs, output):
    q, k, v, causal, scale = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.scale = causal, scale


def _attention_grad(ctx, d_o, _d_lse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = attention_backward(q, k, v, o, lse, d_o, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None


# Autograd: `o` is differentiable through the backward kernels (the
# log-sum-exp output is not: its gradient is ignored).
torch.library.register_autograd("kernel_ops::attention", _attention_grad, setup_context=_attention_setup, lib=_lib)

# Attention with variants (head dim 64): ``window`` ``[left, right]``, query
# ``i`` sees keys ``i - left ..= i + right`` (-1: no bound on that side;
# ``[-1, -1]``: no window; with ``causal`` the right bound is 0);
# ``softcap > 0``: scores ``softcap * tanh(scale q.k / softcap)`` (0 or
# negative: no soft-cap); ``sinks``: float32 ``[heads]`` logits, one more term
# of each row's softmax with no value (lse includes it). ``(o, lse)``.
# Autograd: dq, dk, dv and the sinks' gradient.
_VARIANT_ARGS = "bool causal=False, float scale=-1.0, int[2] window=[-1, -1], float softcap=0.0, Tensor? sinks=None"


def _variant_kwargs(causal, scale, window, softcap, sinks):
    """The keywords of ``kernel_ops.attention``/``attention_backward`` for
    the ops' arguments (their "none" values mapped to None)."""
    left, right = window
    return dict(causal=causal, scale=None if scale < 0 else scale,
                window=None if left < 0 and right < 0 else (left, right),
                softcap=softcap if softcap > 0 else None, sinks=sinks)


def _lse_like(q):
    return q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)


attention_variant = _define(
    f"attention_variant(Tensor q, Tensor k, Tensor v, {_VARIANT_ARGS}) -> (Tensor, Tensor)",
    lambda q, k, v, causal=False, scale=-1.0, window=(-1, -1), softcap=0.0, sinks=None: _k.attention(
        q, k, v, **_variant_kwargs(causal, scale, window, softcap, sinks)),
    lambda q, k, v, causal=False, scale=-1.0, window=(-1, -1), softcap=0.0, sinks=None: (torch.empty_like(q), _lse_like(q)),
)


def _variant_backward(q, k, v, o, lse, d_o, causal=False, scale=-1.0, window=(-1, -1), softcap=0.0, sinks=None):
    grads = _k.attention_backward(q, k, v, o, lse, d_o.contiguous(), **_variant_kwargs(causal, scale, window, softcap, sinks))
    # Without sinks: an empty d_sinks (a schema returns no optional tensor).
    return grads if sinks is not None else grads + (q.new_empty((0,), dtype=torch.float32),)


# The variants' backward: ``(dq, dk, dv, d_sinks)``, d_sinks float32
# ``[heads]`` (``[0]`` without sinks).
attention_variant_backward = _define(
    f"attention_variant_backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor d_o, {_VARIANT_ARGS})"
    " -> (Tensor, Tensor, Tensor, Tensor)",
    _variant_backward,
    lambda q, k, v, o, lse, d_o, causal=False, scale=-1.0, window=(-1, -1), softcap=0.0, sinks=None: (
        torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
        q.new_empty((q.shape[2] if sinks is not None else 0,), dtype=torch.float32)),
)


def _variant_setup(ctx, inputs, output):
    q, k, v, causal, scale, window, softcap, sinks = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, sinks)
    ctx.rest = (causal, scale, window, softcap)


def _variant_grad(ctx, d_o, _d_lse):
    q, k, v, o, lse, sinks = ctx.saved_tensors
    dq, dk, dv, d_sinks = attention_variant_backward(q, k, v, o, lse, d_o, *ctx.rest, sinks)
    return dq, dk, dv, None, None, None, None, (d_sinks if sinks is not None else None)


# Autograd of the variants: as `kernel_ops::attention`'s, with the sinks'
# gradient (float32, as the sinks are).
torch.library.register_autograd("kernel_ops::attention_variant", _variant_grad, setup_context=_variant_setup, lib=_lib)

# Grouped GEMM for mixture of experts: rows of ``a`` grouped by expert
# (``sizes``, int32, on the device), ``b`` ``G x N x K``; asynchronous
# (``check=False``: the sizes are not read back, so the op stays
# capturable).
grouped_matmul = _define(
    "grouped_matmul(Tensor a, Tensor b, Tensor sizes) -> Tensor",
    lambda a, b, sizes: _k.grouped_matmul(a, b, sizes, check=False),
    lambda a, b, sizes: a.new_empty((a.shape[0], b.shape[1])),
)


# FP8 GEMMs, ``c = scales * a @ b.T`` (a ``M x K``, b ``N x K``; float16 c
# ``M x N``): a and b ``float8_e4m3fn`` (or, per-tensor, one of them
# ``float8_e5m2``). Per-tensor: ``scale_a``, ``scale_b`` float32 tensors of
# one element on the device (``torch._scaled_mm``'s); row-wise: ``a_scales``
# M values, ``b_scales`` N (``[M, 1]`` and ``[1, N]`` work); block-scaled:
# ``a_scales`` ``[ceil(K / 128), M]``, ``b_scales`` ``[ceil(N / 128), ceil(K
# / 128)]`` (``kernel_ops.matmul_fp8_blockscaled``).
def _fp8_out(a, b):
    return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.float16)


matmul_fp8 = _define(
    "matmul_fp8(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b) -> Tensor",
    lambda a, b, scale_a, scale_b: _k.matmul_fp8(a, b, scale_a, scale_b),
    lambda a, b, scale_a, scale_b: _fp8_out(a, b),
)

matmul_fp8_rowwise = _define(
    "matmul_fp8_rowwise(Tensor a, Tensor b, Tensor a_scales, Tensor b_scales) -> Tensor",
    lambda a, b, a_scales, b_scales: _k.matmul_fp8_rowwise(a, b, a_scales.contiguous(), b_scales.contiguous()),
    lambda a, b, a_scales, b_scales: _fp8_out(a, b),
)

matmul_fp8_blockscaled = _define(
    "matmul_fp8_blockscaled(Tensor a, Tensor b, Tensor a_scales, Tensor b_scales) -> Tensor",
    lambda a, b, a_scales, b_scales: _k.matmul_fp8_blockscaled(a, b, a_scales, b_scales),
    lambda a, b, a_scales, b_scales: _fp8_out(a, b),
)

# Grouped block-scaled FP8 (mixture of experts): rows of ``a`` grouped by
# expert (``sizes``, int32, on the device), ``b`` ``G x N x K``, ``b_scales``
# ``[G, ceil(N / 128), ceil(K / 128)]``; asynchronous (``check=False``, as
# ``grouped_matmul``).
grouped_matmul_fp8_blockscaled = _define(
    "grouped_matmul_fp8_blockscaled(Tensor a, Tensor b, Tensor a_scales, Tensor b_scales, Tensor sizes) -> Tensor",
    lambda a, b, a_scales, b_scales, sizes: _k.grouped_matmul_fp8_blockscaled(a, b, a_scales, b_scales, sizes, check=False),
    lambda a, b, a_scales, b_scales, sizes: a.new_empty((a.shape[0], b.shape[1]), dtype=torch.float16),
)

# Decode attention against a K/V cache (contiguous, or paged with a block
# table; FP8 e4m3 caches with ``kv_scales``): ``(out, lse)``. Lengths and
# the block table stay on the device: capturable in a CUDA graph.
attention_decode = _define(
    "attention_decode(Tensor q, Tensor k_cache, Tensor v_cache, Tensor lens, Tensor? block_table=None,"
    " Tensor? kv_scales=None, float scale=-1.0) -> (Tensor, Tensor)",
    lambda q, k_cache, v_cache, lens, block_table=None, kv_scales=None, scale=-1.0: _k.attention_decode(
        q, k_cache, v_cache, lens, block_table=block_table, kv_scales=kv_scales, scale=None if scale < 0 else scale),
    lambda q, k_cache, v_cache, lens, block_table=None, kv_scales=None, scale=-1.0: (
        torch.empty_like(q), q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)),
)

# Attention over packed variable-length sequences: ``(o, lse)``.
attention_varlen = _define(
    "attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q,"
    " int max_seqlen_k, bool causal=False, float scale=-1.0) -> (Tensor, Tensor)",
    lambda q, k, v, cq, ck, mq, mk, causal=False, scale=-1.0: _k.attention_varlen(
        q, k, v, cq, ck, mq, mk, causal=causal, scale=None if scale < 0 else scale),
    lambda q, k, v, cq, ck, mq, mk, causal=False, scale=-1.0: (
        torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)),
)

attention_varlen_backward = _define(
    "attention_varlen_backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor d_o, Tensor cu_seqlens_q,"
    " Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, bool causal=False, float scale=-1.0)"
    " -> (Tensor, Tensor, Tensor)",
    lambda q, k, v, o, lse, d_o, cq, ck, mq, mk, causal=False, scale=-1.0: _k.attention_varlen_backward(
        q, k, v, o, lse, d_o.contiguous(), cq, ck, mq, mk, causal=causal, scale=None if scale < 0 else scale),
    lambda q, k, v, o, lse, d_o, cq, ck, mq, mk, causal=False, scale=-1.0: (
        torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)),
)


def _varlen_setup(ctx, inputs, output):
    q, k, v, cq, ck, mq, mk, causal, scale = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, cq, ck)
    ctx.rest = (mq, mk, causal, scale)


def _varlen_grad(ctx, d_o, _d_lse):
    q, k, v, o, lse, cq, ck = ctx.saved_tensors
    mq, mk, causal, scale = ctx.rest
    dq, dk, dv = attention_varlen_backward(q, k, v, o, lse, d_o, cq, ck, mq, mk, causal, scale)
    return dq, dk, dv, None, None, None, None, None, None


torch.library.register_autograd("kernel_ops::attention_varlen", _varlen_grad, setup_context=_varlen_setup, lib=_lib)
