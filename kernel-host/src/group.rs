//! Several devices of one host: a [`DeviceGroup`] of GPUs with peer access
//! between every pair (NVLink), or of emulated devices in one emulator run,
//! through one API.
//!
//! A [`PeerBuffer`] is one buffer per device, all of one length; a kernel
//! parameter `PeerGmem<T>` (`kernel_device::peer`) takes
//! [`PeerBuffer::on`]`(rank)`: every device's address of it, the launching
//! device's rank and the device count, so the kernel reads and writes any
//! device's part. `PeerSemaphores` takes the same from a zeroed
//! `PeerBuffer<u32>`. [`GroupLauncher::launch`] starts the kernel on every
//! device together (they may wait on each other through the semaphores):
//! on GPUs each device's launch is queued after all work queued on every
//! device of the group, and later work on any device waits for every
//! device's kernel; on the emulator the devices' threads run in one run,
//! under one scheduler and one race detector, so an unsynchronized remote
//! write and local read is a reported race.
//!
//! ```
//! use kernel_device::prelude::*;
//! use kernel_device::peer::{PeerGmem, PeerSemaphores};
//! use kernel_host::group::DeviceGroup;
//!
//! /// Device `r` writes `r + 1` into slot `r` of every device's `out`,
//! /// signals, and waits for every device's signal.
//! #[kernel(block = threads(32))]
//! pub fn ranks(out: PeerGmem<u32>, sems: PeerSemaphores) {
//!     let (me, n) = (out.rank(), out.count());
//!     if thread_idx().x == 0 {
//!         for d in 0..n {
//!             out.remote(d).write(me as usize, me + 1);
//!             sems.signal(d, 0, 1);
//!         }
//!         sems.wait(0, n);
//!     }
//! }
//!
//! # fn main() -> kernel_host::Result<()> {
//! let group = DeviceGroup::emulator(2)?;
//! let out = group.zeros::<u32>(2)?;
//! let sems = group.zeros::<u32>(1)?;
//! group.launch_host::<ranks, _>(1u32, |r| (out.on(r), sems.on(r)))?;
//! assert_eq!(group.download(&out)?, vec![vec![1, 2], vec![1, 2]]);
//! # Ok(()) }
//! ```
use crate::device::{Arg, Args, Buffer, Device, Launched, Launcher, Program};
use crate::runtime::ArgSink;
use crate::emulate::Emulator;
use crate::runtime::{Error, Gpu, Result};
use cudarc::driver::{sys, DeviceRepr, ValidAsZeroBits};
use kernel_device::launch::{Dim3, DeviceCode, HostEntry, KernelSpec};
use kernel_device::peer::{PeerCounters, PeerGmem, PeerSemaphores, MAX_PEER_DEVICES};
use crate::runtime::ParamList;

/// GPUs of one host with peer access between every pair, or emulated
/// devices: the same host program runs on either.
#[derive(Clone, Debug)]
pub struct DeviceGroup {
    devices: Vec<Device>,
    /// The emulator that runs the group's launches, when emulated.
    emulator: Option<Emulator>,
}

/// A device's rank in a launch of a [`DeviceGroup`]: handed to the
/// argument closure of [`GroupLauncher::launch`], so that each device gets
/// its own view of a [`PeerBuffer`] and no other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rank {
    index: usize,
    count: usize,
}

impl Rank {
    /// The rank, `0..count()`.
    pub fn index(self) -> usize {
        self.index
    }
    /// Devices in the launch.
    pub fn count(self) -> usize {
        self.count
    }
}

fn check_count(function: &'static str, n: usize) -> Result<()> {
    if n == 0 || n > MAX_PEER_DEVICES {
        return Err(Error::InvalidArgument {
            function,
            problem: format!(
                "{n} devices: a group has 1 to {MAX_PEER_DEVICES} (kernel_spec::limits::MAX_PEER_DEVICES)"
            ),
        });
    }
    Ok(())
}

