//! Errors of the CUDA runtime: one [`Error`] enum whose messages name the
//! rule that was broken, the values involved and the fix.
//!
//! CUDA driver failures carry a [`CudaError`]: the `CUresult` code, its name
//! (`CUDA_ERROR_ILLEGAL_ADDRESS`) and the driver's description, captured when
//! the error happened so that formatting an [`Error`] never calls the driver.

use cudarc::driver::result::DriverError;
use cudarc::driver::sys;
use kernel_device::launch::MAX_CLUSTER_CTAS;
use kernel_device::Dim3;
use std::fmt;

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A CUDA driver error, with the driver's description captured when it
/// happened (formatting never calls the driver).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaError {
    /// The `CUresult`; match on it, e.g.
    /// `sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS`.
    pub result: sys::CUresult,
    /// The driver's description (`cuGetErrorString`), empty when the driver
    /// library could not be asked.
    pub description: String,
}

impl CudaError {
    /// Captures `err` and its description. The description is asked of the
    /// driver only when libcuda can be loaded (with cudarc's
    /// `dynamic-loading`, calling into an absent libcuda panics).
    /// Captures a raw `CUresult` of a direct driver call.
    pub fn from_result(r: cudarc::driver::sys::CUresult) -> Self {
        Self::from_driver(DriverError(r))
    }

    pub fn from_driver(err: DriverError) -> Self {
        let description = if super::gpu::culib_present() {
            err.error_string()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            String::new()
        };
        CudaError {
            result: err.0,
            description,
        }
    }

    /// The `CUresult` name, e.g. `"CUDA_ERROR_ILLEGAL_ADDRESS"` (the enum
    /// variant's name, so no driver call is needed).
    pub fn name(&self) -> String {
        format!("{:?}", self.result)
    }

    /// The `CUresult` value, e.g. `700`.
    pub fn code(&self) -> u32 {
        self.result as u32
    }

    /// Whether this error is sticky: a kernel faulted (bad address, `trap`,
    /// misaligned access...) and the CUDA context can no longer be used; every
    /// later call on it returns the same error.
    pub fn is_sticky(&self) -> bool {
        use sys::CUresult::*;
        matches!(
            self.result,
            CUDA_ERROR_ILLEGAL_ADDRESS
                | CUDA_ERROR_LAUNCH_TIMEOUT
                | CUDA_ERROR_ASSERT
                | CUDA_ERROR_HARDWARE_STACK_ERROR
                | CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUDA_ERROR_MISALIGNED_ADDRESS
                | CUDA_ERROR_INVALID_ADDRESS_SPACE
                | CUDA_ERROR_INVALID_PC
                | CUDA_ERROR_LAUNCH_FAILED
                | CUDA_ERROR_TENSOR_MEMORY_LEAK
                | CUDA_ERROR_ECC_UNCORRECTABLE
        )
    }
}

impl From<DriverError> for CudaError {
    fn from(err: DriverError) -> Self {
        CudaError::from_driver(err)
    }
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({}", self.result, self.code())?;
        if !self.description.is_empty() {
            write!(f, ": {}", self.description)?;
        }
        write!(f, ")")
    }
}

/// Why a launch configuration was rejected before reaching CUDA (see
/// [`check_launch`](super::check_launch)): `kernel_spec`'s launch rules,
/// whose messages the emulator and `#[kernel]` show too.
pub use kernel_spec::launch::LaunchProblem;

