//! The Blackwell matmuls (tutorial steps 0-2, `kernels::blackwell`): tensor
//! maps built from the kernels' own tile types, launched on a [`Device`]:
//! the CPU emulator (no sm_100 GPU is available to this project) or a GPU
//! of compute capability 10.x (`dev.supports::<K>()`), and checked against
//! a CPU reference.
use crate::{invalid, poisoned, Result};
use kernel_device::f16;
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error, Device, TileMap};
use kernels::blackwell::{self, ATile, BTile, ETile, OTile, TILE_K, TILE_M};

/// Every instance of the Blackwell matmuls, as `name<TN,STAGES>`.
pub const MATMULS: [&str; 6] = [
    "matmul0<128,4>",
    "matmul0<256,2>",
    "matmul1<128,4>",
    "matmul1<256,3>",
    "matmul2<128,4>",
    "matmul2<256,4>",
];

/// Relative Frobenius error a correct f16-output matmul stays under.
pub const TOLERANCE: f64 = 2e-3;

/// Tile N of an instance name.
fn tile_n(name: &str) -> usize {
    if name.contains("<256") {
        256
    } else {
        128
    }
}

/// The inputs of an `m x n x k` problem for instance `name`, after checking
/// that its tiles divide the shape: `A` (`M x K`), `B` as `N x K` (for the
/// reference) and its transpose `K x N` (what the kernels read), f16 from
/// `randn_f16` with seeds `input_seed`, `input_seed + 1`.
fn problem(function: &'static str, name: &str, (m, n, k): (usize, usize, usize), input_seed: u64) -> Result<(Vec<f16>, Vec<f16>, Vec<f16>)> {
    let tn = tile_n(name);
    if m % TILE_M != 0 || n % tn != 0 || k % TILE_K != 0 || k == 0 {
        return Err(invalid(function, format!("{name} needs M % {TILE_M} == 0, N % {tn} == 0, K % {TILE_K} == 0, K > 0; got {m} x {n} x {k}")));
    }
    let a = randn_f16(m * k, input_seed);
    let b_nk = randn_f16(n * k, input_seed + 1);
    let b_kn: Vec<f16> = (0..k * n).map(|i| b_nk[(i % n) * k + i / n]).collect();
    Ok((a, b_nk, b_kn))
}

/// Runs Blackwell matmul `name` (one of [`MATMULS`]) on `dev` at
/// `m x n x k` (`C = A · B`, `A` `M x K`, `B` `K x N`, both row-major f16
/// from `randn_f16` with seeds `input_seed`, `input_seed + 1`) and returns
/// the relative Frobenius error of C against the CPU reference. On a GPU
/// these sm_100a kernels need a B200-class device (compute capability
/// 10.0): elsewhere `Program::kernel` refuses them with
/// `Error::KernelNotForArch` (check `dev.supports::<K>()` first). This
/// project has no such GPU, so that path has never run.
pub fn matmul(dev: &Device, name: &str, m: usize, n: usize, k: usize, input_seed: u64) -> Result<f64> {
    const FUNCTION: &str = "Blackwell matmul";
    if !MATMULS.contains(&name) {
        return Err(invalid(FUNCTION, format!("`{name}` is not a Blackwell matmul; they are: {}", MATMULS.join(", "))));
    }
    let (a_host, b_nk, b_kn) = problem(FUNCTION, name, (m, n, k), input_seed)?;
    let (a, b) = (dev.upload(&a_host)?, dev.upload(&b_kn)?);
    let mut c = poisoned::<f16>(dev, m * n)?;
    let k_steps = (k / TILE_K) as u32;
    let grid = ((m / TILE_M) as u32, (n / tile_n(name)) as u32);
    {
        let prog = dev.load(&kernels::DEVICE_CODE)?;
        let am = TileMap::<ATile>::new_2d(&a, m, k)?;
        let c = &mut c;
        // The instance table: kernel, tile N, output tile type.
        macro_rules! run {
            ($kernel:ty, $tn:literal, $otile:ty) => {{
                let bm = TileMap::<BTile<$tn>>::new_2d(&b, k, n)?;
                let cm = TileMap::<$otile>::new_2d_mut(c, m, n)?;
                prog.kernel::<$kernel>()?.launch_sync(grid, (&am, &bm, &cm, k_steps))?;
            }};
        }
        match name {
            "matmul0<128,4>" => run!(blackwell::matmul0<128, 4>, 128, OTile<128>),
            "matmul0<256,2>" => run!(blackwell::matmul0<256, 2>, 256, OTile<256>),
            "matmul1<128,4>" => run!(blackwell::matmul1<128, 4>, 128, OTile<128>),
            "matmul1<256,3>" => run!(blackwell::matmul1<256, 3>, 256, OTile<256>),
            "matmul2<128,4>" => run!(blackwell::matmul2<128, 4>, 128, ETile),
            "matmul2<256,4>" => run!(blackwell::matmul2<256, 4>, 256, ETile),
            other => unreachable!("`{other}` is in MATMULS but has no arm: add it to the table"),
        }
    }
    Ok(rel_frobenius_error(&dev.download(&c)?, &reference_gemm_nt(m, n, k, &a_host, &b_nk)))
}

