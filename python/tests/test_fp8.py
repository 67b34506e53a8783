"""kernel_ops's FP8 GEMMs on NumPy arrays (the CPU emulator): per-tensor,
row-wise, block-scaled and grouped block-scaled, each against a float64
reference over the dequantized inputs (the FP8 values decoded exactly),
within the Rust tests' tolerance (relative Frobenius error 1e-3: exact
products summed in f32, one float16 rounding); e4m3 as uint8 bytes, and
``ml_dtypes`` FP8 arrays where ml_dtypes is installed; every bad input
refused naming its rule. Small ragged shapes (partial tiles in M and N, a
partial last K block): the emulator is slow."""
import numpy as np
import pytest

import kernel_ops

rng = np.random.default_rng(11)
TOL = 1e-3  # kernel-ops/tests/fp8.rs


def _fp8_table(exp_bits, man_bits, bias, max_byte):
    """The values of the non-negative FP8 bytes ``0..=max_byte`` (finite
    ones: e4m3 up to 0x7e = 448, e5m2 up to 0x7b = 57344)."""
    vals = []
    for byte in range(max_byte + 1):
        e, m = byte >> man_bits, byte & ((1 << man_bits) - 1)
        if e == 0:
            vals.append(m / (1 << man_bits) * 2.0 ** (1 - bias))  # subnormal
        else:
            vals.append((1 + m / (1 << man_bits)) * 2.0 ** (e - bias))
    return np.array(vals)


E4M3 = _fp8_table(4, 3, 7, 0x7E)   # S.EEEE.MMM, bias 7, no infinities
E5M2 = _fp8_table(5, 2, 15, 0x7B)  # S.EEEEE.MM, bias 15


def encode(x, table=E4M3):
    """FP8 bytes (uint8) of `x`: the nearest value of `table`, saturating,
    the sign in bit 7."""
    mag = np.minimum(np.abs(x), table[-1])
    hi = np.clip(np.searchsorted(table, mag), 1, len(table) - 1)
    byte = np.where(mag - table[hi - 1] <= table[hi] - mag, hi - 1, hi)
    return (byte | np.where(x < 0, 0x80, 0)).astype(np.uint8)


def decode(q, table=E4M3):
    """The float64 values of FP8 bytes (none NaN)."""
    mag = table[q & 0x7F]
    return np.where(q & 0x80, -mag, mag)


def quantize(x, table=E4M3):
    """Per-tensor: ``(bytes, scale)`` with ``x ≈ scale * decode(bytes)``."""
    s = float(np.abs(x).max()) / table[-1]
    return encode(x / s, table), s


def quantize_rows(x):
    """A scale per row: ``(bytes, scales [rows] float32)``."""
    s = (np.abs(x).max(1) / 448).astype(np.float32)
    return encode(x / s[:, None]), s


