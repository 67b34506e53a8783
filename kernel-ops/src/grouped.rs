//! Grouped GEMM for mixture-of-experts layers: `C_g = A_g · B_gᵀ` for `G`
//! experts sharing `N` and `K`, with ragged `M_g`, in one persistent launch
//! (`kernel_ops_kernels::grouped::grouped_matmul`).
//!
//! Layout ("contiguous", as DeepGEMM and `torch._grouped_mm` call it):
//! `A` is `M x K` with the rows of expert 0 first, then expert 1's, ...
//! (`M = Σ M_g`); `B` is `G x N x K` (expert `g`'s `N x K` weight at
//! `g N K`); `C` is `M x N`, grouped as `A`. The group sizes are a device
//! buffer of `G` `u32`s: the kernel reads them and schedules the tiles of
//! all groups itself, so a router's output feeds it without a host round
//! trip. A group may be empty; a group's last, partial row block is stored
//! row by row, never over the next group's rows.
//!
//! Sizes that do not add up to `M` cannot be checked on the host without
//! reading them back. So the kernel checks them and computes nothing when
//! they are wrong. [`GroupedMatmul::status`] reads its verdict (a
//! synchronization).
//!
//! Inputs: f16 or bf16 ([`GroupedMatmul::run`]), or e4m3 with block
//! scales, 1 x 128 for `A` and 128 x 128 per expert for `B`, f16 out
//! ([`GroupedMatmul::run_fp8_blockscaled`]).
use crate::{at, Error};
use kernel_device::gmem::GmemRef;
use kernel_device::launch::HostEntry;
use kernel_device::tma::TensorMapParam;
use kernel_device::{bf16, f16, Gmem, E4M3};
use kernel_host::{Buffer, Device, Program, TileMap};
use kernel_ops_kernels::gemm::{ATile, BTile, EpiTile, TK};
use kernel_ops_kernels::grouped::{grouped_matmul, STATUS_OK, STATUS_SIZES_MISMATCH};

/// The kernel's tile shapes (`BM x BN`, both with 4 stages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiles {
    /// `128 x 256`: the default when `N >= 256`.
    Wide = 0,
    /// `128 x 128`: the default for narrower `N`.
    Narrow = 1,
}

impl Tiles {
    /// The default for `N` columns.
    pub fn for_n(n: usize) -> Tiles {
        if n >= 256 { Tiles::Wide } else { Tiles::Narrow }
    }
    /// `"128x256"` or `"128x128"`.
    pub fn name(self) -> &'static str {
        match self {
            Tiles::Wide => "128x256",
            Tiles::Narrow => "128x128",
        }
    }
}

const BM: usize = 128;

/// The grouped GEMM on one [`Device`].
pub struct GroupedMatmul<'d> {
    dev: &'d Device,
    prog: Program,
    status: std::cell::RefCell<Buffer<u32>>,
}

/// The shape checks of [`GroupedMatmul::run`], each naming the rule.
pub fn check_grouped(m: usize, n: usize, k: usize, groups: usize, lens: [(&str, usize); 4]) -> Result<(), Error> {
    check_grouped_of("grouped_matmul", 2, m, n, k, groups, lens)
}

