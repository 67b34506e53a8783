//! Row softmax, layer norm (forward) and RMS norm over f16 / bf16 / f32
//! rows of any width from 1 to [`MAX_COLS`] (65536) and any row count, and
//! the fused residual norms ([`add_rms_norm`], [`add_layer_norm`],
//! optionally with an FP8 e4m3 output and its scales) over f16 / bf16 rows
//! of a multiple of 8 up to [`FUSED_MAX_COLS`] (16384), and the backwards
//! of the RMS norm and the layer norm ([`rms_norm_backward`],
//! [`layer_norm_backward`]: `dx` and the weights' gradients, up to
//! [`BWD_MAX_COLS`] columns): host entry points and CPU references. Kernels: `kernel_ops_kernels::norms` (its docs give
//! the scheme of each width range). The entry points take the kernels
//! loaded on a [`Device`] and run on a GPU or on the
//! CPU emulator alike.
//!
//! Element types: `x`, `y`, `gamma` and `beta` are all of the one type `T`
//! ([`NormElem`]: f16, bf16 or f32; the weights in the input's type); the
//! statistics and arithmetic are f32, `y` rounded to `T` once. Widths that
//! are a multiple of 16 bytes (8 f16 / bf16, 4 f32) move in 16-byte
//! accesses; other widths (whose rows do not start 16-byte aligned) move
//! each row's body in 16-byte accesses and its first and last partial
//! chunks by element ([`RowAccess::Peel`]), never outside the row.
//!
//! ```
//! # fn main() -> Result<(), kernel_ops::Error> {
//! use kernel_device::f16;
//! use kernel_host::Device;
//! let dev = Device::emulator();                     // or Device::gpu_or_emulator()?
//! let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
//! let (rows, cols) = (2, 1024);
//! let x = dev.upload(&vec![f16::from_f32(0.5); rows * cols])?;
//! let mut y = dev.zeros::<f16>(rows * cols)?;
//! kernel_ops::norms::softmax(&ops, &x, &mut y, rows, cols)?;
//! assert!(dev.download(&y)?.iter().all(|v| (v.to_f32() - 1.0 / 1024.0).abs() < 1e-5));
//! # Ok(()) }
//! ```
use crate::{at, Error};
use kernel_device::{bf16, f16, Gmem, E4M3};
use kernel_host::{Arg, Buffer, Device, Program};
use kernel_ops_kernels::norms as k;

/// The widest row of [`softmax`], [`layer_norm`] and [`rms_norm`]: a
/// cluster of 4 CTAs' slices of 16384 columns (`kernel_ops_kernels::norms`).
pub const MAX_COLS: usize = k::MAX_COLS;
/// The widest row of the fused residual norms (one CTA's registers).
pub const FUSED_MAX_COLS: usize = 16384;
/// The fused residual norms' row lengths are multiples of this (16-byte
/// pieces of 16-bit elements; no scalar tail).
pub const COLS_MULTIPLE: usize = 8;
/// The row lengths the benchmark and the tests cover: the hidden sizes of
/// common models, the former fixed set and odd multiples of 8.
pub const BENCH_COLS: [usize; 12] = [768, 1024, 2048, 2560, 4096, 5120, 7168, 8192, 12288, 16384, 1000, 24];
/// Rows wider than one CTA's registers, split over a cluster: the benchmark's widest.
pub const WIDE_BENCH_COLS: [usize; 2] = [32768, 65536];

/// Which kernel family serves a row length, and its `V` (8-element pieces
/// per thread; the same for every element type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowShape {
    /// One row per warp, 4 per CTA: `cols <= 256 V`, `V` in 1..=4 (below 1024 columns).
    Warp(usize),
    /// One row per warpgroup CTA: `cols <= 1024 V`, `V` in 1..=8 (1024..=8192).
    Warpgroup(usize),
    /// One row per CTA of 4 warpgroups: `cols <= 4096 V`, `V` in 3..=4 (8193..=16384).
    Wide(usize),
    /// One row per cluster of 4 CTAs of 4 warpgroups, a slice of at most
    /// `4096 V` columns per CTA: `V` 2 or 4 (16385..=65536).
    Cluster(usize),
}

impl RowShape {
    /// The shape for `cols` (in `1..=MAX_COLS`) with 16-byte accesses.
    pub fn of(cols: usize) -> RowShape {
        RowShape::of_window(cols, 0)
    }
    /// The shape for `cols` whose row slices need `slack` elements more
    /// than their length in registers ([`RowAccess::Peel`]: a slice's
    /// window starts up to `slack` elements before it). `V` may exceed the
    /// instances built ([`RowKernel::of`] checks).
    pub fn of_window(cols: usize, slack: usize) -> RowShape {
        let w = cols + slack;
        if w < 1024 {
            RowShape::Warp(w.div_ceil(256))
        } else if w <= 8192 {
            RowShape::Warpgroup(w.div_ceil(1024))
        } else if w <= 16384 {
            RowShape::Wide(w.div_ceil(4096).max(3))
        } else {
            // Each CTA's slice: a quarter of the row, rounded up to 8 columns.
            let slice = cols.div_ceil(k::CLUSTER * k::VEC) * k::VEC;
            RowShape::Cluster((slice + slack).div_ceil(4096).next_power_of_two())
        }
    }
    /// The launch grid for `rows` rows.
    fn grid(self, rows: usize) -> u32 {
        match self {
            RowShape::Warp(_) => rows.div_ceil(k::WARP_ROWS) as u32,
            RowShape::Cluster(_) => (rows * k::CLUSTER) as u32,
            _ => rows as u32,
        }
    }
    /// The most rows one launch takes (the grid's x extent, 2^31 - 1).
    fn max_rows(self) -> usize {
        match self {
            RowShape::Cluster(_) => i32::MAX as usize / k::CLUSTER,
            _ => i32::MAX as usize,
        }
    }
}

/// How the kernels access a row: 16-byte vectors (aligned rows, or the
/// body of unaligned ones), or one element at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowAccess {
    /// `k::Vec16`: 16 bytes per access; the row length is a multiple of 16
    /// bytes (8 f16 / bf16, 4 f32), so every row starts 16-byte aligned.
    Vec16,
    /// `k::Peel`: for the other lengths (rows not 16-byte aligned), 16 bytes
    /// per access for each row's body, the chunks across its ends by
    /// element; a row slice takes up to [`peel_slack`] elements more room
    /// in registers than its length.
    Peel,
    /// `k::Single`: one element per access. The forward's fallback where
    /// [`RowAccess::Peel`]'s room does not fit or was measured slower
    /// ([`RowKernel::of`]) and the backward's access for the lengths that
    /// are not a multiple of 16 bytes.
    Single,
}