/// [`blackwell::embedding_gather`]: `out[t] = table[ids[t]]` by TMA gather4
/// for a `vocab x EMBED_DIM` f16 table of `randn_f16(.., table_seed)`;
/// returns `(out, want)`, `want` the CPU gather (a row of zeros where
/// `ids[t] >= vocab`: TMA's out-of-bounds fill). `ids.len()` must be a
/// non-zero multiple of `GATHER_TOKENS` (8). An sm_100a kernel: on a GPU it
/// needs compute capability 10.x (none is available to this project).
pub fn embedding_gather(dev: &Device, vocab: usize, ids: &[u32], table_seed: u64) -> Result<(Vec<f16>, Vec<f16>)> {
    use blackwell::{EmbedRow, EMBED_DIM, GATHER_TOKENS};
    const FUNCTION: &str = "embedding_gather";
    if ids.is_empty() || !ids.len().is_multiple_of(GATHER_TOKENS) || vocab == 0 {
        return Err(invalid(FUNCTION, format!("needs a non-zero multiple of {GATHER_TOKENS} token ids and a non-empty table; got {} ids, vocab {vocab}", ids.len())));
    }
    let table = randn_f16(vocab * EMBED_DIM, table_seed);
    let want: Vec<f16> = ids
        .iter()
        .flat_map(|&id| {
            let id = id as usize;
            (0..EMBED_DIM).map(move |c| (id, c))
        })
        .map(|(id, c)| if id < vocab { table[id * EMBED_DIM + c] } else { f16::ZERO })
        .collect();
    let (dt, di) = (dev.upload(&table)?, dev.upload(ids)?);
    let mut out = poisoned::<f16>(dev, ids.len() * EMBED_DIM)?;
    {
        let map = TileMap::<EmbedRow>::new_2d(&dt, vocab, EMBED_DIM)?;
        let grid = (ids.len() / GATHER_TOKENS) as u32;
        dev.load(&kernels::DEVICE_CODE)?
            .kernel::<blackwell::embedding_gather>()?
            .launch_sync(grid, (&map, &di, &mut out))?;
    }
    Ok((dev.download(&out)?, want))
}

/// [`blackwell::tcgen05_transposed`]: `A · Bᵀ` (`128 x 128 x 64`) on the
/// tensor core with A, B or both read through transposed SMEM views
/// (MN-major operands), against the CPU product; returns each variant's
/// relative Frobenius error.
pub fn tcgen05_transposed(dev: &Device) -> Result<[f64; blackwell::TCGEN05_TRANSPOSED_VARIANTS]> {
    use blackwell::{TrAKm, TrBNk, TCGEN05_TRANSPOSED_VARIANTS as V};
    let (m, n, k) = (128, 128, 64);
    let a_mk = randn_f16(m * k, 41);
    let b_nk = randn_f16(n * k, 42);
    let transpose = |x: &[f16], rows: usize, cols: usize| -> Vec<f16> { (0..rows * cols).map(|i| x[(i % rows) * cols + i / rows]).collect() };
    let (a_km, b_kn) = (transpose(&a_mk, m, k), transpose(&b_nk, n, k));
    let (da_mk, da_km, db_nk, db_kn) = (dev.upload(&a_mk)?, dev.upload(&a_km)?, dev.upload(&b_nk)?, dev.upload(&b_kn)?);
    let mut out = poisoned::<f32>(dev, V * m * n)?;
    {
        let maps = (
            TileMap::<ATile>::new_2d(&da_mk, m, k)?,
            TileMap::<TrAKm>::new_2d(&da_km, k, m)?,
            TileMap::<TrBNk>::new_2d(&db_nk, n, k)?,
            TileMap::<BTile<128>>::new_2d(&db_kn, k, n)?,
        );
        dev.load(&kernels::DEVICE_CODE)?
            .kernel::<blackwell::tcgen05_transposed>()?
            .launch_sync(1u32, (&maps.0, &maps.1, &maps.2, &maps.3, &mut out))?;
    }
    let reference = reference_gemm_nt(m, n, k, &a_mk, &b_nk);
    let got: Vec<f32> = dev.download(&out)?;
    let mut errs = [0.0; V];
    for (v, e) in errs.iter_mut().enumerate() {
        *e = kernel_host::rel_frobenius_error_f32(&got[v * m * n..(v + 1) * m * n], &reference);
    }
    Ok(errs)
}