/// [`check_grouped`] for operation `op` on inputs of `in_bytes` bytes per
/// element (TMA: `K` a multiple of `16 / in_bytes`).
fn check_grouped_of(op: &'static str, in_bytes: usize, m: usize, n: usize, k: usize, groups: usize, lens: [(&str, usize); 4]) -> Result<(), Error> {
    let shape = |problem: String| Error::Shape { op, problem };
    if n == 0 || k == 0 || groups == 0 {
        return Err(shape(format!("N x K = {n} x {k} with {groups} groups: N, K and the group count must be at least 1")));
    }
    for (dim, v) in [("M", m), ("N", n), ("K", k), ("groups", groups)] {
        if v > i32::MAX as usize {
            return Err(shape(format!("{dim} = {v}: at most 2^31 - 1 (a TMA coordinate)")));
        }
    }
    let want = [("M x K", m * k), ("G x N x K", groups * n * k), ("G", groups), ("M x N", m * n)];
    for ((name, got), (what, w)) in lens.into_iter().zip(want) {
        if got != w {
            return Err(shape(format!(
                "`{name}` holds {got} elements; {what} = {w} expected for M = {m}, N = {n}, K = {k}, {groups} groups"
            )));
        }
    }
    for (dim, v, mult) in [("K", k, 16 / in_bytes), ("N", n, 8)] {
        if v % mult != 0 {
            return Err(shape(format!(
                "{dim} = {v}: must be a multiple of {mult} (TMA needs rows of 16-byte multiples); pad {dim} with zeros to {}",
                v.next_multiple_of(mult)
            )));
        }
    }
    Ok(())
}

impl<'d> GroupedMatmul<'d> {
    /// Loads the kernel on `dev`.
    pub fn new(dev: &'d Device) -> Result<Self, Error> {
        let prog = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
        let status = std::cell::RefCell::new(dev.zeros::<u32>(1)?);
        Ok(GroupedMatmul { dev, prog, status })
    }

    /// `C_g = A_g · B_gᵀ` for every group (see the module docs): `a` is
    /// `m x k`, `b` `groups x n x k`, `sizes` `groups` row counts adding up
    /// to `m` (on the device), `c` `m x n`; f16 or bf16 ([`GroupedElem`]).
    /// Asynchronous on a GPU; read [`GroupedMatmul::status`] to learn
    /// whether the sizes added up.
    #[allow(clippy::too_many_arguments)]
    pub fn run<E: GroupedElem>(&self, a: &Buffer<E>, b: &Buffer<E>, sizes: &Buffer<u32>, c: &mut Buffer<E>, (m, n, k): (usize, usize, usize), groups: usize) -> Result<(), Error> {
        self.run_with(Tiles::for_n(n), a, b, sizes, c, (m, n, k), groups)
    }

    /// [`GroupedMatmul::run`] with the tile shape given.
    #[allow(clippy::too_many_arguments)]
    pub fn run_with<E: GroupedElem>(&self, tiles: Tiles, a: &Buffer<E>, b: &Buffer<E>, sizes: &Buffer<u32>, c: &mut Buffer<E>, (m, n, k): (usize, usize, usize), groups: usize) -> Result<(), Error> {
        check_grouped(m, n, k, groups, [("a", a.len()), ("b", b.len()), ("sizes", sizes.len()), ("c", c.len())])?;
        crate::check_aligned("grouped_matmul", &[at("a", a), at("b", b), at("sizes", sizes), at("c", c)])?;
        if m == 0 {
            // No rows: nothing to compute (the sizes are not read).
            self.dev.write(&mut self.status.borrow_mut(), &[STATUS_OK])?;
            return Ok(());
        }
        E::LAUNCH[tiles as usize](self, a, b, sizes, c, (m, n, k), groups)
    }

