//! The host side of the template: each function runs one kernel of
//! `my-kernels` on a [`Device`] (a GPU, or the CPU emulator: the same code
//! for both) and checks its output against a CPU reference.
use kernel_host::{Device, Error};

/// What one kernel computed, checked against its CPU reference.
#[derive(Debug)]
pub struct Checked {
    /// The kernel.
    pub name: &'static str,
    /// Output elements compared.
    pub elements: usize,
    /// Elements that differ from the reference (the inputs are chosen so
    /// that the results are exact in f32, whatever the order of the sums).
    pub wrong: usize,
    /// The first wrong element: `(index, got, want)`.
    pub first_wrong: Option<(usize, f32, f32)>,
}

impl Checked {
    fn compare(name: &'static str, got: &[f32], want: &[f32]) -> Checked {
        let wrong: Vec<usize> = (0..want.len()).filter(|&i| got.get(i) != Some(&want[i])).collect();
        let first_wrong = wrong.first().map(|&i| (i, got.get(i).copied().unwrap_or(f32::NAN), want[i]));
        Checked { name, elements: want.len(), wrong: wrong.len(), first_wrong }
    }

    /// Every element matched.
    pub fn passed(&self) -> bool {
        self.wrong == 0
    }
}

/// Small multiples of 1/4: sums and products of a few thousand of them are
/// exact in f32.
fn inputs(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7 + seed) % 17) as f32 * 0.25).collect()
}

/// `y = 2 x + y` over `n` elements with `my_kernels::axpy`.
pub fn axpy(dev: &Device, n: usize) -> Result<Checked, Error> {
    let (x_host, y_host) = (inputs(n, 1), inputs(n, 2));
    let a = 2.0f32;
    let prog = dev.load(&my_kernels::DEVICE_CODE)?;
    let x = dev.upload(&x_host)?;
    let mut y = dev.upload(&y_host)?;
    let blocks = (n as u32).div_ceil(my_kernels::BLOCK);
    prog.kernel::<my_kernels::axpy>()?.launch(blocks, (&x, &mut y, a, n as u32))?;
    let got: Vec<f32> = dev.download(&y)?;
    let want: Vec<f32> = x_host.iter().zip(&y_host).map(|(x, y)| a * x + y).collect();
    Ok(Checked::compare("axpy", &got, &want))
}

/// The sums of the `rows` rows of a `rows x cols` matrix with
/// `my_kernels::row_sums` (one warp per row).
pub fn row_sums(dev: &Device, rows: usize, cols: usize) -> Result<Checked, Error> {
    let x_host = inputs(rows * cols, 3);
    let prog = dev.load(&my_kernels::DEVICE_CODE)?;
    let x = dev.upload(&x_host)?;
    let mut sums = dev.zeros::<f32>(rows)?;
    let blocks = (rows as u32).div_ceil(my_kernels::ROWS_PER_BLOCK);
    prog.kernel::<my_kernels::row_sums>()?.launch(blocks, (&x, &mut sums, rows as u32, cols as u32))?;
    let got: Vec<f32> = dev.download(&sums)?;
    let want: Vec<f32> = x_host.chunks(cols).map(|row| row.iter().sum()).collect();
    Ok(Checked::compare("row_sums", &got, &want))
}
