//! The first examples on the CPU emulator (no GPU needed): the same kernels,
//! inputs and CPU references as on the GPU.
use crate::{check, inputs, ExampleError, Outcome, Result};
use kernel_host::emulate::{EmuError, Emulator};
use kernels::first;

impl From<EmuError> for ExampleError {
    fn from(e: EmuError) -> Self {
        ExampleError::Emulator(e)
    }
}

/// (a) `y = x + 1` over a grid of 2 blocks.
pub fn increment(emu: &Emulator) -> Result<Outcome> {
    let blocks = 2u32;
    let n = (blocks * first::INCREMENT_BLOCK) as usize;
    let x = inputs(n, 1);
    let mut y = vec![f32::NAN; n];
    emu.launch::<first::increment, _>(blocks, (&x[..], &mut y[..], n as u32))?;
    let want: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
    check("increment", &y, &want)
}

/// (b) Producer and consumer warpgroups through a 2-slot SMEM queue.
pub fn producer_consumer(emu: &Emulator) -> Result<Outcome> {
    let steps = 6u32;
    let n = steps as usize * first::QUEUE_ITEM;
    let x = inputs(n, 2);
    let mut y = vec![f32::NAN; n];
    emu.launch::<first::producer_consumer, _>(1u32, (&x[..], &mut y[..], steps))?;
    let want: Vec<f32> = x.iter().map(|v| (v + 1.0) + 1.0).collect();
    check("producer_consumer", &y, &want)
}

/// (c) Clusters of 2 CTAs swap data through distributed shared memory.
pub fn cluster_exchange(emu: &Emulator) -> Result<Outcome> {
    let ctas = 4u32;
    let len = first::EXCHANGE_LEN;
    let n = ctas as usize * len;
    let x = inputs(n, 3);
    let mut y = vec![f32::NAN; n];
    emu.launch::<first::cluster_exchange, _>(ctas, (&x[..], &mut y[..]))?;
    let mut want = vec![0f32; n];
    for cta in 0..ctas as usize {
        let peer = cta ^ 1;
        for t in 0..len {
            want[cta * len + t] = x[peer * len + t] * 2.0 + (peer % 2) as f32;
        }
    }
    check("cluster_exchange", &y, &want)
}

/// (d) Block 0 signals block 1 through a global semaphore.
pub fn semaphore_signal(emu: &Emulator) -> Result<Outcome> {
    let n = first::MESSAGE_LEN;
    let x = inputs(n, 4);
    let mut scratch = vec![f32::NAN; n];
    let mut y = vec![f32::NAN; n];
    let mut sem = vec![0u32; 1];
    emu.launch::<first::semaphore_signal, _>(
        2u32,
        (&x[..], &mut scratch[..], &mut y[..], &mut sem[..]),
    )?;
    let want: Vec<f32> = x.iter().map(|v| v * 3.0).collect();
    let out = check("semaphore_signal", &y, &want)?;
    if sem[0] != 0 {
        return Err(ExampleError::Mismatch {
            example: "semaphore_signal (semaphore value)",
            index: 0,
            got: sem[0] as f32,
            want: 0.0,
            wrong: 1,
        });
    }
    Ok(out)
}

/// `double_checked`: `y = 2 y` through a bounds-checked `Gmem` view.
pub fn double_checked(emu: &Emulator) -> Result<Outcome> {
    let x = inputs(300, 6);
    let mut y = x.clone();
    emu.launch::<first::double_checked, _>(3u32, (&mut y[..],))?;
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    check("double_checked", &y, &want)
}

/// A cluster of 16 CTAs (a non-portable size): `cluster::cluster_allreduce16`
/// over one cluster, 2 steps.
pub fn cluster_allreduce16(emu: &Emulator) -> Result<Outcome> {
    use kernels::cluster::{ALLREDUCE16_CTAS, ALLREDUCE16_LEN};
    let (ctas, steps) = (ALLREDUCE16_CTAS, 2usize);
    let x = inputs(ctas * steps * ALLREDUCE16_LEN, 7);
    let mut y = vec![f32::NAN; x.len()];
    emu.launch::<kernels::cluster::cluster_allreduce16, _>(ctas as u32, (&x[..], &mut y[..], steps as u32))?;
    check("cluster_allreduce16", &y, &crate::allreduce16_reference(&x, ctas, steps))
}