    /// Block-scaled FP8 `C_g = A_g · B_gᵀ` for every group (the module's
    /// layout, e4m3 inputs, f16 out), DeepSeek-V3's scales as
    /// [`crate::fp8::matmul_fp8_blockscaled`] takes them: `a_scales`
    /// `ceil(k / 128) x m` (one per row of `a` and 128 of K,
    /// K-block-major: [`crate::fp8::quantize_1x128`] over all `m` rows),
    /// `b_scales` `groups x ceil(n / 128) x ceil(k / 128)` (one per 128 x
    /// 128 block of each expert's weight: [`quantize_experts_128x128`]);
    /// partial sums promoted to f32 every 128 of K. The kernel is
    /// `kernel_ops_kernels::grouped::grouped_matmul_fp8_blockscaled`
    /// (`128 x 256` tiles, persistent, the sizes read on the device).
    /// Checks the shapes first (`K % 16 == 0`, `N % 8 == 0`, every
    /// buffer's length); asynchronous on a GPU: read
    /// [`GroupedMatmul::status`] to learn whether the sizes added up.
    #[allow(clippy::too_many_arguments)]
    pub fn run_fp8_blockscaled(
        &self,
        a: &Buffer<E4M3>,
        a_scales: &Buffer<f32>,
        b: &Buffer<E4M3>,
        b_scales: &Buffer<f32>,
        sizes: &Buffer<u32>,
        c: &mut Buffer<f16>,
        (m, n, k): (usize, usize, usize),
        groups: usize,
    ) -> Result<(), Error> {
        const OP: &str = "grouped_matmul_fp8_blockscaled";
        check_grouped_of(OP, 1, m, n, k, groups, [("a", a.len()), ("b", b.len()), ("sizes", sizes.len()), ("c", c.len())])?;
        crate::check_aligned(OP, &[at("a", a), at("a_scales", a_scales), at("b", b), at("b_scales", b_scales), at("sizes", sizes), at("c", c)])?;
        let (kb, nb) = (k.div_ceil(SCALE_BLOCK), n.div_ceil(SCALE_BLOCK));
        for (name, got, what, want) in [("a_scales", a_scales.len(), "ceil(K / 128) x M", kb * m), ("b_scales", b_scales.len(), "G x ceil(N / 128) x ceil(K / 128)", groups * nb * kb)] {
            if got != want {
                return Err(Error::Shape { op: OP, problem: format!("`{name}` holds {got} elements; {what} = {want} expected for M = {m}, N = {n}, K = {k}, {groups} groups (one f32 per block of 128)") });
            }
        }
        if m == 0 {
            self.dev.write(&mut self.status.borrow_mut(), &[STATUS_OK])?;
            return Ok(());
        }
        use kernel_ops_kernels::matmul_fp8::{A8TileOf, B8TileOf, BS_BM, BS_BN};
        let grid = self.dev.sm_count().max(1);
        let am = TileMap::<A8TileOf<BS_BM>>::new_2d(a, m, k)?;
        let bm = TileMap::<B8TileOf<BS_BN>, 3>::new_batched(b, groups, n, k)?;
        // SAFETY: as in the f16 launch: `alias` covers `c`'s memory, is
        // dropped before this function returns and frees nothing; the
        // kernel's two writers touch disjoint rows.
        let mut alias = unsafe { alias_of(self.dev, c)? };
        let cm = TileMap::<EpiTile<f16, BS_BM>>::new_2d_mut(&mut alias, m, n)?;
        let mut status = self.status.borrow_mut();
        let args = (&am, &bm, &cm, &mut *c, a_scales, b_scales, sizes, &mut *status, m as u32, n as u32, kb as u32);
        self.prog.kernel::<GroupedBlockScaledInstance>()?.launch(grid, args)?;
        Ok(())
    }

    /// Whether the last [`GroupedMatmul::run`] computed: `Ok` when the
    /// group sizes added up to `m`, else an error naming the rule (waits
    /// for the kernel).
    pub fn status(&self) -> Result<(), Error> {
        let s = self.dev.download(&self.status.borrow())?;
        match s[0] {
            STATUS_OK => Ok(()),
            STATUS_SIZES_MISMATCH => Err(Error::Shape {
                op: "grouped_matmul",
                problem: "the group sizes (a device buffer) do not add up to M, the rows of `a` and `c`: nothing was \
                          computed; the sizes must be the row counts of the groups in `a`'s order"
                    .into(),
            }),
            other => Err(Error::Shape { op: "grouped_matmul", problem: format!("unknown kernel status {other}") }),
        }
    }
}

