//! Host programs for the example kernels: each example is one function
//! taking a [`Device`] (a GPU or the CPU emulator, [`Device::gpu_or_emulator`])
//! that makes its inputs, launches the kernel through the device's one
//! launch path, and checks the output against a CPU reference, element by
//! element. The binaries and the tests call the same functions: the tests
//! with `Device::emulator_with(Emulator::new(seed))` under several seeds,
//! and (ignored) with a GPU device.
use kernel_host::{Buffer, Device};
use kernels::first;

pub mod arrays;
pub mod gated;
pub mod hopper;
pub mod simt;
pub mod peer;
pub mod group_timing;
pub mod attention_ladder;
pub mod ladder;
pub mod blackwell;
pub mod blackwell_ladder;

/// Why an example did not give the right answer.
#[derive(Debug)]
pub enum ExampleError {
    /// A host or launch error: no GPU, a module that fails to load, a
    /// GPU-only feature asked of the emulator, or a race, deadlock or
    /// protocol misuse the CPU emulator found (`kernel_host::Error::Emulator`).
    Host(kernel_host::Error),
    /// The kernel ran and produced a wrong value.
    Mismatch { example: &'static str, index: usize, got: f32, want: f32, wrong: usize },
}

impl std::fmt::Display for ExampleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExampleError::Host(e) => write!(f, "{e}"),
            ExampleError::Mismatch { example, index, got, want, wrong } => write!(
                f,
                "{example}: wrong result: {wrong} element(s) differ from the CPU reference; first at index {index}: got {got}, want {want}"
            ),
        }
    }
}

impl std::error::Error for ExampleError {}

impl From<kernel_host::Error> for ExampleError {
    fn from(e: kernel_host::Error) -> Self {
        ExampleError::Host(e)
    }
}

/// An invalid argument of an example's host function (a shape its tiles do
/// not divide, an unknown instance name).
pub(crate) fn invalid(function: &'static str, problem: String) -> ExampleError {
    ExampleError::Host(kernel_host::Error::InvalidArgument { function, problem })
}

pub type Result<T> = std::result::Result<T, ExampleError>;

/// What a successful example reports.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub example: &'static str,
    /// Elements checked against the CPU reference (all equal, bit for bit).
    pub checked: usize,
    /// A few output values, for the log.
    pub sample: Vec<f32>,
}

/// Deterministic pseudo-random floats in [-4, 4): [`kernel_host::uniform_f32`].
pub use kernel_host::uniform_f32 as inputs;

/// Compares `got` with `want` exactly (the kernels do the same IEEE f32
/// operations as the reference).
pub fn check(example: &'static str, got: &[f32], want: &[f32]) -> Result<Outcome> {
    assert_eq!(got.len(), want.len(), "{example}: output length");
    let wrong: Vec<usize> = (0..got.len()).filter(|&i| got[i].to_bits() != want[i].to_bits()).collect();
    if let Some(&index) = wrong.first() {
        return Err(ExampleError::Mismatch { example, index, got: got[index], want: want[index], wrong: wrong.len() });
    }
    Ok(Outcome { example, checked: got.len(), sample: got.iter().take(4).copied().collect() })
}

/// An output buffer of `n` NaNs, so an element the kernel never writes
/// fails the check.
pub fn poisoned<T: kernel_host::cudarc::driver::DeviceRepr + Copy + NanValue>(dev: &Device, n: usize) -> Result<Buffer<T>> {
    Ok(dev.upload(&vec![T::NAN; n])?)
}

/// The NaN of a floating-point element type (for [`poisoned`]).
pub trait NanValue {
    const NAN: Self;
}
impl NanValue for f32 {
    const NAN: f32 = f32::NAN;
}
impl NanValue for kernel_device::f16 {
    const NAN: kernel_device::f16 = kernel_device::f16::NAN;
}

/// (a) `y = x + 1` over a grid of 2 blocks of 128 threads.
pub fn increment(dev: &Device) -> Result<Outcome> {
    let blocks = 2u32;
    let n = (blocks * first::INCREMENT_BLOCK) as usize;
    let x = inputs(n, 1);
    let dx = dev.upload(&x)?;
    let mut dy = poisoned(dev, n)?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<first::increment>()?.launch_sync(blocks, (&dx, &mut dy, n as u32))?;
    let want: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
    check("increment", &dev.download(&dy)?, &want)
}

/// (b) Producer and consumer warpgroups through a 2-slot SMEM queue: `y = x + 2`,
/// 16 steps on a GPU (8 phases of each barrier), 6 on the emulator (3).
pub fn producer_consumer(dev: &Device) -> Result<Outcome> {
    let steps = if dev.is_gpu() { 16u32 } else { 6 };
    let n = steps as usize * first::QUEUE_ITEM;
    let x = inputs(n, 2);
    let dx = dev.upload(&x)?;
    let mut dy = poisoned(dev, n)?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<first::producer_consumer>()?.launch_sync(1u32, (&dx, &mut dy, steps))?;
    let want: Vec<f32> = x.iter().map(|v| (v + 1.0) + 1.0).collect();
    check("producer_consumer", &dev.download(&dy)?, &want)
}

