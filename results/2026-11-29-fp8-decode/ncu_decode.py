"""One decode call each of kernel_ops (bf16 and FP8) and SDPA cuDNN at
8x4x8192 (32 query heads, 8 per KV head) and 8x8x8192, for ncu (run6.sh)."""
import math
import torch
import kernel_ops
from torch.nn.attention import SDPBackend, sdpa_kernel

torch.manual_seed(0)
for batch, kvh, length in [(8, 4, 8192), (8, 8, 8192)]:
    q = torch.randn(batch, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, length, kvh, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    lens = torch.full((batch,), length, device="cuda", dtype=torch.int32)
    scale = 1.0 / math.sqrt(128)
    ks, vs = float(k.abs().max()) / 448.0, float(v.abs().max()) / 448.0
    k8, v8 = (k.float() / ks).to(torch.float8_e4m3fn), (v.float() / vs).to(torch.float8_e4m3fn)
    scales = torch.tensor([ks, vs], device="cuda", dtype=torch.float32)
    for _ in range(3):
        kernel_ops.attention_decode(q, k, v, lens, scale=scale)
        kernel_ops.attention_decode(q, k8, v8, lens, kv_scales=scales, scale=scale)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=scale, enable_gqa=True)
    torch.cuda.synchronize()
