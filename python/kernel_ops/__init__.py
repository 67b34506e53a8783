"""The ready kernels of kernel-ops from Python.

Arrays come in through DLPack, so torch, JAX, CuPy and NumPy arrays all
work, with no copy:

* CUDA arrays run on the GPU, queued on the caller's current stream (torch's
  ``torch.cuda.current_stream()``, looked up by the native call; pass
  ``stream=`` for another framework's raw ``CUstream``), in the device's
  primary context the framework uses;
* CPU arrays (NumPy) run on the project's CPU emulator, whose race and
  protocol reports raise :class:`EmulatorReport`.

Every input is checked first: a wrong dtype raises ``TypeError``, a wrong
shape, device, layout (not C-contiguous) or alignment (data not 16-byte
aligned) raises ``ValueError``, each naming the rule and the values. Outputs
are allocated with the inputs' framework (``torch.empty`` on the input's
device, ``numpy.empty``) unless ``out=`` is given; JAX and CuPy callers pass
``out=``.

When torch is importable, ``kernel_ops.torch_ops`` registers the ops with
``torch.library.custom_op`` (``torch.ops.kernel_ops.matmul``, ...) with fake
(meta) implementations, so ``torch.compile`` traces through them.

``kernel_ops.jax`` (imported on its own: this module never imports JAX)
registers the ops as XLA FFI targets and offers them inside ``jax.jit``.
"""
from . import _native
from ._native import EmulatorReport

__all__ = ["matmul", "grouped_matmul", "matmul_fp8", "matmul_fp8_rowwise", "matmul_fp8_blockscaled",
           "grouped_matmul_fp8_blockscaled", "softmax", "layer_norm", "rms_norm", "rms_norm_backward", "layer_norm_backward",
           "add_rms_norm", "add_layer_norm", "attention", "attention_backward",
           "attention_decode", "attention_varlen", "attention_varlen_backward",
           "all_gather_matmul", "reduce_scatter_matmul", "all_reduce_matmul", "EmulatorReport"]


