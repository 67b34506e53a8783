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
use crate::Error;
use kernel_device::f16;
use kernel_host::{Buffer, Device, Program, TileMap};
use kernel_ops_kernels::gemm::{ATileOf, BTileOf, EpiTileOf, TK};
use kernel_ops_kernels::grouped::{grouped_matmul, STATUS_OK, STATUS_SIZES_MISMATCH};

/// The kernel's tile shapes (`BM x BN`, both with 4 stages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiles {
    /// `128 x 256`: the default when `N >= 256`.
    Wide,
    /// `128 x 128`: the default for narrower `N`.
    Narrow,
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
    let shape = |problem: String| Error::Shape { op: "grouped_matmul", problem };
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
    for (dim, v) in [("K", k), ("N", n)] {
        if v % 8 != 0 {
            return Err(shape(format!(
                "{dim} = {v}: must be a multiple of 8 (TMA needs rows of 16-byte multiples); pad {dim} with zeros to {}",
                v.next_multiple_of(8)
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
    /// to `m` (on the device), `c` `m x n`. Asynchronous on a GPU; read
    /// [`GroupedMatmul::status`] to learn whether the sizes added up.
    #[allow(clippy::too_many_arguments)]
    pub fn run(&self, a: &Buffer<f16>, b: &Buffer<f16>, sizes: &Buffer<u32>, c: &mut Buffer<f16>, (m, n, k): (usize, usize, usize), groups: usize) -> Result<(), Error> {
        self.run_with(Tiles::for_n(n), a, b, sizes, c, (m, n, k), groups)
    }

    /// [`GroupedMatmul::run`] with the tile shape given.
    #[allow(clippy::too_many_arguments)]
    pub fn run_with(&self, tiles: Tiles, a: &Buffer<f16>, b: &Buffer<f16>, sizes: &Buffer<u32>, c: &mut Buffer<f16>, shape: (usize, usize, usize), groups: usize) -> Result<(), Error> {
        self.launch(tiles, a, b, sizes, c, shape, groups)
    }

    /// One launch of the instance with `BN`-column tiles (a macro: the
    /// tile types of the maps are the instance's).
    #[allow(clippy::too_many_arguments)]
    fn launch(&self, tiles: Tiles, a: &Buffer<f16>, b: &Buffer<f16>, sizes: &Buffer<u32>, c: &mut Buffer<f16>, (m, n, k): (usize, usize, usize), groups: usize) -> Result<(), Error> {
        if m == 0 {
            // No rows: nothing to compute (the sizes are not read).
            check_grouped(m, n, k, groups, [("a", a.len()), ("b", b.len()), ("sizes", sizes.len()), ("c", c.len())])?;
            self.dev.write(&mut self.status.borrow_mut(), &[STATUS_OK])?;
            return Ok(());
        }
        macro_rules! launch {
            ($bn:literal) => {{
                const BN: usize = $bn;
                check_grouped(m, n, k, groups, [("a", a.len()), ("b", b.len()), ("sizes", sizes.len()), ("c", c.len())])?;
                let grid = self.dev.sm_count().max(1);
                let am = TileMap::<ATileOf<BM>>::new_2d(a, m, k)?;
                let bm = TileMap::<BTileOf<BN>, 3>::new_batched(b, groups, n, k)?;
                // The TMA stores of full tiles and the masked stores of partial ones
                // write the same `C`: the map is made over a second, non-owning view.
                // SAFETY: `alias` covers `c`'s memory, is dropped before this
                // function returns, and frees nothing; the kernel's two writers
                // touch disjoint rows (full tiles through the map, a group's last
                // rows through `c`).
                let mut alias = unsafe { alias_of(self.dev, c)? };
                let cm = TileMap::<EpiTileOf<BM>>::new_2d_mut(&mut alias, m, n)?;
                let mut status = self.status.borrow_mut();
                let ks = k.div_ceil(TK) as u32;
                let args = (&am, &bm, &cm, &mut *c, sizes, &mut *status, m as u32, n as u32, ks);
                self.prog.kernel::<grouped_matmul<128, BN, 4>>()?.launch(grid, args)?;
                Ok(())
            }};
        }
        match tiles {
            Tiles::Wide => launch!(256),
            Tiles::Narrow => launch!(128),
        }
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
/// per element), `sizes` on the host.
pub fn grouped_reference(a: &[f16], b: &[f16], sizes: &[u32], n: usize, k: usize) -> Vec<f32> {
    let m: usize = sizes.iter().map(|&s| s as usize).sum();
    let mut out = vec![0f32; m * n];
    let mut row = 0usize;
    for (g, &mg) in sizes.iter().enumerate() {
        let mg = mg as usize;
        let ag = &a[row * k..(row + mg) * k];
        let bg = &b[g * n * k..(g + 1) * n * k];
        let cg = kernel_host::reference_gemm_nt(mg, n, k, ag, bg);
        out[row * n..(row + mg) * n].copy_from_slice(&cg);
        row += mg;
    }
    out
}

/// A second, non-owning [`Buffer`] over `c`'s memory.
///
/// # Safety
/// The view must not outlive `c`, and its users must not race with `c`'s.
unsafe fn alias_of(dev: &Device, c: &Buffer<f16>) -> Result<Buffer<f16>, Error> {
    // SAFETY: the caller's contract; the view frees nothing.
    Ok(unsafe {
        if dev.is_gpu() {
            Buffer::borrow_gpu(dev, c.address(), c.len())?
        } else {
            Buffer::borrow_host(dev, c.address() as *mut f16, c.len())?
        }
    })
}
