//! One launch path for the GPU and the CPU emulator.
//!
//! A host program is written once against [`Device`] and runs on either
//! backend, as Pallas's `interpret=True` runs the same calling code:
//!
//! ```
//! use kernel_device::prelude::*;
//! use kernel_host::Device;
//! # mod my_kernels {
//! #     use kernel_device::prelude::*;
//! #     pub static DEVICE_CODE: kernel_host::DeviceCode = kernel_host::DeviceCode { crate_name: "my_kernels", images: &[] };
//! #     #[kernel(block = threads(128))]
//! #     pub fn axpy(x: GmemRef<f32>, y: Gmem<f32>, a: f32) {
//! #         let i = (block_idx().x * 128 + thread_idx().x) as usize;
//! #         if i < y.len() { y.write(i, a * x.read(i) + y.read(i)); }
//! #     }
//! # }
//!
//! # fn main() -> Result<(), kernel_host::Error> {
//! let dev = Device::emulator();                   // or Device::gpu_or_emulator()?
//! let prog = dev.load(&my_kernels::DEVICE_CODE)?;
//! let x = dev.upload(&vec![1.0f32; 256])?;        // Buffer<f32>, on the device
//! let mut y = dev.upload(&vec![2.0f32; 256])?;
//! prog.kernel::<my_kernels::axpy>()?.launch(2u32, (&x, &mut y, 3.0f32))?;
//! assert!(dev.download(&y)?.iter().all(|&v| v == 5.0));
//! # Ok(()) }
//! ```
//!
//! | piece | GPU | emulator |
//! |---|---|---|
//! | [`Device`] | a [`Gpu`]: context and stream | an [`Emulator`]: seed, emulated SMs |
//! | [`Buffer<T>`] | a `CudaSlice<T>` (device memory) | a host allocation the emulated kernel addresses |
//! | [`TileMap<Tl>`] | a [`TensorMap`] (`cuTensorMapEncodeTiled`) | an [`EmuTensorMap`] |
//! | [`Program`] | a loaded [`Module`] | the kernels' host builds |
//! | [`Launcher::launch`] | queued on the stream ([`Launcher::launch_sync`] waits) | runs to completion, race detector on |
//!
//! Arguments are the same on both: `&Buffer<T>` for `*const T` and
//! `GmemRef<T>`, `&mut Buffer<T>` for `*mut T`, `Gmem<T>` (and `Semaphore`
//! with `T = u32`), `&TileMap<Tl, RANK>` for `Tma<Tl, RANK>`, scalars as
//! themselves. A buffer or map of one backend passed to the other is
//! [`Error::WrongBackend`]; a GPU-only feature asked of the emulator
//! (timing, cuBLAS) is [`Error::GpuOnly`]; a race or protocol error found by
//! the emulator is [`Error::Emulator`].
use crate::emulate::{EmuTensorMap, Emulator, HostArg};
use crate::runtime::{
    kernel_runs_on, ArgSink, DeviceCode, Error, Gpu, Kernel, KernelArg, Module, ParamList, Result, TensorMap, TmaElement,
};
use cudarc::driver::{CudaSlice, DeviceRepr, ValidAsZeroBits};
use kernel_device::launch::HostEntry;
use kernel_device::layout::TileLayout;
use kernel_device::tma::TensorMapParam;
use kernel_device::{Dim3, KernelSpec};
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// The emulated SM count of [`Device::emulator`]: small, so persistent
/// grids built from [`Device::sm_count`] wrap and dynamically scheduled
/// kernels see clusters start late.
pub const EMULATED_SMS: u32 = 8;

/// The environment variable that makes [`Device::gpu_or_emulator`] pick the
/// emulator even on a GPU machine: `KERNEL_DEVICE=emulator`.
pub const DEVICE_ENV: &str = "KERNEL_DEVICE";

/// Where kernels run: a CUDA GPU or the CPU emulator. Cloning shares the
/// GPU's context and stream, and the programs loaded on it.
#[derive(Clone, Debug)]
pub struct Device {
    backend: Backend,
    /// The programs loaded on a GPU, by the address of their
    /// `DeviceCode` (a `static`): [`Device::load`] loads each image once.
    programs: Arc<Mutex<HashMap<usize, Program>>>,
}

#[derive(Clone, Debug)]
enum Backend {
    Gpu(Gpu),
    Emulator {
        emu: Emulator,
        /// Why the emulator was chosen, for [`Device::describe`].
        why: Option<String>,
    },
}

/// Which backend a value belongs to, for [`Error::WrongBackend`].
fn backend_name(gpu: bool) -> &'static str {
    if gpu {
        "GPU"
    } else {
        "CPU emulator"
    }
}

impl Device {
    /// GPU 0 when there is a usable one, else the CPU emulator
    /// ([`Device::describe`] says which and why). `KERNEL_DEVICE=emulator`
    /// picks the emulator on a GPU machine too. A GPU that is present but
    /// fails (a driver error other than "no GPU") is an error, not a silent
    /// fall-back.
    pub fn gpu_or_emulator() -> Result<Device> {
        if std::env::var(DEVICE_ENV).is_ok_and(|v| v == "emulator" || v == "emu") {
            return Ok(Device::emulator_because(Emulator::new(1).sms(EMULATED_SMS), format!("{DEVICE_ENV}=emulator")));
        }
        match Gpu::new(0) {
            Ok(gpu) => Ok(Device::gpu(gpu)),
            Err(e) if e.is_no_gpu() => Ok(Device::emulator_because(Emulator::new(1).sms(EMULATED_SMS), e.to_string())),
            Err(e) => Err(e),
        }
    }