/// Everything that can go wrong in the runtime.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// No usable CUDA GPU: libcuda is missing, `cuInit` failed, or the driver
    /// reports no devices. Tests and examples skip on this one
    /// ([`Error::is_no_gpu`]).
    NoGpu { reason: String },
    /// The requested device ordinal does not exist.
    NoSuchDevice { ordinal: usize, count: usize },
    /// A driver call outside a launch failed (context creation, allocation,
    /// copies, synchronization).
    Cuda { call: &'static str, cuda: CudaError },
    /// The kernels crate has no image for this GPU's architecture.
    NoImageForArch {
        crate_name: &'static str,
        /// The device's name and compute capability.
        device: String,
        /// The architectures the crate was built for.
        available: Vec<&'static str>,
    },
    /// `cuModuleLoadDataEx` rejected the image.
    ModuleLoad {
        crate_name: &'static str,
        arch: &'static str,
        /// `"cubin"` or `"PTX"`.
        format: &'static str,
        cuda: CudaError,
        /// The JIT/loader error log (ptxas messages for PTX), possibly empty.
        log: String,
    },
    /// The module has no entry point named `name`.
    KernelNotFound {
        name: &'static str,
        crate_name: &'static str,
        arch: &'static str,
    },
    /// The kernel is restricted to other architectures (`#[kernel(arch =
    /// ..)]`, e.g. a tcgen05 kernel, `sm_100a` only) than the loaded image's
    /// (the device's).
    KernelNotForArch {
        name: &'static str,
        /// The loaded image's architecture (the device's).
        arch: &'static str,
        /// The architectures the kernel is built for.
        kernel_archs: &'static [&'static str],
    },
    /// The kernel's dynamic plus static shared memory is over the device's
    /// per-CTA opt-in maximum.
    SmemTooLarge {
        kernel: &'static str,
        dynamic_bytes: u32,
        static_bytes: u32,
        max_bytes: u32,
    },
    /// The launch configuration breaks a rule checked before calling CUDA.
    InvalidLaunch {
        kernel: &'static str,
        problem: LaunchProblem,
    },
    /// The GPU cannot run one cluster of the kernel: it cannot co-schedule
    /// that many CTAs, with this kernel's threads and shared memory each, on
    /// one GPC (`cuOccupancyMaxActiveClusters` said 0, or refused the
    /// cluster size, or the launch failed with `CUDA_ERROR_INVALID_CLUSTER_SIZE`).
    ClusterNotSchedulable {
        kernel: &'static str,
        cluster: Dim3,
        block: Dim3,
        smem_bytes: u32,
        /// Whether the kernel opts in to non-portable cluster sizes
        /// (`KernelSpec::NON_PORTABLE_CLUSTER`).
        non_portable: bool,
        /// The driver's error, when it refused (rather than answering 0
        /// clusters); `None` when the occupancy query returned 0.
        cuda: Option<CudaError>,
        /// The largest cluster (in CTAs) this GPU can co-schedule for the
        /// kernel (`cuOccupancyMaxPotentialClusterSize`), when the driver
        /// could say.
        largest: Option<u32>,
    },
    /// `cuLaunchKernelEx` (or preparing for it) failed.
    Launch {
        kernel: &'static str,
        grid: Dim3,
        block: Dim3,
        cluster: Dim3,
        smem_bytes: u32,
        cuda: CudaError,
    },
    /// The kernel was launched but failed while running (found by
    /// [`Kernel::launch_sync`](super::Kernel::launch_sync)).
    KernelFault {
        kernel: &'static str,
        grid: Dim3,
        block: Dim3,
        cluster: Dim3,
        smem_bytes: u32,
        cuda: CudaError,
    },
    /// A driver call returned a sticky error: a kernel queued earlier
    /// faulted while it ran (its launch had returned). `recent` names the
    /// launches since the last completed [`Gpu::synchronize`](super::Gpu::synchronize)
    /// (the last few, oldest first): the faulting one is among them.
    AsyncFault {
        call: &'static str,
        cuda: CudaError,
        recent: Vec<String>,
    },
    /// cuBLAS could not be loaded, or a cuBLAS call failed (see
    /// [`Blas`](super::Blas)).
    Cublas {
        call: &'static str,
        /// The `cublasStatus_t` name, or why the library could not be loaded.
        reason: String,
    },
    /// An argument of a runtime helper is out of range: matrix dimensions that
    /// do not match the buffers, no iterations to time.
    InvalidArgument {
        function: &'static str,
        problem: String,
    },
    /// A TMA tensor map breaks `cuTensorMapEncodeTiled`'s documented rules
    /// (checked before the driver is called; see [`TensorMapSpec`](super::TensorMapSpec)).
    TensorMap {
        /// What was being made, with every argument.
        context: String,
        /// Every problem, one per violated field (its name, value and rule).
        problems: Vec<String>,
    },
    /// `cuTensorMapEncodeTiled` rejected a tensor map that passed the checks.
    TensorMapEncode {
        cuda: CudaError,
        /// Every argument, as passed to the driver.
        args: String,
    },
    /// A kernel run on the CPU emulator failed: a data race, a protocol
    /// misuse (mbarrier, TMA, wgmma, TMEM), a deadlock, a panic in the
    /// kernel; the report names the kernel, the rule and the threads.
    Emulator(Box<kernel_emu::EmuError>),
    /// A value made for one backend was used with the other: a buffer or
    /// tensor map of the emulator in a GPU launch, or the reverse.
    WrongBackend {
        /// What was passed (`"buffer"`, `"tensor map"`) and where.
        what: String,
        /// The backend the value belongs to.
        value_on: &'static str,
        /// The backend of the operation.
        device: &'static str,
    },
    /// The occupancy of a kernel was asked on the CPU emulator, which
    /// computes it from the ptxas report in the kernels crate's
    /// `DEVICE_CODE`, and the crate was built without ptxas (or the report
    /// lacks the kernel).
    NoPtxasReport {
        kernel: &'static str,
        crate_name: &'static str,
        arch: &'static str,
    },
    /// A GPU-only feature (timing, cuBLAS, cluster occupancy queries) was
    /// asked of the CPU emulator.
    GpuOnly {
        /// The feature.
        what: &'static str,
    },
    /// Two GPUs of a `DeviceGroup` cannot address each other's memory
    /// (`cuDeviceCanAccessPeer` said no: no NVLink or PCIe P2P path, or
    /// P2P disabled).
    NoPeerAccess { from: usize, to: usize },
    /// NCCL could not be loaded, or an NCCL call failed
    /// (`kernel_host::nccl`).
    Nccl {
        call: &'static str,
        reason: String,
    },
}