/// The elements a [`RowAccess::Peel`] slice of `T` needs beyond its length
/// (its window starts up to one 16-byte chunk less one element before it).
pub fn peel_slack<T: NormElem>() -> usize {
    16 / size_of::<T>() - 1
}
/// The largest `V` of the `k::Peel` warpgroup instances (a thread's
/// pieces beyond 6 spilled in the f32 layer norm: rows whose window needs
/// more go to the 4-warpgroup shape).
pub const PEEL_MAX_WARPGROUP_V: usize = 6;
/// The largest `V` of the f32 `k::Peel` cluster instances of every op
/// (the f32 layer norm's `V` = 4 per 512 threads spilled; there is no
/// f32 `Wide(4)` `k::Peel` instance of it either: those rows go to
/// `Cluster(2)`).
pub const PEEL_F32_MAX_CLUSTER_V: usize = 2;
/// The largest `V` of the cluster instances (`k::MAX_COLS` is a cluster's
/// 4 slices of `4096 V` columns at this `V`).
pub const CLUSTER_MAX_V: usize = k::MAX_COLS / (k::CLUSTER * 4096);

/// The kernel instance that serves rows of `cols` elements of `T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowKernel {
    pub shape: RowShape,
    pub access: RowAccess,
}

impl RowKernel {
    /// The instance for `cols` (in `1..=MAX_COLS`) of `T`: 16-byte accesses
    /// when `cols` is a multiple of 16 bytes; else the peeled 16-byte
    /// accesses, with the shape of `cols` plus [`peel_slack`] (warpgroup
    /// `V` above [`PEEL_MAX_WARPGROUP_V`]: the 4-warpgroup shape), or one
    /// element per access: f32 rows of warpgroup `V` above
    /// [`PEEL_MAX_WARPGROUP_V`] (`Warpgroup(8)`) and of `Wide(4)`, rows of
    /// at most 16384 columns whose slack would make them a cluster's
    /// (`Wide(4)`), and where a cluster's slice and its slack exceed `V` =
    /// [`CLUSTER_MAX_V`] (the last few columns below [`MAX_COLS`]; f32:
    /// [`PEEL_F32_MAX_CLUSTER_V`]).
    pub fn of<T: NormElem>(cols: usize) -> RowKernel {
        if (cols * size_of::<T>()) % 16 == 0 {
            return RowKernel { shape: RowShape::of(cols), access: RowAccess::Vec16 };
        }
        let f32 = size_of::<T>() == 4;
        let peel = |shape| RowKernel { shape, access: RowAccess::Peel };
        let single = |shape| RowKernel { shape, access: RowAccess::Single };
        // The routes away from `Peel` are measured (H200, 2026-11-28,
        // RESULTS.md): one element per access in a warpgroup or 4 was
        // faster there than `Peel` in the next larger shape.
        match RowShape::of_window(cols, peel_slack::<T>()) {
            RowShape::Warpgroup(v) if v > PEEL_MAX_WARPGROUP_V && f32 => single(RowShape::Warpgroup(8)),
            RowShape::Warpgroup(v) if v > PEEL_MAX_WARPGROUP_V => peel(RowShape::Wide(3)),
            RowShape::Wide(4) if f32 => single(RowShape::Wide(4)),
            RowShape::Cluster(_) if cols <= k::WIDE_THREADS * k::VEC * 4 => single(RowShape::Wide(4)),
            RowShape::Cluster(v) if v > CLUSTER_MAX_V || (f32 && v > PEEL_F32_MAX_CLUSTER_V) => single(RowShape::Cluster(CLUSTER_MAX_V)),
            shape => peel(shape),
        }
    }
}

/// Checks `rows` and the buffer lengths against a row shape.
fn check_lens(op: &'static str, shape: RowShape, rows: usize, cols: usize, lens: &[(&str, usize, usize)]) -> Result<(), Error> {
    if rows == 0 || rows > shape.max_rows() {
        return Err(Error::Shape { op, problem: format!("rows = {rows}: must be in 1..={} (the grid's x extent, {} CTAs per row)", shape.max_rows(), shape.grid(1)) });
    }
    for &(name, len, want) in lens {
        if len < want {
            return Err(Error::Shape { op, problem: format!("`{name}` holds {len} elements; {want} needed for {rows} x {cols}") });
        }
    }
    Ok(())
}

/// Checks `cols` and the buffer lengths of a plain norm; returns its kernel.
fn check<T: NormElem>(op: &'static str, rows: usize, cols: usize, lens: &[(&str, usize, usize)]) -> Result<RowKernel, Error> {
    if cols == 0 || cols > MAX_COLS {
        return Err(Error::Shape {
            op,
            problem: format!("cols = {cols}: rows of 1 to {MAX_COLS} columns are implemented (a cluster of 4 CTAs per row at most); split wider rows and combine their statistics"),
        });
    }
    let kernel = RowKernel::of::<T>(cols);
    check_lens(op, kernel.shape, rows, cols, lens)?;
    Ok(kernel)
}

/// Checks `cols` and the buffer lengths of a fused norm; returns its shape.
fn check_fused(op: &'static str, rows: usize, cols: usize, lens: &[(&str, usize, usize)]) -> Result<RowShape, Error> {
    if cols % COLS_MULTIPLE != 0 || cols == 0 {
        return Err(Error::Shape {
            op,
            problem: format!(
                "cols = {cols}: the fused norms take rows of a non-zero multiple of {COLS_MULTIPLE} elements (16-byte pieces; no scalar tail); \
                 pad the rows to {} columns (and the statistics change: mask or rescale), or call add and the plain norm, which take any width",
                cols.next_multiple_of(COLS_MULTIPLE).max(COLS_MULTIPLE)
            ),
        });
    }
    if cols > FUSED_MAX_COLS {
        return Err(Error::Shape { op, problem: format!("cols = {cols}: the fused norms take rows of at most {FUSED_MAX_COLS} columns (one CTA); call add and the plain norm, which take up to {MAX_COLS}") });
    }
    let shape = RowShape::of(cols);
    check_lens(op, shape, rows, cols, lens)?;
    Ok(shape)
}

/// An unused buffer parameter (the fused kernels' `y` when quantizing, or
/// `q` and `scales` when not): a null, empty `Gmem` the kernel never touches.
struct Unused;
impl<T: Copy> Arg<Gmem<T>> for Unused {
    fn gpu<'a>(self, _: &mut kernel_host::ArgSink<'a>) -> kernel_host::Result<Gmem<T>>
    where
        Self: 'a,
    {
        // SAFETY: an empty view; the kernel does not access it in this mode.
        Ok(unsafe { Gmem::from_raw_parts(core::ptr::null_mut(), 0) })
    }
    fn emulator(self) -> kernel_host::Result<Gmem<T>> {
        // SAFETY: as above.
        Ok(unsafe { Gmem::from_raw_parts(core::ptr::null_mut(), 0) })
    }
}

/// One launch of a plain norm kernel: the op and its buffers.
#[doc(hidden)]
pub enum Call<'a, T> {
    Softmax { x: &'a Buffer<T>, y: &'a mut Buffer<T> },
    LayerNorm { x: &'a Buffer<T>, g: &'a Buffer<T>, b: &'a Buffer<T>, y: &'a mut Buffer<T>, eps: f32 },
    RmsNorm { x: &'a Buffer<T>, g: &'a Buffer<T>, y: &'a mut Buffer<T>, eps: f32 },
}

