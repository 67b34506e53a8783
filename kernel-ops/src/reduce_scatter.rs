//! A reduce-scatter matmul on several devices of one host: `C = A · Bᵀ`
//! with K sharded across the `p` devices of a group, the result summed
//! over the devices and scattered by rows (the output projection of a
//! tensor-parallel layer: each device holds a column block of the
//! activations and the matching block of the weights).
//!
//! Device `d` holds `A_d` (`M x K/p`, row-major f16 or bf16) and `B_d` (`N
//! x K/p`, row-major, the "NT" layout of [`crate::matmul`]); it receives
//! row block `d` of `C = Σ_d A_d · B_dᵀ` (`M/p x N`, the same type, summed
//! in f32).
//!
//! [`ReduceScatterMatmul::run`] launches **one persistent kernel per
//! device**, all together
//! ([`kernel_ops_kernels::reduce_scatter::reduce_scatter_matmul_ws`]):
//! each device computes the tiles of the other devices' row blocks first
//! and writes each one's accumulators, rounded to the element type, straight into its
//! owner's receive buffer over NVLink, signalling the owner's counter of
//! that tile (system-scope release) once its next tile's MMAs are done;
//! then it computes its own block, and each of its tiles waits for the
//! other devices' `p - 1` partials (system-scope acquire), adds them to
//! its own f32 accumulators in f32 and stores the sum. The reduction
//! runs inside the matmul: no separate reduce-scatter. Each other
//! device's partial is rounded once, as in the baseline (a matmul
//! writing its partial, then a reduce-scatter of it), and the sum is rounded
//! once more; the device's own partial is not rounded.
//!
//! The baseline it replaces is a matmul per device (each device's partial
//! `C`, `M x N`) followed by an NCCL reduce-scatter.
//!
//! [`ReduceScatterMatmul::run_all_reduce`] leaves all of `C` on every
//! device: the same kernel body
//! ([`kernel_ops_kernels::reduce_scatter::allreduce_matmul_ws`]), whose
//! owner of a summed tile also writes it into every other device's `C`
//! from the epilogue (the all-reduce fused into the GEMM's epilogue,
//! replacing a matmul and an NCCL all-reduce).
//!
//! The counters are consumed by the waits, so they are zero again after
//! each call: repeated calls need no reset. On emulated devices the
//! group's kernels run in one emulator run, under its race detector.
use crate::collective::CollectiveElem;
use crate::matmul::{check_problem, MatmulError};
use crate::Ctas;
use kernel_device::launch::HostEntry;
use kernel_device::peer::{PeerGmem, PeerSemaphores};
use kernel_device::tma::TensorMapParam;
use kernel_host::group::{DeviceGroup, GroupProgram, PeerBuffer};
use kernel_host::{Error, TileMap};
use kernel_ops_kernels::gemm::{ATile, BTile, EpiTile};
use kernel_ops_kernels::matmul::TK;
use kernel_ops_kernels::reduce_scatter::{allreduce_matmul_ws, recv_words, reduce_scatter_matmul_ws};
use std::cell::{Cell, RefCell};

/// The kernel's tile rows: each device's row block (`m / p` rows) must be a
/// multiple of it.
pub const TILE_ROWS: usize = 128;

/// Launches the group's kernels of one instance on element type `E`
/// (`ReduceScatterMatmul`, `a`, `b`, `c`, `(m, n, k_shard)`).
#[doc(hidden)]
pub type Launch<E> = fn(&ReduceScatterMatmul<'_>, &PeerBuffer<E>, &PeerBuffer<E>, &mut PeerBuffer<E>, (usize, usize, usize)) -> Result<(), MatmulError>;

/// The [`reduce_scatter_matmul_ws`] instances: name, tile columns (their
/// launches: [`CollectiveElem::REDUCE_SCATTER`], in this order).
const INSTANCES: [(&str, usize); 2] = [("ws 128x256 s4 w8", 256), ("ws 128x128 s4 w8", 128)];

/// The names of the kernel instances [`ReduceScatterMatmul`] picks from
/// (by [`ReduceScatterMatmul::instance_for`], or
/// [`ReduceScatterMatmul::force_instance`]).
pub const INSTANCE_NAMES: [&str; INSTANCES.len()] = [INSTANCES[0].0, INSTANCES[1].0];

/// The parameters of `reduce_scatter_matmul_ws<E, BM, BN, ..>`.
type Params<E, const BM: usize, const BN: usize> =
    (TensorMapParam<ATile<E, BM>>, TensorMapParam<BTile<E, BN>>, TensorMapParam<EpiTile<E, BM>>, PeerGmem<u32>, PeerSemaphores, u32, u32, u32);

/// What both launches share: the grid, the receive buffers and counters
/// grown for the shape, every device's maps of `A` and `B`, and `(block
/// tiles, n tiles, k steps)`.
struct Prepared<'b, E: CollectiveElem, const BM: usize, const BN: usize> {
    grid: u32,
    a_maps: Vec<TileMap<'b, ATile<E, BM>>>,
    b_maps: Vec<TileMap<'b, BTile<E, BN>>>,
    tiles: (u32, u32, u32),
}