/// The CPU reference: every group's `A_g · B_gᵀ` in f32 (an f64 dot product
/// per element), `sizes` on the host; f16 or bf16 inputs.
pub fn grouped_reference<E: Copy + Into<f32>>(a: &[E], b: &[E], sizes: &[u32], n: usize, k: usize) -> Vec<f32> {
    let m: usize = sizes.iter().map(|&s| s as usize).sum();
    let mut out = vec![0f32; m * n];
    let mut row = 0usize;
    for (g, &mg) in sizes.iter().enumerate() {
        for r in row..row + mg as usize {
            let ar = &a[r * k..(r + 1) * k];
            for col in 0..n {
                let br = &b[(g * n + col) * k..(g * n + col + 1) * k];
                let dot: f64 = ar.iter().zip(br).map(|(&x, &y)| f64::from(x.into()) * f64::from(y.into())).sum();
                out[r * n + col] = dot as f32;
            }
        }
        row += mg as usize;
    }
    out
}

/// [`GroupedMatmul::run_fp8_blockscaled`]'s instance: 4 stages.
pub type GroupedBlockScaledInstance = kernel_ops_kernels::grouped::grouped_matmul_fp8_blockscaled<4>;

/// K (and N, for B) of one scale block.
const SCALE_BLOCK: usize = kernel_ops_kernels::matmul_fp8::SCALE_BLOCK;

/// Block quantization of `groups` expert weights (`w` is `groups x n x k`
/// row-major): each expert's `n x k` weight by
/// [`crate::fp8::quantize_128x128`]. Returns the e4m3 values (the same
/// layout) and the scales, `groups x ceil(n / 128) x ceil(k / 128)`, what
/// [`GroupedMatmul::run_fp8_blockscaled`] reads.
pub fn quantize_experts_128x128(w: &[f32], groups: usize, n: usize, k: usize) -> (Vec<E4M3>, Vec<f32>) {
    assert_eq!(w.len(), groups * n * k, "quantize_experts_128x128: w holds {} elements; groups x n x k = {} needed", w.len(), groups * n * k);
    let (mut q, mut scales) = (Vec::with_capacity(w.len()), Vec::new());
    for e in w.chunks(n * k).take(groups) {
        let (qe, se) = crate::fp8::quantize_128x128(e, n, k);
        q.extend(qe);
        scales.extend(se);
    }
    (q, scales)
}

/// The CPU reference of [`GroupedMatmul::run_fp8_blockscaled`]: for every
/// row of group `g` and column, per block of 128 of K the exact FP8
/// products summed in f64 and scaled by the row's `a_scales` and expert
/// `g`'s `b_scales` of the block, summed in f64, rounded once to f32.
/// Returns `M x N` row-major (`M = Σ sizes`).
pub fn grouped_reference_blockscaled(a: &[E4M3], a_scales: &[f32], b: &[E4M3], b_scales: &[f32], sizes: &[u32], n: usize, k: usize) -> Vec<f32> {
    let m: usize = sizes.iter().map(|&s| s as usize).sum();
    let (kb, nb) = (k.div_ceil(SCALE_BLOCK), n.div_ceil(SCALE_BLOCK));
    assert!(a.len() == m * k && a_scales.len() == kb * m && b.len() == sizes.len() * n * k && b_scales.len() == sizes.len() * nb * kb, "grouped_reference_blockscaled: operand lengths do not match M = {m}, N = {n}, K = {k}, {} groups", sizes.len());
    let (af, bf): (Vec<f64>, Vec<f64>) = (a.iter().map(|v| f64::from(v.to_f32())).collect(), b.iter().map(|v| f64::from(v.to_f32())).collect());
    let mut out = vec![0f32; m * n];
    let mut row = 0usize;
    for (g, &mg) in sizes.iter().enumerate() {
        for r in row..row + mg as usize {
            for col in 0..n {
                let br = (g * n + col) * k;
                let total: f64 = (0..kb)
                    .map(|bk| {
                        let ks = bk * SCALE_BLOCK..((bk + 1) * SCALE_BLOCK).min(k);
                        let dot: f64 = ks.map(|kk| af[r * k + kk] * bf[br + kk]).sum();
                        dot * f64::from(a_scales[bk * m + r]) * f64::from(b_scales[(g * nb + col / SCALE_BLOCK) * kb + bk])
                    })
                    .sum();
                out[r * n + col] = total as f32;
            }
        }
        row += mg as usize;
    }
    out
}

