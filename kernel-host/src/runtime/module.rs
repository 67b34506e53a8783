//! Loading a kernels crate's device code ([`Module`]) and launching its
//! kernels ([`Kernel`]) through `cuLaunchKernelEx`, with clusters and dynamic
//! shared memory taken from the kernel's [`KernelSpec`].
//!
//! Modules are loaded with the driver API directly (`cuModuleLoadDataEx`)
//! rather than cudarc's `load_module`, which needs cudarc's `nvrtc` feature;
//! this also returns the JIT's error log when PTX fails to load.

use super::args::{ArgSink, KernelArgs, ParamList};
use super::error::{CudaError, Error, Result};
use super::gpu::Gpu;
use super::validate::check_kernel_launch;
use cudarc::driver::result::DriverError;
use cudarc::driver::sys::{self, CUfunction_attribute, CUjit_option};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtrMut};
use kernel_device::launch::{DeviceCode, DeviceImage};
use kernel_device::{Dim3, KernelSpec};
use std::ffi::{c_void, CString};
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

/// Dynamic shared memory a kernel may use without opting in.
pub const DEFAULT_MAX_DYNAMIC_SMEM: u32 = 48 * 1024;

/// Bytes of JIT error log kept when a module fails to load.
const JIT_LOG_BYTES: usize = 16 * 1024;

/// A loaded `CUmodule`, unloaded on drop. Shared by the [`Module`] and its
/// [`Kernel`]s, so a kernel keeps its code loaded.
#[derive(Debug)]
struct LoadedModule {
    raw: sys::CUmodule,
    ctx: Arc<CudaContext>,
    /// The function handles looked up so far, by kernel name (with their
    /// attributes set): [`Module::kernel`] costs a map lookup after the
    /// first call for a kernel, not driver calls.
    funcs: std::sync::Mutex<std::collections::HashMap<&'static str, usize>>,
}

// SAFETY: a `CUmodule` is a driver handle usable from any thread whose
// current context is the module's (every use binds `ctx` first); the driver
// API is thread-safe.
unsafe impl Send for LoadedModule {}
// SAFETY: as above; `&LoadedModule` only reads the handle.
unsafe impl Sync for LoadedModule {}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; cudarc keeps them in the
        // context and returns them from its next call.
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: `raw` was loaded by `cuModuleLoadDataEx` in `ctx`, is
        // unloaded only here, and no `Kernel` outlives this (they hold an
        // `Arc` to it).
        self.ctx
            .record_err(unsafe { sys::cuModuleUnload(self.raw) }.result());
    }
}

/// Loads `image` (a NUL-terminated PTX text or a cubin) into the current
/// context. On failure returns the error and the loader's error log.
///
/// # Safety
/// `image` points to a NUL-terminated PTX string or a complete cubin/fatbin,
/// alive for the call; a context is current on this thread.
unsafe fn load_image(
    image: *const c_void,
) -> std::result::Result<sys::CUmodule, (DriverError, String)> {
    let mut log = vec![0u8; JIT_LOG_BYTES];
    let mut options = [
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    // The driver reads option values as pointer-sized words: the buffer's
    // address, and its size as an integer.
    let mut values: [*mut c_void; 2] = [
        log.as_mut_ptr().cast(),
        std::ptr::without_provenance_mut(JIT_LOG_BYTES),
    ];
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: `image` per this function's contract; `module` is a valid
    // out-pointer; `options`/`values` hold 2 entries each, and the log buffer
    // is `JIT_LOG_BYTES` long and outlives the call.
    let result = unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            image,
            options.len() as u32,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    };
    match result.result() {
        Ok(()) => Ok(module),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
            Err((e, text))
        }
    }
}

/// A kernels crate's device code, loaded on a [`Gpu`]: the image built for
/// the GPU's architecture (its cubin when there is one, else its PTX, which
/// the driver compiles). Cloning shares the loaded module.
#[derive(Clone, Debug)]
pub struct Module {
    loaded: Arc<LoadedModule>,
    stream: Arc<CudaStream>,
    crate_name: &'static str,
    image: &'static DeviceImage,
    max_smem_per_block: u32,
}