fn prepare<'b, E: CollectiveElem, const BM: usize, const BN: usize>(
    rs: &ReduceScatterMatmul<'_>,
    a: &'b PeerBuffer<E>,
    b: &'b PeerBuffer<E>,
    (m, n, k): (usize, usize, usize),
) -> Result<Prepared<'b, E, BM, BN>, MatmulError> {
    let p = rs.group.len();
    let (block_tiles, n_tiles, k_steps) = (m / p / BM, n.div_ceil(BN), k.div_ceil(TK));
    // At most one CTA per SM (the kernel's SMEM allows no more) and never
    // more CTAs than SMs: every CTA must be resident, since a CTA waiting
    // for its own block's partials holds its SM.
    let sms = (0..p).map(|d| rs.group.device(d).sm_count()).min().unwrap_or(1);
    let grid = Ctas::EvenWaves.grid((p * block_tiles * n_tiles) as u32, sms).max(1);
    rs.ensure_buffers(recv_words(p, block_tiles, n_tiles, BM, BN), block_tiles * n_tiles)?;
    let a_maps = (0..p).map(|d| TileMap::<ATile<E, BM>>::new_2d(a.part(d), m, k)).collect::<Result<Vec<_>, _>>()?;
    let b_maps = (0..p).map(|d| TileMap::<BTile<E, BN>>::new_2d(b.part(d), n, k)).collect::<Result<Vec<_>, _>>()?;
    Ok(Prepared { grid, a_maps, b_maps, tiles: (block_tiles as u32, n_tiles as u32, k_steps as u32) })
}

/// Launches `reduce_scatter_matmul_ws<E, BM, BN, STAGES, GRID_W>` on every
/// device of the group (shapes checked by the caller).
pub(crate) fn launch<E: CollectiveElem, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    rs: &ReduceScatterMatmul<'_>,
    a: &PeerBuffer<E>,
    b: &PeerBuffer<E>,
    c: &mut PeerBuffer<E>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), MatmulError>
where
    reduce_scatter_matmul_ws<E, BM, BN, STAGES, GRID_W>: HostEntry<Params = Params<E, BM, BN>>,
{
    let Prepared { grid, a_maps, b_maps, tiles: (bt, nt, ks) } = prepare::<E, BM, BN>(rs, a, b, (m, n, k))?;
    let rows = m / rs.group.len();
    let c_maps = c.parts_mut().map(|part| TileMap::<EpiTile<E, BM>>::new_2d_mut(part, rows, n)).collect::<Result<Vec<_>, _>>()?;
    let (recv, ready) = (rs.recv.borrow(), rs.ready.borrow());
    let (recv, ready) = (recv.as_ref().expect("allocated by prepare"), ready.as_ref().expect("allocated by prepare"));
    rs.program
        .kernel::<reduce_scatter_matmul_ws<E, BM, BN, STAGES, GRID_W>>()?
        .launch(grid, |r| (&a_maps[r.index()], &b_maps[r.index()], &c_maps[r.index()], recv.on(r), ready.on(r), bt, nt, ks))?;
    Ok(())
}

/// The parameters of `allreduce_matmul_ws<E, BM, BN, ..>`.
type AllReduceParams<E, const BM: usize, const BN: usize> =
    (TensorMapParam<ATile<E, BM>>, TensorMapParam<BTile<E, BN>>, TensorMapParam<EpiTile<E, BM>>, PeerGmem<E>, PeerGmem<u32>, PeerSemaphores, u32, u32, u32);

/// Launches `allreduce_matmul_ws<E, BM, BN, STAGES, GRID_W>` on every
/// device of the group (shapes checked by the caller; `c` is `M x N` on
/// every device).
pub(crate) fn launch_all_reduce<E: CollectiveElem, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    rs: &ReduceScatterMatmul<'_>,
    a: &PeerBuffer<E>,
    b: &PeerBuffer<E>,
    c: &mut PeerBuffer<E>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), MatmulError>