/// A second, non-owning [`Buffer`] over `c`'s memory.
///
/// # Safety
/// The view must not outlive `c`, and its users must not race with `c`'s.
unsafe fn alias_of<E>(dev: &Device, c: &Buffer<E>) -> Result<Buffer<E>, Error> {
    // SAFETY: the caller's contract; the view frees nothing.
    Ok(unsafe {
        if dev.is_gpu() {
            Buffer::borrow_gpu(dev, c.address(), c.len())?
        } else {
            Buffer::borrow_host(dev, c.address() as *mut E, c.len())?
        }
    })
}

/// The launch of `grouped_matmul<E, 128, BN, 4>` (shape already checked, `m > 0`).
type Launch<E> = fn(&GroupedMatmul<'_>, &Buffer<E>, &Buffer<E>, &Buffer<u32>, &mut Buffer<E>, (usize, usize, usize), usize) -> Result<(), Error>;

/// The parameters of `grouped_matmul<E, 128, BN, 4>`.
type Params<E, const BN: usize> =
    (TensorMapParam<ATile<E, BM>>, TensorMapParam<BTile<E, BN>, 3>, TensorMapParam<EpiTile<E, BM>>, Gmem<E>, GmemRef<u32>, Gmem<u32>, u32, u32, u32);

/// The element types of the grouped GEMM: f16 and bf16 (`A`, `B` and `C`
/// alike, f32 accumulation); the kernel is generic over it.
pub trait GroupedElem: Copy + kernel_host::TmaElement + kernel_host::cudarc::driver::DeviceRepr + 'static {
    /// The launches of the wide and the narrow tiles ([`Tiles`] order).
    #[doc(hidden)]
    const LAUNCH: [Launch<Self>; 2];
}

impl GroupedElem for f16 {
    const LAUNCH: [Launch<Self>; 2] = [launch::<Self, 256>, launch::<Self, 128>];
}

impl GroupedElem for bf16 {
    const LAUNCH: [Launch<Self>; 2] = [launch::<Self, 256>, launch::<Self, 128>];
}

/// The launch of `grouped_matmul<E, 128, BN, 4>` (compiled for f16 and
/// bf16, `BN` 128 and 256).
fn launch<E: GroupedElem, const BN: usize>(gm: &GroupedMatmul<'_>, a: &Buffer<E>, b: &Buffer<E>, sizes: &Buffer<u32>, c: &mut Buffer<E>, (m, n, k): (usize, usize, usize), groups: usize) -> Result<(), Error>
where
    grouped_matmul<E, BM, BN, 4>: HostEntry<Params = Params<E, BN>>,
{
    let grid = gm.dev.sm_count().max(1);
    let am = TileMap::<ATile<E, BM>>::new_2d(a, m, k)?;
    let bm = TileMap::<BTile<E, BN>, 3>::new_batched(b, groups, n, k)?;
    // The TMA stores of full tiles and the stores of a group's partial
    // tile write the same `C`: the map is made over a second, non-owning
    // view.
    // SAFETY: `alias` covers `c`'s memory, is dropped before this function
    // returns and frees nothing; the kernel's two writers touch disjoint rows.
    let mut alias = unsafe { alias_of(gm.dev, c)? };
    let cm = TileMap::<EpiTile<E, BM>>::new_2d_mut(&mut alias, m, n)?;
    let mut status = gm.status.borrow_mut();
    let ks = k.div_ceil(TK) as u32;
    let args = (&am, &bm, &cm, &mut *c, sizes, &mut *status, m as u32, n as u32, ks);
    gm.prog.kernel::<grouped_matmul<E, BM, BN, 4>>()?.launch(grid, args)?;
    Ok(())
}
