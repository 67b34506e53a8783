//! `C = A · Bᵀ` on Hopper, in f16 or bf16: the ready matmul (the Hopper
//! ladder's steps 4 and 5 as library kernels, `kernel_ops_kernels::matmul`),
//! autotuned per shape and element type.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let (m, n, k) = (1024, 1024, 512);
//! let dev = kernel_host::Device::gpu_or_emulator()?;   // the same code runs on the CPU emulator
//! # let a = dev.upload(&vec![kernel_device::f16::ZERO; m * k])?;
//! # let b = dev.upload(&vec![kernel_device::f16::ZERO; n * k])?;
//! # let mut c = dev.zeros::<kernel_device::f16>(m * n)?;
//! let mm = kernel_ops::Matmul::new(&dev)?;
//! mm.matmul(&a, (m, k), &b, (n, k), &mut c)?;   // a: M x K, b: N x K, c: M x N, row-major f16
//! # let a16 = dev.upload(&vec![kernel_device::bf16::ZERO; m * k])?;
//! # let b16 = dev.upload(&vec![kernel_device::bf16::ZERO; n * k])?;
//! # let mut c16 = dev.zeros::<kernel_device::bf16>(m * n)?;
//! mm.matmul(&a16, (m, k), &b16, (n, k), &mut c16)?;   // the same call on bf16 buffers
//! # Ok(())
//! # }
//! ```
//!
//! * **Element types** ([`MatmulElem`]): f16 and bf16, `A`, `B` and `C`
//!   alike, f32 accumulation; the type of the buffers picks the kernels
//!   (`matmul_persistent_ws<E, ..>` and `matmul_persistent_ws_cluster<E,
//!   ..>`, generic over the element type: the same instances for both).
//!
//! * **Devices**: a GPU (Hopper: the kernels use wgmma and TMA) or the CPU
//!   emulator, through the same calls; on the emulator keep shapes small
//!   (hundreds, not thousands) and expect no autotuning ([`Matmul::tune`]
//!   is [`kernel_host::Error::GpuOnly`] there).
//!
//! * **Shapes**: any `M, N, K >= 1` with `K % 8 == 0` and `N % 8 == 0` (TMA
//!   needs row strides that are multiples of 16 bytes); the kernels' tiles
//!   need not divide the shape: TMA zero-fills loads past the edges (a
//!   no-op in the aligned case) and clips the stores.
//! * **Errors** ([`MatmulError`]): a dimension of 0, A's and B's K that
//!   differ, a buffer whose length is not its shape's, a stride TMA cannot
//!   take, a dimension over TMA's `i32` coordinates, a buffer that does
//!   not start at a multiple of 16 bytes: each names the rule and the
//!   values, before anything is launched.
//! * **Instance choice**: the winner of an autotuning sweep for the device,
//!   element type and shape, read from the cache file ([`TuneCache`]);
//!   without one, the shipped table's winner for the shape's class on this
//!   GPU ([`table_instance`]: tuned on an H200 over `M` 64-16384, `N`
//!   1024-16384, `K` 512-16384); on a GPU the table does not have, a
//!   default by problem size ([`default_instance`]).
//! * **Split-K** (`splitk 128x128 s6`, `splitk 128x64 s8`, `splitk 64x128
//!   s8`, `splitk 64x64 s13`: `kernel_ops_kernels::matmul::matmul_splitk`):
//!   for shapes with fewer tiles than half the SMs (the decode rows, `M` =
//!   64-256, against a weight), each tile's K steps are split over up to 16 CTAs
//!   ([`splitk_splits`]), and the last CTA of a tile sums the f32 partials
//!   in split order: no second kernel, deterministic bits. Its workspace
//!   (one f32 `128 x 128` tile per SM, about 8.6 MB on 132 SMs) is
//!   allocated at its first launch and kept by the [`Matmul`]; its launches
//!   are ordered on the device's stream, so they never share it at once.
//!   The one way they could: CUDA graphs captured with split-K matmuls of
//!   one `Matmul` (one Python thread) replayed concurrently on two streams
//!   share its workspace; replay them in order, or give each its own
//!   `Matmul`.
//!   [`Matmul::tune`] (f16) and [`Matmul::tune_elem`] (either type) run the
//!   sweep (a progress bar on stderr), `retune = true` ignores the cache.
//! * **Tensor maps** are encoded once per (instance, buffers, shape) and
//!   reused ([`kernel_host::MapArg`]).
use kernel_device::launch::HostEntry;
use kernel_device::tma::TensorMapParam;
use kernel_device::{bf16, f16};
use kernel_host::{time_kernel, Buffer, Device, MapArg, Program, TileMap};
use crate::Ctas;
use kernel_device::Gmem;
use kernel_ops_kernels::matmul::{matmul_persistent_ws, matmul_persistent_ws_cluster, matmul_splitk, ATile, BTile, EpiTile, TK};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

/// Why a matmul was refused (nothing was launched) or failed.
#[derive(Debug)]
pub enum MatmulError {
    /// A dimension is 0.
    EmptyDimension { m: usize, n: usize, k: usize },
    /// A is `M x K` and B is `N x K'` with `K != K'`.
    KMismatch { a_k: usize, b_k: usize },
    /// A buffer's length is not its shape's (`dtype`: the element type,
    /// `"f16"` or `"bf16"`).
    BufferLength { name: &'static str, shape: String, want: usize, got: usize, dtype: &'static str },
    /// A row stride TMA cannot take (rows must be a multiple of 16 bytes).
    MisalignedStride { name: &'static str, dim: &'static str, value: usize, dtype: &'static str },
    /// A dimension over TMA's signed 32-bit coordinates.
    TooLarge { dim: &'static str, value: usize },
    /// A buffer that does not start at a multiple of 16 bytes
    /// ([`crate::check_aligned`]: a view borrowed at an offset).
    Misaligned { name: &'static str, address: u64 },
    /// No listed instance has this name.
    UnknownInstance { name: String },
    /// A CUDA, cuBLAS or launch error, or a report of the CPU emulator.
    Cuda(kernel_host::Error),
}

impl fmt::Display for MatmulError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatmulError::EmptyDimension { m, n, k } => {
                write!(f, "matmul: every dimension must be at least 1; got M = {m}, N = {n}, K = {k}")
            }
            MatmulError::KMismatch { a_k, b_k } => write!(
                f,
                "matmul: A (M x K) and B (N x K) must have the same K; A has K = {a_k}, B has K = {b_k}"
            ),
            MatmulError::BufferLength { name, shape, want, got, dtype } => {
                write!(f, "matmul: `{name}` must hold {shape} = {want} {dtype} elements (row-major), but it has {got}")
            }
            MatmulError::MisalignedStride { name, dim, value, dtype } => write!(
                f,
                "matmul: the rows of `{name}` are {dim} = {value} {dtype} = {} bytes apart, and TMA needs row strides \
                 that are multiples of 16 bytes: {dim} must be a multiple of 8 (pad the rows and pass a padded copy)",
                2 * value
            ),
            MatmulError::TooLarge { dim, value } => {
                write!(f, "matmul: {dim} = {value} is over TMA's coordinate range (at most {})", i32::MAX)
            }
            MatmulError::Misaligned { name, address } => write!(f, "matmul: {}", crate::misaligned(name, *address)),
            MatmulError::UnknownInstance { name } => write!(
                f,
                "matmul: no instance `{name}`; instances: {}",
                INSTANCES.iter().map(|i| i.name).collect::<Vec<_>>().join(", ")
            ),
            MatmulError::Cuda(e) => write!(f, "matmul: {e}"),
        }
    }
}