    /// A GPU device.
    pub fn gpu(gpu: Gpu) -> Device {
        Device::with_backend(Backend::Gpu(gpu))
    }

    fn with_backend(backend: Backend) -> Device {
        Device { backend, programs: Arc::default() }
    }

    /// The CPU emulator with seed 1 and [`EMULATED_SMS`] SMs.
    pub fn emulator() -> Device {
        Device::emulator_with(Emulator::new(1).sms(EMULATED_SMS))
    }

    /// The CPU emulator with this configuration (seed, emulated SMs, step
    /// limit).
    pub fn emulator_with(emu: Emulator) -> Device {
        Device::with_backend(Backend::Emulator { emu, why: None })
    }

    fn emulator_because(emu: Emulator, why: String) -> Device {
        Device::with_backend(Backend::Emulator { emu, why: Some(why) })
    }

    /// Whether kernels run on a GPU.
    pub fn is_gpu(&self) -> bool {
        matches!(self.backend, Backend::Gpu(_))
    }

    /// The GPU, if this is one (for what the launch path does not cover:
    /// cuBLAS, events, streams).
    pub fn as_gpu(&self) -> Option<&Gpu> {
        match &self.backend {
            Backend::Gpu(gpu) => Some(gpu),
            Backend::Emulator { .. } => None,
        }
    }

    /// The emulator, if this is it.
    pub fn as_emulator(&self) -> Option<&Emulator> {
        match &self.backend {
            Backend::Gpu(_) => None,
            Backend::Emulator { emu, .. } => Some(emu),
        }
    }

    /// The GPU, or [`Error::GpuOnly`] naming `what` needed it.
    pub fn require_gpu(&self, what: &'static str) -> Result<&Gpu> {
        self.as_gpu().ok_or(Error::GpuOnly { what })
    }

    /// One line: the GPU's name and compute capability, or "the CPU
    /// emulator" and why it was chosen.
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Gpu(gpu) => gpu.describe(),
            Backend::Emulator { emu, why } => {
                let sms = emu.sm_count().map_or(String::from("every cluster resident"), |s| format!("{s} emulated SMs"));
                match why {
                    Some(why) => format!("the CPU emulator (seed {}, {sms}; {why})", emu.seed()),
                    None => format!("the CPU emulator (seed {}, {sms})", emu.seed()),
                }
            }
        }
    }

    /// The SMs kernels run on: the GPU's count, or the emulator's
    /// (`Emulator::sms`; 1 when every cluster is resident). Persistent grids
    /// are sized from it.
    pub fn sm_count(&self) -> u32 {
        match &self.backend {
            Backend::Gpu(gpu) => gpu.sm_count(),
            Backend::Emulator { emu, .. } => emu.sm_count().unwrap_or(1),
        }
    }

    /// The architecture kernels are loaded for (`"sm_90a"`, `"sm_100a"`);
    /// the emulator runs every architecture's kernels (`None`).
    pub fn arch(&self) -> Option<&'static str> {
        match &self.backend {
            Backend::Gpu(gpu) => gpu.arch(),
            Backend::Emulator { .. } => None,
        }
    }

    /// Whether kernel `K` can run here: on a GPU, when it is built for the
    /// GPU's architecture (`#[kernel(arch = ..)]`); the emulator runs all.
    pub fn supports<K: KernelSpec>(&self) -> bool {
        match &self.backend {
            Backend::Gpu(gpu) => gpu.arch().is_some_and(|arch| kernel_runs_on(K::ARCHS, arch)),
            Backend::Emulator { .. } => true,
        }
    }

    /// A buffer holding a copy of `data`.
    pub fn upload<T: DeviceRepr + Copy>(&self, data: &[T]) -> Result<Buffer<T>> {
        Ok(Buffer {
            mem: match &self.backend {
                Backend::Gpu(gpu) => Mem::Gpu(GpuMem::owned(gpu.upload(data)?)),
                Backend::Emulator { .. } => Mem::Host(HostMem::from_slice(data)),
            },
        })
    }

    /// A buffer of `len` zeros.
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits + Copy + Default>(&self, len: usize) -> Result<Buffer<T>> {
        Ok(Buffer {
            mem: match &self.backend {
                Backend::Gpu(gpu) => Mem::Gpu(GpuMem::owned(gpu.zeros(len)?)),
                Backend::Emulator { .. } => Mem::Host(HostMem::from_box(vec![T::default(); len].into_boxed_slice())),
            },
        })
    }

    /// A copy of `buf`'s contents (waits for the work queued before it).
    pub fn download<T: DeviceRepr + Copy>(&self, buf: &Buffer<T>) -> Result<Vec<T>> {
        match (&self.backend, &buf.mem) {
            (Backend::Gpu(gpu), Mem::Gpu(slice)) => gpu.download(slice),
            (Backend::Emulator { .. }, Mem::Host(host)) => Ok(host.as_slice().to_vec()),
            (_, mem) => Err(self.wrong_backend("the buffer passed to `Device::download`", mem.is_gpu())),
        }
    }

    /// Overwrites `buf` with `data` (same length).
    pub fn write<T: DeviceRepr + Copy>(&self, buf: &mut Buffer<T>, data: &[T]) -> Result<()> {
        if buf.len() != data.len() {
            return Err(Error::InvalidArgument {
                function: "Device::write",
                problem: format!("the buffer holds {} elements and the data {}: they must be equal", buf.len(), data.len()),
            });
        }
        match (&self.backend, &mut buf.mem) {
            (Backend::Gpu(gpu), Mem::Gpu(slice)) => gpu
                .stream()
                .memcpy_htod(data, &mut **slice)
                .map_err(Error::cuda_call("cuMemcpyHtoDAsync (Device::write)")),
            (Backend::Emulator { .. }, Mem::Host(host)) => {
                host.as_mut_slice().copy_from_slice(data);
                Ok(())
            }
            (_, mem) => Err(self.wrong_backend("the buffer passed to `Device::write`", mem.is_gpu())),
        }
    }

    /// Waits for the work queued on the GPU (nothing to wait for on the
    /// emulator, whose launches run to completion).
    pub fn synchronize(&self) -> Result<()> {
        match &self.backend {
            Backend::Gpu(gpu) => gpu.synchronize(),
            Backend::Emulator { .. } => Ok(()),
        }
    }

    /// Loads a kernels crate's device code: on a GPU the image for its
    /// architecture (see [`Gpu::load`]), once per `Device`: later calls (of
    /// this device or its clones) return the loaded program, which stays
    /// loaded while the device lives; on the emulator the kernels' host
    /// builds run, so nothing is loaded.
    pub fn load(&self, code: &'static DeviceCode) -> Result<Program> {
        let gpu = match &self.backend {
            Backend::Gpu(gpu) => gpu,
            Backend::Emulator { emu, .. } => {
                return Ok(Program { backend: ProgramBackend::Emulator(emu.clone()), crate_name: code.crate_name, code });
            }
        };
        let key = std::ptr::from_ref(code) as usize;
        // A panic while the lock was held left the map consistent (an
        // insert is the only write).
        let mut programs = self.programs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(program) = programs.get(&key) {
            return Ok(program.clone());
        }
        let program = Program { backend: ProgramBackend::Gpu(gpu.load(code)?), crate_name: code.crate_name, code };
        programs.insert(key, program.clone());
        Ok(program)
    }

    fn wrong_backend(&self, what: &str, value_on_gpu: bool) -> Error {
        Error::WrongBackend { what: what.to_string(), value_on: backend_name(value_on_gpu), device: backend_name(self.is_gpu()) }
    }
}