where
    allreduce_matmul_ws<E, BM, BN, STAGES, GRID_W>: HostEntry<Params = AllReduceParams<E, BM, BN>>,
{
    let Prepared { grid, a_maps, b_maps, tiles: (bt, nt, ks) } = prepare::<E, BM, BN>(rs, a, b, (m, n, k))?;
    // Each device's `C` is written through its own TMA map and, by the
    // other devices, through `c_all`: the maps are over second handles.
    // SAFETY: `c` is borrowed mutably for this call; a tile of `C` is
    // written by its owner only (its map on its own device, `c_all` on
    // the others), within this one group launch.
    let mut c_alias = unsafe { crate::collective::alias_parts(rs.group, c) }?;
    let c_maps = c_alias.iter_mut().map(|part| TileMap::<EpiTile<E, BM>>::new_2d_mut(part, m, n)).collect::<Result<Vec<_>, _>>()?;
    let (recv, ready) = (rs.recv.borrow(), rs.ready.borrow());
    let (recv, ready) = (recv.as_ref().expect("allocated by prepare"), ready.as_ref().expect("allocated by prepare"));
    rs.program
        .kernel::<allreduce_matmul_ws<E, BM, BN, STAGES, GRID_W>>()?
        .launch(grid, |r| (&a_maps[r.index()], &b_maps[r.index()], &c_maps[r.index()], c.on(r), recv.on(r), ready.on(r), bt, nt, ks))?;
    Ok(())
}

fn invalid(problem: String) -> MatmulError {
    MatmulError::Cuda(Error::InvalidArgument { function: "ReduceScatterMatmul::run", problem })
}

/// The reduce-scatter matmul on a group (module docs): the kernels loaded
/// on every device, and each device's receive buffer and tile counters
/// (grown to the largest shape run so far).
pub struct ReduceScatterMatmul<'g> {
    group: &'g DeviceGroup,
    program: GroupProgram,
    /// Per device: `p - 1` slots of partial tiles, one per sender (16-bit
    /// elements, two to a word).
    recv: RefCell<Option<PeerBuffer<u32>>>,
    /// Per device: one counter per tile of its row block, zero between
    /// calls.
    ready: RefCell<Option<PeerBuffer<u32>>>,
    /// An index into [`INSTANCE_NAMES`] that every call uses, if set.
    forced: Cell<Option<usize>>,
}

impl<'g> ReduceScatterMatmul<'g> {
    /// Loads the kernels on every device of `group` (GPUs with peer access,
    /// or emulated devices).
    pub fn new(group: &'g DeviceGroup) -> Result<Self, MatmulError> {
        let program = group.load(&kernel_ops_kernels::DEVICE_CODE)?;
        Ok(ReduceScatterMatmul { group, program, recv: RefCell::new(None), ready: RefCell::new(None), forced: Cell::new(None) })
    }

    /// The instance (an index into [`INSTANCE_NAMES`]) a call of shape `(m,
    /// n, _)` runs: `128 x 128` tiles when `N <= 128`, or when `128 x 256`
    /// tiles would leave SMs idle (fewer tiles per device than SMs) and
    /// `128 x 128` would not; `128 x 256` otherwise.
    pub fn instance_for(&self, (m, n, _): (usize, usize, usize)) -> usize {
        if let Some(i) = self.forced.get() {
            return i;
        }
        let p = self.group.len();
        let sms = (0..p).map(|d| self.group.device(d).sm_count()).min().unwrap_or(1) as usize;
        let block_tiles = m / p / TILE_ROWS;
        let wide = p * block_tiles * n.div_ceil(256);
        let narrow = p * block_tiles * n.div_ceil(128);
        if n <= 128 || (wide < sms && narrow > wide) {
            1
        } else {
            0
        }
    }

    /// Runs every later call with instance `name` (one of
    /// [`INSTANCE_NAMES`]), or picks by shape again with `None`.
    pub fn force_instance(&self, name: Option<&str>) -> Result<(), MatmulError> {
        match name {
            None => self.forced.set(None),
            Some(name) => match INSTANCE_NAMES.iter().position(|x| *x == name) {
                Some(i) => self.forced.set(Some(i)),
                None => return Err(MatmulError::UnknownInstance { name: name.to_string() }),
            },
        }
        Ok(())
    }