impl DeviceGroup {
    /// GPUs `0..n`, with peer access enabled from every one to every other.
    /// Errors: fewer than `n` GPUs ([`Error::NoSuchDevice`], [`Error::NoGpu`]),
    /// or two that cannot reach each other's memory ([`Error::NoPeerAccess`]).
    pub fn gpus(n: usize) -> Result<DeviceGroup> {
        check_count("DeviceGroup::gpus", n)?;
        let gpus = (0..n).map(Gpu::new).collect::<Result<Vec<_>>>()?;
        for (i, a) in gpus.iter().enumerate() {
            for (j, b) in gpus.iter().enumerate() {
                if i != j {
                    enable_peer_access(a, b)?;
                }
            }
        }
        Ok(DeviceGroup { devices: gpus.into_iter().map(Device::gpu).collect(), emulator: None })
    }

    /// `n` emulated devices (scheduler seed 1) run in one emulator run per
    /// launch.
    pub fn emulator(n: usize) -> Result<DeviceGroup> {
        Self::emulator_with(Emulator::new(1), n)
    }

    /// `n` emulated devices run by `emu` (its seed and step limit; every
    /// cluster is resident).
    pub fn emulator_with(emu: Emulator, n: usize) -> Result<DeviceGroup> {
        check_count("DeviceGroup::emulator", n)?;
        let devices = (0..n).map(|_| Device::emulator_with(emu.clone())).collect();
        Ok(DeviceGroup { devices, emulator: Some(emu) })
    }

    /// `n` GPUs when there are that many, else `n` emulated devices
    /// ([`DeviceGroup::describe`] says which and why); `KERNEL_DEVICE=emulator`
    /// picks the emulator. A GPU machine with fewer than `n` GPUs, or GPUs
    /// without peer access, is an error, not a silent fall-back.
    pub fn gpus_or_emulator(n: usize) -> Result<DeviceGroup> {
        if std::env::var(crate::device::DEVICE_ENV).is_ok_and(|v| v == "emulator" || v == "emu") {
            return Self::emulator(n);
        }
        match Self::gpus(n) {
            Err(e) if e.is_no_gpu() => Self::emulator(n),
            other => other,
        }
    }

    /// Devices in the group.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Never: a group has at least one device.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// Whether the group is GPUs (else emulated devices).
    pub fn is_gpu(&self) -> bool {
        self.emulator.is_none()
    }

    /// Device `rank`.
    pub fn device(&self, rank: usize) -> &Device {
        &self.devices[rank]
    }

    /// What the group is: `"2 GPUs (NVIDIA H200, NVIDIA H200), peer access enabled"`
    /// or `"2 emulated devices"`.
    pub fn describe(&self) -> String {
        if self.is_gpu() {
            let names: Vec<String> = self.devices.iter().filter_map(|d| d.as_gpu().map(|g| g.name().to_string())).collect();
            format!("{} GPUs ({}), peer access enabled between every pair", self.len(), names.join(", "))
        } else {
            format!("{} emulated devices (CPU emulator, one run per launch)", self.len())
        }
    }

    /// One zeroed buffer of `len` elements on each device.
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits + Copy + Default>(&self, len: usize) -> Result<PeerBuffer<T>> {
        let parts = self.devices.iter().map(|d| d.zeros(len)).collect::<Result<Vec<_>>>()?;
        Ok(PeerBuffer { parts })
    }