/// An allocation on a [`Device`]: GPU memory, or on the emulator a host
/// allocation that emulated kernels address as global memory. Made by
/// [`Device::upload`] and [`Device::zeros`]; read back with
/// [`Device::download`].
pub struct Buffer<T> {
    mem: Mem<T>,
}

enum Mem<T> {
    Gpu(GpuMem<T>),
    Host(HostMem<T>),
}

/// GPU memory: an allocation of this program's (freed when the buffer
/// drops) or a borrowed one ([`Buffer::borrow_gpu`]: never freed here).
struct GpuMem<T> {
    slice: std::mem::ManuallyDrop<CudaSlice<T>>,
    owned: bool,
}

impl<T> GpuMem<T> {
    fn owned(slice: CudaSlice<T>) -> Self {
        GpuMem { slice: std::mem::ManuallyDrop::new(slice), owned: true }
    }
}

impl<T> std::ops::Deref for GpuMem<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.slice
    }
}

impl<T> std::ops::DerefMut for GpuMem<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.slice
    }
}

impl<T> Drop for GpuMem<T> {
    fn drop(&mut self) {
        // SAFETY: `slice` is dropped or taken exactly once, here.
        let slice = unsafe { std::mem::ManuallyDrop::take(&mut self.slice) };
        if self.owned {
            drop(slice);
        } else {
            // Borrowed: hand the pointer back without freeing it (`leak`
            // still orders the stream after the slice's recorded work).
            let _ = slice.leak();
        }
    }
}

impl<T> Mem<T> {
    fn is_gpu(&self) -> bool {
        matches!(self, Mem::Gpu(_))
    }
}

/// Host memory that an emulated kernel addresses through raw pointers, as
/// device memory is addressed: owned by the buffer, freed when it drops.
struct HostMem<T> {
    ptr: NonNull<T>,
    len: usize,
    /// Allocated here (a `Box<[T]>`, freed on drop), or borrowed
    /// ([`Buffer::borrow_host`]: never freed here).
    owned: bool,
}

impl<T: Copy> HostMem<T> {
    fn from_slice(data: &[T]) -> Self {
        Self::from_box(data.into())
    }
}

impl<T> HostMem<T> {
    fn from_box(boxed: Box<[T]>) -> Self {
        let len = boxed.len();
        // SAFETY: `Box::into_raw` never returns null.
        let ptr = unsafe { NonNull::new_unchecked(Box::into_raw(boxed).cast::<T>()) };
        HostMem { ptr, len, owned: true }
    }

    fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` owns `len` initialized elements (from a `Box<[T]>`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above, borrowed mutably through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for HostMem<T> {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // SAFETY: `ptr`/`len` came from `Box::into_raw` of a `Box<[T]>` of
        // `len` elements and are freed once.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) });
    }
}

// SAFETY: `HostMem<T>` owns its elements like a `Box<[T]>`.
unsafe impl<T: Send> Send for HostMem<T> {}
// SAFETY: shared access only reads through `as_slice`; kernels write through
// the pointers a launch hands them, which `&mut Buffer` arguments borrow.
unsafe impl<T: Sync> Sync for HostMem<T> {}

impl<T> Buffer<T> {
    /// A buffer over `len` elements of GPU memory this program does not own
    /// (a framework's tensor, e.g. received through DLPack): kernels read
    /// and write it in place, and dropping the buffer frees nothing.
    /// Errors when `dev` is the emulator ([`Error::WrongBackend`]).
    ///
    /// # Safety
    /// `ptr` addresses at least `len` valid, suitably aligned `T`s of
    /// device memory usable in `dev`'s CUDA context (the device's primary
    /// context: what the CUDA runtime, torch and JAX use), and that memory
    /// stays allocated, and is not accessed except in stream order with this
    /// program's work, until the buffer is dropped and the work using it
    /// has completed.
    pub unsafe fn borrow_gpu(dev: &Device, ptr: u64, len: usize) -> Result<Buffer<T>> {
        let gpu = dev.as_gpu().ok_or(Error::WrongBackend { what: "a borrowed GPU buffer".into(), value_on: "GPU", device: "CPU emulator" })?;
        // SAFETY: the caller's contract; `GpuMem` never frees it.
        let slice = unsafe { gpu.stream().upgrade_device_ptr::<T>(ptr, len) };
        Ok(Buffer { mem: Mem::Gpu(GpuMem { slice: std::mem::ManuallyDrop::new(slice), owned: false }) })
    }

    /// A buffer over `len` elements of host memory this program does not
    /// own (a NumPy array's data), for the emulator: emulated kernels read
    /// and write it in place; dropping the buffer frees nothing. Errors when
    /// `dev` is a GPU ([`Error::WrongBackend`]).
    ///
    /// # Safety
    /// `ptr` addresses `len` initialized, aligned `T`s that stay valid, and
    /// that nothing else accesses, until the buffer is dropped.
    pub unsafe fn borrow_host(dev: &Device, ptr: *mut T, len: usize) -> Result<Buffer<T>> {
        if dev.is_gpu() {
            return Err(Error::WrongBackend { what: "a borrowed host buffer".into(), value_on: "CPU emulator", device: "GPU" });
        }
        let ptr = NonNull::new(ptr).ok_or(Error::InvalidArgument { function: "Buffer::borrow_host", problem: "a null pointer".into() })?;
        Ok(Buffer { mem: Mem::Host(HostMem { ptr, len, owned: false }) })
    }

    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        match &self.mem {
            Mem::Gpu(s) => s.len(),
            Mem::Host(h) => h.len,
        }
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the buffer is GPU memory.
    pub fn is_gpu(&self) -> bool {
        self.mem.is_gpu()
    }

    /// The buffer's address: its device address on a GPU, the host address
    /// the emulator uses otherwise. For keys of caches of encoded tensor
    /// maps ([`MapArg`]); never dereference it.
    pub fn address(&self) -> u64 {
        match &self.mem {
            Mem::Gpu(s) => {
                use cudarc::driver::DevicePtr;
                let (ptr, _record) = s.device_ptr(s.stream());
                ptr
            }
            Mem::Host(h) => h.ptr.as_ptr() as u64,
        }
    }

    /// The GPU allocation (for cuBLAS and other cudarc calls), or
    /// [`Error::GpuOnly`] on the emulator.
    pub fn cuda(&self) -> Result<&CudaSlice<T>> {
        match &self.mem {
            Mem::Gpu(s) => Ok(s),
            Mem::Host(_) => Err(Error::GpuOnly { what: "a CUDA buffer (`Buffer::cuda`)" }),
        }
    }

    /// As [`Buffer::cuda`], mutably.
    pub fn cuda_mut(&mut self) -> Result<&mut CudaSlice<T>> {
        match &mut self.mem {
            Mem::Gpu(s) => Ok(s),
            Mem::Host(_) => Err(Error::GpuOnly { what: "a CUDA buffer (`Buffer::cuda_mut`)" }),
        }
    }

    /// The emulator buffer's start and length, or the GPU slice.
    fn host_parts(&self, what: &str) -> Result<(*mut T, usize)> {
        match &self.mem {
            Mem::Host(h) => Ok((h.ptr.as_ptr(), h.len)),
            Mem::Gpu(_) => Err(Error::WrongBackend { what: what.to_string(), value_on: "GPU", device: "CPU emulator" }),
        }
    }

    fn gpu_slice(&self, what: &str) -> Result<&CudaSlice<T>> {
        match &self.mem {
            Mem::Gpu(s) => Ok(s),
            Mem::Host(_) => Err(Error::WrongBackend { what: what.to_string(), value_on: "CPU emulator", device: "GPU" }),
        }
    }

    fn gpu_slice_mut(&mut self, what: &str) -> Result<&mut CudaSlice<T>> {
        match &mut self.mem {
            Mem::Gpu(s) => Ok(s),
            Mem::Host(_) => Err(Error::WrongBackend { what: what.to_string(), value_on: "CPU emulator", device: "GPU" }),
        }
    }
}

/// A GPU allocation made with cudarc (or [`Gpu::upload`]) as a [`Buffer`]
/// of the GPU's [`Device`].
impl<T> From<CudaSlice<T>> for Buffer<T> {
    fn from(slice: CudaSlice<T>) -> Self {
        Buffer { mem: Mem::Gpu(GpuMem::owned(slice)) }
    }
}

impl<T> fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer<{}>[{}] on the {}", std::any::type_name::<T>(), self.len(), backend_name(self.is_gpu()))
    }
}

/// A TMA tensor map on either backend, for a kernel parameter
/// `Tma<Tl, RANK>`: box and swizzle from the tile type `Tl`, checked by the
/// same rules on both ([`TensorMap`] on the GPU, [`EmuTensorMap`] on the
/// emulator). It borrows its buffer.
pub struct TileMap<'a, Tl: TileLayout, const RANK: usize = 2> {
    map: MapBackend<'a, Tl, RANK>,
}

enum MapBackend<'a, Tl: TileLayout, const RANK: usize> {
    Gpu(TensorMap<'a, Tl, RANK>),
    Emulator(EmuTensorMap<'a, Tl, RANK>),
}

impl<'a, Tl: TileLayout> TileMap<'a, Tl, 2>
where
    Tl::Elem: TmaElement,
{
    /// The map of a row-major `rows x cols` matrix in `buf`. On the emulator
    /// it is read-only (a TMA store through it is reported); use
    /// [`TileMap::new_2d_mut`] for a store destination.
    pub fn new_2d(buf: &'a Buffer<Tl::Elem>, rows: usize, cols: usize) -> Result<Self> {
        Self::make(buf, &[rows, cols], false, |s| TensorMap::new_2d(s, rows, cols))
    }

    /// The map of a row-major `rows x cols` matrix that kernels load from and
    /// store to.
    pub fn new_2d_mut(buf: &'a mut Buffer<Tl::Elem>, rows: usize, cols: usize) -> Result<Self> {
        Self::make(buf, &[rows, cols], true, |s| TensorMap::new_2d(s, rows, cols))
    }
}

impl<'a, Tl: TileLayout> TileMap<'a, Tl, 3>
where
    Tl::Elem: TmaElement,
{
    /// The map of `batch` row-major `rows x cols` matrices stored one after
    /// another (coordinates `[col, row, batch]`); read-only on the emulator.
    pub fn new_batched(buf: &'a Buffer<Tl::Elem>, batch: usize, rows: usize, cols: usize) -> Result<Self> {
        Self::make(buf, &[batch, rows, cols], false, |s| TensorMap::new_batched(s, batch, rows, cols))
    }

    /// As [`TileMap::new_batched`], for loads and stores.
    pub fn new_batched_mut(buf: &'a mut Buffer<Tl::Elem>, batch: usize, rows: usize, cols: usize) -> Result<Self> {
        Self::make(buf, &[batch, rows, cols], true, |s| TensorMap::new_batched(s, batch, rows, cols))
    }
}

impl<'a, Tl: TileLayout, const RANK: usize> TileMap<'a, Tl, RANK>
where
    Tl::Elem: TmaElement,
{
    /// The map over `buf`: `gpu` encodes it on a GPU; on the emulator the
    /// tensor has `dims` (outermost first), row-major and contiguous.
    fn make(
        buf: &'a Buffer<Tl::Elem>,
        dims: &[usize],
        writable: bool,
        gpu: impl FnOnce(&'a CudaSlice<Tl::Elem>) -> Result<TensorMap<'a, Tl, RANK>>,
    ) -> Result<Self> {
        let map = match &buf.mem {
            Mem::Gpu(slice) => MapBackend::Gpu(gpu(slice)?),
            Mem::Host(host) => MapBackend::Emulator(EmuTensorMap::build(host.ptr.as_ptr(), host.len, dims, writable)?),
        };
        Ok(TileMap { map })
    }
}

impl<Tl: TileLayout, const RANK: usize> TileMap<'_, Tl, RANK> {
    /// Whether the map is a GPU tensor map.
    pub fn is_gpu(&self) -> bool {
        matches!(self.map, MapBackend::Gpu(_))
    }

    /// The encoded map (the kernel parameter's bytes), to cache and pass
    /// again with [`MapArg`] while its buffer lives.
    pub fn param(&self) -> TensorMapParam<Tl, RANK> {
        match &self.map {
            MapBackend::Gpu(map) => map.param(),
            MapBackend::Emulator(map) => HostArg::into_param(map),
        }
    }
}

/// A cached tensor map's parameter passed with the buffer it addresses, for
/// launches that reuse an encoded map ([`TileMap::param`]) instead of
/// encoding one per launch: on a GPU the launch is ordered after earlier
/// accesses of the buffer (as `&TileMap` is). `param` must have been made
/// from this buffer, with the same shape.
pub struct MapArg<'b, Tl: TileLayout, const RANK: usize = 2> {
    param: TensorMapParam<Tl, RANK>,
    buf: MapBuf<'b, Tl::Elem>,
}

enum MapBuf<'b, T> {
    Read(&'b Buffer<T>),
    Write(&'b mut Buffer<T>),
}

impl<'b, Tl: TileLayout, const RANK: usize> MapArg<'b, Tl, RANK> {
    /// A map of `buf` that the kernel loads from.
    pub fn read(param: TensorMapParam<Tl, RANK>, buf: &'b Buffer<Tl::Elem>) -> Self {
        MapArg { param, buf: MapBuf::Read(buf) }
    }
    /// A map of `buf` that the kernel stores to.
    pub fn write(param: TensorMapParam<Tl, RANK>, buf: &'b mut Buffer<Tl::Elem>) -> Self {
        MapArg { param, buf: MapBuf::Write(buf) }
    }
}

const MAP_ARG: &str = "the buffer of a tensor map passed to a kernel";

impl<Tl: TileLayout, const RANK: usize> Arg<TensorMapParam<Tl, RANK>> for MapArg<'_, Tl, RANK> {
    fn gpu<'a>(self, sink: &mut ArgSink<'a>) -> Result<TensorMapParam<Tl, RANK>>
    where
        Self: 'a,
    {
        match self.buf {
            MapBuf::Read(b) => {
                sink.read(b.gpu_slice(MAP_ARG)?);
            }
            MapBuf::Write(b) => {
                sink.write(b.gpu_slice_mut(MAP_ARG)?);
            }
        }
        Ok(self.param)
    }
    fn emulator(self) -> Result<TensorMapParam<Tl, RANK>> {
        let buf: &Buffer<Tl::Elem> = match &self.buf {
            MapBuf::Read(b) => b,
            MapBuf::Write(b) => b,
        };
        buf.host_parts(MAP_ARG)?;
        Ok(self.param)
    }
}

/// A kernels crate's device code on a [`Device`] (see [`Device::load`]).
/// Cloning shares the loaded module.
#[derive(Clone, Debug)]
pub struct Program {
    backend: ProgramBackend,
    crate_name: &'static str,
    /// The kernels crate's device code (its ptxas reports answer the
    /// emulator's occupancy queries).
    code: &'static DeviceCode,
}

#[derive(Clone, Debug)]
enum ProgramBackend {
    Gpu(Module),
    Emulator(Emulator),
}

impl Program {
    /// Kernel `K`, ready to launch. On a GPU this finds the entry point and
    /// sets its shared-memory and cluster attributes ([`Module::kernel`]),
    /// and refuses a kernel not built for the GPU's architecture
    /// ([`Error::KernelNotForArch`]); on the emulator it always succeeds.
    pub fn kernel<K: HostEntry>(&self) -> Result<Launcher<K>> {
        Ok(Launcher {
            backend: match &self.backend {
                ProgramBackend::Gpu(module) => LauncherBackend::Gpu(module.kernel::<K>()?),
                ProgramBackend::Emulator(emu) => LauncherBackend::Emulator(emu.clone(), PhantomData),
            },
            code: self.code,
        })
    }

    /// The GPU module, if this program is loaded on a GPU.
    pub fn as_module(&self) -> Option<&Module> {
        match &self.backend {
            ProgramBackend::Gpu(m) => Some(m),
            ProgramBackend::Emulator(_) => None,
        }
    }

    /// The kernels crate's name.
    pub fn crate_name(&self) -> &'static str {
        self.crate_name
    }
}

/// What a launch reports: on the emulator its run report (scheduling steps,
/// threads, clusters canceled by cluster launch control); nothing on a GPU.
#[derive(Clone, Debug, Default)]
pub struct Launched {
    pub emulator: Option<crate::emulate::RunReport>,
}

/// Kernel `K` on a [`Program`]'s device.
pub struct Launcher<K: KernelSpec> {
    backend: LauncherBackend<K>,
    code: &'static DeviceCode,
}

enum LauncherBackend<K: KernelSpec> {
    Gpu(Kernel<K>),
    Emulator(Emulator, PhantomData<fn() -> K>),
}

impl<K: HostEntry> Launcher<K>
where
    K::Params: ParamList,
{
    /// Launches `K` over `grid` CTAs with `args` (one per parameter, as a
    /// tuple). On a GPU the launch is queued on the stream (a fault shows
    /// at the next synchronizing call; [`Launcher::launch_sync`] waits); on
    /// the emulator it runs to completion under the race detector.
    pub fn launch<A: Args<K::Params>>(&self, grid: impl Into<Dim3>, args: A) -> Result<Launched> {
        let grid = grid.into();
        match &self.backend {
            LauncherBackend::Gpu(kernel) => {
                kernel.prepare(grid)?;
                let mut sink = ArgSink::new(kernel.stream());
                let params = args.gpu(&mut sink)?;
                kernel.submit(grid, sink, params)?;
                Ok(Launched::default())
            }
            LauncherBackend::Emulator(emu, _) => {
                let params = args.emulator()?;
                let report = emu.launch_params::<K>(grid, params)?;
                Ok(Launched { emulator: Some(report) })
            }
        }
    }

    /// [`Launcher::launch`], then waits for the kernel, so that a fault is
    /// reported as [`Error::KernelFault`] naming it (the same as `launch` on
    /// the emulator).
    pub fn launch_sync<A: Args<K::Params>>(&self, grid: impl Into<Dim3>, args: A) -> Result<Launched> {
        let grid = grid.into();
        let launched = self.launch(grid, args)?;
        if let LauncherBackend::Gpu(kernel) = &self.backend {
            kernel.wait(grid)?;
        }
        Ok(launched)
    }

    /// The GPU kernel (for occupancy queries and timing), or
    /// [`Error::GpuOnly`].
    pub fn gpu_kernel(&self) -> Result<&Kernel<K>> {
        match &self.backend {
            LauncherBackend::Gpu(k) => Ok(k),
            LauncherBackend::Emulator(..) => Err(Error::GpuOnly { what: "a GPU kernel handle (`Launcher::gpu_kernel`)" }),
        }
    }

    /// The kernel's entry-point name.
    pub fn name(&self) -> &'static str {
        K::NAME
    }
}

impl<K: KernelSpec> Launcher<K> {
    /// How many CTAs of `K` fit on one SM of the device at once, and the
    /// resource that limits it (registers, shared memory, threads or
    /// blocks per SM), with what would raise it in its `Display`.
    ///
    /// On a GPU: the driver's answer
    /// ([`Kernel::max_active_blocks_per_sm`]), beside CUDA's occupancy
    /// rules on the loaded function's registers and shared memory. On the
    /// emulator: those rules ([`kernel_spec::occupancy`]) on the kernel's
    /// ptxas report in the crate's `DEVICE_CODE` (for the first
    /// architecture the kernel is built for, sm_90a when not restricted),
    /// so the answer is the GPU's without a GPU; [`Error::NoPtxasReport`]
    /// when the crate was built without ptxas. Raise it with
    /// `#[kernel(min_blocks_per_sm = N)]` or `max_registers = R` (fewer
    /// registers), or with less shared memory.
    pub fn occupancy(&self) -> Result<crate::occupancy::Occupancy> {
        let threads = K::BLOCK.x * K::BLOCK.y * K::BLOCK.z;
        match &self.backend {
            LauncherBackend::Gpu(kernel) => Ok(crate::occupancy::from_driver(K::NAME, kernel.max_active_blocks_per_sm()?, kernel.resources()?)),
            LauncherBackend::Emulator(..) => {
                let arch = K::ARCHS.first().copied().unwrap_or("sm_90a");
                let image = self.code.image(arch).ok_or(Error::NoPtxasReport { kernel: K::NAME, crate_name: self.code.crate_name, arch })?;
                crate::occupancy::from_report(K::NAME, threads, K::SMEM_BYTES, self.code.crate_name, image)
            }
        }
    }
}