impl Gpu {
    /// Loads the image of `code` built for this GPU's architecture.
    ///
    /// Errors: [`Error::NoImageForArch`] when `code` has no image for this
    /// GPU, [`Error::ModuleLoad`] when the driver rejects it.
    pub fn load(&self, code: &'static DeviceCode) -> Result<Module> {
        let image = self
            .arch()
            .and_then(|arch| code.image(arch))
            .ok_or_else(|| Error::NoImageForArch {
                crate_name: code.crate_name,
                device: self.describe(),
                available: code.images.iter().map(|i| i.arch).collect(),
            })?;
        let load_err = |format: &'static str, cuda: CudaError, log: String| Error::ModuleLoad {
            crate_name: code.crate_name,
            arch: image.arch,
            format,
            cuda,
            log,
        };
        self.context()
            .bind_to_thread()
            .map_err(|e| load_err("image", CudaError::from_driver(e), String::new()))?;
        let (format, loaded) = if image.cubin.is_empty() {
            let ptx = CString::new(image.ptx).map_err(|e| {
                load_err(
                    "PTX",
                    CudaError::from_driver(DriverError(sys::CUresult::CUDA_ERROR_INVALID_PTX)),
                    format!("the PTX text has a NUL byte at offset {}", e.nul_position()),
                )
            })?;
            // SAFETY: `ptx` is NUL-terminated and alive for the call; the
            // context was bound above.
            ("PTX", unsafe { load_image(ptx.as_ptr().cast()) })
        } else {
            // The loader parses the cubin as an ELF image; `include_bytes!`
            // data has alignment 1, so copy it to 8-byte-aligned memory.
            let mut aligned = vec![0u64; image.cubin.len().div_ceil(8)];
            // SAFETY: `aligned` has at least `cubin.len()` bytes; the regions
            // are distinct allocations; u64 has no invalid bit patterns.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    image.cubin.as_ptr(),
                    aligned.as_mut_ptr().cast::<u8>(),
                    image.cubin.len(),
                )
            };
            // SAFETY: `aligned` holds the complete cubin and lives for the
            // call; the context was bound above.
            ("cubin", unsafe { load_image(aligned.as_ptr().cast()) })
        };
        let raw = loaded.map_err(|(e, log)| load_err(format, CudaError::from_driver(e), log))?;
        Ok(Module {
            loaded: Arc::new(LoadedModule {
                funcs: Default::default(),
                raw,
                ctx: self.context().clone(),
            }),
            stream: self.stream().clone(),
            crate_name: code.crate_name,
            image,
            max_smem_per_block: self.max_smem_per_block(),
        })
    }
}