impl From<kernel_emu::EmuError> for Error {
    fn from(e: kernel_emu::EmuError) -> Self {
        Error::Emulator(Box::new(e))
    }
}

impl Error {
    /// Whether this is [`Error::NoGpu`]: there is no GPU to run on, as opposed
    /// to a GPU on which something failed.
    pub fn is_no_gpu(&self) -> bool {
        matches!(self, Error::NoGpu { .. })
    }

    /// The CUDA error inside, if the driver reported one.
    pub fn cuda(&self) -> Option<&CudaError> {
        match self {
            Error::ClusterNotSchedulable { cuda: Some(cuda), .. } => Some(cuda),
            Error::Cuda { cuda, .. }
            | Error::ModuleLoad { cuda, .. }
            | Error::Launch { cuda, .. }
            | Error::KernelFault { cuda, .. }
            | Error::AsyncFault { cuda, .. }
            | Error::TensorMapEncode { cuda, .. } => Some(cuda),
            _ => None,
        }
    }

    /// A [`Error::Cuda`] for the driver call `call`.
    pub(crate) fn cuda_call(call: &'static str) -> impl FnOnce(DriverError) -> Error {
        move |e| {
            let cuda = CudaError::from_driver(e);
            if cuda.is_sticky() {
                Error::AsyncFault { call, cuda, recent: super::gpu::recent_launches() }
            } else {
                Error::Cuda { call, cuda }
            }
        }
    }
}

/// The hint appended to messages carrying a sticky error from an unknown kernel.
const STICKY_HINT: &str = "this error is sticky: a kernel faulted (out-of-bounds or misaligned \
    access, or a `trap` from a device panic: failed bounds check, `unwrap` on `None`, `panic!`) \
    and this CUDA context cannot be used again; launch with `Kernel::launch_sync` to find which \
    kernel, then restart the process";

/// The hint appended to [`Error::KernelFault`] messages.
const FAULT_HINT: &str = "the usual causes are an out-of-bounds or misaligned access, or a \
    `trap` from a device panic (failed bounds check, `unwrap` on `None`, `panic!`); this CUDA \
    context cannot be used again: restart the process";

/// Extra advice for errors `cuLaunchKernelEx` returns.
fn launch_hint(cuda: &CudaError) -> Option<&'static str> {
    use sys::CUresult::*;
    Some(match cuda.result {
        CUDA_ERROR_INVALID_CLUSTER_SIZE => {
            "the cluster shape is not schedulable for this kernel on this GPU (its CTAs do not \
             fit together in one GPC); use a smaller cluster or fewer resources per CTA"
        }
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => {
            "the CTA needs more registers than an SM has (registers per thread x threads per \
             block); use fewer threads per CTA or fewer registers per thread"
        }
        CUDA_ERROR_INVALID_VALUE => {
            "a launch parameter is out of range for this kernel (dynamic shared memory over the \
             kernel's limit, or a block larger than the kernel's max threads per block)"
        }
        CUDA_ERROR_INVALID_HANDLE => {
            "the kernel's module was unloaded or belongs to another context"
        }
        _ => return None,
    })
}