/// One launch of a fused norm kernel (`b` given: layer norm); `y` or
/// `(q, scales)` by `fp8` (a `k::FP8_*` mode).
#[doc(hidden)]
pub struct AddCall<'a, T> {
    x: &'a Buffer<T>,
    r: &'a Buffer<T>,
    g: &'a Buffer<T>,
    b: Option<&'a Buffer<T>>,
    new_r: &'a mut Buffer<T>,
    y: Option<&'a mut Buffer<T>>,
    q: Option<(&'a mut Buffer<E4M3>, &'a mut Buffer<f32>)>,
    fp8: u32,
    eps: f32,
}

/// Launches `$call` on the instance `<$t, $a, $v>` of the kernels `$sm`,
/// `$ln`, `$rms` (`[rows]` for the `_warp` family, which takes the row
/// count). A macro: each `(T, A, V)` instance is its own concrete type.
macro_rules! launch_one {
    ($p:ident, $grid:ident, $rows:ident, $cols:ident, $call:ident, $t:ty, $a:ident, $v:literal, $sm:ident, $ln:ident, $rms:ident, [$($wr:ident)?]) => {{
        let c = $cols as u32;
        $(let $wr = $rows as u32;)?
        match $call {
            Call::Softmax { x, y } => $p.kernel::<k::$sm<$t, k::$a, $v>>()?.launch($grid, (x, y, $($wr,)? c)).map(drop),
            Call::LayerNorm { x, g, b, y, eps } => $p.kernel::<k::$ln<$t, k::$a, $v>>()?.launch($grid, (x, g, b, y, eps, $($wr,)? c)).map(drop),
            Call::RmsNorm { x, g, y, eps } => $p.kernel::<k::$rms<$t, k::$a, $v>>()?.launch($grid, (x, g, y, eps, $($wr,)? c)).map(drop),
        }
    }};
}

/// Every instance of `T`, by shape, access and `V` (the kernels' table).
macro_rules! launch_elem {
    ($t:ty, $p:ident, $kernel:ident, $rows:ident, $cols:ident, $call:ident $(, $peel4:ident)?) => {{
        use RowAccess::{Peel, Single, Vec16};
        use RowShape::{Cluster, Warp, Warpgroup, Wide};
        let grid = $kernel.shape.grid($rows);
        let r: kernel_host::Result<()> = match ($kernel.access, $kernel.shape) {
            (Vec16, Warp(1)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 1, softmax_warp, layer_norm_warp, rms_norm_warp, [rows]),
            (Vec16, Warp(2)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 2, softmax_warp, layer_norm_warp, rms_norm_warp, [rows]),
            (Vec16, Warp(3)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 3, softmax_warp, layer_norm_warp, rms_norm_warp, [rows]),
            (Vec16, Warp(4)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 4, softmax_warp, layer_norm_warp, rms_norm_warp, [rows]),
            (Vec16, Warpgroup(1)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 1, softmax, layer_norm, rms_norm, []),
            (Vec16, Warpgroup(2)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 2, softmax, layer_norm, rms_norm, []),
            (Vec16, Warpgroup(3)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 3, softmax, layer_norm, rms_norm, []),
            (Vec16, Warpgroup(4)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 4, softmax, layer_norm, rms_norm, []),
            (Vec16, Warpgroup(5)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 5, softmax, layer_norm, rms_norm, []),
            (Vec16, Warpgroup(6)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 6, softmax, layer_norm, rms_norm, []),
            (Vec16, Warpgroup(7)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 7, softmax, layer_norm, rms_norm, []),
            (Vec16, Warpgroup(8)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 8, softmax, layer_norm, rms_norm, []),
            (Vec16, Wide(3)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 3, softmax_wide, layer_norm_wide, rms_norm_wide, []),
            (Vec16, Wide(4)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 4, softmax_wide, layer_norm_wide, rms_norm_wide, []),
            (Vec16, Cluster(2)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 2, softmax_cluster, layer_norm_cluster, rms_norm_cluster, []),
            (Vec16, Cluster(4)) => launch_one!($p, grid, $rows, $cols, $call, $t, Vec16, 4, softmax_cluster, layer_norm_cluster, rms_norm_cluster, []),
            (Peel, Warp(1)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 1, softmax_warp, layer_norm_warp, rms_norm_warp, [rows]),
            (Peel, Warp(2)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 2, softmax_warp, layer_norm_warp, rms_norm_warp, [rows]),
            (Peel, Warp(3)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 3, softmax_warp, layer_norm_warp, rms_norm_warp, [rows]),
            (Peel, Warp(4)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 4, softmax_warp, layer_norm_warp, rms_norm_warp, [rows]),
            (Peel, Warpgroup(1)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 1, softmax, layer_norm, rms_norm, []),
            (Peel, Warpgroup(2)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 2, softmax, layer_norm, rms_norm, []),
            (Peel, Warpgroup(3)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 3, softmax, layer_norm, rms_norm, []),
            (Peel, Warpgroup(4)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 4, softmax, layer_norm, rms_norm, []),
            (Peel, Warpgroup(5)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 5, softmax, layer_norm, rms_norm, []),
            (Peel, Warpgroup(6)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 6, softmax, layer_norm, rms_norm, []),
            (Peel, Wide(3)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 3, softmax_wide, layer_norm_wide, rms_norm_wide, []),
            // (`Peel` at `V` = 4 per 512 threads: f16 and bf16 only, `$peel4`.)
            $((Peel, Wide(4)) if stringify!($peel4) == "peel4" => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 4, softmax_wide, layer_norm_wide, rms_norm_wide, []),)?
            (Peel, Cluster(2)) => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 2, softmax_cluster, layer_norm_cluster, rms_norm_cluster, []),
            $((Peel, Cluster(4)) if stringify!($peel4) == "peel4" => launch_one!($p, grid, $rows, $cols, $call, $t, Peel, 4, softmax_cluster, layer_norm_cluster, rms_norm_cluster, []),)?
            (Single, Warpgroup(8)) => launch_one!($p, grid, $rows, $cols, $call, $t, Single, 8, softmax, layer_norm, rms_norm, []),
            (Single, Wide(4)) => launch_one!($p, grid, $rows, $cols, $call, $t, Single, 4, softmax_wide, layer_norm_wide, rms_norm_wide, []),
            (Single, Cluster(4)) => launch_one!($p, grid, $rows, $cols, $call, $t, Single, 4, softmax_cluster, layer_norm_cluster, rms_norm_cluster, []),
            other => unreachable!("no instance for {other:?} (RowKernel::of gives only built ones)"),
        };
        Ok(r?)
    }};
}

