//! A collective matmul on several devices of one host: the all-gather of
//! `A` (row-sharded, one `M x K` shard per device) overlapped with
//! `A · Bᵀ`, where each device holds its own `B` (`N x K`, e.g. a column
//! block of the weights).
//!
//! The schedule is a ring: at step `s` device `d` multiplies the shard of
//! device `d - s` (its own at step 0, the one received at step `s - 1`
//! after that) with [`Matmul`] on its compute stream, while its copy
//! engine forwards that shard to device `d + 1` over NVLink
//! (`cuMemcpyPeerAsync` on a second stream: no SM is taken from the
//! matmul). Step `s + 1` on device `d + 1` waits for that copy (an event),
//! so the copies of step `s` hide under the matmuls of step `s`: the
//! host-orchestrated form ([`AllGatherMatmul::run`], as PyTorch's async
//! tensor parallelism does), one matmul launch per shard.
//!
//! [`AllGatherMatmul::run_persistent`] runs the same ring of copies under
//! **one persistent matmul per device**
//! ([`kernel_ops_kernels::collective::allgather_matmul_ws`]) over the
//! whole gathered `A`: after each incoming copy the receiving device's copy
//! stream sets the shard's arrival flag in its own memory (a 4-byte
//! copy-engine copy of the call's epoch, ordered after the shard's copy by
//! an event), and the kernel's producer visits the shards in arrival
//! order, spinning on each flag before its first TMA load from that shard.
//! No SM copies, no launch or tail per shard.
//!
//! [`AllGatherMatmul::run_forwarding`] drops the copy engines: one
//! persistent kernel per device
//! ([`kernel_ops_kernels::collective::allgather_matmul_fwd`]) whose CTAs
//! store the A tiles they load to the next device by TMA and signal each
//! row there (Pallas's collective matmul); one group launch.
//!
//! On emulated devices `run` and `run_persistent` run with host copies
//! first (correctness only: the kernels find every flag already set);
//! `run_forwarding` runs as on GPUs, under the race detector.
use crate::matmul::{check_problem, Matmul, MatmulElem, MatmulError};
use crate::Ctas;
use kernel_host::cudarc::driver::{sys, CudaEvent, CudaStream};
use kernel_host::group::{DeviceGroup, PeerBuffer};
use kernel_host::{Buffer, Error, Gpu, TileMap};
use kernel_device::gmem::GmemRef;
use kernel_device::launch::HostEntry;
use kernel_device::tma::TensorMapParam;
use crate::reduce_scatter::launch as rs_launch;
use kernel_device::peer::PeerCounters;
use kernel_device::{bf16, f16};
use kernel_ops_kernels::collective::{allgather_matmul_fwd, allgather_matmul_ws};
use kernel_ops_kernels::gemm::{ATile, BTile, EpiTile};
use kernel_ops_kernels::matmul::TK;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// Launches device `d`'s kernel of one instance on its stream
/// (`AllGatherMatmul`, `d`, `a`, `b`, `c`, `(m, n, k)`, `epoch`).
#[doc(hidden)]
pub type PersistentLaunch<E> = fn(&AllGatherMatmul<'_>, usize, &Buffer<E>, &Buffer<E>, &mut Buffer<E>, (usize, usize, usize), u32) -> Result<(), MatmulError>;

/// `(name, BM)` of each [`allgather_matmul_ws`] instance `run_persistent`
/// picks from (their launches: [`CollectiveElem::PERSISTENT`], in this
/// order); [`AllGatherMatmul::tune_persistent`] times them.
pub const PERSISTENT_INSTANCES: &[(&str, usize)] = &[("ws 128x256 s4 w8", 128), ("ws 256x128 s3 w8", 256)];

/// The tile rows of [`AllGatherMatmul::run_forwarding`]'s kernel: shard
/// rows must be a multiple.
pub const FORWARDING_TILE_ROWS: usize = 128;

/// The tile columns of [`AllGatherMatmul::run_forwarding`]'s kernel.
const FORWARDING_TILE_COLS: usize = 256;

/// The element types of the collective matmuls
/// ([`AllGatherMatmul::run_forwarding`],
/// [`crate::reduce_scatter::ReduceScatterMatmul::run`]): f16 and bf16 (`A`,
/// `B` and `C` alike, f32 accumulation). The kernels are generic over it.
pub trait CollectiveElem: MatmulElem {
    /// `run_forwarding`'s launch on this type.
    #[doc(hidden)]
    const FORWARDING: ForwardingLaunch<Self>;
    /// The reduce-scatter matmul's launches on this type
    /// ([`crate::reduce_scatter::INSTANCE_NAMES`] order).
    #[doc(hidden)]
    const REDUCE_SCATTER: [crate::reduce_scatter::Launch<Self>; 2];
    /// The all-reduce matmul's launch on this type.
    #[doc(hidden)]
    const ALL_REDUCE: crate::reduce_scatter::Launch<Self>;
    /// `run_persistent`'s launches on this type ([`PERSISTENT_INSTANCES`]
    /// order).
    #[doc(hidden)]
    const PERSISTENT: [PersistentLaunch<Self>; 2];
}

impl CollectiveElem for f16 {
    const ALL_REDUCE: crate::reduce_scatter::Launch<Self> = crate::reduce_scatter::launch_all_reduce::<Self, 128, 128, 4, 8>;
    const PERSISTENT: [PersistentLaunch<Self>; 2] = [launch_persistent::<Self, 128, 256, 4, 8>, launch_persistent::<Self, 256, 128, 3, 8>];
    const FORWARDING: ForwardingLaunch<Self> = launch_forwarding::<Self>;
    const REDUCE_SCATTER: [crate::reduce_scatter::Launch<Self>; 2] = [rs_launch::<Self, 128, 256, 4, 8>, rs_launch::<Self, 128, 128, 4, 8>];
}

impl CollectiveElem for bf16 {
    const ALL_REDUCE: crate::reduce_scatter::Launch<Self> = crate::reduce_scatter::launch_all_reduce::<Self, 128, 128, 4, 8>;
    const PERSISTENT: [PersistentLaunch<Self>; 2] = [launch_persistent::<Self, 128, 256, 4, 8>, launch_persistent::<Self, 256, 128, 3, 8>];
    const FORWARDING: ForwardingLaunch<Self> = launch_forwarding::<Self>;
    const REDUCE_SCATTER: [crate::reduce_scatter::Launch<Self>; 2] = [rs_launch::<Self, 128, 256, 4, 8>, rs_launch::<Self, 128, 128, 4, 8>];
}

/// The group launch of `allgather_matmul_fwd<E, ..>` (shapes checked and the
/// counters made by the caller): `AllGatherMatmul`, `a`, `b`, `c`, `(m, n,
/// k)`, the counters, the value the counters reach in this call.
#[doc(hidden)]
pub type ForwardingLaunch<E> =
    fn(&AllGatherMatmul<'_>, &mut PeerBuffer<E>, &PeerBuffer<E>, &mut PeerBuffer<E>, (usize, usize, usize), &PeerBuffer<u32>, u32) -> Result<(), MatmulError>;

/// The parameters of `allgather_matmul_fwd<E, ..>`.
type ForwardingParams<E> = (
    TensorMapParam<ATile<E, FORWARDING_TILE_ROWS>>,
    TensorMapParam<ATile<E, FORWARDING_TILE_ROWS>>,
    TensorMapParam<BTile<E, FORWARDING_TILE_COLS>>,
    TensorMapParam<EpiTile<E, FORWARDING_TILE_ROWS>>,
    PeerCounters,
    u32,
    u32,
    u32,
    u32,
);

fn launch_forwarding<E: CollectiveElem>(
    ag: &AllGatherMatmul<'_>,
    a: &mut PeerBuffer<E>,
    b: &PeerBuffer<E>,
    c: &mut PeerBuffer<E>,
    (m, n, k): (usize, usize, usize),
    arrived: &PeerBuffer<u32>,
    target: u32,
) -> Result<(), MatmulError>
where
    allgather_matmul_fwd<E, FORWARDING_TILE_ROWS, FORWARDING_TILE_COLS, 4, 8>: HostEntry<Params = ForwardingParams<E>>,
{
    const BM: usize = FORWARDING_TILE_ROWS;
    const BN: usize = FORWARDING_TILE_COLS;
    let p = ag.group.len();
    let (mt, nt, ks) = ((p * m / BM) as u32, n.div_ceil(BN) as u32, k.div_ceil(TK) as u32);
    // Device d's kernel reads its own `A` through a read map and stores
    // into the next device's through that device's write map. A part
    // cannot be borrowed for both at once, so each read map is over a
    // second handle on the part, used by its own device only.
    // SAFETY: `a` is borrowed mutably for this call; each handle is read
    // by its owner's kernel only, ordered with every other use by the
    // group launch's barriers.
    let aliases = unsafe { alias_parts(ag.group, a) }?;
    let a_maps = aliases.iter().map(|buf| TileMap::<ATile<E, BM>>::new_2d(buf, p * m, k)).collect::<Result<Vec<_>, _>>()?;
    let store_maps = a.parts_mut().map(|part| TileMap::<ATile<E, BM>>::new_2d_mut(part, p * m, k)).collect::<Result<Vec<_>, _>>()?;
    let b_maps = (0..p).map(|d| TileMap::<BTile<E, BN>>::new_2d(b.part(d), n, k)).collect::<Result<Vec<_>, _>>()?;
    let c_maps = c.parts_mut().map(|part| TileMap::<EpiTile<E, BM>>::new_2d_mut(part, p * m, n)).collect::<Result<Vec<_>, _>>()?;
    // The same grid on every device, one CTA per SM at most (every CTA
    // resident: the kernels wait for one another's rows).
    let sms = (0..p).map(|d| ag.group.device(d).sm_count()).min().unwrap_or(1);
    let grid = Ctas::EvenWaves.grid(mt * nt, sms).max(1);
    ag.group
        .load(&kernel_ops_kernels::DEVICE_CODE)?
        .kernel::<allgather_matmul_fwd<E, BM, BN, 4, 8>>()?
        .launch(grid, |r| {
            let d = r.index();
            (&a_maps[d], &store_maps[(d + 1) % p], &b_maps[d], &c_maps[d], arrived.on(r), target, mt, nt, ks)
        })?;
    Ok(())
}


/// The parameters of `allgather_matmul_ws<E, BM, BN, ..>`.
type Params<E, const BM: usize, const BN: usize> = (TensorMapParam<ATile<E, BM>>, TensorMapParam<BTile<E, BN>>, TensorMapParam<EpiTile<E, BM>>, GmemRef<u32>, u32, u32, u32, u32, u32, u32);

/// Launches device `d`'s `allgather_matmul_ws<E, BM, BN, STAGES, GRID_W>` on its stream.
fn launch_persistent<E: CollectiveElem, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    ag: &AllGatherMatmul<'_>,
    d: usize,
    a: &Buffer<E>,
    b: &Buffer<E>,
    c: &mut Buffer<E>,
    (m, n, k): (usize, usize, usize),
    epoch: u32,
) -> Result<(), MatmulError>
where
    allgather_matmul_ws<E, BM, BN, STAGES, GRID_W>: HostEntry<Params = Params<E, BM, BN>>,
{
    let p = ag.group.len();
    let sms = ag.group.device(d).sm_count();
    let prog = ag.matmuls[d].program();
    let (mt, nt, ks) = ((p * m / BM) as u32, n.div_ceil(BN) as u32, k.div_ceil(TK) as u32);
    // One SM stays free: the kernels spin on flags that driver-queued
    // copies set, and a device-to-device copy may run as a kernel on an
    // SM. With every SM held by a spinning CTA, the full-size 4-GPU run
    // hung; with one free, it completed.
    let grid = Ctas::EvenWaves.grid(mt * nt, sms.saturating_sub(1)).max(1);
    let am = TileMap::<ATile<E, BM>>::new_2d(a, p * m, k)?;
    let bmap = TileMap::<BTile<E, BN>>::new_2d(b, n, k)?;
    let cm = TileMap::<EpiTile<E, BM>>::new_2d_mut(c, p * m, n)?;
    let arrived = ag.arrived.borrow();
    let args = (&am, &bmap, &cm, arrived.part(d), epoch, d as u32, p as u32, mt, nt, ks);
    prog.kernel::<allgather_matmul_ws<E, BM, BN, STAGES, GRID_W>>()?.launch(grid, args)?;
    Ok(())
}

/// A second handle on each part of `buf` (device `d`'s on device `d`), for
/// a tensor map over a part that a launch also passes as a `PeerGmem` or
/// as another map.
///
/// # Safety
/// The handles must not outlive `buf`, and the uses of each part through
/// its handle and through `buf` must be ordered (within one group launch:
/// disjoint elements, or one kernel's own accesses).
pub(crate) unsafe fn alias_parts<E>(group: &DeviceGroup, buf: &PeerBuffer<E>) -> Result<Vec<Buffer<E>>, MatmulError> {
    (0..group.len())
        .map(|d| {
            let (dev, part) = (group.device(d), buf.part(d));
            // SAFETY: the part's own memory on its own device, alive while
            // `buf` is (the caller's contract), never freed through this
            // handle.
            unsafe {
                if dev.is_gpu() {
                    Buffer::<E>::borrow_gpu(dev, part.address(), part.len())
                } else {
                    Buffer::<E>::borrow_host(dev, part.address() as *mut E, part.len())
                }
            }
            .map_err(MatmulError::from)
        })
        .collect()
}

/// The all-gather matmul on a group: one [`Matmul`] and one copy stream per
/// device.
pub struct AllGatherMatmul<'g> {
    group: &'g DeviceGroup,
    matmuls: Vec<Matmul<'g>>,
    copy_streams: Vec<Arc<CudaStream>>,
    /// Per device, one arrival flag per shard (`run_persistent`).
    arrived: RefCell<PeerBuffer<u32>>,
    /// The value the flags of the next `run_persistent` take.
    epoch: Cell<u32>,
    /// Per device, one u32 holding the current epoch: the source of the
    /// 4-byte copy that sets a flag.
    epoch_src: RefCell<PeerBuffer<u32>>,
    /// Index into [`PERSISTENT_INSTANCES`].
    persistent: Cell<usize>,
    /// Per device, one arrival counter per tile row of the gathered `A`
    /// (`run_forwarding`), made anew whenever a call's tile rows or
    /// senders per row differ from the previous call's.
    fwd_arrived: RefCell<Option<PeerBuffer<u32>>>,
    /// `(tile rows, senders per row, count)` of the last `run_forwarding`:
    /// its shape, and the value its counters reached.
    fwd_state: Cell<(u32, u32, u32)>,
}