/// Extra advice for errors `cuTensorMapEncodeTiled` returns.
fn tensor_map_hint(cuda: &CudaError) -> Option<&'static str> {
    use sys::CUresult::*;
    Some(match cuda.result {
        CUDA_ERROR_INVALID_VALUE => {
            "the driver rejected an argument that passed this runtime's checks of the documented \
             rules (a rule missing from `TensorMapSpec::problems`, or one of a newer driver); \
             the arguments are above"
        }
        CUDA_ERROR_NOT_INITIALIZED | CUDA_ERROR_INVALID_CONTEXT | CUDA_ERROR_DEINITIALIZED => {
            "open a Gpu first (or make a CUDA context current on this thread)"
        }
        _ => return None,
    })
}

/// Extra advice for errors `cuModuleLoadDataEx` returns.
fn load_hint(cuda: &CudaError) -> Option<&'static str> {
    use sys::CUresult::*;
    Some(match cuda.result {
        CUDA_ERROR_INVALID_PTX => "the driver's JIT rejected the PTX; the loader log says why",
        CUDA_ERROR_UNSUPPORTED_PTX_VERSION => {
            "the PTX ISA version is newer than this driver's JIT supports; update the driver, \
             or build a cubin with ptxas at build time"
        }
        CUDA_ERROR_NO_BINARY_FOR_GPU | CUDA_ERROR_INVALID_IMAGE => {
            "the image was not built for this GPU or is corrupt; rebuild the kernels crate"
        }
        _ => return None,
    })
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoGpu { reason } => write!(f, "no CUDA GPU found: {reason}"),
            Error::NoSuchDevice { ordinal, count } => write!(
                f,
                "no CUDA device with ordinal {ordinal}: the driver reports {count} device(s); \
                 pass an ordinal below {count}"
            ),
            Error::AsyncFault { call, cuda, recent } => {
                write!(f, "{call} failed: {cuda}: a kernel faulted while it ran, after its launch had returned; ")?;
                if recent.is_empty() {
                    write!(f, "no launch of this program's kernels since the last completed synchronization (another library's kernel, or one launched before it)")?;
                } else {
                    write!(f, "it is one of the launches since the last completed synchronization (oldest first): {}", recent.join(", "))?;
                }
                write!(f, "; {STICKY_HINT}")
            }
            Error::Cuda { call, cuda } => {
                write!(f, "{call} failed: {cuda}")?;
                if cuda.is_sticky() {
                    write!(f, "; {STICKY_HINT}")?;
                }
                Ok(())
            }
            Error::NoImageForArch {
                crate_name,
                device,
                available,
            } => write!(
                f,
                "kernels crate `{crate_name}` has no device image for {device}: it was built for \
                 {available:?}; this toolkit targets sm_90a (compute capability 9.0, H100/H200) \
                 and sm_100a (10.0, B200); build the kernels crate for the GPU's architecture"
            ),
            Error::ModuleLoad {
                crate_name,
                arch,
                format,
                cuda,
                log,
            } => {
                write!(
                    f,
                    "loading the {arch} {format} of kernels crate `{crate_name}` failed: {cuda}"
                )?;
                if let Some(hint) = load_hint(cuda) {
                    write!(f, "; {hint}")?;
                }
                if !log.is_empty() {
                    write!(f, "\nloader log:\n{log}")?;
                }
                Ok(())
            }
            Error::KernelNotFound {
                name,
                crate_name,
                arch,
            } => write!(
                f,
                "kernel `{name}` is not in the {arch} image of kernels crate `{crate_name}` \
                 (cuModuleGetFunction found no `.entry {name}`); the embedded DEVICE_CODE is \
                 stale or the kernel is not a `#[kernel]` of that crate: rebuild the kernels \
                 crate and load the DEVICE_CODE of the crate that defines the kernel"
            ),
            Error::KernelNotForArch { name, arch, kernel_archs } => write!(
                f,
                "kernel `{name}` has no {arch} image: it is built only for {kernel_archs:?} \
                 (`#[kernel(arch = ..)]`: e.g. tcgen05/TMEM kernels need sm_100a, a B200 of compute \
                 capability 10.0; wgmma kernels need sm_90a, an H100/H200 of 9.0), and this device \
                 loaded the {arch} image; run it on a GPU of that architecture, or on the CPU \
                 emulator (kernel_host::emulate)"
            ),
            Error::SmemTooLarge {
                kernel,
                dynamic_bytes,
                static_bytes,
                max_bytes,
            } => write!(
                f,
                "kernel `{kernel}` needs {dynamic_bytes} bytes of dynamic shared memory plus \
                 {static_bytes} static, {} in all, but this GPU allows at most {max_bytes} bytes \
                 per CTA; shrink the kernel's shared scratch (tiles or pipeline stages)",
                u64::from(*dynamic_bytes) + u64::from(*static_bytes)
            ),
            Error::InvalidLaunch { kernel, problem } => {
                write!(f, "cannot launch kernel `{kernel}`: {problem}")
            }
            Error::ClusterNotSchedulable {
                kernel,
                cluster,
                block,
                smem_bytes,
                non_portable,
                cuda,
                largest,
            } => {
                let ctas = cluster.volume();
                let threads = block.volume();
                write!(
                    f,
                    "cannot launch kernel `{kernel}` in clusters of {cluster} = {ctas} CTAs: all CTAs \
                     of a cluster run at once on one GPC, and this GPU cannot co-schedule {ctas} \
                     CTAs of {threads} threads and {smem_bytes} bytes of dynamic shared memory \
                     each there "
                )?;
                match cuda {
                    None => write!(f, "(cuOccupancyMaxActiveClusters: 0 clusters)")?,
                    Some(c) => write!(f, "(the driver refused the cluster: {c})")?,
                }
                if ctas > MAX_CLUSTER_CTAS && !non_portable {
                    write!(
                        f,
                        "; a cluster over {MAX_CLUSTER_CTAS} CTAs needs the non-portable opt-in: \
                         `#[kernel(.., non_portable_cluster)]`, which makes the host set \
                         CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED when it loads the kernel"
                    )?;
                } else if ctas > MAX_CLUSTER_CTAS {
                    write!(
                        f,
                        "; clusters over {MAX_CLUSTER_CTAS} CTAs are non-portable: this GPU (or \
                         its MIG slice) may support fewer, and \
                         CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED must be set on the \
                         function (`Module::kernel` sets it)"
                    )?;
                }
                if let Some(n) = largest {
                    write!(f, "; the largest cluster this GPU can co-schedule for this kernel is {n} CTAs")?;
                }
                write!(
                    f,
                    "; fix: use a smaller cluster, or less shared memory or fewer threads per CTA"
                )
            }
            Error::Launch {
                kernel,
                grid,
                block,
                cluster,
                smem_bytes,
                cuda,
            } => {
                write!(
                    f,
                    "launching kernel `{kernel}` (grid {grid}, block {block}, cluster {cluster}, \
                     {smem_bytes} bytes of dynamic shared memory) failed: {cuda}"
                )?;
                if cuda.is_sticky() {
                    write!(
                        f,
                        "; the error comes from an earlier kernel on this context, not from \
                         this launch; {STICKY_HINT}"
                    )?;
                } else if let Some(hint) = launch_hint(cuda) {
                    write!(f, "; {hint}")?;
                }
                Ok(())
            }
            Error::KernelFault {
                kernel,
                grid,
                block,
                cluster,
                smem_bytes,
                cuda,
            } => {
                write!(
                    f,
                    "kernel `{kernel}` (grid {grid}, block {block}, cluster {cluster}, \
                     {smem_bytes} bytes of dynamic shared memory) failed while running: {cuda}"
                )?;
                if cuda.is_sticky() {
                    write!(f, "; {FAULT_HINT}")?;
                }
                Ok(())
            }
            Error::Cublas { call, reason } => write!(f, "{call} failed: {reason}"),
            Error::InvalidArgument { function, problem } => {
                write!(f, "invalid argument to {function}: {problem}")
            }
            Error::TensorMap { context, problems } => {
                let n = problems.len();
                let s = if n == 1 { "" } else { "s" };
                write!(f, "invalid TMA tensor map ({n} problem{s}) for {context}:")?;
                for p in problems {
                    write!(f, "\n  - {p}")?;
                }
                Ok(())
            }
            Error::TensorMapEncode { cuda, args } => {
                write!(
                    f,
                    "cuTensorMapEncodeTiled failed: {cuda}, with arguments {args}"
                )?;
                if let Some(hint) = tensor_map_hint(cuda) {
                    write!(f, "; {hint}")?;
                }
                Ok(())
            }
            Error::Emulator(e) => write!(f, "on the CPU emulator: {e}"),
            Error::WrongBackend { what, value_on, device } => write!(
                f,
                "{what} lives on the {value_on} but the operation runs on the {device}: buffers and \
                 tensor maps belong to the `Device` that made them; make it with that device's \
                 `upload`/`zeros` (or download it and upload it to the other device)"
            ),
            Error::Nccl { call, reason } => write!(f, "{call} failed: {reason}"),
            Error::NoPeerAccess { from, to } => write!(
                f,
                "GPU {from} cannot access GPU {to}'s memory (cuDeviceCanAccessPeer = 0): a device group needs \
                 peer access between every pair (NVLink or PCIe P2P); group GPUs that `nvidia-smi topo -p2p r` \
                 shows as OK, or exchange data through host memory or NCCL instead"
            ),
            Error::NoPtxasReport { kernel, crate_name, arch } => write!(
                f,
                "the occupancy of kernel `{kernel}` on the CPU emulator is computed from its registers per thread in \
                 ptxas's report, and the {arch} image of crate `{crate_name}` has no report of it: the crate was built \
                 without ptxas; install it (tools/install-ptxas.sh, or set KERNEL_PTXAS) and rebuild the crate"
            ),
            Error::GpuOnly { what } => write!(
                f,
                "{what} needs a CUDA GPU and this `Device` is the CPU emulator (it checks \
                 correctness, not speed); run on a GPU machine, or skip this step when \
                 `Device::is_gpu()` is false"
            ),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;
    use sys::CUresult::*;

    fn cuda(result: sys::CUresult) -> CudaError {
        CudaError::from_driver(DriverError(result))
    }

    fn launch(result: sys::CUresult) -> Error {
        Error::Launch {
            kernel: "gemm",
            grid: Dim3::new(132, 1, 1),
            block: Dim3::new(384, 1, 1),
            cluster: Dim3::new(2, 1, 1),
            smem_bytes: 200_000,
            cuda: cuda(result),
        }
    }

    #[test]
    fn cuda_errors_carry_their_name_and_code() {
        let e = cuda(CUDA_ERROR_NOT_FOUND);
        assert_eq!(e.name(), "CUDA_ERROR_NOT_FOUND");
        assert_eq!(e.code(), 500);
        let msg = e.to_string();
        assert!(msg.starts_with("CUDA_ERROR_NOT_FOUND (500"), "{msg}");
        assert!(msg.ends_with(')'), "{msg}");
    }

    #[test]
    fn only_kernel_faults_are_sticky() {
        assert!(cuda(CUDA_ERROR_ILLEGAL_ADDRESS).is_sticky());
        assert!(cuda(CUDA_ERROR_LAUNCH_FAILED).is_sticky());
        assert!(cuda(CUDA_ERROR_ILLEGAL_INSTRUCTION).is_sticky());
        assert!(!cuda(CUDA_ERROR_INVALID_VALUE).is_sticky());
        assert!(!cuda(CUDA_ERROR_OUT_OF_MEMORY).is_sticky());
    }

    #[test]
    fn launch_errors_name_the_launch_and_advise() {
        let msg = launch(CUDA_ERROR_INVALID_CLUSTER_SIZE).to_string();
        assert!(
            msg.starts_with(
                "launching kernel `gemm` (grid (132, 1, 1), block (384, 1, 1), cluster (2, 1, 1), \
                 200000 bytes of dynamic shared memory) failed: CUDA_ERROR_INVALID_CLUSTER_SIZE (912"
            ),
            "{msg}"
        );
        assert!(msg.contains("use a smaller cluster"), "{msg}");

        // A sticky error at launch time belongs to an earlier kernel.
        let msg = launch(CUDA_ERROR_ILLEGAL_ADDRESS).to_string();
        assert!(msg.contains("comes from an earlier kernel"), "{msg}");
        assert!(msg.contains("launch_sync"), "{msg}");
    }

    #[test]
    fn sticky_errors_of_later_calls_name_the_launches_since_the_last_sync() {
        // A non-sticky error stays a plain `Cuda` error.
        let plain = Error::cuda_call("cuMemcpyDtoHAsync")(DriverError(CUDA_ERROR_INVALID_VALUE));
        assert!(matches!(plain, Error::Cuda { .. }), "{plain:?}");
        super::super::gpu::record_launch("attention_fwd", Dim3::new(4, 8, 2));
        let e = Error::cuda_call("cuStreamSynchronize (Gpu::synchronize)")(DriverError(CUDA_ERROR_ILLEGAL_ADDRESS));
        let msg = e.to_string();
        assert!(matches!(e, Error::AsyncFault { .. }), "{e:?}");
        assert!(msg.starts_with("cuStreamSynchronize (Gpu::synchronize) failed: CUDA_ERROR_ILLEGAL_ADDRESS (700"), "{msg}");
        assert!(msg.contains("one of the launches since the last completed synchronization (oldest first): "), "{msg}");
        assert!(msg.contains("`attention_fwd` (grid (4, 8, 2))"), "{msg}");
        assert!(msg.contains("this error is sticky"), "{msg}");
        assert_eq!(e.cuda().map(|c| c.result), Some(CUDA_ERROR_ILLEGAL_ADDRESS));
        let none = Error::AsyncFault { call: "cuStreamSynchronize", cuda: cuda(CUDA_ERROR_ILLEGAL_ADDRESS), recent: vec![] };
        assert!(none.to_string().contains("no launch of this program's kernels since the last completed synchronization"), "{none}");
    }

    #[test]
    fn kernel_faults_explain_the_usual_causes() {
        let e = Error::KernelFault {
            kernel: "gemm",
            grid: Dim3::new(1, 1, 1),
            block: Dim3::new(32, 1, 1),
            cluster: Dim3::new(1, 1, 1),
            smem_bytes: 0,
            cuda: cuda(CUDA_ERROR_LAUNCH_FAILED),
        };
        let msg = e.to_string();
        assert!(msg.starts_with("kernel `gemm` (grid (1, 1, 1)"), "{msg}");
        assert!(
            msg.contains("failed while running: CUDA_ERROR_LAUNCH_FAILED (719"),
            "{msg}"
        );
        assert!(msg.contains("`trap` from a device panic"), "{msg}");
        assert_eq!(e.cuda().map(|c| c.result), Some(CUDA_ERROR_LAUNCH_FAILED));
        assert!(!e.is_no_gpu());
    }

    #[test]
    fn lookup_and_resource_errors_name_values_and_fix() {
        let msg = Error::KernelNotForArch { name: "matmul0__128_4", arch: "sm_90a", kernel_archs: &["sm_100a"] }.to_string();
        assert!(
            msg.starts_with("kernel `matmul0__128_4` has no sm_90a image: it is built only for [\"sm_100a\"]"),
            "{msg}"
        );
        let msg = Error::KernelNotFound {
            name: "gemm",
            crate_name: "my_kernels",
            arch: "sm_90a",
        }
        .to_string();
        assert!(
            msg.starts_with(
                "kernel `gemm` is not in the sm_90a image of kernels crate `my_kernels`"
            ),
            "{msg}"
        );
        assert!(msg.contains("rebuild the kernels crate"), "{msg}");

        let msg = Error::SmemTooLarge {
            kernel: "gemm",
            dynamic_bytes: 230_000,
            static_bytes: 4096,
            max_bytes: 232_448,
        }
        .to_string();
        assert!(
            msg.contains("230000 bytes of dynamic shared memory plus 4096 static, 234096 in all"),
            "{msg}"
        );
        assert!(msg.contains("at most 232448 bytes per CTA"), "{msg}");

        let msg = Error::NoImageForArch {
            crate_name: "my_kernels",
            device: "NVIDIA A100 (compute capability 8.0)".into(),
            available: vec!["sm_90a", "sm_100a"],
        }
        .to_string();
        assert!(
            msg.contains("no device image for NVIDIA A100 (compute capability 8.0)"),
            "{msg}"
        );
        assert!(msg.contains("[\"sm_90a\", \"sm_100a\"]"), "{msg}");

        let msg = Error::ModuleLoad {
            crate_name: "my_kernels",
            arch: "sm_90a",
            format: "PTX",
            cuda: cuda(CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
            log: "ptxas fatal: bad version".into(),
        }
        .to_string();
        assert!(
            msg.starts_with("loading the sm_90a PTX of kernels crate `my_kernels`"),
            "{msg}"
        );
        assert!(msg.contains("update the driver"), "{msg}");
        assert!(
            msg.ends_with("loader log:\nptxas fatal: bad version"),
            "{msg}"
        );
    }

    #[test]
    fn unschedulable_clusters_name_the_rule_values_and_fix() {
        let e = Error::ClusterNotSchedulable {
            kernel: "allreduce16",
            cluster: Dim3::new(16, 1, 1),
            block: Dim3::new(256, 1, 1),
            smem_bytes: 200_000,
            non_portable: true,
            cuda: None,
            largest: None,
        };
        let msg = e.to_string();
        assert!(
            msg.starts_with(
                "cannot launch kernel `allreduce16` in clusters of (16, 1, 1) = 16 CTAs: all CTAs \
                 of a cluster run at once on one GPC, and this GPU cannot co-schedule 16 CTAs of \
                 256 threads and 200000 bytes of dynamic shared memory each there \
                 (cuOccupancyMaxActiveClusters: 0 clusters)"
            ),
            "{msg}"
        );
        assert!(msg.contains("clusters over 8 CTAs are non-portable"), "{msg}");
        assert!(
            msg.ends_with("fix: use a smaller cluster, or less shared memory or fewer threads per CTA"),
            "{msg}"
        );
        assert_eq!(e.cuda(), None);

        // Refused by the driver, and the kernel did not opt in: the fix names the option.
        let e = Error::ClusterNotSchedulable {
            kernel: "allreduce16",
            cluster: Dim3::new(16, 1, 1),
            block: Dim3::new(32, 1, 1),
            smem_bytes: 1024,
            non_portable: false,
            cuda: Some(cuda(CUDA_ERROR_INVALID_CLUSTER_SIZE)),
            largest: Some(8),
        };
        let msg = e.to_string();
        assert!(
            msg.contains("(the driver refused the cluster: CUDA_ERROR_INVALID_CLUSTER_SIZE (912"),
            "{msg}"
        );
        assert!(msg.contains("`#[kernel(.., non_portable_cluster)]`"), "{msg}");
        assert!(msg.contains("the largest cluster this GPU can co-schedule for this kernel is 8 CTAs"), "{msg}");
        assert_eq!(e.cuda().map(|c| c.result), Some(CUDA_ERROR_INVALID_CLUSTER_SIZE));

        // A portable cluster that does not fit: no word about the opt-in.
        let e = Error::ClusterNotSchedulable {
            kernel: "k",
            cluster: Dim3::new(8, 1, 1),
            block: Dim3::new(1024, 1, 1),
            smem_bytes: 232_448,
            non_portable: false,
            cuda: None,
            largest: None,
        };
        let msg = e.to_string();
        assert!(!msg.contains("non-portable") && !msg.contains("non_portable"), "{msg}");
        assert!(msg.contains("8 CTAs of 1024 threads and 232448 bytes"), "{msg}");
    }

    #[test]
    fn no_gpu_is_distinguishable() {
        let e = Error::NoGpu {
            reason: "libcuda.so could not be loaded".into(),
        };
        assert!(e.is_no_gpu());
        assert_eq!(
            e.to_string(),
            "no CUDA GPU found: libcuda.so could not be loaded"
        );
        assert!(!Error::NoSuchDevice {
            ordinal: 1,
            count: 1
        }
        .is_no_gpu());
        let e = Error::InvalidLaunch {
            kernel: "k",
            problem: LaunchProblem::ZeroGrid {
                grid: Dim3::new(0, 1, 1),
            },
        };
        assert!(!e.is_no_gpu());
        assert!(
            e.to_string()
                .starts_with("cannot launch kernel `k`: grid (0, 1, 1)"),
            "{e}"
        );
    }

    #[test]
    fn error_is_a_small_thread_safe_std_error() {
        fn assert_std_error<E: std::error::Error + Send + Sync + 'static>() {}
        assert_std_error::<Error>();
        // Under clippy's `result_large_err` threshold, so callers' functions
        // returning `Result<_, Error>` do not trip it.
        assert!(
            std::mem::size_of::<Error>() <= 128,
            "{}",
            std::mem::size_of::<Error>()
        );
    }
}