/// Launches the fused `$call` on the instances `V = $v` of `$arn`, `$aln`
/// (`[rows]` for the `_warp` family).
macro_rules! launch_fused_one {
    ($p:ident, $grid:ident, $rows:ident, $cols:ident, $call:ident, $t:ty, $v:literal, $arn:ident, $aln:ident, [$($wr:ident)?]) => {{
        let c = $cols as u32;
        $(let $wr = $rows as u32;)?
        let AddCall { x, r, g, b, new_r, y, q, fp8, eps } = $call;
        match (b, y, q) {
            (None, Some(y), None) => $p.kernel::<k::$arn<$t, $v>>()?.launch($grid, (x, r, g, new_r, y, Unused, Unused, fp8, eps, $($wr,)? c)).map(drop),
            (None, None, Some((q, s))) => $p.kernel::<k::$arn<$t, $v>>()?.launch($grid, (x, r, g, new_r, Unused, q, s, fp8, eps, $($wr,)? c)).map(drop),
            (Some(b), Some(y), None) => $p.kernel::<k::$aln<$t, $v>>()?.launch($grid, (x, r, g, b, new_r, y, Unused, Unused, fp8, eps, $($wr,)? c)).map(drop),
            (Some(b), None, Some((q, s))) => $p.kernel::<k::$aln<$t, $v>>()?.launch($grid, (x, r, g, b, new_r, Unused, q, s, fp8, eps, $($wr,)? c)).map(drop),
            _ => unreachable!("the entry points pass y or (q, scales)"),
        }
    }};
}

/// Every fused instance of `T`, by shape and `V`.
macro_rules! launch_fused_elem {
    ($t:ty, $p:ident, $shape:ident, $rows:ident, $cols:ident, $call:ident) => {{
        let grid = $shape.grid($rows);
        let r: kernel_host::Result<()> = match $shape {
            RowShape::Warp(1) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 1, add_rms_norm_warp, add_layer_norm_warp, [rows]),
            RowShape::Warp(2) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 2, add_rms_norm_warp, add_layer_norm_warp, [rows]),
            RowShape::Warp(3) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 3, add_rms_norm_warp, add_layer_norm_warp, [rows]),
            RowShape::Warp(4) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 4, add_rms_norm_warp, add_layer_norm_warp, [rows]),
            RowShape::Warpgroup(1) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 1, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(2) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 2, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(3) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 3, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(4) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 4, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(5) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 5, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(6) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 6, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(7) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 7, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(8) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 8, add_rms_norm, add_layer_norm, []),
            RowShape::Wide(3) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 3, add_rms_norm_wide, add_layer_norm_wide, []),
            RowShape::Wide(4) => launch_fused_one!($p, grid, $rows, $cols, $call, $t, 4, add_rms_norm_wide, add_layer_norm_wide, []),
            other => unreachable!("no fused instance for {other:?} (checked)"),
        };
        Ok(r?)
    }};
}

/// One launch of a backward kernel (`db` given: layer norm).
#[doc(hidden)]
pub struct BwdCall<'a, T> {
    x: &'a Buffer<T>,
    dy: &'a Buffer<T>,
    g: &'a Buffer<T>,
    dx: &'a mut Buffer<T>,
    dg: &'a mut Buffer<f32>,
    db: Option<&'a mut Buffer<f32>>,
    eps: f32,
    groups: usize,
    rows: usize,
    cols: usize,
}

/// Launches the backward `$call` on the instance `<$t, Vec16, $v>` of
/// `$rms` / `$ln`.
macro_rules! launch_bwd_one {
    ($p:ident, $grid:ident, $call:ident, $t:ty, $a:ident, $v:literal, $rms:ident, $ln:ident) => {{
        let BwdCall { x, dy, g, dx, dg, db, eps, groups, rows, cols } = $call;
        let (groups, rows, cols) = (groups as u32, rows as u32, cols as u32);
        match db {
            None => $p.kernel::<k::$rms<$t, k::$a, $v>>()?.launch($grid, (x, dy, g, dx, dg, eps, groups, rows, cols)).map(drop),
            Some(db) => $p.kernel::<k::$ln<$t, k::$a, $v>>()?.launch($grid, (x, dy, g, dx, dg, db, eps, groups, rows, cols)).map(drop),
        }
    }};
}

/// Every backward instance of `T`, by access and shape ([`backward_kernel`]).
macro_rules! launch_bwd_elem {
    ($t:ty, $p:ident, $kernel:ident, $call:ident $(, $rwide:ident, $lwide:ident)?) => {{
        use RowAccess::{Single, Vec16};
        use RowShape::{Warp, Warpgroup};
        let grid = match $kernel.shape {
            Warp(_) => $call.groups.div_ceil(k::WARP_ROWS) as u32,
            _ => $call.groups as u32,
        };
        let r: kernel_host::Result<()> = match ($kernel.access, $kernel.shape) {
            (Vec16, Warp(1)) => launch_bwd_one!($p, grid, $call, $t, Vec16, 1, rms_norm_bwd_warp, layer_norm_bwd_warp),
            (Vec16, Warp(2)) => launch_bwd_one!($p, grid, $call, $t, Vec16, 2, rms_norm_bwd_warp, layer_norm_bwd_warp),
            (Vec16, Warp(4)) => launch_bwd_one!($p, grid, $call, $t, Vec16, 4, rms_norm_bwd_warp, layer_norm_bwd_warp),
            (Vec16, Warpgroup(1)) => launch_bwd_one!($p, grid, $call, $t, Vec16, 1, rms_norm_bwd, layer_norm_bwd),
            (Vec16, Warpgroup(2)) => launch_bwd_one!($p, grid, $call, $t, Vec16, 2, rms_norm_bwd, layer_norm_bwd),
            (Vec16, Warpgroup(4)) => launch_bwd_one!($p, grid, $call, $t, Vec16, 4, rms_norm_bwd, layer_norm_bwd),
            (Vec16, Warpgroup(8)) => launch_bwd_one!($p, grid, $call, $t, Vec16, 8, rms_norm_bwd, layer_norm_bwd),
            (Single, Warp(1)) => launch_bwd_one!($p, grid, $call, $t, Single, 1, rms_norm_bwd_warp, layer_norm_bwd_warp),
            (Single, Warp(2)) => launch_bwd_one!($p, grid, $call, $t, Single, 2, rms_norm_bwd_warp, layer_norm_bwd_warp),
            (Single, Warp(4)) => launch_bwd_one!($p, grid, $call, $t, Single, 4, rms_norm_bwd_warp, layer_norm_bwd_warp),
            (Single, Warpgroup(2)) => launch_bwd_one!($p, grid, $call, $t, Single, 2, rms_norm_bwd, layer_norm_bwd),
            (Single, Warpgroup(4)) => launch_bwd_one!($p, grid, $call, $t, Single, 4, rms_norm_bwd, layer_norm_bwd),
            $((Vec16, RowShape::Wide(4)) => launch_bwd_one!($p, grid, $call, $t, Vec16, 4, $rwide, $lwide),)?
            other => unreachable!("no backward instance for {other:?} (backward_kernel gives only built ones)"),
        };
        Ok(r?)
    }};
}