/// An example on the emulator.
pub type EmulatedExample = (&'static str, fn(&Emulator) -> Result<Outcome>);

/// The first examples, in order.
pub const FIRST_EXAMPLES: [EmulatedExample; 6] = [
    ("increment", increment),
    ("producer_consumer", producer_consumer),
    ("cluster_exchange", cluster_exchange),
    ("semaphore_signal", semaphore_signal),
    ("double_checked", double_checked),
    ("cluster_allreduce16", cluster_allreduce16),
];

// ----- Hopper kernels (TMA and wgmma) on the emulator ---------------------------

use kernel_device::f16;
use kernel_host::emulate::EmuTensorMap;
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error};
use kernels::hopper::{
    self, ATile, BTile, BTileKn, BTileWs, McHalf, McTile, OTile, OTileWs, TILE_K, TILE_M, TILE_N,
};

/// [`hopper::multicast_copy`]: a cluster of 2 loads one `16 x 32` f32 tile
/// with TMA multicast; `y = [x; x]`.
pub fn multicast_copy(emu: &Emulator) -> Result<Outcome> {
    use kernels::hopper::{MC_COLS, MC_ROWS};
    let x: Vec<f32> = inputs(MC_ROWS * MC_COLS, 5);
    let mut y = vec![f32::NAN; 2 * MC_ROWS * MC_COLS];
    {
        let xm = EmuTensorMap::<McHalf>::new_2d(&x, MC_ROWS, MC_COLS)?;
        let ym = EmuTensorMap::<McTile>::new_2d_mut(&mut y, 2 * MC_ROWS, MC_COLS)?;
        emu.launch::<hopper::multicast_copy, _>(2u32, (&xm, &ym))?;
    }
    let want: Vec<f32> = x.iter().chain(x.iter()).copied().collect();
    check("multicast_copy", &y, &want)
}

/// [`hopper::warp_roles`]: a TMA warp and a consumer warp; `y = 2 x` over 4 tiles.
pub fn warp_roles(emu: &Emulator) -> Result<Outcome> {
    let tiles = 4usize;
    let x: Vec<f32> = inputs(tiles * 64 * 64, 9);
    let mut y = vec![f32::NAN; x.len()];
    let xm = EmuTensorMap::<hopper::RoleTile>::new_2d(&x, tiles * 64, 64)?;
    emu.launch::<hopper::warp_roles, _>(tiles as u32, (&xm, &mut y[..]))?;
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    check("warp_roles", &y, &want)
}

/// [`hopper::wgmma_variants`] on the emulator: each variant's relative
/// Frobenius error against the CPU reference (f32 SS, f16-accumulator SS,
/// f32 with A from registers), with the GPU version's inputs.
pub fn wgmma_variants(emu: &Emulator) -> Result<[f64; hopper::VARIANTS]> {
    use kernels::hopper::{VarA, VarB};
    let (m, n, k, batches, batch) = (64, 128, 64, 3, 2);
    let a = randn_f16(m * k, 7);
    let b = randn_f16(batches * n * k, 8);
    let mut out = vec![f16::NAN; hopper::VARIANTS * m * n];
    let am = EmuTensorMap::<VarA>::new_2d(&a, m, k)?;
    let bm = EmuTensorMap::<VarB, 3>::new_batched(&b, batches, n, k)?;
    emu.launch::<hopper::wgmma_variants, _>(1u32, (&am, &bm, batch as u32, &mut out[..]))?;
    let reference = reference_gemm_nt(m, n, k, &a, &b[batch * n * k..(batch + 1) * n * k]);
    let mut errs = [0.0; hopper::VARIANTS];
    for (v, e) in errs.iter_mut().enumerate() {
        *e = rel_frobenius_error(&out[v * m * n..(v + 1) * m * n], &reference);
    }
    Ok(errs)
}

/// The matmuls the emulator runs: every instance of `hopper::MATMULS`.
pub const EMULATED_MATMULS: [&str; 9] = crate::hopper::MATMULS;

