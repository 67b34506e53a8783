"""my_python on torch CUDA tensors (a GPU machine with torch; skipped
visibly without them): the same kernels on the GPU, on torch's current
stream, with no copy, and the dtype check."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import my_python  # noqa: E402


def test_axpy_on_cuda_tensors():
    x = torch.randn(100_000, device="cuda")
    y = torch.randn(100_000, device="cuda")
    want = 2.5 * x + y
    my_python.axpy(x, y, 2.5)
    torch.cuda.synchronize()
    assert torch.allclose(y, want, rtol=1e-6, atol=1e-6)


def test_row_sums_on_cuda_tensors():
    x = torch.randn(300, 257, device="cuda")
    sums = torch.empty(300, device="cuda")
    my_python.row_sums(x, sums)
    assert torch.allclose(sums, x.sum(1), rtol=1e-4, atol=1e-4)


def test_runs_in_order_on_torchs_current_side_stream():
    # No stream= given: the launch is ordered on torch's current stream.
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y2 = y * 3  # queued on s before the kernel: it must see it
        my_python.axpy(x, y2, 2.0)
        z = y2 - 3 * y  # queued on s after the kernel: must see its result
    torch.cuda.synchronize()
    assert torch.allclose(z, 2.0 * x, rtol=1e-5, atol=1e-5)


def test_a_wrong_dtype_is_a_type_error_on_cuda_too():
    x = torch.randn(16, device="cuda", dtype=torch.float64)
    with pytest.raises(TypeError, match="float32 expected"):
        my_python.axpy(x, x.clone(), 1.0)


def test_normalize_rows_on_cuda_tensors():
    x = torch.rand(300, 257, device="cuda") + 0.5
    out = torch.empty(300, 257, device="cuda", dtype=torch.bfloat16)
    my_python.normalize_rows(x, out)
    assert torch.allclose(out.float(), x / x.sum(1, keepdim=True), rtol=1e-2, atol=1e-4)