impl Module {
    /// The image that was loaded.
    pub fn image(&self) -> &'static DeviceImage {
        self.image
    }

    /// The architecture of the loaded image, e.g. `"sm_90a"`.
    pub fn arch(&self) -> &'static str {
        self.image.arch
    }

    /// The kernels crate's name.
    pub fn crate_name(&self) -> &'static str {
        self.crate_name
    }

    /// The raw `CUmodule`; valid while this `Module` or one of its kernels
    /// lives. Do not unload it.
    pub fn cu_module(&self) -> sys::CUmodule {
        self.loaded.raw
    }

    /// The kernel `K`, ready to launch.
    ///
    /// When `K::SMEM_BYTES` is over 48 KiB this opts the kernel in to that
    /// much dynamic shared memory (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    /// When the kernel opts in to non-portable cluster sizes
    /// (`K::NON_PORTABLE_CLUSTER`, `#[kernel(.., non_portable_cluster)]`) it
    /// sets `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED` to 1, so
    /// clusters of up to 16 CTAs may launch.
    ///
    /// Errors: [`Error::KernelNotFound`] when the module has no entry
    /// `K::NAME`; [`Error::SmemTooLarge`] when the kernel's dynamic plus
    /// static shared memory is over the device's per-CTA maximum.
    pub fn kernel<K: KernelSpec>(&self) -> Result<Kernel<K>> {
        let not_found = || Error::KernelNotFound {
            name: K::NAME,
            crate_name: self.crate_name,
            arch: self.image.arch,
        };
        if !kernel_runs_on(K::ARCHS, self.image.arch) {
            return Err(Error::KernelNotForArch { name: K::NAME, arch: self.image.arch, kernel_archs: K::ARCHS });
        }
        let cached = self.loaded.funcs.lock().unwrap_or_else(|e| e.into_inner()).get(K::NAME).copied();
        if let Some(func) = cached {
            return Ok(Kernel {
                func: func as sys::CUfunction,
                module: self.loaded.clone(),
                stream: self.stream.clone(),
                cluster_check: OnceLock::new(),
                _spec: PhantomData,
            });
        }
        let ctx = &self.loaded.ctx;
        ctx.bind_to_thread()
            .map_err(Error::cuda_call("cuCtxSetCurrent (Module::kernel)"))?;
        let name = CString::new(K::NAME).map_err(|_| not_found())?;
        let mut func: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: `func` is a valid out-pointer, `self.loaded.raw` a loaded
        // module of the current context, `name` NUL-terminated.
        let found = unsafe { sys::cuModuleGetFunction(&mut func, self.loaded.raw, name.as_ptr()) };
        match found.result() {
            Ok(()) => {}
            Err(DriverError(sys::CUresult::CUDA_ERROR_NOT_FOUND)) => return Err(not_found()),
            Err(e) => return Err(Error::cuda_call("cuModuleGetFunction")(e)),
        }

        let get = |attr: CUfunction_attribute, call: &'static str| -> Result<u32> {
            // SAFETY: `func` was just returned by cuModuleGetFunction for a
            // module that `self` keeps loaded.
            let v = unsafe { cudarc::driver::result::function::get_function_attribute(func, attr) }
                .map_err(Error::cuda_call(call))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        let static_bytes = get(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            "cuFuncGetAttribute(SHARED_SIZE_BYTES)",
        )?;
        let dynamic_bytes = K::SMEM_BYTES;
        if u64::from(dynamic_bytes) + u64::from(static_bytes) > u64::from(self.max_smem_per_block) {
            return Err(Error::SmemTooLarge {
                kernel: K::NAME,
                dynamic_bytes,
                static_bytes,
                max_bytes: self.max_smem_per_block,
            });
        }
        if dynamic_bytes > DEFAULT_MAX_DYNAMIC_SMEM {
            // SAFETY: `func` is a live function handle (as above).
            unsafe {
                cudarc::driver::result::function::set_function_attribute(
                    func,
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    // At most the device maximum, checked above: fits an i32.
                    i32::try_from(dynamic_bytes).unwrap_or(i32::MAX),
                )
            }
            .map_err(Error::cuda_call(
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            ))?;
        }
        if K::NON_PORTABLE_CLUSTER {
            // SAFETY: `func` is a live function handle (as above).
            unsafe {
                cudarc::driver::result::function::set_function_attribute(
                    func,
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                    1,
                )
            }
            .map_err(Error::cuda_call(
                "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)",
            ))?;
        }
        self.loaded.funcs.lock().unwrap_or_else(|e| e.into_inner()).insert(K::NAME, func as usize);
        Ok(Kernel {
            func,
            module: self.loaded.clone(),
            stream: self.stream.clone(),
            cluster_check: OnceLock::new(),
            _spec: PhantomData,
        })
    }
}

/// The cluster-dimension launch attribute for `cluster`, or `None` for
/// `(1, 1, 1)` (a launch without clusters carries no attribute).
fn cluster_attribute(cluster: Dim3) -> Option<sys::CUlaunchAttribute> {
    if cluster == Dim3::new(1, 1, 1) {
        return None;
    }
    Some(cluster_dimension_attribute(cluster))
}

/// The `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION` attribute for `cluster`.
fn cluster_dimension_attribute(cluster: Dim3) -> sys::CUlaunchAttribute {
    let mut value = sys::CUlaunchAttributeValue { pad: [0; 64] };
    value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 {
        x: cluster.x,
        y: cluster.y,
        z: cluster.z,
    };
    sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value,
    }
}