impl std::error::Error for MatmulError {}

impl From<kernel_host::Error> for MatmulError {
    fn from(e: kernel_host::Error) -> Self {
        MatmulError::Cuda(e)
    }
}

/// Checks an f16 problem before anything is launched: `a` is `m x k`, `b`
/// `n x kb`, `c` `m x n` (lengths `a_len`, `b_len`, `c_len`). Pure: no GPU.
/// [`check_problem_for`] for either element type.
pub fn check_problem(a_shape: (usize, usize), b_shape: (usize, usize), lens: (usize, usize, usize)) -> Result<(), MatmulError> {
    check_problem_for::<f16>(a_shape, b_shape, lens)
}

/// [`check_problem`] on element type `E` (named in the errors; the rules
/// are the same for f16 and bf16, both 2 bytes).
pub fn check_problem_for<E: MatmulElem>(
    (m, k): (usize, usize),
    (n, kb): (usize, usize),
    (a_len, b_len, c_len): (usize, usize, usize),
) -> Result<(), MatmulError> {
    let dtype = E::NAME;
    if k != kb {
        return Err(MatmulError::KMismatch { a_k: k, b_k: kb });
    }
    if m == 0 || n == 0 || k == 0 {
        return Err(MatmulError::EmptyDimension { m, n, k });
    }
    for (dim, value) in [("M", m), ("N", n), ("K", k)] {
        if value > i32::MAX as usize {
            return Err(MatmulError::TooLarge { dim, value });
        }
    }
    for (name, shape, rows, cols, got) in [("a", "M x K", m, k, a_len), ("b", "N x K", n, k, b_len), ("c", "M x N", m, n, c_len)] {
        let want = rows * cols;
        if got != want {
            return Err(MatmulError::BufferLength { name, shape: format!("{shape} = {rows} x {cols}"), want, got, dtype });
        }
    }
    if k % 8 != 0 {
        return Err(MatmulError::MisalignedStride { name: "a` and `b", dim: "K", value: k, dtype });
    }
    if n % 8 != 0 {
        return Err(MatmulError::MisalignedStride { name: "c", dim: "N", value: n, dtype });
    }
    Ok(())
}

/// How an instance sizes its grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grid {
    /// One CTA per tile slot: [`Ctas::grid`] of the tiles on the SMs.
    Persistent,
    /// CTAs in clusters of 2, one pair per two tile rows: twice
    /// [`Ctas::grid`] of `ceil(m_tiles / 2) n_tiles` pairs on `SMs / 2`.
    ClusterPairs,
    /// One CTA per tile and K split: `m_tiles n_tiles` times
    /// [`splitk_splits`] CTAs (`kernel_ops_kernels::matmul::matmul_splitk`),
    /// for shapes with fewer tiles than SMs.
    SplitK,
}

/// The most K splits of a split-K instance.
pub const SPLITK_MAX: u32 = 16;
/// The fewest K steps (of 64) a split takes: shorter splits spend more on
/// their partial tile's round trip than they save.
pub const SPLITK_MIN_STEPS: u32 = 4;
/// The fewest K steps for which [`default_instance`] splits K: on the
/// H200, the split-K kernel lost to `ws 128x128` (1.03-1.66x slower) at
/// every shape of `K <= 2048` with few tiles, and won from `K = 4096` up
/// (`kernel-ops/data/matmul_table.tsv`).
pub const SPLITK_DEFAULT_MIN_K_STEPS: u32 = 64;

/// The K splits a split-K instance uses for `tiles` output tiles of
/// `k_steps` K steps on `sms` SMs: as many as fill the SMs once
/// (`tiles x splits <= sms`), at most [`SPLITK_MAX`], each split at least
/// [`SPLITK_MIN_STEPS`] steps; 1 (no split) when the tiles alone fill
/// half the SMs or K is short. The split-K workspace holds `sms` partial
/// tiles, which `tiles x splits <= sms` keeps it within.
pub fn splitk_splits(tiles: u32, k_steps: u32, sms: u32) -> u32 {
    if tiles == 0 || 2 * tiles > sms {
        return 1;
    }
    (sms / tiles).min(k_steps / SPLITK_MIN_STEPS).clamp(1, SPLITK_MAX)
}

/// One kernel instance the entry point can run.
#[derive(Clone, Copy, Debug)]
pub struct Instance {
    pub name: &'static str,
    pub bm: usize,
    pub bn: usize,
    pub grid: Grid,
}

/// Every instance, in sweep order (the rows of [`MatmulElem::TABLE`],
/// the same for f16 and bf16).
pub const INSTANCES: &[Instance] = &instances(&table::<f16>());

/// The parameters of both matmul kernels on element type `E`: the maps of
/// A (`BM`-row tiles), B (`BH`-row tiles) and C, then `m_tiles`,
/// `n_tiles`, `k_steps`.
type GemmParams<E, const BM: usize, const BH: usize> = (TensorMapParam<ATile<E, BM>>, TensorMapParam<BTile<E, BH>>, TensorMapParam<EpiTile<E, BM>>, u32, u32, u32);

/// The parameters of the split-K kernel: the three maps, the workspace's
/// partial tiles and counters, `m_tiles`, `n_tiles`, `k_steps`, `splits`.
type SplitKParams<E, const BM: usize, const BN: usize> = (TensorMapParam<ATile<E, BM>>, TensorMapParam<BTile<E, BN>>, TensorMapParam<EpiTile<E, BM>>, Gmem<f32>, Gmem<u32>, u32, u32, u32, u32);

/// The split-K kernels' scratch in global memory, allocated at the first
/// split-K launch and reused: room for one `128 x 128` f32 partial tile
/// per SM, and one arrival counter per tile (zero between launches: the
/// kernel leaves them so). The launches of one [`Matmul`] are ordered on
/// its device's stream, so they never share it at the same time.
#[doc(hidden)]
pub struct Workspace {
    partials: Buffer<f32>,
    counters: Buffer<u32>,
}

/// The largest split-K tile (`BM x BN`) the workspace is sized for.
const SPLITK_TILE: usize = 128 * 128;

impl Workspace {
    fn new(dev: &Device) -> kernel_host::Result<Self> {
        let sms = dev.sm_count().max(1) as usize;
        Ok(Workspace { partials: dev.zeros::<f32>(sms * SPLITK_TILE)?, counters: dev.zeros::<u32>(sms)? })
    }
}

/// Encodes instance `inst`'s tensor maps for these buffers and returns its
/// launch (shape already checked).
type Prepare<E> = fn(&Matmul<'_>, &'static Instance, &Buffer<E>, &Buffer<E>, &mut Buffer<E>, (usize, usize, usize)) -> Result<Launch<E>, MatmulError>;