/// (c) Clusters of 2 CTAs swap data through distributed shared memory.
pub fn cluster_exchange(dev: &Device) -> Result<Outcome> {
    let ctas = 4u32; // two clusters
    let len = first::EXCHANGE_LEN;
    let n = ctas as usize * len;
    let x = inputs(n, 3);
    let dx = dev.upload(&x)?;
    let mut dy = poisoned(dev, n)?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<first::cluster_exchange>()?.launch_sync(ctas, (&dx, &mut dy))?;
    let mut want = vec![0f32; n];
    for cta in 0..ctas as usize {
        let peer = cta ^ 1; // rank = cta % 2 within clusters of 2
        for t in 0..len {
            want[cta * len + t] = x[peer * len + t] * 2.0 + (peer % 2) as f32;
        }
    }
    check("cluster_exchange", &dev.download(&dy)?, &want)
}

/// (d) Block 0 signals block 1 through a global semaphore: `y = 3 x`, and
/// the semaphore ends at 0.
pub fn semaphore_signal(dev: &Device) -> Result<Outcome> {
    let n = first::MESSAGE_LEN;
    let x = inputs(n, 4);
    let dx = dev.upload(&x)?;
    let mut scratch = poisoned(dev, n)?;
    let mut dy = poisoned(dev, n)?;
    let mut sem = dev.zeros::<u32>(1)?;
    dev.load(&kernels::DEVICE_CODE)?
        .kernel::<first::semaphore_signal>()?
        .launch_sync(2u32, (&dx, &mut scratch, &mut dy, &mut sem))?;
    let want: Vec<f32> = x.iter().map(|v| v * 3.0).collect();
    let out = check("semaphore_signal", &dev.download(&dy)?, &want)?;
    let left = dev.download(&sem)?[0];
    if left != 0 {
        return Err(ExampleError::Mismatch { example: "semaphore_signal (semaphore value)", index: 0, got: left as f32, want: 0.0, wrong: 1 });
    }
    Ok(out)
}

/// (e) `grid_sum`: the sum of 4 blocks' shares, finalized by the last block
/// through grid-wide scratch the launcher allocates. Launched twice on the
/// same device: each launch gets freshly zeroed scratch, or the second
/// launch's counter would start at 4 and no block would finalize. The
/// inputs are small integers, so every order of the f32 additions is exact.
pub fn grid_sum(dev: &Device) -> Result<Outcome> {
    let blocks = 4u32;
    let n = blocks as usize * first::GRID_SUM_BLOCK as usize * 2 + 37;
    let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 13) as f32 - 6.0).collect();
    let want = vec![x.iter().map(|&v| v as f64).sum::<f64>() as f32];
    let dx = dev.upload(&x)?;
    let kernel = dev.load(&kernels::DEVICE_CODE)?.kernel::<first::grid_sum>()?;
    let mut out = None;
    for launch in 0..2 {
        let mut dy = poisoned(dev, 1)?;
        kernel.launch_sync(blocks, (&dx, &mut dy))?;
        let example = if launch == 0 { "grid_sum" } else { "grid_sum (second launch: scratch zeroed again)" };
        out = Some(check(example, &dev.download(&dy)?, &want)?);
    }
    Ok(out.expect("two launches"))
}

/// `double_checked`: `y = 2 y` through a bounds-checked `Gmem` view, on a
/// length that is not a multiple of the block (300 elements, 3 blocks).
pub fn double_checked(dev: &Device) -> Result<Outcome> {
    let x = inputs(300, 6);
    let mut dy = dev.upload(&x)?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<first::double_checked>()?.launch_sync(3u32, (&mut dy,))?;
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    check("double_checked", &dev.download(&dy)?, &want)
}

/// The CPU reference of [`cluster::cluster_allreduce16`](kernels::cluster::cluster_allreduce16)
/// over `ctas` CTAs (clusters of 16 consecutive CTAs) and `steps` steps:
/// every CTA's row of step `s` is the sum, in rank order, of the rows of
/// step `s` of the CTAs of its cluster.
pub fn allreduce16_reference(x: &[f32], ctas: usize, steps: usize) -> Vec<f32> {
    use kernels::cluster::{ALLREDUCE16_CTAS as C, ALLREDUCE16_LEN as L};
    assert_eq!(x.len(), ctas * steps * L, "x holds ctas * steps * {L} floats");
    assert_eq!(ctas % C, 0, "whole clusters of {C}");
    let mut want = vec![0f32; x.len()];
    for cluster in 0..ctas / C {
        for s in 0..steps {
            for t in 0..L {
                let mut sum = 0f32;
                for r in 0..C {
                    sum += x[((cluster * C + r) * steps + s) * L + t];
                }
                for r in 0..C {
                    want[((cluster * C + r) * steps + s) * L + t] = sum;
                }
            }
        }
    }
    want
}