    /// A peer buffer over buffers that exist already, `parts[d]` on device
    /// `d` of this group (made with `self.device(d)`: memory of another
    /// framework borrowed with [`Buffer::borrow_gpu`] or
    /// [`Buffer::borrow_host`], say). Errors when `parts` has not one
    /// buffer per device, when their lengths differ, or when a part is on
    /// the other backend.
    pub fn peer_buffer<T>(&self, parts: Vec<Buffer<T>>) -> Result<PeerBuffer<T>> {
        if parts.len() != self.len() {
            return Err(Error::InvalidArgument {
                function: "DeviceGroup::peer_buffer",
                problem: format!("{} buffers for a group of {} devices: give one per device", parts.len(), self.len()),
            });
        }
        let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
        if lens.iter().any(|&l| l != lens[0]) {
            return Err(Error::InvalidArgument {
                function: "DeviceGroup::peer_buffer",
                problem: format!("the devices' parts have lengths {lens:?}: a peer buffer has one length on every device"),
            });
        }
        if let Some(d) = parts.iter().position(|p| p.is_gpu() != self.is_gpu()) {
            return Err(Error::WrongBackend {
                what: format!("part {d} of a peer buffer"),
                value_on: if parts[d].is_gpu() { "GPU" } else { "CPU emulator" },
                device: if self.is_gpu() { "GPU" } else { "CPU emulator" },
            });
        }
        Ok(PeerBuffer { parts })
    }

    /// One buffer per device, device `d`'s holding `parts[d]`. Errors when
    /// `parts` has not one slice per device or the slices differ in length
    /// (a peer buffer has one length on every device).
    pub fn upload<T: DeviceRepr + Copy, S: AsRef<[T]>>(&self, parts: &[S]) -> Result<PeerBuffer<T>> {
        if parts.len() != self.len() {
            return Err(Error::InvalidArgument {
                function: "DeviceGroup::upload",
                problem: format!("{} slices for a group of {} devices: give one per device", parts.len(), self.len()),
            });
        }
        let lens: Vec<usize> = parts.iter().map(|p| p.as_ref().len()).collect();
        if lens.iter().any(|&l| l != lens[0]) {
            return Err(Error::InvalidArgument {
                function: "DeviceGroup::upload",
                problem: format!(
                    "the devices' parts have lengths {lens:?}: a peer buffer has one length on every device \
                     (kernels address any device's part with the same indices); pad the parts to one length"
                ),
            });
        }
        let parts = self.devices.iter().zip(parts).map(|(d, p)| d.upload(p.as_ref())).collect::<Result<Vec<_>>>()?;
        Ok(PeerBuffer { parts })
    }

    /// Every device's part, by rank.
    pub fn download<T: DeviceRepr + Copy>(&self, buf: &PeerBuffer<T>) -> Result<Vec<Vec<T>>> {
        self.check_buffer("DeviceGroup::download", buf.parts.len())?;
        self.devices.iter().zip(&buf.parts).map(|(d, p)| d.download(p)).collect()
    }

    /// Waits for the work queued on every device (nothing on the emulator).
    pub fn synchronize(&self) -> Result<()> {
        self.devices.iter().try_for_each(Device::synchronize)
    }

    fn check_buffer(&self, function: &'static str, parts: usize) -> Result<()> {
        if parts != self.len() {
            return Err(Error::InvalidArgument {
                function,
                problem: format!("a peer buffer of {parts} devices used with a group of {}: make it with this group", self.len()),
            });
        }
        Ok(())
    }

    /// Loads a kernels crate's device code on every device.
    pub fn load(&self, code: &'static DeviceCode) -> Result<GroupProgram> {
        let programs = self.devices.iter().map(|d| d.load(code)).collect::<Result<Vec<_>>>()?;
        Ok(GroupProgram { programs, group: self.clone() })
    }

    /// Runs kernel `K`, compiled into this host program, on every emulated
    /// device (what doc examples and tests without a kernels crate use);
    /// on GPUs use [`DeviceGroup::load`] and [`GroupProgram::kernel`].
    pub fn launch_host<K: HostEntry, A: Args<K::Params>>(
        &self,
        grid: impl Into<Dim3>,
        args: impl FnMut(Rank) -> A,
    ) -> Result<Launched>
    where
        K::Params: ParamList,
    {
        match &self.emulator {
            Some(emu) => emulator_launch::<K, A>(emu, self.len(), grid.into(), args),
            None => Err(Error::InvalidArgument {
                function: "DeviceGroup::launch_host",
                problem: format!(
                    "`{}` is compiled for the host only here; on GPUs load the kernels crate's DEVICE_CODE \
                     (DeviceGroup::load) and launch through GroupProgram::kernel",
                    K::NAME
                ),
            }),
        }
    }
}