/// One row of the instance table on element type `E`.
#[doc(hidden)]
pub struct Row<E: 'static> {
    pub inst: Instance,
    prepare: Prepare<E>,
    /// The dynamic SMEM bytes of the instance's kernel.
    pub smem_bytes: u32,
}

/// The instance table on element type `E`: each instance's kernel type
/// (`matmul_persistent_ws<E, ..>` or `matmul_persistent_ws_cluster<E, ..>`),
/// its name, its tile (`BM x BN`, and `BH`, the rows of the B tile each
/// CTA loads) and its grid. The `where` clause says each listed kernel is
/// compiled for `E` (it is, for f16 and bf16: `instances(E = [f16, bf16],
/// ..)`), which the generic launch needs.
const fn table<E: MatmulElem>() -> [Row<E>; 12]
where
    matmul_persistent_ws<E, 128, 256, 4, 8>: HostEntry<Params = GemmParams<E, 128, 256>>,
    matmul_persistent_ws<E, 128, 256, 4, 16>: HostEntry<Params = GemmParams<E, 128, 256>>,
    matmul_persistent_ws<E, 256, 128, 3, 8>: HostEntry<Params = GemmParams<E, 256, 128>>,
    matmul_persistent_ws<E, 128, 128, 4, 8>: HostEntry<Params = GemmParams<E, 128, 128>>,
    matmul_persistent_ws<E, 128, 128, 4, 16>: HostEntry<Params = GemmParams<E, 128, 128>>,
    matmul_persistent_ws_cluster<E, 128, 256, 128, 4, 8>: HostEntry<Params = GemmParams<E, 128, 128>>,
    matmul_persistent_ws_cluster<E, 128, 256, 128, 4, 16>: HostEntry<Params = GemmParams<E, 128, 128>>,
    matmul_persistent_ws_cluster<E, 256, 128, 64, 3, 8>: HostEntry<Params = GemmParams<E, 256, 64>>,
    matmul_splitk<E, 128, 128, 128, 6>: HostEntry<Params = SplitKParams<E, 128, 128>>,
    matmul_splitk<E, 128, 64, 64, 8>: HostEntry<Params = SplitKParams<E, 128, 64>>,
    matmul_splitk<E, 64, 128, 64, 8>: HostEntry<Params = SplitKParams<E, 64, 128>>,
    matmul_splitk<E, 64, 64, 32, 13>: HostEntry<Params = SplitKParams<E, 64, 64>>,
{
    use Grid::{ClusterPairs, Persistent};
    const { assert!(128 * 128 <= SPLITK_TILE, "the split-K workspace holds one partial tile per SM (of the largest split-K tile, 128 x 128)") };
    [
        row::<E, matmul_persistent_ws<E, 128, 256, 4, 8>, 128, 256, 256>("ws 128x256 s4 w8", Persistent),
        row::<E, matmul_persistent_ws<E, 128, 256, 4, 16>, 128, 256, 256>("ws 128x256 s4 w16", Persistent),
        row::<E, matmul_persistent_ws<E, 256, 128, 3, 8>, 256, 128, 128>("ws 256x128 s3 w8", Persistent),
        row::<E, matmul_persistent_ws<E, 128, 128, 4, 8>, 128, 128, 128>("ws 128x128 s4 w8", Persistent),
        row::<E, matmul_persistent_ws<E, 128, 128, 4, 16>, 128, 128, 128>("ws 128x128 s4 w16", Persistent),
        row::<E, matmul_persistent_ws_cluster<E, 128, 256, 128, 4, 8>, 128, 256, 128>("cluster2 128x256 s4 w8", ClusterPairs),
        row::<E, matmul_persistent_ws_cluster<E, 128, 256, 128, 4, 16>, 128, 256, 128>("cluster2 128x256 s4 w16", ClusterPairs),
        row::<E, matmul_persistent_ws_cluster<E, 256, 128, 64, 3, 8>, 256, 128, 64>("cluster2 256x128 s3 w8", ClusterPairs),
        row_splitk::<E, matmul_splitk<E, 128, 128, 128, 6>, 128, 128>("splitk 128x128 s6"),
        row_splitk::<E, matmul_splitk<E, 128, 64, 64, 8>, 128, 64>("splitk 128x64 s8"),
        row_splitk::<E, matmul_splitk<E, 64, 128, 64, 8>, 64, 128>("splitk 64x128 s8"),
        row_splitk::<E, matmul_splitk<E, 64, 64, 32, 13>, 64, 64>("splitk 64x64 s13"),
    ]
}