/// f16, bf16 and f32: the element types of [`softmax`], [`layer_norm`]
/// and [`rms_norm`] (inputs, weights and outputs of one type).
pub trait NormElem: Copy + kernel_host::DeviceRepr + Default + 'static + sealed::Sealed {
    /// The type's name (`"f16"`, `"bf16"`, `"f32"`).
    const NAME: &'static str;
    /// The [`max_rel_error`] the tests and the benchmark accept: a few
    /// roundings of the output type (f16: 4e-3, bf16: 2e-2, f32: 2e-5).
    const TOLERANCE: f64;
    #[doc(hidden)]
    fn launch(p: &Program, kernel: RowKernel, rows: usize, cols: usize, call: Call<'_, Self>) -> Result<(), Error>;
    #[doc(hidden)]
    fn launch_bwd(p: &Program, kernel: RowKernel, call: BwdCall<'_, Self>) -> Result<(), Error>;
    fn to_f32(self) -> f32;
    fn from_f32(x: f32) -> Self;
}

/// f16 and bf16: the element types of the fused residual norms.
pub trait FusedNormElem: NormElem {
    #[doc(hidden)]
    fn launch_fused(p: &Program, shape: RowShape, rows: usize, cols: usize, call: AddCall<'_, Self>) -> Result<(), Error>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for kernel_device::f16 {}
    impl Sealed for kernel_device::bf16 {}
    impl Sealed for f32 {}
}

impl NormElem for f16 {
    const NAME: &'static str = "f16";
    const TOLERANCE: f64 = 4e-3;
    fn launch(p: &Program, kernel: RowKernel, rows: usize, cols: usize, call: Call<'_, Self>) -> Result<(), Error> {
        launch_elem!(f16, p, kernel, rows, cols, call, peel4)
    }
    fn launch_bwd(p: &Program, kernel: RowKernel, call: BwdCall<'_, Self>) -> Result<(), Error> {
        launch_bwd_elem!(f16, p, kernel, call, rms_norm_bwd_wide, layer_norm_bwd_wide)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
}
impl FusedNormElem for f16 {
    fn launch_fused(p: &Program, shape: RowShape, rows: usize, cols: usize, call: AddCall<'_, Self>) -> Result<(), Error> {
        launch_fused_elem!(f16, p, shape, rows, cols, call)
    }
}

impl NormElem for bf16 {
    const NAME: &'static str = "bf16";
    const TOLERANCE: f64 = 2e-2;
    fn launch(p: &Program, kernel: RowKernel, rows: usize, cols: usize, call: Call<'_, Self>) -> Result<(), Error> {
        launch_elem!(bf16, p, kernel, rows, cols, call, peel4)
    }
    fn launch_bwd(p: &Program, kernel: RowKernel, call: BwdCall<'_, Self>) -> Result<(), Error> {
        launch_bwd_elem!(bf16, p, kernel, call, rms_norm_bwd_wide, layer_norm_bwd_wide)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
}
impl FusedNormElem for bf16 {
    fn launch_fused(p: &Program, shape: RowShape, rows: usize, cols: usize, call: AddCall<'_, Self>) -> Result<(), Error> {
        launch_fused_elem!(bf16, p, shape, rows, cols, call)
    }
}

impl NormElem for f32 {
    const NAME: &'static str = "f32";
    const TOLERANCE: f64 = 2e-5;
    fn launch(p: &Program, kernel: RowKernel, rows: usize, cols: usize, call: Call<'_, Self>) -> Result<(), Error> {
        launch_elem!(f32, p, kernel, rows, cols, call)
    }
    fn launch_bwd(p: &Program, kernel: RowKernel, call: BwdCall<'_, Self>) -> Result<(), Error> {
        launch_bwd_elem!(f32, p, kernel, call)
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(x: f32) -> Self {
        x
    }
}

/// `y[r] = softmax(x[r])` for each of `rows` rows of `cols` (1 to
/// [`MAX_COLS`]), with `ops` the kernels of `kernel_ops_kernels`
/// loaded on the device that holds the buffers (queued on a GPU's stream;
/// run to completion on the emulator).
pub fn softmax<T: NormElem>(ops: &Program, x: &Buffer<T>, y: &mut Buffer<T>, rows: usize, cols: usize) -> Result<(), Error> {
    let kernel = check::<T>("softmax", rows, cols, &[("x", x.len(), rows * cols), ("y", y.len(), rows * cols)])?;
    crate::check_aligned("softmax", &[at("x", x), at("y", y)])?;
    T::launch(ops, kernel, rows, cols, Call::Softmax { x, y })
}

/// `y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta` for each row.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm<T: NormElem>(ops: &Program, x: &Buffer<T>, gamma: &Buffer<T>, beta: &Buffer<T>, y: &mut Buffer<T>, eps: f32, rows: usize, cols: usize) -> Result<(), Error> {
    let kernel = check::<T>("layer_norm", rows, cols, &[("x", x.len(), rows * cols), ("gamma", gamma.len(), cols), ("beta", beta.len(), cols), ("y", y.len(), rows * cols)])?;
    crate::check_aligned("layer_norm", &[at("x", x), at("gamma", gamma), at("beta", beta), at("y", y)])?;
    T::launch(ops, kernel, rows, cols, Call::LayerNorm { x, g: gamma, b: beta, y, eps })
}

/// `y[r] = x[r] / sqrt(mean(x[r]²) + eps) * gamma` for each row.
pub fn rms_norm<T: NormElem>(ops: &Program, x: &Buffer<T>, gamma: &Buffer<T>, y: &mut Buffer<T>, eps: f32, rows: usize, cols: usize) -> Result<(), Error> {
    let kernel = check::<T>("rms_norm", rows, cols, &[("x", x.len(), rows * cols), ("gamma", gamma.len(), cols), ("y", y.len(), rows * cols)])?;
    crate::check_aligned("rms_norm", &[at("x", x), at("gamma", gamma), at("y", y)])?;
    T::launch(ops, kernel, rows, cols, Call::RmsNorm { x, g: gamma, y, eps })
}

/// The widest row of [`rms_norm_backward`] and [`layer_norm_backward`]
/// for f16 / bf16 (one CTA per row: the warp, warpgroup and 4-warpgroup
/// shapes).
pub const BWD_MAX_COLS: usize = 16384;
/// The widest f32 row of the backward (no 4-warpgroup f32 instances: the
/// rows of `x` and `dy` in f32 over 512 threads spill).
pub const BWD_MAX_COLS_F32: usize = 8192;

/// The widest row of the backward whose width is not a multiple of 16
/// bytes (one element per access: the wider such rows spill).
pub const BWD_MAX_COLS_SINGLE: usize = 4096;

/// The widest row of the backward for `T` (at a width that is a multiple
/// of 16 bytes).
pub fn backward_max_cols<T: NormElem>() -> usize {
    if size_of::<T>() == 4 { BWD_MAX_COLS_F32 } else { BWD_MAX_COLS }
}
/// The most groups (warps or CTAs, each with its own partial row of the
/// weights' gradients) of one backward launch.
pub const BWD_MAX_GROUPS: usize = 4096;
/// The most CTAs of the partials' sum on the emulator (4096 threads).
const BWD_REDUCE_EMU_CTAS: usize = 4096 / k::REDUCE_THREADS;
/// Partial rows summed per CTA in the first of the GPU's two summing
/// launches (64: 8 rounds of 8 loads in flight per thread).
const BWD_REDUCE_CHUNK: usize = 64;
/// The same on the emulator (small problems: so that its tests take both launches).
const BWD_REDUCE_EMU_CHUNK: usize = 8;
/// The fewest rows a backward group takes (when there are enough rows):
/// its partial row (`cols` f32, written once and read once by the sum)
/// costs at most a sixth of the rows' own traffic (16-bit `x`, `dy`, `dx`).
pub const BWD_ROWS_PER_GROUP: usize = 8;

/// The backward kernel for rows of `cols` (checked: at most
/// [`backward_max_cols`]) of `T`: 16-byte accesses for a multiple of 16
/// bytes, else one element per access ([`RowAccess::Single`]), and the
/// forward's shape of `cols` ([`RowShape::of`]), with `V` rounded up to the instances built (1, 2, 4
/// per warp; 1, 2, 4, 8 per warpgroup, 2, 4 for one element per access;
/// 4 per 4 warpgroups): a thread's extra pieces are masked.
pub fn backward_kernel<T: NormElem>(cols: usize) -> RowKernel {
    let access = if (cols * size_of::<T>()) % 16 == 0 { RowAccess::Vec16 } else { RowAccess::Single };
    let shape = match RowShape::of(cols) {
        RowShape::Warp(v) => RowShape::Warp(v.next_power_of_two()),
        RowShape::Warpgroup(v) if access == RowAccess::Vec16 => RowShape::Warpgroup(v.next_power_of_two()),
        RowShape::Warpgroup(v) => RowShape::Warpgroup(v.next_power_of_two().max(2)),
        _ => RowShape::Wide(4),
    };
    RowKernel { shape, access }
}

/// The backward's groups for `rows` rows: `ceil(rows / 8)`, at most
/// [`BWD_MAX_GROUPS`] (so every group has a row, and at most 4096 partial
/// rows are summed: 4096 warps are about what 132 SMs hold at once).
pub fn backward_groups(rows: usize) -> usize {
    rows.div_ceil(BWD_ROWS_PER_GROUP).min(BWD_MAX_GROUPS)
}

/// Checks a backward's `cols` and buffer lengths; returns its shape.
fn check_bwd<T: NormElem>(op: &'static str, rows: usize, cols: usize, lens: &[(&str, usize, usize)]) -> Result<RowKernel, Error> {
    if cols == 0 {
        return Err(Error::Shape { op, problem: "cols = 0: rows of at least 1 column".into() });
    }
    let max = backward_max_cols::<T>();
    if cols > max {
        return Err(Error::Shape {
            op,
            problem: format!("cols = {cols}: the backward takes {} rows of at most {max} columns (one CTA per row; not implemented for wider rows yet)", T::NAME),
        });
    }
    let per16 = 16 / size_of::<T>();
    if cols % per16 != 0 && cols > BWD_MAX_COLS_SINGLE {
        return Err(Error::Shape {
            op,
            problem: format!(
                "cols = {cols}: the backward takes {} rows wider than {BWD_MAX_COLS_SINGLE} columns only at a multiple of {per16} (16-byte accesses; \
                 one element per access spills there: not implemented yet); pad the rows to {} columns with zeros in x, dy and gamma \
                 (the statistics change: rescale the mean and eps) or use the framework's own backward",
                T::NAME,
                cols.next_multiple_of(per16)
            ),
        });
    }
    let kernel = backward_kernel::<T>(cols);
    check_lens(op, kernel.shape, rows, cols, lens)?;
    Ok(kernel)
}

/// The backward's launches: the row kernel into per-group partials, then
/// their sums into `dgamma` (and `dbeta`).
#[allow(clippy::too_many_arguments)]
fn norm_backward<T: NormElem>(
    op: &'static str,
    dev: &Device,
    ops: &Program,
    (x, gamma, dy): (&Buffer<T>, &Buffer<T>, &Buffer<T>),
    dx: &mut Buffer<T>,
    dgamma: &mut Buffer<f32>,
    dbeta: Option<&mut Buffer<f32>>,
    eps: f32,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    let n = rows * cols;
    let mut lens = vec![("x", x.len(), n), ("gamma", gamma.len(), cols), ("dy", dy.len(), n), ("dx", dx.len(), n), ("dgamma", dgamma.len(), cols)];
    let mut starts = vec![at("x", x), at("gamma", gamma), at("dy", dy), at("dx", dx), at("dgamma", dgamma)];
    if let Some(b) = &dbeta {
        lens.push(("dbeta", b.len(), cols));
        starts.push(at("dbeta", b));
    }
    let kernel = check_bwd::<T>(op, rows, cols, &lens)?;
    crate::check_aligned(op, &starts)?;
    let groups = backward_groups(rows);
    let mut dg_part = dev.zeros::<f32>(groups * cols)?;
    let mut db_part = match dbeta {
        Some(_) => Some(dev.zeros::<f32>(groups * cols)?),
        None => None,
    };
    T::launch_bwd(ops, kernel, BwdCall { x, dy, g: gamma, dx, dg: &mut dg_part, db: db_part.as_mut(), eps, groups, rows, cols })?;
    // A thread per column, over chunks of groups (then a second launch over
    // the chunks' sums); on the emulator at most 32 CTAs in all (4096
    // threads, its limit), each thread taking several columns.
    let emu_chunks = |n: usize| if dev.is_gpu() || n <= BWD_REDUCE_EMU_CTAS { n } else { 1 };
    let chunk = if dev.is_gpu() { BWD_REDUCE_CHUNK } else { BWD_REDUCE_EMU_CHUNK };
    let chunks = emu_chunks(groups.div_ceil(chunk));
    let chunk = groups.div_ceil(chunks);
    let ctas = cols.div_ceil(k::REDUCE_THREADS).min(if dev.is_gpu() { usize::MAX } else { BWD_REDUCE_EMU_CTAS / chunks }) as u32;
    let mut sums = if chunks > 1 { Some(dev.zeros::<f32>(chunks * cols)?) } else { None };
    let mut reduce = |part: &Buffer<f32>, out: &mut Buffer<f32>| -> Result<(), Error> {
        let sum = |part: &Buffer<f32>, out: &mut Buffer<f32>, groups: usize, chunk: usize, chunks: usize| -> Result<(), Error> {
            Ok(ops.kernel::<k::norm_bwd_reduce>()?.launch((ctas, chunks as u32, 1), (part, out, groups as u32, cols as u32, ctas, chunk as u32)).map(drop)?)
        };
        match sums.as_mut() {
            Some(s) => {
                sum(part, s, groups, chunk, chunks)?;
                sum(s, out, chunks, chunks, 1)
            }
            None => sum(part, out, groups, groups, 1),
        }
    };
    reduce(&dg_part, dgamma)?;
    if let (Some(part), Some(out)) = (&db_part, dbeta) {
        reduce(part, out)?;
    }
    Ok(())
}

/// The RMS norm's backward: from the forward's `x` and `gamma` and the
/// loss's gradient `dy` with respect to `y`, writes `dx` (in `T`) and
/// `dgamma` (f32, summed over the rows). The statistics are recomputed
/// from `x` (the forward saves none). Rows of a multiple of 16 bytes (8
/// f16 / bf16, 4 f32) up to [`BWD_MAX_COLS`] (f16 / bf16) or
/// [`BWD_MAX_COLS_F32`] (f32), other widths up to [`BWD_MAX_COLS_SINGLE`],
/// with the forward's accesses ([`backward_kernel`]); a launch over the rows,
/// one or two more per weight gradient (the sum of the groups' partials:
/// over chunks of 64 groups, then over the chunks, when there are more than
/// 64), and a `groups x cols` f32 workspace per weight gradient
/// ([`backward_groups`]; `ceil(groups / 64) x cols` more for the chunks'
/// sums) allocated on `dev`.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_backward<T: NormElem>(
    dev: &Device,
    ops: &Program,
    x: &Buffer<T>,
    gamma: &Buffer<T>,
    dy: &Buffer<T>,
    dx: &mut Buffer<T>,
    dgamma: &mut Buffer<f32>,
    eps: f32,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    norm_backward("rms_norm_backward", dev, ops, (x, gamma, dy), dx, dgamma, None, eps, rows, cols)
}

/// The layer norm's backward: `dx` (in `T`), `dgamma` and `dbeta` (f32,
/// summed over the rows); as [`rms_norm_backward`] (`beta` does not enter
/// the backward).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_backward<T: NormElem>(
    dev: &Device,
    ops: &Program,
    x: &Buffer<T>,
    gamma: &Buffer<T>,
    dy: &Buffer<T>,
    dx: &mut Buffer<T>,
    dgamma: &mut Buffer<f32>,
    dbeta: &mut Buffer<f32>,
    eps: f32,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    norm_backward("layer_norm_backward", dev, ops, (x, gamma, dy), dx, dgamma, Some(dbeta), eps, rows, cols)
}

/// CPU reference of [`rms_norm_backward`] (f64 arithmetic): `(dx,
/// dgamma)` with `r = 1 / sqrt(mean(x²) + eps)`, `dx = r dy g - x r³
/// mean(dy g x)`, `dgamma = sum over rows of dy x r`.
pub fn rms_norm_backward_reference(x: &[f32], gamma: &[f32], dy: &[f32], eps: f32, cols: usize) -> (Vec<f32>, Vec<f32>) {
    let mut dx = Vec::with_capacity(x.len());
    let mut dg = vec![0f64; cols];
    for (row, d) in x.chunks(cols).zip(dy.chunks(cols)) {
        let n = cols as f64;
        let r = 1.0 / (row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n + eps as f64).sqrt();
        let c = (0..cols).map(|i| d[i] as f64 * gamma[i] as f64 * row[i] as f64).sum::<f64>() / n;
        for i in 0..cols {
            let (xi, di, gi) = (row[i] as f64, d[i] as f64, gamma[i] as f64);
            dx.push((r * di * gi - xi * r * r * r * c) as f32);
            dg[i] += di * xi * r;
        }
    }
    (dx, dg.into_iter().map(|v| v as f32).collect())
}

/// CPU reference of [`layer_norm_backward`] (f64 arithmetic): `(dx,
/// dgamma, dbeta)` with `xhat = (x - mean) r`, `r = 1 / sqrt(var + eps)`,
/// `dx = r (dy g - mean(dy g) - xhat mean(dy g xhat))`, `dgamma = sum over
/// rows of dy xhat`, `dbeta = sum over rows of dy`.
pub fn layer_norm_backward_reference(x: &[f32], gamma: &[f32], dy: &[f32], eps: f32, cols: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut dx = Vec::with_capacity(x.len());
    let (mut dg, mut db) = (vec![0f64; cols], vec![0f64; cols]);
    for (row, d) in x.chunks(cols).zip(dy.chunks(cols)) {
        let n = cols as f64;
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
        let r = 1.0 / (row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n + eps as f64).sqrt();
        let xhat: Vec<f64> = row.iter().map(|&v| (v as f64 - mean) * r).collect();
        let w: Vec<f64> = (0..cols).map(|i| d[i] as f64 * gamma[i] as f64).collect();
        let mw = w.iter().sum::<f64>() / n;
        let mwx = (0..cols).map(|i| w[i] * xhat[i]).sum::<f64>() / n;
        for i in 0..cols {
            dx.push((r * (w[i] - mw - xhat[i] * mwx)) as f32);
            dg[i] += d[i] as f64 * xhat[i];
            db[i] += d[i] as f64;
        }
    }
    let f = |v: Vec<f64>| v.into_iter().map(|v| v as f32).collect();
    (dx, f(dg), f(db))
}

/// How the fused norms scale their FP8 output `q = e4m3(y / scale)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fp8Scale {
    /// `scale[r] = amax(|y[r]|) / 448` (1 for an all-zero row), one per
    /// row, written to `scales[r]` (`rows` of them): one pass.
    PerRow,
    /// One given scale for the tensor (calibrated; the caller's `scale`,
    /// written to `scales[0]`): one pass.
    PerTensor(f32),
    /// `scale = amax(|y|) / 448` over the tensor (1 if all zero), written
    /// to `scales[0]`: two passes over `x` and `residual` (the first finds
    /// the amax) and two one-thread launches.
    PerTensorDynamic,
}

/// The fused norms' output: `y` in `T`, or FP8 e4m3 with its scales.
pub enum NormOut<'a, T> {
    /// `y` in the input's type.
    Y(&'a mut Buffer<T>),
    /// `q = e4m3(y / scale)` (round to nearest even, saturating) and the
    /// scales (`rows` for [`Fp8Scale::PerRow`], else 1): what
    /// `kernel_ops::fp8::matmul_fp8_rowwise` / `matmul_fp8` multiply back.
    Fp8 { q: &'a mut Buffer<E4M3>, scales: &'a mut Buffer<f32>, scale: Fp8Scale },
}

/// The fused residual norms: `new_residual = x + residual` (rounded to
/// `T`), then `y = norm(new_residual)` (layer norm with `beta`, RMS norm
/// without), both in one pass over the rows: `x` and `residual` read once,
/// `new_residual` and `y` (or its FP8 form) written once.
#[allow(clippy::too_many_arguments)]
fn add_norm<T: FusedNormElem>(
    op: &'static str,
    ops: &Program,
    (x, residual, gamma, beta): (&Buffer<T>, &Buffer<T>, &Buffer<T>, Option<&Buffer<T>>),
    new_residual: &mut Buffer<T>,
    out: NormOut<'_, T>,
    eps: f32,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    let n = rows * cols;
    let mut lens = vec![("x", x.len(), n), ("residual", residual.len(), n), ("gamma", gamma.len(), cols), ("new_residual", new_residual.len(), n)];
    let mut starts = vec![at("x", x), at("residual", residual), at("gamma", gamma), at("new_residual", new_residual)];
    if let Some(b) = beta {
        lens.push(("beta", b.len(), cols));
        starts.push(at("beta", b));
    }
    match &out {
        NormOut::Y(y) => {
            lens.push(("y", y.len(), n));
            starts.push(at("y", y));
        }
        NormOut::Fp8 { q, scales, scale } => {
            lens.push(("q", q.len(), n));
            lens.push(("scales", scales.len(), if *scale == Fp8Scale::PerRow { rows } else { 1 }));
            starts.extend([at("q", q), at("scales", scales)]);
        }
    }
    let shape = check_fused(op, rows, cols, &lens)?;
    crate::check_aligned(op, &starts)?;
    let call = |new_r: &mut Buffer<T>, y: Option<&mut Buffer<T>>, q: Option<(&mut Buffer<E4M3>, &mut Buffer<f32>)>, fp8: u32| {
        T::launch_fused(ops, shape, rows, cols, AddCall { x, r: residual, g: gamma, b: beta, new_r, y, q, fp8, eps })
    };
    match out {
        NormOut::Y(y) => call(new_residual, Some(y), None, k::FP8_NONE),
        NormOut::Fp8 { q, scales, scale: Fp8Scale::PerRow } => call(new_residual, None, Some((q, scales)), k::FP8_PER_ROW),
        NormOut::Fp8 { q, scales, scale: Fp8Scale::PerTensor(s) } => {
            scale_step(ops, scales, 0, s)?;
            call(new_residual, None, Some((q, scales)), k::FP8_TENSOR_SCALE)
        }
        NormOut::Fp8 { q, scales, scale: Fp8Scale::PerTensorDynamic } => {
            scale_step(ops, scales, 0, 0.0)?;
            call(new_residual, None, Some((q, scales)), k::FP8_TENSOR_AMAX)?;
            call(new_residual, None, Some((q, scales)), k::FP8_TENSOR_FROM_AMAX)?;
            scale_step(ops, scales, 1, 0.0)
        }
    }
}

/// One launch of `fp8_tensor_scale` (`op` 0: `scales[0] = value`; 1: amax to scale).
fn scale_step(ops: &Program, scales: &mut Buffer<f32>, op: u32, value: f32) -> Result<(), Error> {
    Ok(ops.kernel::<k::fp8_tensor_scale>()?.launch(1u32, (scales, op, value)).map(drop)?)
}

/// `new_residual = x + residual`, `y = rms_norm(new_residual) * gamma`
/// (see [`NormOut`] for the FP8 form), one pass (two for
/// [`Fp8Scale::PerTensorDynamic`]).
#[allow(clippy::too_many_arguments)]
pub fn add_rms_norm<T: FusedNormElem>(
    ops: &Program,
    x: &Buffer<T>,
    residual: &Buffer<T>,
    gamma: &Buffer<T>,
    new_residual: &mut Buffer<T>,
    out: NormOut<'_, T>,
    eps: f32,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    add_norm("add_rms_norm", ops, (x, residual, gamma, None), new_residual, out, eps, rows, cols)
}

/// `new_residual = x + residual`, `y = layer_norm(new_residual) * gamma +
/// beta` (see [`NormOut`] for the FP8 form), one pass.
#[allow(clippy::too_many_arguments)]
pub fn add_layer_norm<T: FusedNormElem>(
    ops: &Program,
    x: &Buffer<T>,
    residual: &Buffer<T>,
    gamma: &Buffer<T>,
    beta: &Buffer<T>,
    new_residual: &mut Buffer<T>,
    out: NormOut<'_, T>,
    eps: f32,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    add_norm("add_layer_norm", ops, (x, residual, gamma, Some(beta)), new_residual, out, eps, rows, cols)
}

/// CPU reference of the fused norms: `(new_residual, y)`, with
/// `new_residual = round_T(x + residual)` (`round` the element type's
/// rounding) and `y` the norm of it in f64 (layer norm with `beta`).
pub fn add_norm_reference(x: &[f32], residual: &[f32], gamma: &[f32], beta: Option<&[f32]>, eps: f32, cols: usize, round: impl Fn(f32) -> f32) -> (Vec<f32>, Vec<f32>) {
    let s: Vec<f32> = x.iter().zip(residual).map(|(a, b)| round(a + b)).collect();
    let y = match beta {
        Some(b) => layer_norm_reference(&s, gamma, b, eps, cols),
        None => rms_norm_reference(&s, gamma, eps, cols),
    };
    (s, y)
}

/// CPU reference of [`softmax`] (f64 arithmetic on the f32 inputs).
pub fn softmax_reference(x: &[f32], cols: usize) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let e: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
            let s: f64 = e.iter().sum();
            e.into_iter().map(move |v| (v / s) as f32)
        })
        .collect()
}