/// A value that can be passed for a kernel parameter of type `P` on either
/// backend.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter of type `{P}`",
    label = "this argument does not fit the kernel parameter `{P}`",
    note = "pass `&Buffer<T>` for `*const T` and `GmemRef<T>`, `&mut Buffer<T>` for `*mut T` and `Gmem<T>`, \
            `&mut Buffer<u32>` for `Semaphore`, `&TileMap<Tl, RANK>` for `Tma<Tl, RANK>`, and a value of \
            exactly the parameter's type for a scalar (`n as u32` for `u32`)"
)]
pub trait Arg<P: Copy> {
    /// The parameter value for a GPU launch (buffer guards go to `sink`).
    fn gpu<'a>(self, sink: &mut ArgSink<'a>) -> Result<P>
    where
        Self: 'a;
    /// The parameter value for an emulator launch.
    fn emulator(self) -> Result<P>;
}

macro_rules! scalar_args {
    ($($t:ty),*) => {$(
        impl Arg<$t> for $t {
            fn gpu<'a>(self, _sink: &mut ArgSink<'a>) -> Result<$t> where Self: 'a { Ok(self) }
            fn emulator(self) -> Result<$t> { Ok(self) }
        }
    )*};
}
scalar_args!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, bool);

const BUFFER_ARG: &str = "a buffer passed to a kernel";