/// The row of kernel `K` (tile `BM x BN`, B tiles of `BH` rows).
const fn row<E: MatmulElem, K, const BM: usize, const BN: usize, const BH: usize>(name: &'static str, grid: Grid) -> Row<E>
where
    K: HostEntry<Params = GemmParams<E, BM, BH>> + 'static,
{
    Row { inst: Instance { name, bm: BM, bn: BN, grid }, prepare: prepare::<E, K, BM, BH>, smem_bytes: K::SMEM_BYTES }
}

/// The launch of kernel `K` on these buffers (the [`Prepare`] of a row).
fn prepare<E: MatmulElem, K, const BM: usize, const BH: usize>(mm: &Matmul<'_>, inst: &'static Instance, a: &Buffer<E>, b: &Buffer<E>, c: &mut Buffer<E>, (m, n, k): (usize, usize, usize)) -> Result<Launch<E>, MatmulError>
where
    K: HostEntry<Params = GemmParams<E, BM, BH>> + 'static,
{
    let (grid, mt, nt, ks) = launch_dims(inst, m, n, k, mm.dev.sm_count(), mm.ctas);
    let (am, bmap, cm) = maps::<E, BM, BH>(a, b, c, (m, n, k))?;
    let kernel = mm.prog.kernel::<K>()?;
    Ok(Box::new(move |a, b, c, _| kernel.launch(grid, (MapArg::read(am, a), MapArg::read(bmap, b), MapArg::write(cm, c), mt, nt, ks)).map(drop)))
}

/// The tensor maps every matmul kernel takes: A in `BM`-row tiles, B in
/// `BH`-row tiles, C in `BM x 64` epilogue sub-tiles.
#[allow(clippy::type_complexity)]
fn maps<E: MatmulElem, const BM: usize, const BH: usize>(a: &Buffer<E>, b: &Buffer<E>, c: &mut Buffer<E>, (m, n, k): (usize, usize, usize)) -> Result<(TensorMapParam<ATile<E, BM>>, TensorMapParam<BTile<E, BH>>, TensorMapParam<EpiTile<E, BM>>), MatmulError> {
    Ok((TileMap::<ATile<E, BM>>::new_2d(a, m, k)?.param(), TileMap::<BTile<E, BH>>::new_2d(b, n, k)?.param(), TileMap::<EpiTile<E, BM>>::new_2d_mut(c, m, n)?.param()))
}

/// The row of split-K kernel `K` (tile `BM x BN`).
const fn row_splitk<E: MatmulElem, K, const BM: usize, const BN: usize>(name: &'static str) -> Row<E>
where
    K: HostEntry<Params = SplitKParams<E, BM, BN>> + 'static,
{
    Row { inst: Instance { name, bm: BM, bn: BN, grid: Grid::SplitK }, prepare: prepare_splitk::<E, K, BM, BN>, smem_bytes: K::SMEM_BYTES }
}

/// The launch of split-K kernel `K` on these buffers and the workspace.
fn prepare_splitk<E: MatmulElem, K, const BM: usize, const BN: usize>(mm: &Matmul<'_>, inst: &'static Instance, a: &Buffer<E>, b: &Buffer<E>, c: &mut Buffer<E>, (m, n, k): (usize, usize, usize)) -> Result<Launch<E>, MatmulError>
where
    K: HostEntry<Params = SplitKParams<E, BM, BN>> + 'static,
{
    let (grid, mt, nt, ks) = launch_dims(inst, m, n, k, mm.dev.sm_count(), mm.ctas);
    let splits = grid / (mt * nt);
    let (am, bmap, cm) = maps::<E, BM, BN>(a, b, c, (m, n, k))?;
    let kernel = mm.prog.kernel::<K>()?;
    Ok(Box::new(move |a, b, c, ws| {
        let ws = ws.expect("a split-K launch gets the workspace");
        kernel.launch(grid, (MapArg::read(am, a), MapArg::read(bmap, b), MapArg::write(cm, c), &mut ws.partials, &mut ws.counters, mt, nt, ks, splits)).map(drop)
    }))
}

/// The instances of a table's rows.
const fn instances<const N: usize>(rows: &[Row<f16>; N]) -> [Instance; N] {
    let mut out = [rows[0].inst; N];
    let mut i = 1;
    while i < N {
        out[i] = rows[i].inst;
        i += 1;
    }
    out
}

/// `(grid, m_tiles, n_tiles, k_steps)` of instance `inst` for `m x n x k`
/// on `sms` SMs, the grid sized by `ctas`.
pub fn launch_dims(inst: &Instance, m: usize, n: usize, k: usize, sms: u32, ctas: Ctas) -> (u32, u32, u32, u32) {
    let (mt, nt, ks) = (m.div_ceil(inst.bm) as u32, n.div_ceil(inst.bn) as u32, k.div_ceil(TK) as u32);
    let grid = match inst.grid {
        Grid::Persistent => ctas.grid(mt * nt, sms),
        Grid::ClusterPairs => 2 * ctas.grid(mt.div_ceil(2) * nt, sms / 2),
        Grid::SplitK => mt * nt * splitk_splits(mt * nt, ks, sms),
    };
    (grid, mt, nt, ks)
}

/// The instance used when no tuned winner is cached: 128 x 256 tiles
/// (the tuner's winner at every shape of the suite on an H100, runs 1-3 in
/// RESULTS.md) unless that leaves most SMs idle; then, for `M <= 64` and
/// `K >= 1024`, a 64-row split-K kernel, `64 x 64` tiles while they are
/// no more than the SMs, else `64 x 128` (the H200's winners at 49 of the
/// 50 such classes of the shipped table); else the 128-row split-K kernel when its
/// tiles of 128 x 128 fill less than half the SMs and K is at least
/// [`SPLITK_DEFAULT_MIN_K_STEPS`] steps ([`splitk_splits`]); else 128 x
/// 128. On a GPU the shipped table has ([`table_instance`]) the table
/// decides instead.
pub fn default_instance(m: usize, n: usize, k: usize, sms: u32) -> &'static Instance {
    let big_tiles = m.div_ceil(128) * n.div_ceil(256);
    let tiles = (m.div_ceil(128) * n.div_ceil(128)).min(u32::MAX as usize) as u32;
    let k_steps = k.div_ceil(TK) as u32;
    let name = if 2 * big_tiles >= sms as usize {
        "ws 128x256 s4 w8"
    } else if m <= 64 && k >= 1024 {
        if n.div_ceil(64) <= sms as usize {
            "splitk 64x64 s13"
        } else {
            "splitk 64x128 s8"
        }
    } else if k_steps >= SPLITK_DEFAULT_MIN_K_STEPS && splitk_splits(tiles, k_steps, sms) > 1 {
        "splitk 128x128 s6"
    } else {
        "ws 128x128 s4 w8"
    };
    instance(name).expect("listed")
}

/// The instance named `name`.
pub fn instance(name: &str) -> Option<&'static Instance> {
    INSTANCES.iter().find(|i| i.name == name)
}

/// Autotuning winners on disk: one line per (device, element type,
/// shape), `device<TAB>m<TAB>n<TAB>k<TAB>instance<TAB>TFLOP/s<TAB>dtype`
/// (`dtype`: `f16` or `bf16`, [`MatmulElem::NAME`]). A line of six fields,
/// as written before bf16 existed, is an f16 winner: old cache files stay
/// valid. The file is `$KERNEL_OPS_CACHE`, else
/// `$HOME/.cache/kernel-ops/matmul.tsv`.
#[derive(Debug, Clone)]
pub struct TuneCache {
    pub path: PathBuf,
    entries: HashMap<CacheKey, (String, f64)>,
}

/// `(device, dtype, m, n, k)`.
type CacheKey = (String, String, usize, usize, usize);

impl TuneCache {
    /// The default cache file's path.
    pub fn default_path() -> PathBuf {
        if let Some(p) = std::env::var_os("KERNEL_OPS_CACHE") {
            return PathBuf::from(p);
        }
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        home.join(".cache").join("kernel-ops").join("matmul.tsv")
    }

    /// Reads `path` (a missing file is an empty cache; malformed lines are skipped).
    pub fn load(path: PathBuf) -> TuneCache {
        let entries = std::fs::read_to_string(&path).map(|text| Self::parse(&text)).unwrap_or_default();
        TuneCache { path, entries }
    }

    /// The entries of a cache file's text (malformed lines, `#` comments
    /// among them, are skipped).
    fn parse(text: &str) -> HashMap<CacheKey, (String, f64)> {
        let mut entries = HashMap::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let dtype = match f.len() {
                6 => "f16",
                7 => f[6],
                _ => continue,
            };
            if let (Ok(m), Ok(n), Ok(k), Ok(t)) = (f[1].parse(), f[2].parse(), f[3].parse(), f[5].parse()) {
                entries.insert((f[0].to_string(), dtype.to_string(), m, n, k), (f[4].to_string(), t));
            }
        }
        entries
    }

    /// The cached winner for `device`, element type `dtype` (`"f16"`,
    /// `"bf16"`) and the shape, if any (and still an instance).
    pub fn get(&self, device: &str, dtype: &str, m: usize, n: usize, k: usize) -> Option<(&'static Instance, f64)> {
        let (name, t) = self.entries.get(&(device.to_string(), dtype.to_string(), m, n, k))?;
        Some((instance(name)?, *t))
    }

    /// Records a winner and rewrites the file.
    #[allow(clippy::too_many_arguments)]
    pub fn put(&mut self, device: &str, dtype: &str, m: usize, n: usize, k: usize, inst: &Instance, tflops: f64) -> std::io::Result<()> {
        self.entries.insert((device.to_string(), dtype.to_string(), m, n, k), (inst.name.to_string(), tflops));
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut lines: Vec<String> = self.entries.iter().map(|((d, e, m, n, k), (i, t))| format!("{d}\t{m}\t{n}\t{k}\t{i}\t{t:.1}\t{e}")).collect();
        lines.sort();
        std::fs::write(&self.path, lines.join("\n") + "\n")
    }
}