def quantize_blocks(x, rows_per_block):
    """Scales per ``rows_per_block x 128`` block: ``(bytes, scales
    [ceil(rows / rows_per_block), ceil(K / 128)] float32)``."""
    r, k = x.shape
    rb, kb = -(-r // rows_per_block), -(-k // 128)
    s = np.empty((rb, kb), np.float32)
    q = np.empty(x.shape, np.uint8)
    for i in range(rb):
        for j in range(kb):
            blk = x[i * rows_per_block:(i + 1) * rows_per_block, j * 128:(j + 1) * 128]
            s[i, j] = np.abs(blk).max() / 448
            q[i * rows_per_block:(i + 1) * rows_per_block, j * 128:(j + 1) * 128] = encode(blk / s[i, j])
    return q, s


def blockscaled_reference(qa, sa, qb, sb):
    """``Σ_kb sa[kb, i] sb[j // 128, kb] (a_kb @ b_kbᵀ)[i, j]`` in float64
    (sa ``[K/128, M]``, sb ``[N/128, K/128]``)."""
    af, bf = decode(qa), decode(qb)
    k = qa.shape[1]
    c = np.zeros((qa.shape[0], qb.shape[0]))
    for kb in range(-(-k // 128)):
        cols = slice(kb * 128, (kb + 1) * 128)
        col_scale = np.repeat(sb[:, kb].astype(np.float64), 128)[:qb.shape[0]]
        c += sa[kb].astype(np.float64)[:, None] * (af[:, cols] @ bf[:, cols].T) * col_scale[None, :]
    return c


def rel_err(got, want):
    got = np.asarray(got, np.float64)
    assert np.isfinite(got).all(), "an output element is not finite"
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def spread(rows, cols, row_exp, block_exp=lambda kb: 0):
    """iid N(0, 1) scaled by ``2^(row_exp(row) + block_exp(k block))``:
    magnitudes that differ by row and by K block, so a scale applied to the
    wrong row or block is a large error."""
    e = np.array([[row_exp(r) + block_exp(c // 128) for c in range(cols)] for r in range(rows)])
    return rng.standard_normal((rows, cols)) * 2.0 ** e


def test_the_fp8_helpers_match_the_formats():
    assert E4M3[-1] == 448 and E4M3[1] == 2.0 ** -9 and E5M2[-1] == 57344 and E5M2[1] == 2.0 ** -16
    x = np.array([0.0, 1.0, -1.5, 448.0, 1000.0, -0.3])
    assert np.array_equal(decode(encode(x)), [0.0, 1.0, -1.5, 448.0, 448.0, -0.3125])
    ml = pytest.importorskip("ml_dtypes")
    y = rng.standard_normal(4096) * 30
    for table, dt in ((E4M3, ml.float8_e4m3fn), (E5M2, ml.float8_e5m2)):
        q = encode(y, table)
        assert np.array_equal(decode(q, table), q.view(dt).astype(np.float64))


def test_matmul_fp8_matches_float64_at_ragged_shapes():
    # 72 and 200 rows: partial 128-row tiles; N = 136: a partial 256-wide tile.
    for m, n, k in ((72, 136, 256), (200, 136, 272)):
        (qa, sa), (qb, sb) = quantize(rng.standard_normal((m, k))), quantize(rng.standard_normal((n, k)))
        want = sa * sb * (decode(qa) @ decode(qb).T)
        c = kernel_ops.matmul_fp8(qa, qb, sa, sb)
        assert c.shape == (m, n) and c.dtype == np.float16
        assert rel_err(c, want) < TOL, (m, n, k)
    # Scales as float32 arrays of one element; out= given.
    out = np.full((m, n), np.nan, np.float16)
    got = kernel_ops.matmul_fp8(qa, qb, np.array([sa], np.float32), np.float32(sb).reshape(()), out=out)
    assert got is out and rel_err(out, want) < TOL
    # Both scales in one float32 [2] array (scale_b=None), read as it is.
    assert rel_err(kernel_ops.matmul_fp8(qa, qb, np.array([sa, sb], np.float32)), want) < TOL


def test_matmul_fp8_takes_ml_dtypes_e4m3_and_e5m2_operands():
    ml = pytest.importorskip("ml_dtypes")
    m, n, k = 72, 136, 256
    x, w = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    (a4, sa4), (b4, sb4) = quantize(x), quantize(w)
    (a5, sa5), (b5, sb5) = quantize(x, E5M2), quantize(w, E5M2)
    e4, e5 = ml.float8_e4m3fn, ml.float8_e5m2
    c = kernel_ops.matmul_fp8(a4.view(e4), b4.view(e4), sa4, sb4)
    assert rel_err(c, sa4 * sb4 * (decode(a4) @ decode(b4).T)) < TOL
    # e5m2 with e4m3, in either order, each decoded as its own format (read
    # as e4m3, e5m2 bytes would be off by orders of magnitude).
    c = kernel_ops.matmul_fp8(a5.view(e5), b4.view(e4), sa5, sb4)
    assert rel_err(c, sa5 * sb4 * (decode(a5, E5M2) @ decode(b4).T)) < TOL
    c = kernel_ops.matmul_fp8(a4, b5.view(e5), sa4, sb5)  # uint8 bytes are e4m3
    assert rel_err(c, sa4 * sb5 * (decode(a4) @ decode(b5, E5M2).T)) < TOL
    with pytest.raises(NotImplementedError, match="two e5m2 operands are not built"):
        kernel_ops.matmul_fp8(a5.view(e5), b5.view(e5), sa5, sb5)
    with pytest.raises(NotImplementedError, match="matmul_fp8_rowwise: built for e4m3 operands only"):
        kernel_ops.matmul_fp8_rowwise(a5.view(e5), b4, np.ones(m, np.float32), np.ones(n, np.float32))
    with pytest.raises(TypeError, match="float8_e4m3fnuz is not supported"):
        kernel_ops.matmul_fp8(a4.view(ml.float8_e4m3fnuz), b4, sa4, sb4)


def test_matmul_fp8_rowwise_matches_float64():
    m, n, k = 200, 136, 256
    qa, sa = quantize_rows(spread(m, k, lambda r: r % 13 - 9))
    qb, sb = quantize_rows(spread(n, k, lambda r: r % 11 - 8))
    want = sa.astype(np.float64)[:, None] * (decode(qa) @ decode(qb).T) * sb.astype(np.float64)[None, :]
    c = kernel_ops.matmul_fp8_rowwise(qa, qb, sa, sb)
    assert c.shape == (m, n) and c.dtype == np.float16
    assert rel_err(c, want) < TOL
    # torch._scaled_mm's row-wise shapes: M x 1 and 1 x N.
    c = kernel_ops.matmul_fp8_rowwise(qa[:72], qb, sa[:72].reshape(72, 1).copy(), sb.reshape(1, n))
    assert rel_err(c, want[:72]) < TOL


def test_matmul_fp8_blockscaled_matches_float64():
    # K = 272: blocks 128 + 128 + 16; N = 136: a partial 128-row block of b.
    m, n, k = 72, 136, 272
    qa, sa = quantize_blocks(spread(m, k, lambda r: r % 7 - 4, lambda kb: 2 * kb), 1)
    qb, sb = quantize_blocks(spread(n, k, lambda r: 3 * (r // 128), lambda kb: -kb), 128)
    sa = np.ascontiguousarray(sa.T)  # [K/128, M]: K-block-major
    assert sa.shape == (3, m) and sb.shape == (2, 3)
    c = kernel_ops.matmul_fp8_blockscaled(qa, qb, sa, sb)
    assert c.shape == (m, n) and c.dtype == np.float16
    assert rel_err(c, blockscaled_reference(qa, sa, qb, sb)) < TOL


def test_grouped_matmul_fp8_blockscaled_matches_float64_with_ragged_groups():
    sizes = np.array([37, 0, 100, 5], np.int32)
    m, n, k, g = int(sizes.sum()), 136, 256, len(sizes)
    qa, sa = quantize_blocks(spread(m, k, lambda r: r % 5 - 2, lambda kb: kb), 1)
    sa = np.ascontiguousarray(sa.T)
    parts = [quantize_blocks(spread(n, k, lambda r: r // 128 - e, lambda kb: -kb), 128) for e in range(g)]
    qb, sb = np.stack([p[0] for p in parts]), np.stack([p[1] for p in parts])
    assert sa.shape == (2, m) and sb.shape == (g, 2, 2)
    c = kernel_ops.grouped_matmul_fp8_blockscaled(qa, qb, sa, sb, sizes)
    assert c.shape == (m, n) and c.dtype == np.float16
    want, row = np.zeros((m, n)), 0
    for e, mg in enumerate(sizes):
        rows = slice(row, row + mg)
        want[rows] = blockscaled_reference(qa[rows], sa[:, rows], qb[e], sb[e])
        row += mg
    assert rel_err(c, want) < TOL
    with pytest.raises(ValueError, match="do not add up to M"):
        kernel_ops.grouped_matmul_fp8_blockscaled(qa, qb, sa, sb, sizes - 1)


def _u8(*shape):
    return encode(rng.standard_normal(shape))


_A, _B = _u8(64, 256), _u8(32, 256)
_S64, _S32 = np.ones(64, np.float32), np.ones(32, np.float32)


@pytest.mark.parametrize("call, exc, rule", [
    (lambda: kernel_ops.matmul_fp8(_A.astype(np.float16), _B, 1.0, 1.0), TypeError,
     "an FP8 operand is float8_e4m3fn or float8_e5m2 (torch, ml_dtypes) or uint8 holding e4m3 bytes"),
    (lambda: kernel_ops.matmul_fp8(_A, _u8(32, 128), 1.0, 1.0), ValueError, "K differs (256 vs 128)"),
    (lambda: kernel_ops.matmul_fp8(_u8(64, 40), _u8(32, 40), 1.0, 1.0), ValueError, "K = 40: must be a multiple of 16"),
    (lambda: kernel_ops.matmul_fp8(_A, _u8(36, 256), 1.0, 1.0), ValueError, "N = 36: must be a multiple of 8"),
    (lambda: kernel_ops.matmul_fp8(_A, _B, np.ones(2, np.float32), 1.0), ValueError,
     "`scale_a`: a per-tensor scale is a float or a float32 array of 1 element"),
    (lambda: kernel_ops.matmul_fp8(_A, _B, "x", 1.0), TypeError, "`scale_a`: a per-tensor scale is a float"),
    (lambda: kernel_ops.matmul_fp8(_A, _B, np.ones(3, np.float32)), ValueError, "`scales` (float32 [3] on the CPU): shape [2] expected"),
    (lambda: kernel_ops.matmul_fp8(_A, _B, 1.0), TypeError, "`scale_a`: a float is not an array with `__dlpack__`"),
    (lambda: kernel_ops.matmul_fp8(_A, _B, 1.0, 1.0, out=np.empty((64, 32), np.float32)), TypeError, "the op takes float16"),
    (lambda: kernel_ops.matmul_fp8(_A, _B, 1.0, 1.0, out=np.empty((64, 40), np.float16)), ValueError, "shape [64, 32] expected"),
    (lambda: kernel_ops.matmul_fp8_rowwise(_A, _B, _S64[:63], _S32), ValueError, "64 scales expected (one per row of a: M)"),
    (lambda: kernel_ops.matmul_fp8_rowwise(_A, _B, _S64, _S64), ValueError, "32 scales expected"),
    (lambda: kernel_ops.matmul_fp8_rowwise(_A, _B, _S64.astype(np.float16), _S32), TypeError, "the op takes float32"),
    (lambda: kernel_ops.matmul_fp8_blockscaled(_A, _B, np.ones((64, 2), np.float32), np.ones((1, 2), np.float32)), ValueError,
     "shape [2, 64] expected"),
    (lambda: kernel_ops.matmul_fp8_blockscaled(_A, _B, np.ones((2, 64), np.float32), np.ones((2, 2), np.float32)), ValueError,
     "shape [1, 2] expected"),
    (lambda: kernel_ops.grouped_matmul_fp8_blockscaled(_A, _u8(2, 32, 256), np.ones((2, 64), np.float32),
                                                       np.ones((2, 1, 1), np.float32), np.array([32, 32], np.int32)),
     ValueError, "shape [2, 1, 2] expected"),
    (lambda: kernel_ops.grouped_matmul_fp8_blockscaled(_A, _B, np.ones((2, 64), np.float32),
                                                       np.ones((1, 2), np.float32), np.array([64], np.int32)),
     ValueError, "a is M x K, b is G x N x K"),
])
def test_fp8_bad_inputs_raise_naming_the_rule(call, exc, rule):
    with pytest.raises(exc) as e:
        call()
    assert rule in str(e.value), str(e.value)