fn emulator_launch<K: HostEntry, A: Args<K::Params>>(
    emu: &Emulator,
    n: usize,
    grid: Dim3,
    mut args: impl FnMut(Rank) -> A,
) -> Result<Launched> {
    let params = (0..n).map(|index| args(Rank { index, count: n }).emulator()).collect::<Result<Vec<_>>>()?;
    let report = emu.launch_devices_params::<K>(grid, params)?;
    Ok(Launched { emulator: Some(report) })
}

/// `cuCtxEnablePeerAccess` from `a`'s context to `b`'s memory, after
/// `cuDeviceCanAccessPeer` says it can.
fn enable_peer_access(a: &Gpu, b: &Gpu) -> Result<()> {
    let mut can: std::ffi::c_int = 0;
    // SAFETY: valid device handles of live contexts; `can` is written.
    let r = unsafe { sys::cuDeviceCanAccessPeer(&mut can, a.context().cu_device(), b.context().cu_device()) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(Error::Cuda { call: "cuDeviceCanAccessPeer", cuda: crate::runtime::CudaError::from_result(r) });
    }
    if can == 0 {
        return Err(Error::NoPeerAccess { from: a.ordinal(), to: b.ordinal() });
    }
    a.context().bind_to_thread().map_err(Error::cuda_call("cuCtxSetCurrent"))?;
    // SAFETY: `b`'s primary context is live; flags must be 0.
    let r = unsafe { sys::cuCtxEnablePeerAccess(b.context().cu_ctx(), 0) };
    match r {
        sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
        r => return Err(Error::Cuda { call: "cuCtxEnablePeerAccess", cuda: crate::runtime::CudaError::from_result(r) }),
    }
    // Buffers come from `b`'s stream-ordered memory pool (cudarc allocates
    // with `cuMemAllocAsync`), which `cuCtxEnablePeerAccess` does not
    // cover: kernels on `a` touching them fault with an illegal address
    // unless the pool grants `a` access.
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: a valid device handle; `pool` is written.
    let r = unsafe { sys::cuDeviceGetMemPool(&mut pool, b.context().cu_device()) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(Error::Cuda { call: "cuDeviceGetMemPool", cuda: crate::runtime::CudaError::from_result(r) });
    }
    let desc = sys::CUmemAccessDesc {
        location: sys::CUmemLocation { type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id: a.ordinal() as i32 },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: `pool` is `b`'s current pool; one descriptor.
    let r = unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(Error::Cuda { call: "cuMemPoolSetAccess", cuda: crate::runtime::CudaError::from_result(r) });
    }
    Ok(())
}

/// One buffer of one length on each device of a group (see the module
/// docs). Pass [`PeerBuffer::on`]`(rank)` for a `PeerGmem<T>`, a
/// `PeerSemaphores` (a `PeerBuffer<u32>` of zeroed counters), or the
/// launching device's own part as `Gmem<T>` / `GmemRef<T>`.
pub struct PeerBuffer<T> {
    parts: Vec<Buffer<T>>,
}

