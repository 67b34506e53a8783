"""my_python on NumPy arrays (the CPU emulator): each kernel against
NumPy, and the checks that run before a launch."""
import ml_dtypes
import numpy as np
import pytest

import my_python


def inputs(n, seed):
    # Small multiples of 1/4: the sums are exact in float32.
    return ((np.arange(n) * 7 + seed) % 17 * 0.25).astype(np.float32)


def test_axpy_matches_numpy():
    x, y = inputs(3001, 1), inputs(3001, 2)
    want = 2 * x + y
    my_python.axpy(x, y, 2.0)
    assert (y == want).all()


def test_row_sums_match_numpy():
    x = inputs(37 * 100, 3).reshape(37, 100)
    sums = np.zeros(37, np.float32)
    my_python.row_sums(x, sums)
    assert (sums == x.sum(axis=1)).all()


def test_normalize_rows_matches_numpy_in_bfloat16():
    # Two kernels and a scratch array in one call; the bfloat16 output is an
    # ml_dtypes array (NumPy has no bfloat16 of its own).
    x = inputs(37 * 100, 4).reshape(37, 100) + 0.25
    out = np.zeros((37, 100), ml_dtypes.bfloat16)
    my_python.normalize_rows(x, out)
    want = (x / x.sum(axis=1, keepdims=True)).astype(ml_dtypes.bfloat16)
    assert (out.view(np.uint16) == want.view(np.uint16)).all()


def test_a_bfloat16_parameter_refuses_float32():
    with pytest.raises(TypeError, match=r"normalize_rows\(\): `out` has dtype float32, bfloat16 expected"):
        my_python.normalize_rows(np.ones((4, 8), np.float32), np.zeros((4, 8), np.float32))


def test_a_wrong_dtype_is_a_type_error_naming_the_parameter():
    with pytest.raises(TypeError, match=r"axpy\(\): `x` has dtype float64, float32 expected"):
        my_python.axpy(np.zeros(8), np.zeros(8, np.float32), 1.0)


@pytest.mark.parametrize("call, rule", [
    (lambda: my_python.axpy(np.zeros(8, np.float32), np.zeros(9, np.float32), 1.0),
     "axpy(): `y` has shape [9], [n] expected, with n = 8 (dimension 0 of `x`)"),
    (lambda: my_python.row_sums(np.zeros(8, np.float32), np.zeros(8, np.float32)),
     "row_sums(): `x` has shape [8], 2 dimension(s) [rows, cols] expected"),
    (lambda: my_python.row_sums(np.zeros((4, 8), np.float32), np.zeros(5, np.float32)),
     "row_sums(): `sums` has shape [5], [rows] expected, with rows = 4"),
])
def test_a_wrong_shape_is_a_value_error_naming_the_rule(call, rule):
    with pytest.raises(ValueError) as e:
        call()
    assert rule in str(e.value), str(e.value)


def test_an_output_that_overlaps_an_input_is_refused():
    x = np.zeros(64, np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        my_python.axpy(x, x, 1.0)


def test_the_emulator_report_exception_is_exported():
    assert issubclass(my_python.EmulatorReport, RuntimeError)