/// The emulator's view of a buffer argument the kernel reads: a shared
/// slice, borrowed as the argument is.
fn host_ref<T>(buf: &Buffer<T>) -> Result<&[T]> {
    let (ptr, len) = buf.host_parts(BUFFER_ARG)?;
    // SAFETY: `ptr` owns `len` initialized elements, alive and not mutably
    // borrowed while `buf` is shared-borrowed.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The emulator's view of a buffer argument the kernel writes: an
/// exclusive slice, borrowed as the `&mut Buffer` argument is.
fn host_mut<T>(buf: &mut Buffer<T>) -> Result<&mut [T]> {
    let (ptr, len) = buf.host_parts(BUFFER_ARG)?;
    // SAFETY: `ptr` owns `len` initialized elements; `buf` is borrowed
    // exclusively for the slice's lifetime.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Implements `Arg<$param>` for `$arg` (a borrow of a `Buffer<T>`) by the
/// GPU argument of the `CudaSlice` and the emulator argument of the slice.
macro_rules! buffer_arg {
    ($($(#[$doc:meta])* [$($bound:tt)*] $arg:ty => $param:ty, $gpu:ident, $host:ident;)*) => {$(
        $(#[$doc])*
        impl<$($bound)*> Arg<$param> for $arg {
            fn gpu<'a>(self, sink: &mut ArgSink<'a>) -> Result<$param>
            where
                Self: 'a,
            {
                Ok(KernelArg::<$param>::into_param(self.$gpu(BUFFER_ARG)?, sink))
            }
            fn emulator(self) -> Result<$param> {
                Ok(HostArg::<$param>::into_param($host(self)?))
            }
        }
    )*};
}

buffer_arg! {
    [T] &Buffer<T> => *const T, gpu_slice, host_ref;
    [T] &mut Buffer<T> => *const T, gpu_slice, host_ref;
    [T] &mut Buffer<T> => *mut T, gpu_slice_mut, host_mut;
    [T: Copy] &mut Buffer<T> => kernel_device::Gmem<T>, gpu_slice_mut, host_mut;
    [T: Copy] &Buffer<T> => kernel_device::gmem::GmemRef<T>, gpu_slice, host_ref;
    [T: Copy] &mut Buffer<T> => kernel_device::gmem::GmemRef<T>, gpu_slice, host_ref;
    [] &mut Buffer<u32> => kernel_device::Semaphore, gpu_slice_mut, host_mut;
}

/// A tensor map for a `Tma<Tl, RANK>` parameter: only a map made for the
/// same tile type fits.
impl<Tl: TileLayout, const RANK: usize> Arg<TensorMapParam<Tl, RANK>> for &TileMap<'_, Tl, RANK> {
    fn gpu<'a>(self, sink: &mut ArgSink<'a>) -> Result<TensorMapParam<Tl, RANK>>
    where
        Self: 'a,
    {
        match &self.map {
            MapBackend::Gpu(map) => Ok(KernelArg::into_param(map, sink)),
            MapBackend::Emulator(_) => Err(Error::WrongBackend { what: "a tensor map passed to a kernel".into(), value_on: "CPU emulator", device: "GPU" }),
        }
    }
    fn emulator(self) -> Result<TensorMapParam<Tl, RANK>> {
        match &self.map {
            MapBackend::Emulator(map) => Ok(HostArg::into_param(map)),
            MapBackend::Gpu(_) => Err(Error::WrongBackend { what: "a tensor map passed to a kernel".into(), value_on: "GPU", device: "CPU emulator" }),
        }
    }
}

/// A tuple of arguments, one per kernel parameter, for either backend.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not match the kernel's parameters `{Params}`",
    label = "expected one argument per kernel parameter, as a tuple",
    note = "pass the arguments as a tuple in parameter order, e.g. `(&input, &mut output, n)`; one argument is \
            `(x,)`, none is `()`"
)]
pub trait Args<Params> {
    /// The parameter values for a GPU launch.
    fn gpu<'a>(self, sink: &mut ArgSink<'a>) -> Result<Params>
    where
        Self: 'a;
    /// The parameter values for an emulator launch.
    fn emulator(self) -> Result<Params>;
}