/// The CPU reference of [`cluster::cluster_allreduce`](kernels::cluster::cluster_allreduce)
/// on one 2 x 2 cluster and `steps` steps: every CTA's row of step `s` is
/// the sum of the 4 CTAs' rows of step `s`.
pub fn allreduce2x2_reference(x: &[f32], steps: usize) -> Vec<f32> {
    use kernels::cluster::ALLREDUCE_LEN as L;
    assert_eq!(x.len(), 4 * steps * L, "x holds 4 * steps * {L} floats");
    let mut want = vec![0f32; x.len()];
    for s in 0..steps {
        for t in 0..L {
            let sum: f32 = (0..4).map(|c| x[(c * steps + s) * L + t]).sum();
            for c in 0..4 {
                want[(c * steps + s) * L + t] = sum;
            }
        }
    }
    want
}

/// The CPU reference of [`cluster::cluster_axis_sums`](kernels::cluster::cluster_axis_sums)
/// on one 2 x 2 x 2 cluster: for CTA rank `me`, `y[2 me]` sums `r + 1` over
/// the ranks `r` of its y-z plane (same x), `y[2 me + 1]` over its x row
/// (same y and z).
pub fn axis_sums_reference() -> Vec<u32> {
    let coords = |r: u32| (r % 2, (r / 2) % 2, r / 4);
    let mut want = vec![0u32; 16];
    for me in 0..8u32 {
        let (mx, my, mz) = coords(me);
        for r in 0..8u32 {
            let (x, y, z) = coords(r);
            if x == mx {
                want[2 * me as usize] += r + 1;
            }
            if y == my && z == mz {
                want[2 * me as usize + 1] += r + 1;
            }
        }
    }
    want
}

/// A cluster of 16 CTAs, a non-portable size (`#[kernel(.., non_portable_cluster)]`):
/// clusters all-reduce their rows through distributed shared memory
/// (`cluster::cluster_allreduce16`): two clusters and 3 steps on a GPU, one
/// cluster and 2 steps on the emulator ([`cluster_allreduce16_sized`] for
/// other sizes).
pub fn cluster_allreduce16(dev: &Device) -> Result<Outcome> {
    let (clusters, steps) = if dev.is_gpu() { (2, 3) } else { (1, 2) };
    cluster_allreduce16_sized(dev, clusters, steps)
}

/// [`cluster_allreduce16`] over `clusters` clusters of 16 and `steps` steps.
pub fn cluster_allreduce16_sized(dev: &Device, clusters: usize, steps: usize) -> Result<Outcome> {
    use kernels::cluster::{ALLREDUCE16_CTAS, ALLREDUCE16_LEN};
    let ctas = clusters * ALLREDUCE16_CTAS;
    let x = inputs(ctas * steps * ALLREDUCE16_LEN, 7);
    let dx = dev.upload(&x)?;
    let mut dy = poisoned(dev, x.len())?;
    dev.load(&kernels::DEVICE_CODE)?
        .kernel::<kernels::cluster::cluster_allreduce16>()?
        .launch_sync(ctas as u32, (&dx, &mut dy, steps as u32))?;
    check("cluster_allreduce16", &dev.download(&dy)?, &allreduce16_reference(&x, ctas, steps))
}

/// An example: its name and how to run it.
pub type Example = (&'static str, fn(&Device) -> Result<Outcome>);

/// The seed reference's first examples, in order.
pub const FIRST_EXAMPLES: [Example; 7] = [
    ("increment", increment),
    ("producer_consumer", producer_consumer),
    ("cluster_exchange", cluster_exchange),
    ("semaphore_signal", semaphore_signal),
    ("grid_sum", grid_sum),
    ("double_checked", double_checked),
    ("cluster_allreduce16", cluster_allreduce16),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_varied_and_in_range() {
        let v = inputs(1000, 7);
        assert!(v.iter().all(|x| (-4.0..4.0).contains(x)));
        let distinct: std::collections::BTreeSet<u32> = v.iter().map(|x| x.to_bits()).collect();
        assert!(distinct.len() > 990, "{} distinct", distinct.len());
        assert_ne!(inputs(4, 1), inputs(4, 2));
    }

    #[test]
    fn check_reports_the_first_wrong_element() {
        let err = check("t", &[1.0, 5.0, f32::NAN], &[1.0, 2.0, 3.0]).unwrap_err().to_string();
        assert!(err.contains("2 element(s) differ") && err.contains("index 1: got 5, want 2"), "{err}");
        assert!(check("t", &[1.0, 2.0], &[1.0, 2.0]).is_ok());
    }
}