/// CPU reference of [`layer_norm`] (f64 arithmetic).
pub fn layer_norm_reference(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32, cols: usize) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let n = cols as f64;
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
            let r = 1.0 / (var + eps as f64).sqrt();
            row.iter().enumerate().map(move |(c, &v)| ((v as f64 - mean) * r * gamma[c] as f64 + beta[c] as f64) as f32)
        })
        .collect()
}

/// CPU reference of [`rms_norm`] (f64 arithmetic).
pub fn rms_norm_reference(x: &[f32], gamma: &[f32], eps: f32, cols: usize) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / cols as f64;
            let r = 1.0 / (ms + eps as f64).sqrt();
            row.iter().enumerate().map(move |(c, &v)| (v as f64 * r * gamma[c] as f64) as f32)
        })
        .collect()
}

/// `max |got - want| / max |want|` (a normwise relative error: f16 outputs
/// of a softmax over 8192 columns are mostly f16 subnormals, whose
/// elementwise relative error is large by construction). The tests and the
/// benchmark accept [`NormElem::TOLERANCE`].
pub fn max_rel_error<T: NormElem>(got: &[T], want: &[f32]) -> f64 {
    let scale = want.iter().fold(0f64, |m, &w| m.max(w.abs() as f64));
    let err = got.iter().zip(want).map(|(&g, &w)| (g.to_f32() as f64 - w as f64).abs()).fold(0.0, |m: f64, e| if e.is_nan() { f64::INFINITY } else { m.max(e) });
    err / scale
}