impl<T> PeerBuffer<T> {
    /// Elements of each device's part.
    pub fn len(&self) -> usize {
        self.parts[0].len()
    }
    /// Devices it has a part on.
    pub fn devices(&self) -> usize {
        self.parts.len()
    }
    /// Whether the parts are empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Device `rank`'s part.
    pub fn part(&self, rank: usize) -> &Buffer<T> {
        &self.parts[rank]
    }
    /// Device `rank`'s part, mutably (to write it from the host).
    pub fn part_mut(&mut self, rank: usize) -> &mut Buffer<T> {
        &mut self.parts[rank]
    }
    /// Every device's part, mutably, by rank (e.g. to make a writable
    /// tensor map over each: a kernel on one device may store through the
    /// map of another's part).
    pub fn parts_mut(&mut self) -> impl Iterator<Item = &mut Buffer<T>> {
        self.parts.iter_mut()
    }
    /// The buffer as seen by the launching device `rank`: an argument for
    /// `PeerGmem<T>`, `PeerSemaphores`, `PeerCounters`, `Gmem<T>` or
    /// `GmemRef<T>`.
    pub fn on(&self, rank: Rank) -> PeerArg<'_, T> {
        PeerArg { buf: self, rank }
    }
}

/// A [`PeerBuffer`] passed to device `rank`'s kernel (see [`PeerBuffer::on`]).
pub struct PeerArg<'b, T> {
    buf: &'b PeerBuffer<T>,
    rank: Rank,
}

impl<T> PeerArg<'_, T> {
    fn peer_param(&self, gpu: bool) -> Result<PeerGmem<T>> {
        let parts = &self.buf.parts;
        if parts.len() != self.rank.count {
            return Err(Error::InvalidArgument {
                function: "PeerBuffer::on",
                problem: format!(
                    "a peer buffer of {} devices passed to a launch on {}: make it with the launching group",
                    parts.len(),
                    self.rank.count
                ),
            });
        }
        let mut ptrs = [std::ptr::null_mut::<T>(); MAX_PEER_DEVICES];
        for (p, part) in ptrs.iter_mut().zip(parts) {
            if part.is_gpu() != gpu {
                return Err(Error::WrongBackend {
                    what: "a peer buffer passed to a kernel".into(),
                    value_on: if part.is_gpu() { "GPU" } else { "CPU emulator" },
                    device: if gpu { "GPU" } else { "CPU emulator" },
                });
            }
            *p = part.address() as *mut T;
        }
        // SAFETY: every part holds `len` elements on its device, peer access
        // is enabled between the group's GPUs (or all are host memory of one
        // emulator run), and the `&PeerBuffer` borrow keeps them alive for the
        // launch; `rank < count <= MAX_PEER_DEVICES` (checked by the group).
        Ok(unsafe { PeerGmem::from_raw_parts(ptrs, self.buf.len(), self.rank.index as u32, self.rank.count as u32) })
    }
}

impl<T: Copy> Arg<PeerGmem<T>> for PeerArg<'_, T> {
    fn gpu<'a>(self, _sink: &mut ArgSink<'a>) -> Result<PeerGmem<T>>
    where
        Self: 'a,
    {
        self.peer_param(true)
    }
    fn emulator(self) -> Result<PeerGmem<T>> {
        self.peer_param(false)
    }
}

impl Arg<PeerSemaphores> for PeerArg<'_, u32> {
    fn gpu<'a>(self, _sink: &mut ArgSink<'a>) -> Result<PeerSemaphores>
    where
        Self: 'a,
    {
        // SAFETY: the words are the group's zeroed counters (the caller's
        // contract for a semaphore buffer, as for `Semaphore`).
        Ok(unsafe { PeerSemaphores::from_words(self.peer_param(true)?) })
    }
    fn emulator(self) -> Result<PeerSemaphores> {
        // SAFETY: as above.
        Ok(unsafe { PeerSemaphores::from_words(self.peer_param(false)?) })
    }
}

impl Arg<PeerCounters> for PeerArg<'_, u32> {
    fn gpu<'a>(self, _sink: &mut ArgSink<'a>) -> Result<PeerCounters>
    where
        Self: 'a,
    {
        // SAFETY: the group's words, used as counters by the kernel (the
        // caller's contract for a counter buffer).
        Ok(unsafe { PeerCounters::from_words(self.peer_param(true)?) })
    }
    fn emulator(self) -> Result<PeerCounters> {
        // SAFETY: as above.
        Ok(unsafe { PeerCounters::from_words(self.peer_param(false)?) })
    }
}

