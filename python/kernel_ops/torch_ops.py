"""kernel_ops's ops as PyTorch custom ops (``torch.ops.kernel_ops.*``).

Each op is registered with ``torch.library.custom_op`` (no arguments
mutated: it returns new tensors, allocated with ``torch.empty`` on the
input's device) and a fake implementation that only computes the output's
shape and dtype, so ``torch.compile`` traces through it with no graph
break. Import this module to register them (it needs torch >= 2.4)::

    import kernel_ops.torch_ops
    c = torch.ops.kernel_ops.matmul(a, b)      # or kernel_ops.torch_ops.matmul
"""
import torch

import kernel_ops as _k


@torch.library.custom_op("kernel_ops::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b.T`` (float16 or bfloat16; a ``M x K``, b ``N x K``)."""
    return _k.matmul(a, b)


@matmul.register_fake
def _(a, b):
    return a.new_empty((a.shape[0], b.shape[0]))


@torch.library.custom_op("kernel_ops::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, gamma: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMS norm over the last dimension."""
    return _k.rms_norm(x, gamma, eps)


@rms_norm.register_fake
def _(x, gamma, eps=1e-6):
    return torch.empty_like(x)


@torch.library.custom_op("kernel_ops::layer_norm", mutates_args=())
def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Layer norm over the last dimension."""
    return _k.layer_norm(x, gamma, beta, eps)


@layer_norm.register_fake
def _(x, gamma, beta, eps=1e-5):
    return torch.empty_like(x)


@torch.library.custom_op("kernel_ops::softmax", mutates_args=())
def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension."""
    return _k.softmax(x)


@softmax.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("kernel_ops::attention", mutates_args=())
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float = -1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention forward, ``[batch, seq, heads, head_dim]``: ``(o, lse)``
    (``scale < 0`` means ``1 / sqrt(head_dim)``)."""
    return _k.attention(q, k, v, causal=causal, scale=None if scale < 0 else scale)


@attention.register_fake
def _(q, k, v, causal=False, scale=-1.0):
    return torch.empty_like(q), q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)


@torch.library.custom_op("kernel_ops::attention_backward", mutates_args=())
def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, d_o: torch.Tensor,
                       causal: bool = False, scale: float = -1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention backward: ``(dq, dk, dv)`` from the forward's inputs, its
    ``(o, lse)`` and ``d_o``."""
    return _k.attention_backward(q, k, v, o, lse, d_o.contiguous(), causal=causal, scale=None if scale < 0 else scale)


@attention_backward.register_fake
def _(q, k, v, o, lse, d_o, causal=False, scale=-1.0):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


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
attention.register_autograd(_attention_grad, setup_context=_attention_setup)


@torch.library.custom_op("kernel_ops::grouped_matmul", mutates_args=())
def grouped_matmul(a: torch.Tensor, b: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """Grouped GEMM for mixture of experts: rows of ``a`` grouped by expert
    (``sizes``, int32, on the device), ``b`` ``G x N x K``; asynchronous
    (``check=False``: the sizes are not read back, so the op stays
    capturable)."""
    return _k.grouped_matmul(a, b, sizes, check=False)


@grouped_matmul.register_fake
def _(a, b, sizes):
    return a.new_empty((a.shape[0], b.shape[1]))