macro_rules! tuple_args {
    ($(($A:ident, $P:ident, $a:ident)),*) => {
        impl<$($A, $P),*> Args<($($P,)*)> for ($($A,)*)
        where
            $($P: Copy, $A: Arg<$P>,)*
        {
            #[allow(unused_variables, clippy::unused_unit)]
            fn gpu<'a>(self, sink: &mut ArgSink<'a>) -> Result<($($P,)*)>
            where
                Self: 'a,
            {
                let ($($a,)*) = self;
                Ok(($($a.gpu(sink)?,)*))
            }
            #[allow(clippy::unused_unit)]
            fn emulator(self) -> Result<($($P,)*)> {
                let ($($a,)*) = self;
                Ok(($($a.emulator()?,)*))
            }
        }
    };
}
for_each_tuple_arity!(tuple_args);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulator_buffers_round_trip_and_refuse_the_gpu() {
        let dev = Device::emulator();
        assert!(!dev.is_gpu());
        let mut buf = dev.upload(&[1u32, 2, 3]).unwrap();
        assert_eq!(buf.len(), 3);
        assert_eq!(dev.download(&buf).unwrap(), vec![1, 2, 3]);
        dev.write(&mut buf, &[4, 5, 6]).unwrap();
        assert_eq!(dev.download(&buf).unwrap(), vec![4, 5, 6]);
        assert!(dev.write(&mut buf, &[1]).is_err());
        let zeros = dev.zeros::<f32>(4).unwrap();
        assert_eq!(dev.download(&zeros).unwrap(), vec![0.0; 4]);
        match buf.cuda() {
            Err(Error::GpuOnly { .. }) => {}
            other => panic!("expected GpuOnly, got {other:?}"),
        }
        let mut sink = ArgSink::detached();
        match Arg::<*const u32>::gpu(&buf, &mut sink) {
            Err(e @ Error::WrongBackend { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("CPU emulator") && msg.contains("GPU"), "{msg}");
            }
            other => panic!("expected WrongBackend, got {other:?}"),
        }
    }

    #[test]
    fn describe_names_the_emulator_and_its_sms() {
        let d = Device::emulator().describe();
        assert!(d.contains("CPU emulator") && d.contains("8 emulated SMs"), "{d}");
        assert_eq!(Device::emulator().sm_count(), EMULATED_SMS);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn gpu_buffers_round_trip_and_refuse_emulator_values() {
        let dev = Device::gpu(Gpu::new(0).expect("a CUDA GPU"));
        assert!(dev.is_gpu() && dev.sm_count() > 0, "{}", dev.describe());
        let mut buf = dev.upload(&[1.5f32, -2.0, 3.25]).unwrap();
        assert!(buf.is_gpu() && buf.address() != 0);
        assert_eq!(dev.download(&buf).unwrap(), vec![1.5, -2.0, 3.25]);
        dev.write(&mut buf, &[7.0, 8.0, 9.0]).unwrap();
        assert_eq!(dev.download(&buf).unwrap(), vec![7.0, 8.0, 9.0]);
        let host = Device::emulator().upload(&[1.0f32]).unwrap();
        match dev.download(&host) {
            Err(Error::WrongBackend { value_on: "CPU emulator", device: "GPU", .. }) => {}
            other => panic!("expected WrongBackend, got {other:?}"),
        }
        match Device::emulator().download(&buf) {
            Err(Error::WrongBackend { value_on: "GPU", device: "CPU emulator", .. }) => {}
            other => panic!("expected WrongBackend, got {other:?}"),
        }
    }
}