/// A kernel of a loaded [`Module`], launched with the block shape, cluster
/// shape and dynamic shared memory of its [`KernelSpec`].
pub struct Kernel<K: KernelSpec> {
    func: sys::CUfunction,
    module: Arc<LoadedModule>,
    stream: Arc<CudaStream>,
    /// For a cluster kernel, `cuOccupancyMaxActiveClusters`'s answer, asked
    /// at the first launch (it depends only on `K` and the function's
    /// attributes, set when the kernel was made).
    cluster_check: OnceLock<std::result::Result<u32, CudaError>>,
    _spec: PhantomData<fn() -> K>,
}

/// What a cluster launch's occupancy query (or the launch itself) says
/// about whether the GPU can co-schedule one cluster.
#[derive(Debug, PartialEq, Eq)]
enum ClusterVerdict {
    /// Go on with the launch.
    Launch,
    /// The GPU cannot: [`Error::ClusterNotSchedulable`], with the driver's
    /// error if it refused.
    NotSchedulable(Option<CudaError>),
}

/// How [`Kernel::launch`] reads the answer of `cuOccupancyMaxActiveClusters`
/// for a cluster of `ctas` CTAs: 0 clusters, or a refused cluster size
/// (`CUDA_ERROR_INVALID_CLUSTER_SIZE`), means the kernel cannot run; any
/// other failure of the query (`CUDA_ERROR_INVALID_VALUE` included, which
/// might be the query's own) is left to the launch, whose refusal
/// [`is_cluster_refusal`] reads.
fn cluster_verdict(ctas: u32, answer: &std::result::Result<u32, CudaError>) -> ClusterVerdict {
    match answer {
        Ok(0) if ctas > 1 => ClusterVerdict::NotSchedulable(None),
        Err(e) if ctas > 1 && e.result == sys::CUresult::CUDA_ERROR_INVALID_CLUSTER_SIZE => {
            ClusterVerdict::NotSchedulable(Some(e.clone()))
        }
        _ => ClusterVerdict::Launch,
    }
}

/// Whether the launch error `e`, for a cluster of `ctas` CTAs, says that the
/// cluster cannot be scheduled: `CUDA_ERROR_INVALID_CLUSTER_SIZE`, or
/// `CUDA_ERROR_INVALID_VALUE` for a non-portable size (more than 8 CTAs:
/// what the driver may answer when the function lacks the opt-in).
fn is_cluster_refusal(ctas: u32, e: &CudaError) -> bool {
    use sys::CUresult::*;
    ctas > 1
        && (e.result == CUDA_ERROR_INVALID_CLUSTER_SIZE
            || (ctas > kernel_device::launch::MAX_CLUSTER_CTAS && e.result == CUDA_ERROR_INVALID_VALUE))
}

// SAFETY: a `CUfunction` is a driver handle, valid while `module` is loaded
// (the `Arc` keeps it) and usable from any thread once the module's context
// is current (every launch binds it); the driver API is thread-safe.
unsafe impl<K: KernelSpec> Send for Kernel<K> {}
// SAFETY: as above; launching needs only `&self`.
unsafe impl<K: KernelSpec> Sync for Kernel<K> {}

impl<K: KernelSpec> std::fmt::Debug for Kernel<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &K::NAME)
            .field("block", &K::BLOCK)
            .field("cluster", &K::CLUSTER)
            .field("smem_bytes", &K::SMEM_BYTES)
            .finish()
    }
}

