//! my-kernels' kernels as Python functions: `my_python.axpy(x, y, a)`,
//! `my_python.row_sums(x, sums)` and `my_python.normalize_rows(x, out)`,
//! which launches two kernels through a scratch array. Arrays come in
//! through DLPack, with no copy: NumPy arrays run on the CPU emulator (a
//! race report is raised as `my_python.EmulatorReport`), CUDA arrays
//! (torch, JAX, CuPy) on their GPU, on the caller's stream (`stream=`). Dtypes and shapes are checked
//! before the launch; the launch is typed, so an argument that does not
//! fit its kernel parameter does not compile.
use pyo3::prelude::*;

kernel_py::kernels! {
    code: my_kernels::DEVICE_CODE;

    /// `y = a * x + y`, elementwise, on float32 vectors of one length.
    fn axpy(x: f32[n], y: mut f32[n], a: f32) {
        kernel: my_kernels::axpy,
        grid: (n as u32).div_ceil(my_kernels::BLOCK),
        args: (&x, &mut y, a, n as u32),
    }

    /// `sums[r] = x[r, 0] + ... + x[r, cols - 1]` (float32, `x` is
    /// `rows x cols`).
    fn row_sums(x: f32[rows, cols], sums: mut f32[rows]) {
        kernel: my_kernels::row_sums,
        grid: (rows as u32).div_ceil(my_kernels::ROWS_PER_BLOCK),
        args: (&x, &mut sums, rows as u32, cols as u32),
    }

    /// `out[r, c] = x[r, c] / (x[r, 0] + ... + x[r, cols - 1])`, rounded
    /// to bfloat16 (`x` float32, `out` bfloat16: a torch.bfloat16 tensor,
    /// or on the emulator an `ml_dtypes.bfloat16` NumPy array). Two
    /// kernels: the row sums go to `sums`, a scratch array made by the
    /// framework of `x` on its device, which `divide_rows` then reads.
    fn normalize_rows(x: f32[rows, cols], out: mut bf16[rows, cols]) {
        scratch sums: f32[rows];
        launch {
            kernel: my_kernels::row_sums,
            grid: (rows as u32).div_ceil(my_kernels::ROWS_PER_BLOCK),
            args: (&x, &mut sums, rows as u32, cols as u32),
        }
        launch {
            kernel: my_kernels::divide_rows,
            grid: (rows as u32).div_ceil(my_kernels::ROWS_PER_BLOCK),
            args: (&x, &sums, &mut out, rows as u32, cols as u32),
        }
    }
}

#[pymodule]
fn my_python(m: &Bound<'_, PyModule>) -> PyResult<()> {
    kernel_py::add_exceptions(m)?;
    m.add_function(wrap_pyfunction!(axpy, m)?)?;
    m.add_function(wrap_pyfunction!(row_sums, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_rows, m)?)
}