    /// `c.part(d)` = row block `d` (rows `d m/p ..`, `m/p x n`) of
    /// `Σ_j a.part(j) · b.part(j)ᵀ`, where `a.part(j)` is `m x k_shard` and
    /// `b.part(j)` is `n x k_shard` (row-major, f16 or bf16 alike) on device
    /// `j`; the sum in f32, of the other devices' partials each rounded to
    /// the element type (module
    /// docs). Asynchronous on GPUs (synchronize the group before reading
    /// `c`).
    ///
    /// Errors, each naming the rule, the values and the fix: buffers not
    /// made with this group; an empty dimension, a buffer length that is
    /// not its shape's, or a `k_shard` or `n` that is not a multiple of 8
    /// (those of [`check_problem`]); `m` not divisible by the device count;
    /// a row block `m / p` that is not a multiple of [`TILE_ROWS`].
    pub fn run<E: CollectiveElem>(&self, a: &PeerBuffer<E>, b: &PeerBuffer<E>, c: &mut PeerBuffer<E>, (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        let p = self.group.len();
        self.check(a, b, c, (m, n, k), "M/p x N", m / p.max(1))?;
        let r = (E::REDUCE_SCATTER[self.instance_for((m, n, k))])(self, a, b, c, (m, n, k));
        self.after(r)
    }

    /// The all-reduce matmul: `c.part(d)` = all of `Σ_j a.part(j) ·
    /// b.part(j)ᵀ` (`m x n`) on every device `d`, the operands as
    /// [`ReduceScatterMatmul::run`]'s. One kernel per device
    /// (`kernel_ops_kernels::reduce_scatter::allreduce_matmul_ws`, `128 x
    /// 128` tiles): the reduce-scatter's kernel, whose owner of each summed
    /// tile also writes it into every other device's `c` (16-byte stores
    /// over NVLink from the epilogue's SMEM sub-tiles), so the all-reduce
    /// costs no launch of its own: for small outputs, where a matmul then
    /// an all-reduce pays a second launch and its latency. Errors as
    /// `run`'s, `c` holding `m x n` on every device.
    pub fn run_all_reduce<E: CollectiveElem>(&self, a: &PeerBuffer<E>, b: &PeerBuffer<E>, c: &mut PeerBuffer<E>, (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        self.check(a, b, c, (m, n, k), "M x N", m)?;
        let r = (E::ALL_REDUCE)(self, a, b, c, (m, n, k));
        self.after(r)
    }

    /// The checks of `run` and `run_all_reduce`: `c` holds `c_rows x n`
    /// (`c_shape` names it).
    fn check<E: CollectiveElem>(&self, a: &PeerBuffer<E>, b: &PeerBuffer<E>, c: &PeerBuffer<E>, (m, n, k): (usize, usize, usize), c_shape: &str, c_rows: usize) -> Result<(), MatmulError> {
        let p = self.group.len();
        for (what, devices) in [("a", a.devices()), ("b", b.devices()), ("c", c.devices())] {
            if devices != p {
                return Err(invalid(format!("{what} has parts on {devices} devices; the group has {p}: make the buffers with this group")));
            }
        }
        check_problem((m, k), (n, k), (a.len(), b.len(), m * n))?;
        if m % p != 0 {
            return Err(invalid(format!(
                "m = {m} rows cannot be split evenly over {p} devices (device d receives rows d m/p .. (d + 1) m/p): \
                 make m a multiple of {p} (and of {} for the kernel's {TILE_ROWS}-row tiles), padding A with zero rows",
                p * TILE_ROWS
            )));
        }
        let rows = m / p;
        if c.len() != c_rows * n {
            return Err(MatmulError::BufferLength {
                name: "c",
                shape: format!("{c_shape} = {c_rows} x {n} (on each of the {p} devices)"),
                want: c_rows * n,
                got: c.len(),
                dtype: E::NAME,
            });
        }
        if rows % TILE_ROWS != 0 {
            return Err(invalid(format!(
                "each device's row block m / p = {m} / {p} = {rows} rows is not a multiple of the kernel's {TILE_ROWS} tile rows \
                 (a tile's partials go to one owner): make m a multiple of {}, padding A with zero rows",
                p * TILE_ROWS
            )));
        }
        Ok(())
    }

    /// A launch's result; after a failure, fresh counters for the next
    /// call (a failed launch may have left counts behind).
    fn after(&self, r: Result<(), MatmulError>) -> Result<(), MatmulError> {
        if r.is_err() {
            self.ready.replace(None);
        }
        r
    }

    /// Grows the receive buffers to `recv` words and the counters to
    /// `counters` words per device (zeroed when new).
    fn ensure_buffers(&self, recv: usize, counters: usize) -> Result<(), MatmulError> {
        if self.recv.borrow().as_ref().is_none_or(|x| x.len() < recv) {
            self.recv.replace(Some(self.group.zeros::<u32>(recv.max(1))?));
        }
        if self.ready.borrow().as_ref().is_none_or(|x| x.len() < counters) {
            self.ready.replace(Some(self.group.zeros::<u32>(counters.max(1))?));
        }
        Ok(())
    }
}