/// The tuned choices shipped with the library (`kernel-ops/data/matmul_table.tsv`,
/// in the tuning cache's format): the tuner's winner for each shape class
/// of a grid (`M` 64 to 16384, `N` 1024 to 16384, `K` 512 to 16384, powers
/// of two), per device, written on that device by the `matmul_table`
/// binary. Only the devices measured are in it (an H200 so far).
pub const SHIPPED_TABLE: &str = include_str!("../data/matmul_table.tsv");

/// The shipped table's winner for the shape class of `m x n x k` on
/// `device`: the entry of that device and element type (an f16 entry when
/// the table has none of `dtype`: the bf16 kernels are the f16 ones but for
/// the MMA's input type and the epilogue's conversion) nearest in
/// `|log2(m / m')| + |log2(n / n')| + |log2(k / k')|`, which on the table's
/// grid of powers of two is the class of the shape's nearest power of two
/// in each dimension. `None` for a device the table does not have.
pub fn table_instance(device: &str, dtype: &str, m: usize, n: usize, k: usize) -> Option<&'static Instance> {
    static TABLE: std::sync::OnceLock<Vec<(CacheKey, &'static Instance)>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut rows: Vec<(CacheKey, &'static Instance)> =
            TuneCache::parse(SHIPPED_TABLE).into_iter().filter_map(|(key, (name, _))| instance(&name).map(|i| (key, i))).collect();
        // In key order, so that a tie between classes always picks the same one.
        rows.sort_by(|x, y| x.0.cmp(&y.0));
        rows
    });
    let log = |x: usize| (x.max(1) as f64).log2();
    let pick = |dt: &str| {
        table
            .iter()
            .filter(|((d, e, ..), _)| d == device && e == dt)
            .map(|((.., tm, tn, tk), inst)| ((log(m) - log(*tm)).abs() + (log(n) - log(*tn)).abs() + (log(k) - log(*tk)).abs(), *inst))
            .min_by(|x, y| x.0.total_cmp(&y.0))
            .map(|(_, inst)| inst)
    };
    pick(dtype).or_else(|| pick("f16"))
}

/// A prepared launch of one instance on buffers of element type `E`.
type Launch<E> = Box<dyn Fn(&Buffer<E>, &Buffer<E>, &mut Buffer<E>, Option<&mut Workspace>) -> kernel_host::Result<()>>;

/// A remembered choice's key: element type (`MatmulElem::NAME`), M, N, K.
type ChoiceKey = (&'static str, usize, usize, usize);

/// A prepared launch's key: instance, buffer addresses, shape.
type PreparedKey = (&'static str, [u64; 3], [usize; 3]);

/// The prepared launches of one element type.
type PreparedOf<E> = RefCell<HashMap<PreparedKey, Launch<E>>>;

/// The prepared launches (kernel handle + encoded tensor maps) per element
/// type ([`MatmulElem::prepared`] picks the map).
#[doc(hidden)]
#[derive(Default)]
pub struct Prepared {
    f16: PreparedOf<f16>,
    bf16: PreparedOf<bf16>,
}

/// The element types of the matmul: f16 and bf16 (`A`, `B` and `C` alike,
/// f32 accumulation). The kernels are generic over it
/// (`kernel_ops_kernels::matmul::matmul_persistent_ws<E, ..>` and
/// `matmul_persistent_ws_cluster<E, ..>`, the same [`INSTANCES`]).
pub trait MatmulElem: Copy + Default + Into<f32> + kernel_host::TmaElement + kernel_host::cudarc::driver::DeviceRepr + kernel_host::cudarc::driver::ValidAsZeroBits + 'static {
    /// `"f16"` or `"bf16"`: in errors and in the tuning cache's key.
    const NAME: &'static str;
    /// A NaN (to poison an output whose every element must be written).
    const NAN: Self;
    /// The instance table on this type ([`INSTANCES`] with their kernels).
    #[doc(hidden)]
    const TABLE: &'static [Row<Self>];
    /// `x` rounded to this type (to nearest even).
    fn from_f32(x: f32) -> Self;
    /// `n` iid N(0, 1) samples of this type (the tuner's inputs).
    #[doc(hidden)]
    fn randn(n: usize, seed: u64) -> Vec<Self>;
    /// This type's prepared launches.
    #[doc(hidden)]
    fn prepared(p: &Prepared) -> &PreparedOf<Self>;
}

impl MatmulElem for f16 {
    const NAME: &'static str = "f16";
    const NAN: Self = f16::NAN;
    const TABLE: &'static [Row<Self>] = &table::<f16>();
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn randn(n: usize, seed: u64) -> Vec<Self> {
        kernel_host::randn_f16(n, seed)
    }
    fn prepared(p: &Prepared) -> &PreparedOf<Self> {
        &p.f16
    }
}

impl MatmulElem for bf16 {
    const NAME: &'static str = "bf16";
    const NAN: Self = bf16::NAN;
    const TABLE: &'static [Row<Self>] = &table::<bf16>();
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn randn(n: usize, seed: u64) -> Vec<Self> {
        kernel_host::randn_f32(n, seed).into_iter().map(bf16::from_f32).collect()
    }
    fn prepared(p: &Prepared) -> &PreparedOf<Self> {
        &p.bf16
    }
}

/// The ready matmul on one [`Device`]: its kernels, the autotuning cache,
/// and the prepared launches (kernel handle + encoded tensor maps) per
/// element type, instance, buffers and shape.
pub struct Matmul<'d> {
    dev: &'d Device,
    prog: Program,
    cache: RefCell<TuneCache>,
    prepared: Prepared,
    /// The split-K kernels' workspace (allocated at their first launch).
    workspace: RefCell<Option<Workspace>>,
    /// The instance chosen per (element type, M, N, K), remembered: the
    /// cache's and the table's lookups build strings and scan, which a
    /// call of a few microseconds would otherwise pay every time.
    chosen: RefCell<HashMap<ChoiceKey, &'static Instance>>,
    /// How the persistent grids are sized.
    ctas: Ctas,
}

impl<'d> Matmul<'d> {
    /// Loads the kernels on `dev` and reads the tuning cache
    /// ([`TuneCache::default_path`]).
    pub fn new(dev: &'d Device) -> Result<Self, MatmulError> {
        Self::with_cache(dev, TuneCache::default_path())
    }