/// Runs matmul `name` (one of [`EMULATED_MATMULS`]) on the emulator at
/// `m x n x k` with `randn_f16` inputs (seeds `input_seed`, `input_seed + 1`)
/// and returns the relative Frobenius error of C against
/// `reference_gemm_nt`. Shapes as on the GPU (`M % 128`, `N % 128` or 256
/// for the warp-specialized one, `K % 64`), small enough for the emulator.
pub fn matmul(
    emu: &Emulator,
    name: &str,
    m: usize,
    n: usize,
    k: usize,
    input_seed: u64,
) -> Result<f64> {
    let tile_n = if name.starts_with("warp_specialized") {
        2 * TILE_N
    } else {
        TILE_N
    };
    if m % TILE_M != 0 || n % tile_n != 0 || k % TILE_K != 0 || k == 0 {
        return Err(ExampleError::Cuda(kernel_host::Error::InvalidArgument {
            function: "emulated matmul",
            problem: format!("{name} needs M % {TILE_M} == 0, N % {tile_n} == 0, K % {TILE_K} == 0, K > 0; got {m} x {n} x {k}"),
        }));
    }
    let a = randn_f16(m * k, input_seed);
    let b = randn_f16(n * k, input_seed + 1);
    let b_kn: Vec<f16> = (0..k * n).map(|i| b[(i % n) * k + i / n]).collect();
    let mut c = vec![f16::NAN; m * n];
    let k_steps = (k / TILE_K) as u32;
    let am = EmuTensorMap::<ATile>::new_2d(&a, m, k)?;
    let m_tiles = (m / TILE_M) as u32;
    let grid_1wg = (m_tiles, (n / TILE_N) as u32);
    let grid_ws = m_tiles * (n / (2 * TILE_N)) as u32;
    macro_rules! one_wg {
        ($kernel:ty, $btile:ty, $b:expr, $brows:expr, $bcols:expr) => {{
            let bm = EmuTensorMap::<$btile>::new_2d($b, $brows, $bcols)?;
            let cm = EmuTensorMap::<OTile>::new_2d_mut(&mut c, m, n)?;
            emu.launch::<$kernel, _>(grid_1wg, (&am, &bm, &cm, k_steps))?;
        }};
    }
    macro_rules! ws {
        ($kernel:ty) => {{
            let bm = EmuTensorMap::<BTileWs>::new_2d(&b, n, k)?;
            let cm = EmuTensorMap::<OTileWs>::new_2d_mut(&mut c, m, n)?;
            emu.launch::<$kernel, _>(grid_ws, (&am, &bm, &cm, m_tiles, k_steps))?;
        }};
    }
    match name {
        "pipelined<2>" => one_wg!(hopper::matmul_pipelined<2>, BTile, &b, n, k),
        "pipelined<4>" => one_wg!(hopper::matmul_pipelined<4>, BTile, &b, n, k),
        "pipelined_kn<2>" => one_wg!(hopper::matmul_pipelined_kn<2>, BTileKn, &b_kn, k, n),
        "pipelined_kn<4>" => one_wg!(hopper::matmul_pipelined_kn<4>, BTileKn, &b_kn, k, n),
        "warp_specialized<2,0>" => ws!(hopper::matmul_warp_specialized<2, 0>),
        "warp_specialized<3,0>" => ws!(hopper::matmul_warp_specialized<3, 0>),
        "warp_specialized<4,0>" => ws!(hopper::matmul_warp_specialized<4, 0>),
        "warp_specialized<4,8>" => ws!(hopper::matmul_warp_specialized<4, 8>),
        "warp_specialized<4,16>" => ws!(hopper::matmul_warp_specialized<4, 16>),
        other => {
            return Err(ExampleError::Cuda(kernel_host::Error::InvalidArgument {
                function: "emulated matmul",
                problem: format!(
                    "`{other}` is not emulated; emulated: {}",
                    EMULATED_MATMULS.join(", ")
                ),
            }))
        }
    }
    let reference = reference_gemm_nt(m, n, k, &a, &b);
    Ok(rel_frobenius_error(&c, &reference))
}