fn invalid(problem: String) -> MatmulError {
    MatmulError::Cuda(Error::InvalidArgument { function: "AllGatherMatmul::run", problem })
}

fn cuda(call: &'static str) -> impl FnOnce(kernel_host::cudarc::driver::DriverError) -> MatmulError {
    move |e| MatmulError::Cuda(Error::Cuda { call, cuda: kernel_host::CudaError::from_driver(e) })
}

/// A driver call's result as this module's error.
fn driver(call: &'static str, r: sys::CUresult) -> Result<(), MatmulError> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(MatmulError::Cuda(Error::Cuda { call, cuda: kernel_host::CudaError::from_result(r) }))
    }
}

impl<'g> AllGatherMatmul<'g> {
    /// Loads the matmul on every device of `group` and makes a copy stream
    /// per GPU.
    pub fn new(group: &'g DeviceGroup) -> Result<Self, MatmulError> {
        let matmuls = (0..group.len()).map(|d| Matmul::new(group.device(d))).collect::<Result<Vec<_>, _>>()?;
        let copy_streams = (0..group.len())
            .filter_map(|d| group.device(d).as_gpu())
            .map(|g| g.context().new_stream().map_err(cuda("cuStreamCreate")))
            .collect::<Result<Vec<_>, _>>()?;
        let arrived = RefCell::new(group.zeros::<u32>(group.len())?);
        let epoch_src = RefCell::new(group.zeros::<u32>(1)?);
        Ok(AllGatherMatmul { group, matmuls, copy_streams, arrived, epoch: Cell::new(0), epoch_src, persistent: Cell::new(0), fwd_arrived: RefCell::new(None), fwd_state: Cell::new((0, 0, 0)) })
    }