    /// As [`Matmul::new`] with the tuning cache at `path`.
    pub fn with_cache(dev: &'d Device, path: PathBuf) -> Result<Self, MatmulError> {
        let prog = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
        Ok(Matmul { dev, prog, cache: RefCell::new(TuneCache::load(path)), prepared: Prepared::default(), workspace: RefCell::new(None), chosen: RefCell::new(HashMap::new()), ctas: Ctas::default() })
    }

    /// This matmul with its persistent grids sized by `ctas` (default
    /// [`Ctas::EvenWaves`]; [`Ctas::EverySm`] for comparisons).
    pub fn with_ctas(mut self, ctas: Ctas) -> Self {
        self.ctas = ctas;
        self.prepared = Prepared::default();
        self
    }

    /// The instance [`Matmul::matmul`] runs for this f16 shape: the cached
    /// winner for this GPU, else the shipped table's ([`table_instance`]),
    /// else [`default_instance`] (always on the emulator). [`Matmul::instance_for_elem`] for either type.
    pub fn instance_for(&self, m: usize, n: usize, k: usize) -> &'static Instance {
        self.instance_for_elem::<f16>(m, n, k)
    }

    /// [`Matmul::instance_for`] on element type `E` (each type has its own
    /// tuned winners).
    pub fn instance_for_elem<E: MatmulElem>(&self, m: usize, n: usize, k: usize) -> &'static Instance {
        let key = (E::NAME, m, n, k);
        if let Some(inst) = self.chosen.borrow().get(&key) {
            return inst;
        }
        let inst = self.choose::<E>(m, n, k);
        self.chosen.borrow_mut().insert(key, inst);
        inst
    }

    /// [`Matmul::instance_for_elem`]'s lookups: the cache, the table, the default.
    fn choose<E: MatmulElem>(&self, m: usize, n: usize, k: usize) -> &'static Instance {
        let Some(gpu) = self.dev.as_gpu() else {
            return default_instance(m, n, k, self.dev.sm_count());
        };
        if let Some((inst, _)) = self.cache.borrow().get(gpu.name(), E::NAME, m, n, k) {
            return inst;
        }
        table_instance(gpu.name(), E::NAME, m, n, k).unwrap_or_else(|| default_instance(m, n, k, self.dev.sm_count()))
    }

    /// `c = a · bᵀ`: `a` is `M x K` (`a_shape = (M, K)`), `b` is `N x K`,
    /// `c` is `M x N`, all row-major f16 or all bf16 ([`MatmulElem`]) on
    /// this device; f32 accumulation. Asynchronous on a GPU's stream, like
    /// a kernel launch. Checks everything first ([`check_problem_for`]).
    pub fn matmul<E: MatmulElem>(&self, a: &Buffer<E>, a_shape: (usize, usize), b: &Buffer<E>, b_shape: (usize, usize), c: &mut Buffer<E>) -> Result<(), MatmulError> {
        check_problem_for::<E>(a_shape, b_shape, (a.len(), b.len(), c.len()))?;
        let ((m, k), (n, _)) = (a_shape, b_shape);
        let inst = self.instance_for_elem::<E>(m, n, k);
        self.run(inst, a, b, c, m, n, k)
    }

    /// Runs instance `inst` (checked as [`Matmul::matmul`]).
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_with<E: MatmulElem>(&self, inst: &'static Instance, a: &Buffer<E>, b: &Buffer<E>, c: &mut Buffer<E>, m: usize, n: usize, k: usize) -> Result<(), MatmulError> {
        check_problem_for::<E>((m, k), (n, k), (a.len(), b.len(), c.len()))?;
        self.run(inst, a, b, c, m, n, k)
    }

    #[allow(clippy::too_many_arguments)]
    fn run<E: MatmulElem>(&self, inst: &'static Instance, a: &Buffer<E>, b: &Buffer<E>, c: &mut Buffer<E>, m: usize, n: usize, k: usize) -> Result<(), MatmulError> {
        for (name, buf) in [("a", a), ("b", b), ("c", &*c)] {
            if crate::check_aligned("matmul", &[crate::at(name, buf)]).is_err() {
                return Err(MatmulError::Misaligned { name, address: buf.address() });
            }
        }
        let key = (inst.name, [a.address(), b.address(), c.address()], [m, n, k]);
        let prepared = E::prepared(&self.prepared);
        if !prepared.borrow().contains_key(&key) {
            let row = E::TABLE.iter().find(|r| r.inst.name == inst.name).ok_or_else(|| MatmulError::UnknownInstance { name: inst.name.to_string() })?;
            let launch = (row.prepare)(self, inst, a, b, c, (m, n, k))?;
            prepared.borrow_mut().insert(key, launch);
        }
        let mut ws = self.workspace.borrow_mut();
        if inst.grid == Grid::SplitK && ws.is_none() {
            *ws = Some(Workspace::new(self.dev)?);
        }
        let prepared = prepared.borrow();
        Ok(prepared[&key](a, b, c, ws.as_mut())?)
    }

    /// Autotunes the f16 shape on a GPU: runs every instance on scratch
    /// buffers of the shape (iid N(0, 1) inputs; `warmup` runs, then the
    /// median of `iters` CUDA-event-timed runs), with a progress bar on
    /// stderr, records the fastest in the cache file and returns
    /// `(instance, TFLOP/s)` for each. With a cached winner and `retune =
    /// false`, returns it alone. On the emulator:
    /// [`kernel_host::Error::GpuOnly`]. [`Matmul::tune_elem`] for either
    /// type.
    pub fn tune(&self, m: usize, n: usize, k: usize, retune: bool, warmup: usize, iters: usize) -> Result<Vec<(&'static Instance, f64)>, MatmulError> {
        self.tune_elem::<f16>(m, n, k, retune, warmup, iters)
    }

    /// [`Matmul::tune`] on element type `E`: its winner is cached for `E`
    /// alone (a bf16 winner is never used for f16, nor the reverse).
    pub fn tune_elem<E: MatmulElem>(&self, m: usize, n: usize, k: usize, retune: bool, warmup: usize, iters: usize) -> Result<Vec<(&'static Instance, f64)>, MatmulError> {
        let gpu = self.dev.require_gpu("Matmul::tune (autotuning times the kernels)")?;
        if !retune {
            if let Some((inst, t)) = self.cache.borrow().get(gpu.name(), E::NAME, m, n, k) {
                self.chosen.borrow_mut().insert((E::NAME, m, n, k), inst);
                return Ok(vec![(inst, t)]);
            }
        }
        check_problem_for::<E>((m, k), (n, k), (m * k, n * k, m * n))?;
        let a = self.dev.upload(&E::randn(m * k, 1))?;
        let b = self.dev.upload(&E::randn(n * k, 2))?;
        let mut c = self.dev.zeros::<E>(m * n)?;
        self.tune_buffers(&a, &b, &mut c, (m, n, k), warmup, iters)
    }

    /// The sweep of [`Matmul::tune_elem`] on buffers the caller made (`a`
    /// `M x K`, `b` `N x K`, `c` `M x N`, checked as [`Matmul::matmul`];
    /// their contents are the inputs, so fill `a` and `b` as the shape's
    /// users would): runs every instance, records the fastest in the cache
    /// file and returns `(instance, TFLOP/s)` for each. GPU only.
    pub fn tune_buffers<E: MatmulElem>(&self, a: &Buffer<E>, b: &Buffer<E>, c: &mut Buffer<E>, (m, n, k): (usize, usize, usize), warmup: usize, iters: usize) -> Result<Vec<(&'static Instance, f64)>, MatmulError> {
        let gpu = self.dev.require_gpu("Matmul::tune (autotuning times the kernels)")?;
        check_problem_for::<E>((m, k), (n, k), (a.len(), b.len(), c.len()))?;
        let bar = indicatif::ProgressBar::new(INSTANCES.len() as u64);
        bar.set_style(indicatif::ProgressStyle::with_template("tuning {msg:>40} [{bar:30}] {pos}/{len}").unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()));
        let mut results = Vec::new();
        for inst in INSTANCES {
            bar.set_message(format!("{m}x{n}x{k} {} {}", E::NAME, inst.name));
            let t = time_kernel(gpu, warmup, iters, || self.run(inst, a, b, c, m, n, k).map_err(|e| match e {
                MatmulError::Cuda(e) => e,
                other => kernel_host::Error::InvalidArgument { function: "Matmul::tune", problem: other.to_string() },
            }))?;
            results.push((inst, t.tflops(m, n, k)));
            bar.inc(1);
        }
        bar.finish_and_clear();
        // Drop the scratch buffers' prepared launches (their addresses die here).
        let scratch = [a.address(), b.address(), c.address()];
        E::prepared(&self.prepared).borrow_mut().retain(|key, _| key.1 != scratch);
        if let Some(&(best, t)) = results.iter().max_by(|x, y| x.1.total_cmp(&y.1)) {
            self.chosen.borrow_mut().insert((E::NAME, m, n, k), best);
            if let Err(e) = self.cache.borrow_mut().put(gpu.name(), E::NAME, m, n, k, best, t) {
                eprintln!("warning: could not write the tuning cache {}: {e}", self.cache.borrow().path.display());
            }
        }
        Ok(results)
    }

    /// The kernels, loaded on the device (for launching an instance by type).
    pub fn program(&self) -> &Program {
        &self.prog
    }

    /// The device.
    pub fn device(&self) -> &Device {
        self.dev
    }

    /// The launch metadata of an instance (SMEM bytes), by name; the same
    /// for f16 and bf16 (a unit test checks it; [`MatmulElem::TABLE`] gives each).
    pub fn smem_bytes(name: &str) -> Option<u32> {
        f16::TABLE.iter().find(|r| r.inst.name == name).map(|r| r.smem_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_shapes_pass_including_ragged_ones() {
        for (m, n, k) in [(4096, 8192, 4096), (1000, 1000, 1000), (1, 8, 8), (16896, 512, 640)] {
            check_problem((m, k), (n, k), (m * k, n * k, m * n)).unwrap();
        }
    }

    #[test]
    fn mismatched_k_is_refused_naming_both() {
        let e = check_problem((64, 128), (64, 96), (64 * 128, 64 * 96, 64 * 64)).unwrap_err();
        assert!(matches!(e, MatmulError::KMismatch { a_k: 128, b_k: 96 }), "{e:?}");
        assert!(e.to_string().contains("A has K = 128, B has K = 96"), "{e}");
    }

    #[test]
    fn wrong_buffer_lengths_name_the_buffer_shape_and_lengths() {
        let e = check_problem((256, 64), (128, 64), (256 * 64, 128 * 64, 256 * 128 - 1)).unwrap_err();
        assert!(matches!(e, MatmulError::BufferLength { name: "c", want: 32768, got: 32767, .. }), "{e:?}");
        assert!(e.to_string().contains("`c` must hold M x N = 256 x 128 = 32768 f16 elements"), "{e}");
        let e = check_problem_for::<bf16>((256, 64), (128, 64), (256 * 64, 128 * 64, 256 * 128 - 1)).unwrap_err();
        assert!(e.to_string().contains("`c` must hold M x N = 256 x 128 = 32768 bf16 elements"), "{e}");
        let e = check_problem((256, 64), (128, 64), (256 * 64 + 8, 128 * 64, 256 * 128)).unwrap_err();
        assert!(matches!(e, MatmulError::BufferLength { name: "a", .. }), "{e:?}");
        let e = check_problem((256, 64), (128, 64), (256 * 64, 0, 256 * 128)).unwrap_err();
        assert!(matches!(e, MatmulError::BufferLength { name: "b", want: 8192, got: 0, .. }), "{e:?}");
    }

    #[test]
    fn misaligned_strides_say_multiple_of_8() {
        let e = check_problem((64, 100), (64, 100), (6400, 6400, 4096)).unwrap_err();
        assert!(matches!(e, MatmulError::MisalignedStride { dim: "K", value: 100, .. }), "{e:?}");
        assert!(e.to_string().contains("K must be a multiple of 8"), "{e}");
        let e = check_problem((64, 64), (100, 64), (4096, 6400, 6400)).unwrap_err();
        assert!(matches!(e, MatmulError::MisalignedStride { dim: "N", value: 100, .. }), "{e:?}");
        let e = check_problem_for::<bf16>((64, 100), (64, 100), (6400, 6400, 4096)).unwrap_err();
        assert!(e.to_string().contains("K = 100 bf16 = 200 bytes apart") && e.to_string().contains("K must be a multiple of 8"), "{e}");
    }

    #[test]
    fn empty_and_huge_dimensions_are_refused() {
        assert!(matches!(check_problem((0, 64), (64, 64), (0, 4096, 0)), Err(MatmulError::EmptyDimension { m: 0, .. })));
        let big = i32::MAX as usize + 1;
        assert!(matches!(check_problem((big, 8), (8, 8), (big * 8, 64, big * 8)), Err(MatmulError::TooLarge { dim: "M", .. })));
    }

    #[test]
    fn instances_fit_shared_memory_and_defaults_exist() {
        for inst in INSTANCES {
            let smem = Matmul::smem_bytes(inst.name).expect("every instance has a kernel");
            assert!(smem <= 227 * 1024, "{}: {smem} bytes of SMEM", inst.name);
            let bf = bf16::TABLE.iter().find(|r| r.inst.name == inst.name).map(|r| r.smem_bytes);
            assert_eq!(bf, Some(smem), "{}: the bf16 kernel's SMEM differs from the f16 one's", inst.name);
        }
        // The tables are the instances, in order, for both types.
        fn names<E>(t: &[Row<E>]) -> Vec<(&str, usize, usize, Grid)> {
            t.iter().map(|r| (r.inst.name, r.inst.bm, r.inst.bn, r.inst.grid)).collect()
        }
        assert_eq!(names(f16::TABLE), names(bf16::TABLE));
        assert_eq!(INSTANCES.len(), f16::TABLE.len());
        assert_eq!(default_instance(8192, 8192, 8192, 132).name, "ws 128x256 s4 w8");
        assert_eq!(default_instance(2048, 2048, 2048, 132).name, "ws 128x256 s4 w8");
        // 64 tiles of 128 x 128 on 132 SMs: K = 1024 is too short to split,
        // K = 4096 is split (4 ways at 32 tiles).
        assert_eq!(default_instance(1024, 1024, 1024, 132).name, "ws 128x128 s4 w8");
        assert_eq!(default_instance(1024, 1024, 4096, 132).name, "splitk 128x128 s6");
        assert_eq!(default_instance(64, 4096, 4096, 132).name, "splitk 64x64 s13");
        assert_eq!(default_instance(64, 4096, 1024, 132).name, "splitk 64x64 s13");
        assert_eq!(default_instance(64, 16384, 4096, 132).name, "splitk 64x128 s8");
        assert_eq!(default_instance(64, 4096, 512, 132).name, "ws 128x128 s4 w8");
        assert_eq!(default_instance(128, 4096, 4096, 132).name, "splitk 128x128 s6");
        // 112 tiles: no room to split; K of one step: nothing to split.
        assert_eq!(default_instance(128, 14336, 4096, 132).name, "ws 128x128 s4 w8");
        assert_eq!(default_instance(1024, 1024, 64, 132).name, "ws 128x128 s4 w8");
        // Splits fill the SMs once, each at least 4 K steps, at most 16.
        assert_eq!(splitk_splits(32, 64, 132), 4);
        assert_eq!(splitk_splits(32, 8, 132), 2);
        assert_eq!(splitk_splits(1, 1000, 132), SPLITK_MAX);
        assert_eq!(splitk_splits(67, 1000, 132), 1);
        assert_eq!(splitk_splits(8, 3, 132), 1);
        // Persistent grids never exceed the SM count; split-K grids do
        // only without splits (one CTA per tile); cluster grids are even.
        for inst in INSTANCES {
            for ctas in [Ctas::EverySm, Ctas::EvenWaves] {
                let (grid, mt, nt, _) = launch_dims(inst, 1000, 1000, 1000, 132, ctas);
                let fits = grid <= 132 || (inst.grid == Grid::SplitK && grid == mt * nt);
                assert!(fits && (inst.grid != Grid::ClusterPairs || grid % 2 == 0), "{} ({ctas:?}): grid {grid}", inst.name);
            }
        }
        // 8192 x 8192 in 128 x 256 tiles: 2048 tiles, 16 waves on 132 SMs
        // either way; even waves take them on 128 CTAs.
        let ws = instance("ws 128x256 s4 w8").unwrap();
        assert_eq!(launch_dims(ws, 8192, 8192, 8192, 132, Ctas::EverySm).0, 132);
        assert_eq!(launch_dims(ws, 8192, 8192, 8192, 132, Ctas::EvenWaves).0, 128);
        let pairs = instance("cluster2 128x256 s4 w8").unwrap();
        assert_eq!(launch_dims(pairs, 8192, 8192, 8192, 132, Ctas::EvenWaves).0, 128);
    }

    #[test]
    fn the_shipped_table_is_complete_names_instances_and_picks_the_nearest_class() {
        let rows = TuneCache::parse(SHIPPED_TABLE);
        for dtype in ["f16", "bf16"] {
            let h200 = rows.keys().filter(|(d, e, ..)| d == "NVIDIA H200" && e == dtype).count();
            // The grid of `matmul_table`'s defaults: 9 M x 5 N x 6 K.
            assert_eq!(h200, 9 * 5 * 6, "the H200's {dtype} grid is complete");
        }
        for ((.., m, n, k), (name, t)) in &rows {
            assert!(instance(name).is_some(), "{m}x{n}x{k}: `{name}` is not an instance (renamed? retune the table)");
            assert!(*t > 0.0, "{m}x{n}x{k}: {t} TFLOP/s");
        }
        let pick = |m, n, k| table_instance("NVIDIA H200", "f16", m, n, k).map(|i| i.name);
        let entry = |m, n, k| rows.get(&("NVIDIA H200".to_string(), "f16".to_string(), m, n, k)).map(|(i, _)| i.as_str());
        // A grid point is its own class; other shapes take the nearest
        // power of two in each dimension.
        assert_eq!(pick(64, 4096, 4096), entry(64, 4096, 4096));
        assert_eq!(pick(64, 4096, 4096), Some("splitk 64x64 s13"), "the decode rows split K on the H200");
        assert_eq!(pick(100, 4000, 5000), entry(128, 4096, 4096));
        assert_eq!(pick(30000, 100, 100_000), entry(16384, 1024, 16384));
        // bf16 has its own winners; another GPU has no table.
        let bf = |m, n, k| rows.get(&("NVIDIA H200".to_string(), "bf16".to_string(), m, n, k)).map(|(i, _)| i.as_str());
        assert_eq!(table_instance("NVIDIA H200", "bf16", 8192, 8192, 8192).map(|i| i.name), bf(8192, 8192, 8192));
        assert!(table_instance("NVIDIA H100 80GB HBM3", "f16", 64, 4096, 4096).is_none());
    }

    #[test]
    fn tune_cache_round_trips_and_is_per_device_and_element_type() {
        let dir = std::env::temp_dir().join(format!("kernel-ops-test-{}", std::process::id()));
        let path = dir.join("matmul.tsv");
        let mut cache = TuneCache::load(path.clone());
        assert!(cache.get("H100", "f16", 64, 64, 64).is_none());
        cache.put("NVIDIA H100 80GB HBM3", "f16", 4096, 8192, 4096, instance("ws 128x256 s4 w16").unwrap(), 780.5).unwrap();
        cache.put("NVIDIA H100 80GB HBM3", "bf16", 4096, 8192, 4096, instance("cluster2 128x256 s4 w8").unwrap(), 770.0).unwrap();
        let again = TuneCache::load(path.clone());
        let (inst, t) = again.get("NVIDIA H100 80GB HBM3", "f16", 4096, 8192, 4096).unwrap();
        assert_eq!((inst.name, t), ("ws 128x256 s4 w16", 780.5));
        let (inst, t) = again.get("NVIDIA H100 80GB HBM3", "bf16", 4096, 8192, 4096).unwrap();
        assert_eq!((inst.name, t), ("cluster2 128x256 s4 w8", 770.0), "the bf16 winner is its own");
        assert!(again.get("NVIDIA H200", "f16", 4096, 8192, 4096).is_none(), "another device's winner is not used");
        assert!(again.get("NVIDIA H100 80GB HBM3", "bf16", 4096, 8192, 1024).is_none());
        // A cache file written before bf16 (six fields a line) holds f16 winners.
        std::fs::write(&path, "NVIDIA H100 80GB HBM3\t1024\t1024\t512\tws 128x128 s4 w8\t500.0\n").unwrap();
        let old = TuneCache::load(path);
        assert_eq!(old.get("NVIDIA H100 80GB HBM3", "f16", 1024, 1024, 512).map(|(i, _)| i.name), Some("ws 128x128 s4 w8"));
        assert!(old.get("NVIDIA H100 80GB HBM3", "bf16", 1024, 1024, 512).is_none(), "an old line is not a bf16 winner");
        let _ = std::fs::remove_dir_all(dir);
    }
}