def _arrays(**named):
    """TypeError unless each argument is an array with ``__dlpack__``
    (before an output is allocated from them; the native call checks every
    array itself)."""
    for name, x in named.items():
        if not hasattr(x, "__dlpack__"):
            raise TypeError(
                f"`{name}`: a {type(x).__name__} is not an array with `__dlpack__` "
                "(pass a numpy.ndarray, torch.Tensor, jax.Array or cupy.ndarray)")


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _empty(like, shape, dtype=None):
    """A new array on `like`'s device: ``like.new_empty`` for torch (its
    device and, unless `dtype` is given, its dtype; contiguous), numpy.empty
    (16-byte aligned) for NumPy; other frameworks must pass out=."""
    if _is_torch(like):
        return like.new_empty(shape) if dtype is None else like.new_empty(shape, dtype=dtype)
    import numpy as np

    if isinstance(like, np.ndarray):
        dt = np.dtype(dtype or like.dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        raw = np.empty(n + 16, dtype=np.uint8)
        off = (-raw.ctypes.data) % 16
        return raw[off:off + n].view(dt).reshape(shape)
    raise TypeError(
        f"kernel_ops: cannot allocate an output like a {type(like).__module__}.{type(like).__name__}: "
        "pass out= (an array of the framework, on the same device)")


def _f32(like):
    if _is_torch(like):
        import torch

        return torch.float32
    import numpy as np

    return np.float32


def matmul(a, b, out=None, stream=None, tune=False):
    """``c = a @ b.T``: a ``M x K``, b ``N x K``, float16 or bfloat16 (all
    three alike), f32 accumulation; returns c (``M x N``, the inputs'
    dtype).

    The kernel instance (tiles and pipeline) is the cached tuning winner for
    this GPU, dtype and shape when the tuning cache has one, else the
    library's built-in choice for the shape class (the winners table
    shipped for the GPU, an H200 so far, else a rule by size: the book's
    performance chapter, "Few tiles"). The cache is the file
    ``$KERNEL_OPS_CACHE``, else ``~/.cache/kernel-ops/matmul.tsv``, read
    by each thread's first call.

    ``tune=True`` on a GPU first tunes this shape and dtype, unless a winner
    is cached already: every instance is timed on scratch buffers of the
    shape (iid N(0, 1) inputs, 3 warm-up and 10 timed runs each, a progress
    bar on stderr when it is a terminal), and the fastest is written to the
    cache file and runs this call and every later one of this shape and
    dtype on this thread (other processes read it from the file). So the sweep runs once per
    shape; it is synchronous and done before the matmul is queued on the
    stream. On the CPU emulator (NumPy arrays) ``tune=True`` is ignored: the
    emulator cannot time kernels, and the built-in choice runs.
    ``torch.ops.kernel_ops.matmul`` never tunes: call this once with
    ``tune=True`` per shape to tune it.
    """
    if out is None:
        _arrays(a=a, b=b)
        out = _empty(a, (a.shape[0], b.shape[0]))
    _native.matmul(a, b, out, stream, tune)
    return out


def _device_list(name, xs):
    """`xs` as a list of arrays, one per device (entry d on device d)."""
    if not isinstance(xs, (list, tuple)) or len(xs) < 2:
        raise TypeError(f"`{name}`: a list of arrays, one per device (entry d on device d), at least 2")
    _arrays(**{f"{name}[{d}]": x for d, x in enumerate(xs)})
    return list(xs)


def all_gather_matmul(a, b, out=None):
    """The all-gather matmul of tensor parallelism on ``p`` devices.

    ``a[d]`` is device ``d``'s shard of the activations (``m x K``) and
    ``b[d]`` its block of the weights (``N x K``), float16 or bfloat16,
    entry ``d`` of each list on device ``d``: CUDA tensors on GPUs
    ``0 .. p-1`` (peer access between every pair), or NumPy arrays, which
    run as ``p`` emulated devices under the race detector.

    Returns ``(gathered, c)``: ``gathered[d]`` (``p m x K`` on device ``d``)
    holds every shard in device order, and ``c[d] = gathered[d] @ b[d].T``
    (``p m x N``, f32 accumulation). With ``m`` a multiple of 128 the
    kernels forward the shards themselves by TMA while they multiply (one
    kernel per device, no copy engine); otherwise copy engines forward them
    under one matmul per shard. ``out=(gathered, c)`` gives the outputs
    (lists of arrays of those shapes; ``gathered[d]`` must already hold
    shard ``d`` at rows ``d m``). Each device's work is queued on its
    current torch stream.
    """
    a, b = _device_list("a", a), _device_list("b", b)
    p = len(a)
    if len(b) != p:
        raise ValueError(f"`a` has {p} arrays and `b` {len(b)}: give one per device")
    if out is None:
        m, k = a[0].shape
        gathered = [_empty(x, (p * m, k)) for x in a]
        for d in range(p):
            gathered[d][d * m:(d + 1) * m] = a[d]
        c = [_empty(x, (p * m, b[0].shape[0])) for x in a]
    else:
        gathered, c = (_device_list("out[0]", out[0]), _device_list("out[1]", out[1]))
        m = gathered[0].shape[0] // p
    _native.all_gather_matmul(gathered, b, c, m)
    return gathered, c


def reduce_scatter_matmul(a, b, out=None):
    """The reduce-scatter matmul of tensor parallelism on ``p`` devices.

    ``a[d]`` (``M x K/p``) and ``b[d]`` (``N x K/p``) are device ``d``'s
    blocks of K, float16 or bfloat16, entry ``d`` of each list on device
    ``d`` (CUDA tensors on GPUs ``0 .. p-1``, or NumPy arrays for ``p``
    emulated devices). Returns ``c``: ``c[d]`` (``M/p x N`` on device
    ``d``) is row block ``d`` of ``sum_j a[j] @ b[j].T``, summed in f32 (the
    other devices' partials rounded once to the element type, as a matmul
    then a reduce-scatter rounds them). One kernel per device computes
    the other devices' tiles first and writes them into their owners'
    memory over NVLink while it computes its own. ``M`` must be a multiple
    of ``128 p``, ``K/p`` and ``N`` of 8. ``out=`` gives ``c``. Each
    device's work is queued on its current torch stream.
    """
    a, b = _device_list("a", a), _device_list("b", b)
    p = len(a)
    if out is None:
        m = a[0].shape[0]
        c = [_empty(x, (m // p, b[0].shape[0])) for x in a]
    else:
        c = _device_list("out", out)
    _native.reduce_scatter_matmul(a, b, c)
    return c


def all_reduce_matmul(a, b, out=None):
    """The all-reduce matmul of tensor parallelism on ``p`` devices: the
    operands of :func:`reduce_scatter_matmul`, and every device ends with
    all of ``sum_j a[j] @ b[j].T`` (``M x N``): ``c[d]`` on device ``d``.
    One kernel per device: the reduce-scatter's, whose owner of each summed
    tile also writes it into every other device's ``c`` from the epilogue
    (no separate all-reduce). ``M`` a multiple of ``128 p``, ``K/p`` and
    ``N`` of 8; ``out=`` gives ``c``.
    """
    a, b = _device_list("a", a), _device_list("b", b)
    if out is None:
        c = [_empty(x, (a[0].shape[0], b[0].shape[0])) for x in a]
    else:
        c = _device_list("out", out)
    _native.all_reduce_matmul(a, b, c)
    return c


def grouped_matmul(a, b, sizes, out=None, check=True, stream=None):
    """Grouped GEMM for mixture of experts: the rows of ``a`` (``M x K``)
    are grouped by expert, ``sizes[g]`` rows for expert ``g`` in order, and
    each group is multiplied by its expert's weight ``b[g]`` (``b`` is
    ``G x N x K``): ``c[rows of g] = a[rows of g] @ b[g].T`` (``M x N``,
    float16 or bfloat16, f32 accumulation). ``sizes`` (int32 or uint32, ``G`` entries)
    stays on the device: the kernel reads it. With ``check`` (the default)
    the call waits for the kernel and raises ValueError when the sizes do
    not add up to ``M``; ``check=False`` leaves the launch asynchronous."""
    if out is None:
        _arrays(a=a, b=b, sizes=sizes)
        out = _empty(a, (a.shape[0], b.shape[1]))
    _native.grouped_matmul(a, b, sizes, out, check, stream)
    return out


def _fp8_operand(x, name):
    """``(bytes, is_e5m2)`` of an FP8 GEMM operand: a torch
    ``float8_e4m3fn`` / ``float8_e5m2`` tensor or an ``ml_dtypes``
    ``float8_e4m3fn`` / ``float8_e5m2`` NumPy array viewed as uint8 (DLPack
    carries no FP8 type through the frameworks' exports), a uint8 array as
    it is (e4m3 bytes). Anything else goes on unchanged, for the native
    call to refuse naming its dtype."""
    if _is_torch(x):
        import torch

        if x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            return x.view(torch.uint8), x.dtype == torch.float8_e5m2
        fnuz = "float8" in str(x.dtype)
    else:
        dt = getattr(x, "dtype", None)
        name_ = getattr(dt, "name", "")
        if name_ in ("float8_e4m3fn", "float8_e5m2"):
            import numpy as np

            return x.view(np.uint8), name_ == "float8_e5m2"
        fnuz = name_.startswith("float8")
    if fnuz:
        raise TypeError(f"`{name}`: dtype {x.dtype} is not supported: FP8 operands are float8_e4m3fn or float8_e5m2 "
                        "(the OCP formats the H100's wgmma reads), or uint8 holding e4m3 bytes")
    return x, False


def _f16(like):
    if _is_torch(like):
        import torch

        return torch.float16
    import numpy as np

    return np.float16


def _fp8_out(a, b, out):
    if out is not None:
        return out
    _arrays(a=a, b=b)
    return _empty(a, (a.shape[0], b.shape[0]), _f16(a))


def _scale_pair(like, scale_a, scale_b):
    """The float32 ``[2]`` array ``[scale_a, scale_b]`` on `like`'s device
    that the per-tensor FP8 kernel reads: each scale a Python float or a
    float32 array of one element (on the device: concatenated there, no
    host round trip)."""
    def one(s, name):
        if hasattr(s, "__dlpack__"):
            size = s.numel() if _is_torch(s) else s.size
            if size != 1 or "float32" not in str(s.dtype):
                raise ValueError(f"`{name}`: a per-tensor scale is a float or a float32 array of 1 element, "
                                 f"not {s.dtype} of shape {tuple(s.shape)}")
            return s.reshape(1)
        try:
            v = float(s)
        except (TypeError, ValueError):
            raise TypeError(f"`{name}`: a per-tensor scale is a float or a float32 array of 1 element, "
                            f"not a {type(s).__name__}") from None
        if _is_torch(like):
            import torch

            return torch.full((1,), v, dtype=torch.float32, device=like.device)
        import numpy as np

        return np.full((1,), v, np.float32)
    sa, sb = one(scale_a, "scale_a"), one(scale_b, "scale_b")
    if _is_torch(like):
        import torch

        return torch.cat([sa, sb])
    import numpy as np

    pair = _empty(like, (2,), np.float32)
    pair[0], pair[1] = sa[0], sb[0]
    return pair


def matmul_fp8(a, b, scale_a, scale_b=None, out=None, stream=None):
    """FP8 GEMM with per-tensor scales: ``c = (scale_a * scale_b) * a @
    b.T``, a ``M x K`` and b ``N x K`` FP8 (row-major, i.e. K-major, as
    cuBLASLt's FP8 "TN" layout and ``torch._scaled_mm``'s ``a @ b.T`` take
    them), f32 accumulation; returns c, ``M x N`` float16.

    FP8 arrays: torch ``float8_e4m3fn`` / ``float8_e5m2`` tensors;
    ``ml_dtypes.float8_e4m3fn`` / ``float8_e5m2`` NumPy arrays; or uint8
    arrays holding e4m3 bytes. Both e4m3, or one e5m2 and the other e4m3
    (the FP8 training recipes' backward GEMMs); two e5m2 operands raise
    NotImplementedError. ``scale_a`` and ``scale_b`` are the dequantization
    scales (``a ≈ scale_a * a_fp8``): Python floats or float32 arrays of one
    element (torch ``_scaled_mm``'s); the kernel reads them from a float32
    ``[2]`` array on the device (made with the inputs' framework, so scales
    computed on the GPU need no host round trip). With ``scale_b=None``,
    ``scale_a`` is that float32 ``[2]`` array itself (``[scale_a,
    scale_b]``, the Rust API's ``scales``), read as it is: no array is made
    per call (one launch fewer). K must be a multiple of 16 and N of 8 (TMA
    rows of 16-byte multiples)."""
    a8, a5 = _fp8_operand(a, "a")
    b8, b5 = _fp8_operand(b, "b")
    _arrays(a=a, b=b)
    if scale_b is None:
        _arrays(scale_a=scale_a)
        scales = scale_a
    else:
        scales = _scale_pair(a, scale_a, scale_b)
    out = _fp8_out(a, b, out)
    _native.matmul_fp8(a8, b8, scales, out, a5, b5, stream)
    return out


def matmul_fp8_rowwise(a, b, a_scales, b_scales, out=None, stream=None):
    """FP8 GEMM with row-wise scales: ``c[i, j] = a_scales[i] * b_scales[j]
    * (a @ b.T)[i, j]``, a ``M x K`` and b ``N x K`` e4m3 (as
    :func:`matmul_fp8` takes them), ``a_scales`` float32 with M values (one
    per row of a), ``b_scales`` float32 with N (one per row of b, i.e. per
    column of c), each shaped ``[len]``, ``[len, 1]`` or ``[1, len]``
    (``torch._scaled_mm``'s row-wise ``M x 1`` and ``1 x N`` work as they
    are); returns c, ``M x N`` float16."""
    a8, a5 = _fp8_operand(a, "a")
    b8, b5 = _fp8_operand(b, "b")
    out = _fp8_out(a, b, out)
    _native.matmul_fp8_rowwise(a8, a_scales, b8, b_scales, out, a5, b5, stream)
    return out


def matmul_fp8_blockscaled(a, b, a_scales, b_scales, out=None, stream=None):
    """Block-scaled FP8 GEMM (DeepSeek-V3's recipe): a ``M x K`` and b ``N
    x K`` e4m3 (as :func:`matmul_fp8` takes them), a scale per row of a and
    128 of K, one per 128 x 128 block of b; the partial sums are promoted
    to f32 every 128 of K. ``a_scales`` float32 ``[ceil(K / 128), M]``
    (K-block-major: the transpose of the ``M x K/128`` grid, as DeepGEMM
    stores it; a torch ``M x K/128`` tensor in column-major is ``s.T`` of
    this), ``b_scales`` float32 ``[ceil(N / 128), ceil(K / 128)]``; the
    last block of K or N may be partial. Returns c, ``M x N`` float16."""
    a8, a5 = _fp8_operand(a, "a")
    b8, b5 = _fp8_operand(b, "b")
    out = _fp8_out(a, b, out)
    _native.matmul_fp8_blockscaled(a8, a_scales, b8, b_scales, out, a5, b5, stream)
    return out


def grouped_matmul_fp8_blockscaled(a, b, a_scales, b_scales, sizes, out=None, check=True, stream=None):
    """Grouped block-scaled FP8 GEMM for mixture of experts: the rows of
    ``a`` (``M x K`` e4m3) grouped by expert as in :func:`grouped_matmul`
    (``sizes``, int32 or uint32 ``[G]`` on the device), ``b`` ``G x N x
    K`` e4m3; scales as :func:`matmul_fp8_blockscaled` takes them,
    ``a_scales`` float32 ``[ceil(K / 128), M]`` over all ``M`` rows,
    ``b_scales`` float32 ``[G, ceil(N / 128), ceil(K / 128)]``. Returns c,
    ``M x N`` float16. ``check`` as in :func:`grouped_matmul`."""
    a8, a5 = _fp8_operand(a, "a")
    b8, b5 = _fp8_operand(b, "b")
    if out is None:
        _arrays(a=a, b=b)
        out = _empty(a, (a.shape[0], b.shape[1]), _f16(a))
    _native.grouped_matmul_fp8_blockscaled(a8, a_scales, b8, b_scales, sizes, out, a5, b5, check, stream)
    return out


def softmax(x, out=None, stream=None):
    """``softmax(x)`` over the last dimension (float16, bfloat16 or
    float32; the last dimension 1 to 65536)."""
    if out is None:
        _arrays(x=x)
        out = _empty(x, x.shape)
    _native.softmax(x, out, stream)
    return out


def layer_norm(x, gamma, beta, eps=1e-5, out=None, stream=None):
    """Layer norm over the last dimension, scaled by gamma and shifted by
    beta (float16, bfloat16 or float32, gamma and beta in x's dtype; the
    last dimension 1 to 65536)."""
    if out is None:
        _arrays(x=x)
        out = _empty(x, x.shape)
    _native.layer_norm(x, gamma, beta, out, eps, stream)
    return out


def rms_norm(x, gamma, eps=1e-6, out=None, stream=None):
    """RMS norm over the last dimension, scaled by gamma (float16, bfloat16
    or float32, gamma in x's dtype; the last dimension 1 to 65536)."""
    if out is None:
        _arrays(x=x)
        out = _empty(x, x.shape)
    _native.rms_norm(x, gamma, out, eps, stream)
    return out


def rms_norm_backward(x, gamma, dy, eps=1e-6, dx=None, dgamma=None, stream=None):
    """The backward of :func:`rms_norm`: from the forward's ``x`` and
    ``gamma`` and ``dy``, the gradient of the loss with respect to its
    output, returns ``(dx, dgamma)``: dx like x, dgamma float32 ``[cols]``
    (summed over the rows in float32; cast it to gamma's dtype if needed).
    The row statistics are recomputed from x. Rows of a multiple of 16
    bytes (8 float16 / bfloat16, 4 float32) up to 16384 columns (8192 for
    float32), other widths up to 4096."""
    _arrays(x=x, gamma=gamma, dy=dy)
    dx = dx if dx is not None else _empty(x, x.shape)
    dgamma = dgamma if dgamma is not None else _empty(x, (x.shape[-1],), _f32(x))
    _native.rms_norm_backward(x, gamma, dy, dx, dgamma, eps, stream)
    return dx, dgamma


def layer_norm_backward(x, gamma, dy, eps=1e-5, dx=None, dgamma=None, dbeta=None, stream=None):
    """The backward of :func:`layer_norm` (beta does not enter it): returns
    ``(dx, dgamma, dbeta)``, dgamma and dbeta float32 ``[cols]``; as
    :func:`rms_norm_backward`."""
    _arrays(x=x, gamma=gamma, dy=dy)
    dx = dx if dx is not None else _empty(x, x.shape)
    dgamma = dgamma if dgamma is not None else _empty(x, (x.shape[-1],), _f32(x))
    dbeta = dbeta if dbeta is not None else _empty(x, (x.shape[-1],), _f32(x))
    _native.layer_norm_backward(x, gamma, dy, dx, dgamma, dbeta, eps, stream)
    return dx, dgamma, dbeta


_FP8_MODES = {"row": 0, "tensor": 1, "dynamic": 2}


def _add_norm(x, residual, gamma, beta, eps, out, residual_out, fp8, scale, stream):
    _arrays(x=x, residual=residual, gamma=gamma)
    new_residual = residual_out if residual_out is not None else _empty(x, x.shape)
    if fp8 is None:
        y = out if out is not None else _empty(x, x.shape)
        _native.add_norm(x, residual, gamma, beta, y, new_residual, eps, stream=stream)
        return y, new_residual
    if fp8 not in _FP8_MODES:
        raise ValueError(f"fp8 = {fp8!r}: 'row' (a scale per row), 'tensor' (the given scale=) or 'dynamic' (the tensor's amax / 448)")
    if fp8 == "tensor" and scale is None:
        raise ValueError("fp8 = 'tensor' takes scale= (the per-tensor scale: q = e4m3(y / scale))")
    import numpy as np

    rows = int(np.prod(x.shape[:-1]))
    q = out if out is not None else _empty(x, x.shape, _u8(x))
    q_bytes, _ = _fp8_bytes(q)
    scales = _empty(x, (rows if fp8 == "row" else 1,), _f32(x))
    _native.add_norm(x, residual, gamma, beta, None, new_residual, eps, q=q_bytes, scales=scales,
                     scale_mode=_FP8_MODES[fp8], scale=float(scale or 1.0), stream=stream)
    return (q, scales), new_residual


def _u8(like):
    if _is_torch(like):
        import torch

        return torch.uint8
    import numpy as np

    return np.uint8


def add_rms_norm(x, residual, gamma, eps=1e-6, out=None, residual_out=None, stream=None, *, fp8=None, scale=None):
    """The fused residual RMS norm: ``new_residual = x + residual`` (rounded
    to x's dtype) and ``y = rms_norm(new_residual, gamma, eps)`` in one pass
    over the rows; returns ``(y, new_residual)``. float16 or bfloat16 (all
    alike), the last dimension a multiple of 8 up to 16384.

    ``fp8=`` quantizes y to FP8 e4m3 instead, ``q = e4m3(y / scale)``
    (uint8 bytes; ``out=`` may be a torch float8_e4m3fn tensor), and returns
    ``((q, scales), new_residual)``: ``'row'`` a scale per row
    (``amax / 448``, float32 ``[rows]``), ``'tensor'`` the given
    ``scale=``, ``'dynamic'`` the tensor's ``amax / 448`` (two passes;
    float32 ``[1]``)."""
    return _add_norm(x, residual, gamma, None, eps, out, residual_out, fp8, scale, stream)


def add_layer_norm(x, residual, gamma, beta, eps=1e-5, out=None, residual_out=None, stream=None, *, fp8=None, scale=None):
    """The fused residual layer norm: ``new_residual = x + residual`` and
    ``y = layer_norm(new_residual, gamma, beta, eps)``; returns ``(y,
    new_residual)`` (or the FP8 form); as :func:`add_rms_norm`."""
    _arrays(beta=beta)
    return _add_norm(x, residual, gamma, beta, eps, out, residual_out, fp8, scale, stream)


def attention(q, k, v, causal=False, scale=None, out=None, lse=None, stream=None, *, window=None, softcap=None, sinks=None):
    """Attention forward: ``o = softmax(scale q kᵀ [+ causal mask]) v``.

    q: ``[batch, seq, heads, head_dim]``; k, v: ``[batch, seq, kv_heads,
    head_dim]`` (kv_heads divides heads: GQA/MQA); float16 or bfloat16;
    head_dim 64, 128 or 256; scale defaults to ``1 / sqrt(head_dim)``. Returns
    ``(o, lse)``: o like q, lse ``[batch, heads, seq]`` float32 (natural
    log).

    Variants (head_dim 64 or 128; :func:`attention_backward` takes the same
    keywords): ``window=(left, right)``, query ``i`` sees keys
    ``i - left ..= i + right`` (-1 or None: no bound on that side; with
    ``causal`` the right bound is 0); ``softcap=cap``, scores ``cap ·
    tanh(scale q·k / cap)``; ``sinks``, float32 ``[heads]`` logits, one
    more term of each row's softmax sum with no value (lse includes it)."""
    _arrays(q=q, k=k, v=v)
    o = out if out is not None else _empty(q, q.shape)
    lse_out = lse if lse is not None else _empty(q, (q.shape[0], q.shape[2], q.shape[1]), _f32(q))
    if window is None and softcap is None and sinks is None:
        _native.attention(q, k, v, o, lse_out, bool(causal), scale, stream)
        return o, lse_out
    _native.attention_variant(q, k, v, o, lse_out, bool(causal), scale, _window(window),
                              None if softcap is None else float(softcap), sinks, stream)
    return o, lse_out


def _window(window):
    """A ``window=(left, right)`` argument as the native calls take it:
    ``None``, or a pair of ints ``>= 0`` and ``None`` (-1 or None: no bound
    on that side)."""
    if window is None:
        return None
    left, right = window

    def side(x, name):
        if x is None or x == -1:
            return None
        if int(x) < 0:
            raise ValueError(f"window {name} = {x}: a bound must be >= 0, or -1 / None for no bound")
        return int(x)
    return (side(left, "left"), side(right, "right"))


def attention_backward(q, k, v, o, lse, d_o, causal=False, scale=None, dq=None, dk=None, dv=None, stream=None, *,
                       window=None, softcap=None, sinks=None, d_sinks=None):
    """Attention backward: from q, k, v, the forward's ``o`` and ``lse``
    (as :func:`attention` returned them) and ``d_o``, the gradient of the
    loss with respect to ``o``, returns ``(dq, dk, dv)`` shaped like q, k, v
    (with GQA, dk and dv sum over the Q heads of each K/V head). ``causal``
    and ``scale`` must be the forward's; head_dim 64 or 128.

    The variants' backward (head_dim 64): ``window``, ``softcap`` and
    ``sinks`` as :func:`attention` took them (they must be the forward's;
    ``o`` and ``lse`` its outputs, lse including the sinks). Without
    ``sinks`` the return is ``(dq, dk, dv)`` as above; with ``sinks`` it is
    ``(dq, dk, dv, d_sinks)``, ``d_sinks`` float32 ``[heads]`` the gradient
    of the loss with respect to the sinks (``-Σ exp(sinks[h] - lse)
    rowsum(d_o ⊙ o)`` over the rows of Q head ``h``), written into the
    ``d_sinks=`` array when given (which is refused without ``sinks``)."""
    _arrays(q=q, k=k, v=v, o=o, lse=lse, d_o=d_o)
    dq = dq if dq is not None else _empty(q, q.shape)
    dk = dk if dk is not None else _empty(k, k.shape)
    dv = dv if dv is not None else _empty(v, v.shape)
    if window is None and softcap is None and sinks is None and d_sinks is None:
        _native.attention_backward(q, k, v, o, lse, d_o, dq, dk, dv, bool(causal), scale, stream)
        return dq, dk, dv
    if sinks is not None:
        _arrays(sinks=sinks)
        if d_sinks is None:
            d_sinks = _empty(q, (q.shape[2],), _f32(q))
    _native.attention_variant_backward(q, k, v, o, lse, d_o, dq, dk, dv, d_sinks, bool(causal), scale, _window(window),
                                       None if softcap is None else float(softcap), sinks, stream)
    return (dq, dk, dv) if sinks is None else (dq, dk, dv, d_sinks)


def _fp8_bytes(x):
    """``(bytes, True)`` for a torch float8_e4m3fn tensor (viewed as uint8:
    DLPack has no FP8 type in the frameworks' exports), else ``(x,
    False)``; a uint8 array is taken as e4m3 bytes only with ``fp8=True``."""
    if _is_torch(x) and "float8_e4m3" in str(x.dtype):
        import torch

        return x.view(torch.uint8), True
    return x, False


def attention_decode(q, k_cache, v_cache, lens, block_table=None, kv_scales=None, scale=None, splits=None,
                     fp8=None, out=None, lse=None, check=False, stream=None):
    """Decode attention: ``tokens`` new query tokens per sequence against a
    K/V cache, split over the keys across the GPU and combined.

    q: ``[batch, tokens, heads, head_dim]`` (float16 or bfloat16; tokens 1,
    or up to 8 speculative tokens, causal among themselves: token ``t`` sees
    keys ``< lens[b] - tokens + 1 + t``); head_dim 64 or 128; ``heads /
    kv_heads`` in 1..16. The cache, of q's dtype or FP8 e4m3
    (``torch.float8_e4m3fn``, or uint8 bytes with ``fp8=True``) with
    ``kv_scales`` float32 ``[2]`` (K's, V's) or ``[2, kv_heads]``:

    * contiguous: ``k_cache``, ``v_cache`` ``[batch, max_len, kv_heads,
      head_dim]``;
    * paged (vLLM's layout, no copy): ``[num_pages, page_size, kv_heads,
      head_dim]`` with ``block_table`` int32 ``[batch, max_pages]`` (page
      sizes 16, 32, 64, 128, 256).

    lens: int32 ``[batch]`` on the device, the keys of each sequence (new
    tokens included); never read by the host, so the call is capturable in
    a CUDA graph (after a first call of the shape on the stream made its
    plan). A length above the cache is clamped and a page index outside the
    cache reads page 0; ``check=True`` reads those flags after the call
    (synchronizing) and raises ``ValueError`` naming them. Returns ``(out,
    lse)``: out like q, lse ``[batch, heads, tokens]`` float32 (natural
    log; ``-inf`` for a token that sees no key, whose output is 0)."""
    _arrays(q=q, k_cache=k_cache, v_cache=v_cache, lens=lens)
    k8, kf = _fp8_bytes(k_cache)
    v8, vf = _fp8_bytes(v_cache)
    is_fp8 = bool(fp8) or (kf and vf)
    o = out if out is not None else _empty(q, q.shape)
    l = lse if lse is not None else _empty(q, (q.shape[0], q.shape[2], q.shape[1]), _f32(q))
    _native.attention_decode(q, k8, v8, lens, o, l, block_table, kv_scales, is_fp8, scale, splits, bool(check), stream)
    return o, l


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, scale=None,
                     out=None, lse=None, check=False, stream=None):
    """Attention over packed variable-length sequences (FlashAttention's
    ``flash_attn_varlen_func`` layout): q ``[total_q, heads, head_dim]``,
    k, v ``[total_k, kv_heads, head_dim]`` (float16 or bfloat16; head_dim
    64, 128 or 256), ``cu_seqlens_q/k`` int32 ``[batch + 1]`` offsets on the
    device (never read by the host), ``max_seqlen_q/k`` the longest
    sequence's lengths (ints: the grid covers them). With ``causal``, the
    mask is aligned bottom-right (query ``i`` of a sequence of ``lq``
    queries and ``lk`` keys sees keys ``j <= i + lk - lq``). Returns ``(o,
    lse)``: o like q, lse ``[heads, total_q]`` float32. Offsets that decrease
    or pass the totals are clamped (nothing outside the outputs is written);
    ``check=True`` raises ``ValueError`` naming them."""
    _arrays(q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    o = out if out is not None else _empty(q, q.shape)
    l = lse if lse is not None else _empty(q, (q.shape[1], q.shape[0]), _f32(q))
    _native.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, o, l, int(max_seqlen_q), int(max_seqlen_k),
                             bool(causal), scale, bool(check), stream)
    return o, l


def attention_varlen_backward(q, k, v, o, lse, d_o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              causal=False, scale=None, dq=None, dk=None, dv=None, check=False, stream=None):
    """The backward of :func:`attention_varlen` (head_dim 64 or 128): from
    its inputs, its ``(o, lse)`` and ``d_o``, returns ``(dq, dk, dv)`` shaped
    like q, k, v."""
    _arrays(q=q, k=k, v=v, o=o, lse=lse, d_o=d_o)
    dq = dq if dq is not None else _empty(q, q.shape)
    dk = dk if dk is not None else _empty(k, k.shape)
    dv = dv if dv is not None else _empty(v, v.shape)
    _native.attention_varlen_backward(q, k, v, o, lse, d_o, cu_seqlens_q, cu_seqlens_k, dq, dk, dv,
                                      int(max_seqlen_q), int(max_seqlen_k), bool(causal), scale, bool(check), stream)
    return dq, dk, dv