    /// Autotunes each device's matmul for the `m x n x k` steps (the
    /// cached winner when there is one; [`Matmul::tune`]); GPU only.
    pub fn tune(&self, (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        for mm in &self.matmuls {
            mm.tune(m, n, k, false, 5, 20)?;
        }
        Ok(())
    }

    /// Gathers `a` and multiplies: on entry `a[j].part(j)` holds device
    /// `j`'s shard (`m x k`, row-major f16 or bf16); on return `a[j].part(d)`
    /// holds it on every device `d`, and `c[j].part(d)` = shard `j` ·
    /// `b.part(d)`ᵀ (`m x n`): device `d`'s `C` in row blocks, block `j`
    /// for the rows of shard `j`. Asynchronous on GPUs (synchronize the
    /// group before reading `c`). Errors name the buffer and the shape.
    pub fn run<E: MatmulElem>(&self, a: &mut [PeerBuffer<E>], b: &PeerBuffer<E>, c: &mut [PeerBuffer<E>], (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        let p = self.group.len();
        if a.len() != p || c.len() != p {
            return Err(invalid(format!(
                "{} A slots and {} C blocks for {p} devices: give one of each per device (shard j in slot j)",
                a.len(),
                c.len()
            )));
        }
        for (what, bufs) in [("a", &*a), ("c", &*c)] {
            if let Some(j) = bufs.iter().position(|x| x.devices() != p) {
                return Err(invalid(format!("{what}[{j}] has parts on {} devices; the group has {p}", bufs[j].devices())));
            }
        }
        if b.devices() != p {
            return Err(invalid(format!("b has parts on {} devices; the group has {p}", b.devices())));
        }
        check_problem((m, k), (n, k), (a[0].len(), b.len(), c[0].len()))?;
        if let Some(j) = (0..p).find(|&j| a[j].len() != a[0].len() || c[j].len() != c[0].len()) {
            return Err(invalid(format!("slot {j}: every A slot holds m x k and every C block m x n elements")));
        }
        if self.group.is_gpu() {
            self.run_gpu(a, b, c, (m, n, k))
        } else {
            self.run_emulated(a, b, c, (m, n, k))
        }
    }

    fn run_emulated<E: MatmulElem>(&self, a: &mut [PeerBuffer<E>], b: &PeerBuffer<E>, c: &mut [PeerBuffer<E>], (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        let p = self.group.len();
        for s in 0..p {
            for d in 0..p {
                let j = (d + p - s) % p;
                self.matmuls[d].matmul(a[j].part(d), (m, k), b.part(d), (n, k), c[j].part_mut(d))?;
                if s + 1 < p {
                    let next = (d + 1) % p;
                    let shard = self.group.device(d).download(a[j].part(d))?;
                    self.group.device(next).write(a[j].part_mut(next), &shard)?;
                }
            }
        }
        Ok(())
    }

    /// The group's GPUs, after ordering everything queued before on every
    /// device (uploads, earlier launches, a previous call's kernels still
    /// reading `A`) before each copy stream.
    fn begin_gpu(&self) -> Result<Vec<&Gpu>, MatmulError> {
        let gpus: Vec<&Gpu> = (0..self.group.len()).map(|d| self.group.device(d).as_gpu().expect("a GPU group")).collect();
        self.group.barrier()?;
        for (g, cs) in gpus.iter().zip(&self.copy_streams) {
            cs.join(g.stream()).map_err(cuda("cuStreamWaitEvent"))?;
        }
        Ok(gpus)
    }

    /// Later work on each device (downloads, the next call) follows its
    /// copies and every device's work.
    fn end_gpu(&self, gpus: &[&Gpu]) -> Result<(), MatmulError> {
        for (g, cs) in gpus.iter().zip(&self.copy_streams) {
            g.stream().join(cs).map_err(cuda("cuStreamWaitEvent"))?;
        }
        self.group.barrier()?;
        Ok(())
    }

    /// Queues `bytes` from `src` on device `d` to `dst` on device `d + 1`
    /// on `d`'s copy stream (a copy engine over NVLink), and returns the
    /// event of its completion.
    fn copy_to_next(&self, gpus: &[&Gpu], d: usize, src: u64, dst: u64, bytes: usize) -> Result<CudaEvent, MatmulError> {
        let next = (d + 1) % gpus.len();
        let cs = &self.copy_streams[d];
        // SAFETY: the callers pass ranges inside allocations of checked
        // lengths, on live contexts with peer access; the stream is d's.
        let r = unsafe { sys::cuMemcpyPeerAsync(dst, gpus[next].context().cu_ctx(), src, gpus[d].context().cu_ctx(), bytes, cs.cu_stream()) };
        driver("cuMemcpyPeerAsync", r)?;
        cs.record_event(None).map_err(cuda("cuEventRecord"))
    }

    fn run_gpu<E: MatmulElem>(&self, a: &mut [PeerBuffer<E>], b: &PeerBuffer<E>, c: &mut [PeerBuffer<E>], (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        let p = self.group.len();
        let gpus = self.begin_gpu()?;
        let bytes = m * k * std::mem::size_of::<E>();
        // sent[d]: the event of device d's copy at the previous step.
        let mut sent: Vec<Option<CudaEvent>> = (0..p).map(|_| None).collect();
        for s in 0..p {
            let mut now: Vec<Option<CudaEvent>> = (0..p).map(|_| None).collect();
            for d in 0..p {
                let j = (d + p - s) % p;
                if s > 0 {
                    // Shard j came from device d - 1 at step s - 1.
                    let prev = (d + p - 1) % p;
                    let ev = sent[prev].as_ref().expect("the previous step's copy");
                    gpus[d].stream().wait(ev).map_err(cuda("cuStreamWaitEvent"))?;
                    self.copy_streams[d].wait(ev).map_err(cuda("cuStreamWaitEvent"))?;
                }
                self.matmuls[d].matmul(a[j].part(d), (m, k), b.part(d), (n, k), c[j].part_mut(d))?;
                if s + 1 < p {
                    let next = (d + 1) % p;
                    now[d] = Some(self.copy_to_next(&gpus, d, a[j].part(d).address(), a[j].part(next).address(), bytes)?);
                }
            }
            sent = now;
        }
        self.end_gpu(&gpus)
    }

    /// Gathers `a` and multiplies with one persistent kernel per device:
    /// `a.part(d)` holds `p x m` rows of `k` (shard `j` at rows `j m`), of
    /// which device `d`'s own shard (rows `d m`) is filled on entry; on
    /// return every device holds all shards, and `c.part(d)` (`p m x n`) =
    /// `a · b.part(d)ᵀ`, the layout an all-gather followed by one matmul
    /// gives. `m` must be a multiple of the kernel's tile rows (128, or
    /// 256 for the `256x128` instance). Asynchronous on GPUs (synchronize
    /// the group before reading `c`). Errors name the buffer and the shape.
    pub fn run_persistent<E: CollectiveElem>(&self, a: &mut PeerBuffer<E>, b: &PeerBuffer<E>, c: &mut PeerBuffer<E>, (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        let p = self.group.len();
        for (what, devices) in [("a", a.devices()), ("b", b.devices()), ("c", c.devices())] {
            if devices != p {
                return Err(invalid(format!("{what} has parts on {devices} devices; the group has {p}")));
            }
        }
        check_problem((p * m, k), (n, k), (a.len(), b.len(), c.len()))?;
        let (name, bm) = PERSISTENT_INSTANCES[self.persistent.get()];
        if m % bm != 0 {
            return Err(invalid(format!(
                "run_persistent: shard rows m = {m} are not a multiple of the kernel's {bm} tile rows ({name}); shards must align to tiles (use AllGatherMatmul::run for other m)"
            )));
        }
        let epoch = self.epoch.get().wrapping_add(1).max(1);
        self.epoch.set(epoch);
        if self.group.is_gpu() {
            self.run_persistent_gpu(a, b, c, (m, n, k), epoch)
        } else {
            // Host copies first (every shard to every device), then the
            // kernels, which find every flag set.
            let mut full = Vec::with_capacity(p * m * k);
            for j in 0..p {
                full.extend_from_slice(&self.group.device(j).download(a.part(j))?[j * m * k..(j + 1) * m * k]);
            }
            for (d, part) in a.parts_mut().enumerate() {
                self.group.device(d).write(part, &full)?;
            }
            let mut arrived = self.arrived.borrow_mut();
            for (d, part) in arrived.parts_mut().enumerate() {
                self.group.device(d).write(part, &vec![epoch; p])?;
            }
            drop(arrived);
            for d in 0..p {
                self.launch_persistent(d, a.part(d), b.part(d), c.part_mut(d), (m, n, k), epoch)?;
            }
            Ok(())
        }
    }

    /// Gathers `a` and multiplies with one persistent kernel per device
    /// that also forwards the shards itself
    /// ([`kernel_ops_kernels::collective::allgather_matmul_fwd`], Pallas's
    /// collective matmul): the buffers and the result as
    /// [`AllGatherMatmul::run_persistent`]'s (`m` a multiple of
    /// [`FORWARDING_TILE_ROWS`]), but no copy engine and no host flag. The
    /// CTAs that compute the tiles of a row of `A` that the next device
    /// lacks store the row's A tiles there by TMA as they pass through
    /// their pipelines (a share of the K steps each), then add 1 to the
    /// row's arrival counter there (a system-scope release); a kernel reads
    /// a row of another device's shard once its own counter says every
    /// share has arrived. The kernels of the
    /// group run at once (one group launch: every device's stream waits
    /// for the others' earlier work, and later work for every kernel).
    /// Asynchronous on GPUs (synchronize the group before reading `c`).
    /// Errors name the buffer and the shape.
    pub fn run_forwarding<E: CollectiveElem>(&self, a: &mut PeerBuffer<E>, b: &PeerBuffer<E>, c: &mut PeerBuffer<E>, (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        const BM: usize = FORWARDING_TILE_ROWS;
        const BN: usize = FORWARDING_TILE_COLS;
        let p = self.group.len();
        for (what, devices) in [("a", a.devices()), ("b", b.devices()), ("c", c.devices())] {
            if devices != p {
                return Err(invalid(format!("{what} has parts on {devices} devices; the group has {p}")));
            }
        }
        check_problem((p * m, k), (n, k), (a.len(), b.len(), c.len()))?;
        if m % BM != 0 {
            return Err(invalid(format!(
                "run_forwarding: shard rows m = {m} are not a multiple of the kernel's {BM} tile rows; shards must align to tiles (use AllGatherMatmul::run for other m)"
            )));
        }
        let (mt, nt, ks) = ((p * m / BM) as u32, n.div_ceil(BN) as u32, k.div_ceil(TK) as u32);
        // Every counter of a call's rows grows by the call's senders per
        // row (`min(n_tiles, k_steps)`, one add each), so a counter's
        // value says which call it has reached only while each call has
        // the rows and senders of the one before: on any change, fresh
        // zeroed counters. (The old ones are freed in stream order, after
        // the kernels that use them.)
        let senders = nt.min(ks);
        let (rows, prev_senders, count) = self.fwd_state.get();
        let mut fwd = self.fwd_arrived.borrow_mut();
        let count = if fwd.is_none() || (rows, prev_senders) != (mt, senders) {
            *fwd = Some(self.group.zeros::<u32>(mt as usize)?);
            0
        } else {
            count
        };
        let arrived = fwd.as_ref().expect("made above");
        let target = count.wrapping_add(senders);
        self.fwd_state.set((mt, senders, target));
        let r = (E::FORWARDING)(self, a, b, c, (m, n, k), arrived, target);
        if r.is_err() {
            // A failed launch may have left counts behind.
            *fwd = None;
        }
        r
    }

    /// Launches device `d`'s kernel on its stream.
    fn launch_persistent<E: CollectiveElem>(&self, d: usize, a: &Buffer<E>, b: &Buffer<E>, c: &mut Buffer<E>, shape: (usize, usize, usize), epoch: u32) -> Result<(), MatmulError> {
        (E::PERSISTENT[self.persistent.get()])(self, d, a, b, c, shape, epoch)
    }

    fn run_persistent_gpu<E: CollectiveElem>(&self, a: &mut PeerBuffer<E>, b: &PeerBuffer<E>, c: &mut PeerBuffer<E>, (m, n, k): (usize, usize, usize), epoch: u32) -> Result<(), MatmulError> {
        let p = self.group.len();
        // This call's epoch in each device's epoch word (on its stream).
        for (d, part) in self.epoch_src.borrow_mut().parts_mut().enumerate() {
            self.group.device(d).write(part, &[epoch])?;
        }
        let gpus = self.begin_gpu()?;
        let bytes = m * k * std::mem::size_of::<E>();
        let mut sent: Vec<Option<CudaEvent>> = (0..p).map(|_| None).collect();
        for s in 0..p {
            let mut now: Vec<Option<CudaEvent>> = (0..p).map(|_| None).collect();
            for d in 0..p {
                let j = (d + p - s) % p;
                let cs = &self.copy_streams[d];
                if s > 0 {
                    // Shard j arrived from device d - 1 at step s - 1: flag it.
                    let prev = (d + p - 1) % p;
                    cs.wait(sent[prev].as_ref().expect("the previous step's copy")).map_err(cuda("cuStreamWaitEvent"))?;
                    let flag = self.arrived.borrow().part(d).address() + (4 * j) as u64;
                    let src = self.epoch_src.borrow().part(d).address();
                    // SAFETY: 4 bytes from device d's epoch word to its
                    // flag j (both inside their allocations), on d's copy
                    // stream after the incoming copy. (A copy, not
                    // cuStreamWriteValue32, which returned
                    // CUDA_ERROR_INVALID_VALUE on this memory, from the
                    // stream-ordered pool, on H100 with driver 580.)
                    driver("cuMemcpyDtoDAsync (arrival flag)", unsafe { sys::cuMemcpyDtoDAsync_v2(flag, src, 4, cs.cu_stream()) })?;
                }
                if s + 1 < p {
                    let next = (d + 1) % p;
                    let off = (j * m * k * std::mem::size_of::<E>()) as u64;
                    // Rows j of both `p m x k` allocations (checked lengths).
                    now[d] = Some(self.copy_to_next(&gpus, d, a.part(d).address() + off, a.part(next).address() + off, bytes)?);
                }
            }
            sent = now;
        }
        // The kernels last: every copy and flag write is queued (an error
        // there returns before any kernel could wait forever on a flag),
        // and the kernels wait on the flags, not on the copy streams.
        for d in 0..p {
            self.launch_persistent(d, a.part(d), b.part(d), c.part_mut(d), (m, n, k), epoch)?;
        }
        self.end_gpu(&gpus)
    }

    /// Times each of [`PERSISTENT_INSTANCES`] on the whole collective at
    /// this shape (scratch buffers, iid N(0, 1); 3 warm-up runs, then the
    /// median of 10 host-timed runs with the group synchronized) and keeps
    /// the fastest for `run_persistent`; returns `(name, ms)` for each.
    /// GPU only.
    pub fn tune_persistent<E: CollectiveElem>(&self, (m, n, k): (usize, usize, usize)) -> Result<Vec<(&'static str, f64)>, MatmulError> {
        if !self.group.is_gpu() {
            return Err(MatmulError::Cuda(Error::GpuOnly { what: "AllGatherMatmul::tune_persistent (it times the kernels)" }));
        }
        let p = self.group.len();
        let mut a = self.group.upload(&(0..p).map(|d| E::randn(p * m * k, 50 + d as u64)).collect::<Vec<_>>())?;
        let b = self.group.upload(&(0..p).map(|d| E::randn(n * k, 60 + d as u64)).collect::<Vec<_>>())?;
        let mut c = self.group.zeros::<E>(p * m * n)?;
        let mut out = Vec::new();
        for (i, (name, bm)) in PERSISTENT_INSTANCES.iter().enumerate() {
            if m % bm != 0 {
                continue;
            }
            self.persistent.set(i);
            let mut times = Vec::new();
            for it in 0..13 {
                let t0 = std::time::Instant::now();
                self.run_persistent(&mut a, &b, &mut c, (m, n, k))?;
                self.group.synchronize()?;
                if it >= 3 {
                    times.push(t0.elapsed().as_secs_f64() * 1e3);
                }
            }
            times.sort_by(f64::total_cmp);
            out.push((*name, times[times.len() / 2]));
        }
        let best = out.iter().min_by(|x, y| x.1.total_cmp(&y.1)).map(|b| b.0);
        self.persistent.set(PERSISTENT_INSTANCES.iter().position(|x| Some(x.0) == best).unwrap_or(0));
        Ok(out)
    }
}