impl<T: Copy> Arg<kernel_device::Gmem<T>> for PeerArg<'_, T> {
    fn gpu<'a>(self, _sink: &mut ArgSink<'a>) -> Result<kernel_device::Gmem<T>>
    where
        Self: 'a,
    {
        self.peer_param(true).map(|p| p.local())
    }
    fn emulator(self) -> Result<kernel_device::Gmem<T>> {
        self.peer_param(false).map(|p| p.local())
    }
}

impl<T: Copy> Arg<kernel_device::GmemRef<T>> for PeerArg<'_, T> {
    fn gpu<'a>(self, _sink: &mut ArgSink<'a>) -> Result<kernel_device::GmemRef<T>>
    where
        Self: 'a,
    {
        self.peer_param(true).map(|p| local_ref(&p))
    }
    fn emulator(self) -> Result<kernel_device::GmemRef<T>> {
        self.peer_param(false).map(|p| local_ref(&p))
    }
}

fn local_ref<T: Copy>(p: &PeerGmem<T>) -> kernel_device::GmemRef<T> {
    // The launching device's own part, alive for the launch (the
    // `&PeerBuffer` borrow).
    p.local().into()
}

/// A kernels crate's device code loaded on every device of a group.
#[derive(Clone, Debug)]
pub struct GroupProgram {
    programs: Vec<Program>,
    group: DeviceGroup,
}

impl GroupProgram {
    /// Kernel `K` on every device.
    pub fn kernel<K: HostEntry>(&self) -> Result<GroupLauncher<K>> {
        let launchers = self.programs.iter().map(Program::kernel::<K>).collect::<Result<Vec<_>>>()?;
        Ok(GroupLauncher { launchers, group: self.group.clone() })
    }
}

/// Kernel `K` on every device of a group.
pub struct GroupLauncher<K: KernelSpec> {
    launchers: Vec<Launcher<K>>,
    group: DeviceGroup,
}

impl<K: HostEntry> GroupLauncher<K>
where
    K::Params: ParamList,
{
    /// Launches `K` over `grid` CTAs on every device, device `r` with
    /// `args(r)`. On GPUs, each device's launch waits for the work queued
    /// on every device of the group, and work queued afterwards on any
    /// device waits for every device's kernel (events, no host wait); on
    /// the emulator the devices run together in one run.
    pub fn launch<A: Args<K::Params>>(&self, grid: impl Into<Dim3>, mut args: impl FnMut(Rank) -> A) -> Result<Launched> {
        let grid = grid.into();
        let n = self.launchers.len();
        if let Some(emu) = &self.group.emulator {
            return emulator_launch::<K, A>(emu, n, grid, args);
        }
        self.group.barrier()?;
        for (index, l) in self.launchers.iter().enumerate() {
            l.launch(grid, args(Rank { index, count: n }))?;
        }
        self.group.barrier()?;
        Ok(Launched::default())
    }
}

impl DeviceGroup {
    /// On GPUs: every device's stream waits for the work queued so far on
    /// every other device's stream (events).
    pub fn barrier(&self) -> Result<()> {
        let gpus: Vec<&Gpu> = self.devices.iter().filter_map(Device::as_gpu).collect();
        let events = gpus
            .iter()
            .map(|g| g.stream().record_event(None).map_err(Error::cuda_call("cuEventRecord")))
            .collect::<Result<Vec<_>>>()?;
        for (i, g) in gpus.iter().enumerate() {
            for (j, e) in events.iter().enumerate() {
                if i != j {
                    g.stream().wait(e).map_err(Error::cuda_call("cuStreamWaitEvent"))?;
                }
            }
        }
        Ok(())
    }
}