impl<K: KernelSpec> Kernel<K> {
    /// The PTX entry point's name.
    pub fn name(&self) -> &'static str {
        K::NAME
    }

    /// The raw `CUfunction`; valid while this `Kernel` lives.
    pub fn cu_function(&self) -> sys::CUfunction {
        self.func
    }

    /// A launch configuration of one cluster (the grid is the cluster) for
    /// the occupancy queries. `attr` must outlive the config's use.
    fn one_cluster_config(attr: &mut sys::CUlaunchAttribute) -> sys::CUlaunchConfig {
        sys::CUlaunchConfig {
            gridDimX: K::CLUSTER.x,
            gridDimY: K::CLUSTER.y,
            gridDimZ: K::CLUSTER.z,
            blockDimX: K::BLOCK.x,
            blockDimY: K::BLOCK.y,
            blockDimZ: K::BLOCK.z,
            sharedMemBytes: K::SMEM_BYTES,
            hStream: std::ptr::null_mut(),
            attrs: std::ptr::from_mut(attr),
            numAttrs: 1,
        }
    }

    /// How many clusters of this kernel (its `CLUSTER`, `BLOCK` and
    /// `SMEM_BYTES`) the GPU can run at once (`cuOccupancyMaxActiveClusters`);
    /// 0 means it cannot run even one: every CTA of a cluster must fit on one
    /// GPC at the same time. Asked of the driver on every call.
    ///
    /// Errors: [`Error::Cuda`] when the driver refuses the query (e.g.
    /// `CUDA_ERROR_INVALID_CLUSTER_SIZE` for a cluster size the function is
    /// not allowed).
    pub fn max_active_clusters(&self) -> Result<u32> {
        self.module
            .ctx
            .bind_to_thread()
            .map_err(Error::cuda_call("cuCtxSetCurrent (Kernel::max_active_clusters)"))?;
        self.query_max_active_clusters()
            .map_err(|cuda| Error::Cuda { call: "cuOccupancyMaxActiveClusters", cuda })
    }

    /// How many CTAs of this kernel (its `BLOCK` and `SMEM_BYTES`) fit on
    /// one SM at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`),
    /// asked of the driver on every call. [`Launcher::occupancy`](crate::Launcher::occupancy)
    /// gives it with the limiting resource.
    pub fn max_active_blocks_per_sm(&self) -> Result<u32> {
        self.module
            .ctx
            .bind_to_thread()
            .map_err(Error::cuda_call("cuCtxSetCurrent (Kernel::max_active_blocks_per_sm)"))?;
        let mut n: std::ffi::c_int = 0;
        let threads = std::ffi::c_int::try_from(K::BLOCK.x * K::BLOCK.y * K::BLOCK.z).unwrap_or(std::ffi::c_int::MAX);
        // SAFETY: `n` is a valid out-pointer; `self.func` is a function of
        // the module `self.module` keeps loaded, whose context is bound.
        unsafe { sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut n, self.func, threads, K::SMEM_BYTES as usize) }
            .result()
            .map_err(Error::cuda_call("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?;
        Ok(u32::try_from(n).unwrap_or(0))
    }

    /// What one CTA of this kernel holds, from the loaded function
    /// (`cuFuncGetAttribute`: registers per thread, static shared memory)
    /// and its `KernelSpec` (block size, dynamic shared memory).
    pub fn resources(&self) -> Result<kernel_spec::occupancy::Resources> {
        self.module.ctx.bind_to_thread().map_err(Error::cuda_call("cuCtxSetCurrent (Kernel::resources)"))?;
        let get = |attr: CUfunction_attribute, call: &'static str| -> Result<u32> {
            // SAFETY: `self.func` is a live function handle of the module
            // `self.module` keeps loaded, whose context is bound.
            let v = unsafe { cudarc::driver::result::function::get_function_attribute(self.func, attr) }.map_err(Error::cuda_call(call))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        let registers = get(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS, "cuFuncGetAttribute(NUM_REGS)")?;
        let static_smem = get(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "cuFuncGetAttribute(SHARED_SIZE_BYTES)")?;
        Ok(kernel_spec::occupancy::Resources {
            threads: K::BLOCK.x * K::BLOCK.y * K::BLOCK.z,
            registers,
            smem_bytes: static_smem + K::SMEM_BYTES,
        })
    }

    /// `cuOccupancyMaxActiveClusters` for one cluster of `K`; the context is
    /// bound by the caller.
    fn query_max_active_clusters(&self) -> std::result::Result<u32, CudaError> {
        let mut attr = cluster_dimension_attribute(K::CLUSTER);
        let config = Self::one_cluster_config(&mut attr);
        let mut n: std::ffi::c_int = 0;
        // SAFETY: `n` is a valid out-pointer; `config` is fully initialized
        // and its `attrs` points to one attribute alive in `attr`; `self.func`
        // is a function of the module `self.module` keeps loaded, whose
        // context the caller bound.
        unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, self.func, &config) }
            .result()
            .map_err(CudaError::from_driver)?;
        Ok(u32::try_from(n).unwrap_or(0))
    }

    /// The largest cluster (CTAs) the GPU can co-schedule for this kernel
    /// (`cuOccupancyMaxPotentialClusterSize`, which honours the
    /// non-portable opt-in), or `None` if the driver cannot say.
    fn largest_cluster(&self) -> Option<u32> {
        let mut attr = cluster_dimension_attribute(K::CLUSTER);
        let mut config = Self::one_cluster_config(&mut attr);
        // The query takes no cluster shape: it finds one.
        config.attrs = std::ptr::null_mut();
        config.numAttrs = 0;
        let mut n: std::ffi::c_int = 0;
        // SAFETY: as in `query_max_active_clusters`, with no attributes.
        let r = unsafe { sys::cuOccupancyMaxPotentialClusterSize(&mut n, self.func, &config) };
        r.result().ok().and_then(|()| u32::try_from(n).ok())
    }

    fn not_schedulable(&self, cuda: Option<CudaError>) -> Error {
        Error::ClusterNotSchedulable {
            kernel: K::NAME,
            cluster: K::CLUSTER,
            block: K::BLOCK,
            smem_bytes: K::SMEM_BYTES,
            non_portable: K::NON_PORTABLE_CLUSTER,
            cuda,
            largest: self.largest_cluster(),
        }
    }

    fn launch_error(grid: Dim3, cuda: CudaError) -> Error {
        Error::Launch {
            kernel: K::NAME,
            grid,
            block: K::BLOCK,
            cluster: K::CLUSTER,
            smem_bytes: K::SMEM_BYTES,
            cuda,
        }
    }

    /// Queues the kernel on the GPU's stream over `grid` CTAs, with `args`
    /// (one per parameter, as a tuple: `(&input, &mut output, n)`).
    ///
    /// The launch is checked first ([`check_launch`](super::check_launch):
    /// grid non-zero and a multiple of the cluster shape, block and cluster
    /// sizes, up to 16 CTAs for a kernel with `K::NON_PORTABLE_CLUSTER`);
    /// for a cluster kernel, the first launch asks the driver whether the
    /// GPU can co-schedule one cluster (`cuOccupancyMaxActiveClusters`) and
    /// returns [`Error::ClusterNotSchedulable`] if not (also when the launch
    /// itself fails with `CUDA_ERROR_INVALID_CLUSTER_SIZE`); any other CUDA
    /// failure to launch is [`Error::Launch`]. The kernel runs
    /// asynchronously: a fault while it runs is reported by a later call on
    /// the stream (or use [`Kernel::launch_sync`]).
    ///
    /// Safety is the kernel's: it must stay within the buffers it is given.
    pub fn launch<A>(&self, grid: impl Into<Dim3>, args: A) -> Result<()>
    where
        A: KernelArgs<K::Params>,
        K::Params: ParamList,
    {
        let grid = grid.into();
        self.prepare(grid)?;
        let mut sink = ArgSink::new(&self.stream);
        let params = args.pack(&mut sink);
        self.submit(grid, sink, params)
    }

    /// The checks and set-up before a launch of `grid`: the launch rules,
    /// the context bound to this thread, and (first cluster launch) the
    /// driver's answer whether one cluster can be co-scheduled.
    pub(crate) fn prepare(&self, grid: Dim3) -> Result<()> {
        check_kernel_launch::<K>(grid).map_err(|problem| {
            Error::InvalidLaunch {
                kernel: K::NAME,
                problem,
            }
        })?;
        self.module
            .ctx
            .bind_to_thread()
            .map_err(|e| Self::launch_error(grid, CudaError::from_driver(e)))?;
        let ctas = K::CLUSTER.volume();
        if ctas > 1 {
            let answer = self.cluster_check.get_or_init(|| self.query_max_active_clusters());
            if let ClusterVerdict::NotSchedulable(cuda) = cluster_verdict(ctas, answer) {
                return Err(self.not_schedulable(cuda));
            }
        }
        Ok(())
    }

    /// The stream launches go to.
    pub(crate) fn stream(&self) -> &CudaStream {
        &self.stream
    }

    /// Queues the kernel over `grid` with the packed `params` (after
    /// [`Kernel::prepare`]); `sink` keeps the buffers' guards until the
    /// launch is queued.
    pub(crate) fn submit(&self, grid: Dim3, sink: ArgSink<'_>, mut params: K::Params) -> Result<()>
    where
        K::Params: ParamList,
    {
        let ctas = K::CLUSTER.volume();
        let mut param_ptrs = params.param_ptrs();
        // The kernel's `#[global_scratch]` (`kernel_device::global`): zeroed
        // on the launch stream before the kernel, passed as the hidden last
        // parameter, freed (stream-ordered, after the kernel) when `global`
        // drops at the end of this function.
        let mut global: Option<CudaSlice<u8>> = match K::GLOBAL_SCRATCH_BYTES {
            0 => None,
            bytes => Some(self.stream.alloc_zeros::<u8>(bytes).map_err(Error::cuda_call(
                "cuMemAllocAsync + cuMemsetD8Async (the kernel's #[global_scratch])",
            ))?),
        };
        let (mut global_addr, global_guard) = match global.as_mut() {
            Some(buf) => {
                let (addr, guard) = buf.device_ptr_mut(&self.stream);
                (addr, Some(guard))
            }
            None => (0, None),
        };
        if global_guard.is_some() {
            param_ptrs.push(std::ptr::from_mut(&mut global_addr).cast::<c_void>());
        }
        let kernel_params = if param_ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            param_ptrs.as_mut_ptr()
        };
        let mut cluster = cluster_attribute(K::CLUSTER);
        let (attrs, num_attrs) = match cluster.as_mut() {
            Some(attr) => (std::ptr::from_mut(attr), 1),
            None => (std::ptr::null_mut(), 0),
        };
        let config = sys::CUlaunchConfig {
            gridDimX: grid.x,
            gridDimY: grid.y,
            gridDimZ: grid.z,
            blockDimX: K::BLOCK.x,
            blockDimY: K::BLOCK.y,
            blockDimZ: K::BLOCK.z,
            sharedMemBytes: K::SMEM_BYTES,
            // The device's stream, or the caller's under graph capture.
            hStream: super::gpu::launch_stream(&self.stream),
            attrs,
            numAttrs: num_attrs,
        };
        // SAFETY: `config` is fully initialized and its `attrs` points to
        // `num_attrs` attributes alive in `cluster`; `self.func` is a function
        // of the module `self.module` keeps loaded, in the context bound
        // above; `kernel_params` is null for a kernel without parameters or
        // points to `K::Params::LEN` pointers, each to a value of the type
        // `#[kernel]` declared for that parameter, all in `params`, which is
        // neither moved nor dropped before the call returns (the driver
        // copies the values during the call), then, for a kernel with
        // `#[global_scratch]`, one to `global_addr` (the hidden `u64`
        // parameter `#[kernel]` appends), alive until after the call; no
        // `extra` is passed.
        // The module's context again: packing may have bound another
        // context (a buffer of another device of a group), and this
        // module's function launched there is CUDA_ERROR_INVALID_HANDLE.
        self.module
            .ctx
            .bind_to_thread()
            .map_err(|e| Self::launch_error(grid, CudaError::from_driver(e)))?;
        let result = unsafe {
            sys::cuLaunchKernelEx(&config, self.func, kernel_params, std::ptr::null_mut())
        };
        // The guards record the buffers' use on the stream now that the
        // launch is queued.
        drop(sink);
        drop(global_guard);
        drop(global);
        if result == sys::CUresult::CUDA_SUCCESS {
            super::gpu::record_launch(K::NAME, grid);
        }
        result.result().map_err(|e| {
            let cuda = CudaError::from_driver(e);
            if is_cluster_refusal(ctas, &cuda) {
                self.not_schedulable(Some(cuda))
            } else {
                Self::launch_error(grid, cuda)
            }
        })
    }

    /// [`Kernel::launch`], then waits for the kernel to finish, so that a
    /// fault while it runs (an out-of-bounds access, a device panic's `trap`)
    /// is returned as [`Error::KernelFault`] naming this kernel.
    pub fn launch_sync<A>(&self, grid: impl Into<Dim3>, args: A) -> Result<()>
    where
        A: KernelArgs<K::Params>,
        K::Params: ParamList,
    {
        let grid = grid.into();
        self.launch(grid, args)?;
        self.wait(grid)
    }

    /// Waits for the stream after a launch over `grid`; a fault is
    /// [`Error::KernelFault`] naming this kernel.
    pub(crate) fn wait(&self, grid: Dim3) -> Result<()> {
        self.stream.synchronize().map_err(|e| Error::KernelFault {
            kernel: K::NAME,
            grid,
            block: K::BLOCK,
            cluster: K::CLUSTER,
            smem_bytes: K::SMEM_BYTES,
            cuda: CudaError::from_driver(e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_cluster_attribute_for_unit_cluster() {
        assert!(cluster_attribute(Dim3::new(1, 1, 1)).is_none());
    }

    #[test]
    fn cluster_attribute_carries_the_shape() {
        let attr = cluster_attribute(Dim3::new(2, 1, 4)).expect("a cluster attribute");
        assert_eq!(
            attr.id,
            sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        );
        // SAFETY: `clusterDim` is the field `cluster_attribute` wrote.
        let dim = unsafe { attr.value.clusterDim };
        assert_eq!((dim.x, dim.y, dim.z), (2, 1, 4));
    }

    /// The occupancy answer decides a cluster launch: 0 clusters or a
    /// refused size is an error before launching, other query failures are
    /// left to the launch.
    #[test]
    fn cluster_verdicts() {
        use sys::CUresult::*;
        let err = |r| CudaError { result: r, description: String::new() };
        assert_eq!(cluster_verdict(16, &Ok(7)), ClusterVerdict::Launch);
        assert_eq!(cluster_verdict(2, &Ok(0)), ClusterVerdict::NotSchedulable(None));
        assert_eq!(cluster_verdict(16, &Ok(0)), ClusterVerdict::NotSchedulable(None));
        let e = err(CUDA_ERROR_INVALID_CLUSTER_SIZE);
        assert_eq!(cluster_verdict(4, &Err(e.clone())), ClusterVerdict::NotSchedulable(Some(e)));
        // Other query failures are left to the launch...
        assert_eq!(cluster_verdict(16, &Err(err(CUDA_ERROR_INVALID_VALUE))), ClusterVerdict::Launch);
        assert_eq!(cluster_verdict(16, &Err(err(CUDA_ERROR_NOT_SUPPORTED))), ClusterVerdict::Launch);
        // ... whose INVALID_VALUE is a refusal for a non-portable size only
        // (for a portable one the launch error keeps its own hint).
        assert!(is_cluster_refusal(16, &err(CUDA_ERROR_INVALID_VALUE)));
        assert!(!is_cluster_refusal(8, &err(CUDA_ERROR_INVALID_VALUE)));
        assert!(is_cluster_refusal(2, &err(CUDA_ERROR_INVALID_CLUSTER_SIZE)));
        assert!(!is_cluster_refusal(1, &err(CUDA_ERROR_INVALID_CLUSTER_SIZE)));
        assert!(!is_cluster_refusal(16, &err(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)));
        assert_eq!(cluster_verdict(1, &Ok(0)), ClusterVerdict::Launch);
    }
}

/// Whether a kernel built for `kernel_archs` (empty: every architecture the
/// crate is built for) has an entry in an image for `image_arch`.
pub fn kernel_runs_on(kernel_archs: &[&str], image_arch: &str) -> bool {
    kernel_archs.is_empty() || kernel_archs.contains(&image_arch)
}

#[cfg(test)]
mod arch_tests {
    use super::kernel_runs_on;
    use crate::runtime::gpu::arch_for;

    /// The image follows the device's compute capability, and a kernel
    /// restricted to another architecture is refused (not looked up).
    #[test]
    fn image_and_kernel_selection_by_compute_capability() {
        assert_eq!(arch_for((9, 0)), Some("sm_90a"));
        assert_eq!(arch_for((10, 0)), Some("sm_100a"));
        assert_eq!(arch_for((8, 0)), None);
        assert!(kernel_runs_on(&[], "sm_90a") && kernel_runs_on(&[], "sm_100a"));
        assert!(kernel_runs_on(&["sm_100a"], "sm_100a"));
        assert!(!kernel_runs_on(&["sm_100a"], "sm_90a"));
        assert!(!kernel_runs_on(&["sm_90a"], "sm_100a"));
    }
}
