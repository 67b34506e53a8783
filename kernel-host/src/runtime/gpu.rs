//! [`Gpu`]: one CUDA device's context and the stream work goes to, with
//! buffer helpers over cudarc's [`CudaSlice`].

use super::error::{CudaError, Error, Result};
use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::sys::{self, CUdevice_attribute};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
use std::cell::Cell;
use std::sync::{Arc, OnceLock};

thread_local! {
    /// The stream this thread's launches go to instead of the device's own
    /// while [`Gpu::in_order_with`] runs for a stream under CUDA-graph
    /// capture (the `CUstream` as an address).
    static LAUNCH_STREAM: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The stream a launch queued now on `own` goes to: `own`, or the caller's
/// stream under capture ([`Gpu::in_order_with`]).
pub(crate) fn launch_stream(own: &CudaStream) -> sys::CUstream {
    match LAUNCH_STREAM.with(Cell::get) {
        Some(s) => s as sys::CUstream,
        None => own.cu_stream(),
    }
}

/// Whether libcuda can be loaded. cudarc (with `dynamic-loading`) panics on
/// the first driver call when it cannot, so every path into the driver checks
/// this first. Loading is tried once per process.
pub(crate) fn culib_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| {
        // SAFETY: `is_culib_present` only `dlopen`s libcuda (running its
        // initializers, as cudarc's own first call would) and closes it again;
        // the NVIDIA driver library is made to be loaded this way.
        unsafe { sys::is_culib_present() }
    })
}

/// The PTX target built for a compute capability: `(9, 0)` is `"sm_90a"`
/// (H100/H200), `(10, 0)` is `"sm_100a"` (B200); other devices have none.
pub fn arch_for(compute_capability: (u32, u32)) -> Option<&'static str> {
    match compute_capability {
        (9, 0) => Some("sm_90a"),
        (10, 0) => Some("sm_100a"),
        _ => None,
    }
}

/// What `cuInit` failing with `err` usually means.
fn init_hint(err: &CudaError) -> &'static str {
    use sys::CUresult::*;
    match err.result {
        CUDA_ERROR_NO_DEVICE => {
            "the driver sees no GPU (check `nvidia-smi`, and that CUDA_VISIBLE_DEVICES is not \
             empty or wrong)"
        }
        CUDA_ERROR_STUB_LIBRARY => {
            "the libcuda.so found is the CUDA toolkit's stub (lib64/stubs), not the driver's; \
             take the stubs directory out of LD_LIBRARY_PATH"
        }
        CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER | CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => {
            "the NVIDIA driver is too old for CUDA 13.0; install driver 580 or newer"
        }
        CUDA_ERROR_SYSTEM_DRIVER_MISMATCH => {
            "libcuda does not match the loaded kernel module; reboot or reinstall the driver"
        }
        _ => "check `nvidia-smi`",
    }
}

/// The checks [`Gpu::new`] makes before creating a context, over their
/// outcomes, so that each way of having no GPU is testable without one.
/// `init` and `count` are called only when libcuda is present. Returns the
/// device count.
fn check_driver(
    lib_present: bool,
    init: impl FnOnce() -> std::result::Result<(), DriverError>,
    count: impl FnOnce() -> std::result::Result<i32, DriverError>,
    ordinal: usize,
) -> Result<usize> {
    if !lib_present {
        return Err(Error::NoGpu {
            reason: "libcuda.so could not be loaded (no NVIDIA driver on this machine, or \
                     libcuda.so.1 is not on the library path)"
                .into(),
        });
    }
    if let Err(e) = init() {
        let cuda = CudaError::from_driver(e);
        let hint = init_hint(&cuda);
        return Err(Error::NoGpu {
            reason: format!("cuInit failed with {cuda}: {hint}"),
        });
    }
    let count = match count() {
        Ok(n) => usize::try_from(n).unwrap_or(0),
        Err(e) => {
            return Err(Error::NoGpu {
                reason: format!("cuDeviceGetCount failed with {}", CudaError::from_driver(e)),
            })
        }
    };
    if count == 0 {
        return Err(Error::NoGpu {
            reason: "the NVIDIA driver is loaded but reports 0 CUDA devices (check \
                     `nvidia-smi` and CUDA_VISIBLE_DEVICES)"
                .into(),
        });
    }
    if ordinal >= count {
        return Err(Error::NoSuchDevice { ordinal, count });
    }
    Ok(count)
}

/// How many recent launches [`record_launch`] keeps.
const RECENT_LAUNCHES: usize = 8;

/// The process's most recent kernel launches since the last completed
/// [`Gpu::synchronize`] (at most [`RECENT_LAUNCHES`], oldest first): a
/// kernel that faults while running (after its launch returned) is
/// reported at a later call, and these name the candidates
/// ([`Error::AsyncFault`]).
static RECENT: std::sync::Mutex<std::collections::VecDeque<(&'static str, kernel_device::Dim3)>> = std::sync::Mutex::new(std::collections::VecDeque::new());

/// Records a queued launch of `kernel` over `grid` (see [`RECENT`]).
pub(crate) fn record_launch(kernel: &'static str, grid: kernel_device::Dim3) {
    let mut r = RECENT.lock().unwrap_or_else(|e| e.into_inner());
    if r.len() == RECENT_LAUNCHES {
        r.pop_front();
    }
    r.push_back((kernel, grid));
}

/// The recorded launches, oldest first, as `name (grid (x, y, z))`.
pub(crate) fn recent_launches() -> Vec<String> {
    let r = RECENT.lock().unwrap_or_else(|e| e.into_inner());
    r.iter().map(|(k, g)| format!("`{k}` (grid ({}, {}, {}))", g.x, g.y, g.z)).collect()
}

/// Forgets the recorded launches: every one has completed.
fn launches_completed() {
    RECENT.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// One CUDA device: its primary context and the stream that uploads,
/// downloads and launches go to (the context's default stream, so work is
/// ordered without events).
///
/// Cloning shares the context and stream.
#[derive(Clone, Debug)]
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    cc: (u32, u32),
    sm_count: u32,
    max_smem_per_block: u32,
}

impl Gpu {
    /// Opens device `ordinal` (0 is the first GPU).
    ///
    /// Returns [`Error::NoGpu`] (see [`Error::is_no_gpu`]) when there is no
    /// NVIDIA driver, `cuInit` fails or the driver reports no devices, and
    /// [`Error::NoSuchDevice`] when `ordinal` is out of range; it never
    /// panics for lack of a GPU.
    pub fn new(ordinal: usize) -> Result<Gpu> {
        check_driver(culib_present(), cu::init, cu::device::get_count, ordinal)?;
        let ctx =
            CudaContext::new(ordinal).map_err(Error::cuda_call("cuDevicePrimaryCtxRetain"))?;
        let name = ctx.name().map_err(Error::cuda_call("cuDeviceGetName"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(Error::cuda_call("cuDeviceGetAttribute(COMPUTE_CAPABILITY)"))?;
        let attr = |a: CUdevice_attribute, call: &'static str| -> Result<u32> {
            let v = ctx.attribute(a).map_err(Error::cuda_call(call))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        let sm_count = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)",
        )?;
        let max_smem_per_block = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)",
        )?;
        let stream = ctx.default_stream();
        Ok(Gpu {
            ctx,
            stream,
            name,
            cc: (
                u32::try_from(major).unwrap_or(0),
                u32::try_from(minor).unwrap_or(0),
            ),
            sm_count,
            max_smem_per_block,
        })
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The device name, e.g. `"NVIDIA H100 80GB HBM3"`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `(major, minor)`, e.g. `(9, 0)` for an H100.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.cc
    }

    /// Number of SMs (132 on an H100 SXM).
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// Most shared memory (static plus dynamic) one CTA may use, with opt-in
    /// (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`; 232448 bytes
    /// on an H100).
    pub fn max_smem_per_block(&self) -> u32 {
        self.max_smem_per_block
    }

    /// The PTX target this toolkit builds for this device (`"sm_90a"`,
    /// `"sm_100a"`), if any; see [`arch_for`].
    pub fn arch(&self) -> Option<&'static str> {
        arch_for(self.cc)
    }

    /// `"NAME (compute capability X.Y)"`, for messages.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} (compute capability {}.{})",
            self.name, self.cc.0, self.cc.1
        )
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream that uploads, downloads and launches go to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Runs `f` (which queues work on [`Gpu::stream`]) in stream order with
    /// `stream`, a raw `CUstream` of this device's primary context owned by
    /// someone else (torch's `torch.cuda.current_stream().cuda_stream`, a
    /// JAX or CuPy stream): the work waits for what `stream` had queued, and
    /// what `stream` queues afterwards waits for the work, through two
    /// events; no host synchronization. `stream = 0` is the legacy default
    /// stream, which [`Gpu::stream`] is: `f` just runs.
    ///
    /// # Safety
    /// `stream` is 0 or a live stream of this device's primary context.
    ///
    /// While `stream` is being captured into a CUDA graph, `f`'s launches go
    /// to `stream` itself (the graph records them; [`Gpu::stream`], the
    /// legacy stream, cannot join a capture), with no events; anything else
    /// `f` queues (an allocation, a copy) would fail with the driver's
    /// capture error, so an op is capturable when, like a kernel-ops plan's
    /// `run`, it only launches.
    pub unsafe fn in_order_with(&self, stream: u64, f: impl FnOnce() -> Result<()>) -> Result<()> {
        if stream == 0 {
            return f();
        }
        let foreign = stream as cudarc::driver::sys::CUstream;
        // SAFETY: the caller's contract on `stream`.
        let status = unsafe { cu::stream::is_capturing(foreign) }.map_err(Error::cuda_call("cuStreamIsCapturing (caller's stream)"))?;
        if status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
            let previous = LAUNCH_STREAM.with(|s| s.replace(Some(foreign as usize)));
            let r = f();
            LAUNCH_STREAM.with(|s| s.set(previous));
            return r;
        }
        let before = self.ctx.new_event(None).map_err(Error::cuda_call("cuEventCreate"))?;
        // SAFETY: the caller's contract on `stream`; the event is live.
        unsafe { cu::event::record(before.cu_event(), foreign) }.map_err(Error::cuda_call("cuEventRecord (caller's stream)"))?;
        self.stream.wait(&before).map_err(Error::cuda_call("cuStreamWaitEvent"))?;
        f()?;
        let after = self.stream.record_event(None).map_err(Error::cuda_call("cuEventRecord"))?;
        // SAFETY: as above.
        unsafe { cu::stream::wait_event(foreign, after.cu_event(), cudarc::driver::sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
            .map_err(Error::cuda_call("cuStreamWaitEvent (caller's stream)"))?;
        Ok(())
    }

    /// Waits for all work on the stream. A kernel that faulted since the last
    /// synchronization shows up here as a sticky CUDA error (use
    /// [`Kernel::launch_sync`](super::Kernel::launch_sync) to learn which).
    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(Error::cuda_call("cuStreamSynchronize (Gpu::synchronize)"))?;
        launches_completed();
        Ok(())
    }

    /// Copies `data` into a new device buffer.
    pub fn upload<T: DeviceRepr>(&self, data: &[T]) -> Result<CudaSlice<T>> {
        self.stream.clone_htod(data).map_err(Error::cuda_call(
            "cuMemAllocAsync + cuMemcpyHtoDAsync (Gpu::upload)",
        ))
    }

    /// A new device buffer of `len` zeroed elements.
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>> {
        self.stream.alloc_zeros(len).map_err(Error::cuda_call(
            "cuMemAllocAsync + cuMemsetD8Async (Gpu::zeros)",
        ))
    }

    /// Copies `buf` back to the host, after all work queued before it on the
    /// stream (so after earlier launches) has finished.
    pub fn download<T: DeviceRepr>(&self, buf: &CudaSlice<T>) -> Result<Vec<T>> {
        let out = self
            .stream
            .clone_dtoh(buf)
            .map_err(Error::cuda_call("cuMemcpyDtoHAsync (Gpu::download)"))?;
        // Surfaces errors cudarc recorded in drop guards, and any fault of a
        // kernel that ran before the copy.
        self.stream
            .synchronize()
            .map_err(Error::cuda_call("cuStreamSynchronize (Gpu::download)"))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_gpu_reason(r: Result<usize>) -> String {
        match r {
            Err(Error::NoGpu { reason }) => reason,
            other => panic!("expected Error::NoGpu, got {other:?}"),
        }
    }

    #[test]
    fn gpu_new_without_a_gpu_is_an_error_value() {
        match Gpu::new(0) {
            Err(e) if !culib_present() || e.is_no_gpu() => {
                assert!(e.is_no_gpu(), "{e:?}");
                let msg = e.to_string();
                assert!(msg.starts_with("no CUDA GPU found: "), "{msg}");
                if !culib_present() {
                    assert!(msg.contains("libcuda.so could not be loaded"), "{msg}");
                }
            }
            Err(e) => panic!("a GPU is present but Gpu::new failed: {e}"),
            Ok(gpu) => {
                // A machine with a GPU: the device must describe itself.
                assert!(culib_present());
                assert!(!gpu.name().is_empty());
                assert!(
                    gpu.compute_capability().0 >= 7,
                    "{:?}",
                    gpu.compute_capability()
                );
                assert!(gpu.sm_count() > 0);
            }
        }
    }

    #[test]
    fn missing_libcuda_is_no_gpu_and_calls_nothing() {
        let reason = no_gpu_reason(check_driver(
            false,
            || panic!("cuInit called without libcuda"),
            || panic!("cuDeviceGetCount called without libcuda"),
            0,
        ));
        assert!(
            reason.contains("libcuda.so could not be loaded"),
            "{reason}"
        );
        assert!(reason.contains("no NVIDIA driver"), "{reason}");
    }

    #[test]
    fn failed_cuinit_is_no_gpu_naming_the_error() {
        let reason = no_gpu_reason(check_driver(
            true,
            || Err(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)),
            || panic!("cuDeviceGetCount called after cuInit failed"),
            0,
        ));
        assert!(
            reason.contains("cuInit failed with CUDA_ERROR_NO_DEVICE (100"),
            "{reason}"
        );
        assert!(reason.contains("CUDA_VISIBLE_DEVICES"), "{reason}");
    }

    #[test]
    fn zero_devices_is_no_gpu() {
        let reason = no_gpu_reason(check_driver(true, || Ok(()), || Ok(0), 0));
        assert!(reason.contains("reports 0 CUDA devices"), "{reason}");
    }

    #[test]
    fn ordinal_out_of_range_is_not_no_gpu() {
        match check_driver(true, || Ok(()), || Ok(2), 2) {
            Err(
                e @ Error::NoSuchDevice {
                    ordinal: 2,
                    count: 2,
                },
            ) => {
                assert!(!e.is_no_gpu());
                let msg = e.to_string();
                assert!(msg.contains("no CUDA device with ordinal 2"), "{msg}");
                assert!(msg.contains("below 2"), "{msg}");
            }
            other => panic!("expected NoSuchDevice, got {other:?}"),
        }
        assert_eq!(check_driver(true, || Ok(()), || Ok(2), 1).ok(), Some(2));
    }

    #[test]
    fn maps_compute_capability_to_arch() {
        assert_eq!(arch_for((9, 0)), Some("sm_90a"));
        assert_eq!(arch_for((10, 0)), Some("sm_100a"));
        assert_eq!(arch_for((8, 0)), None);
        assert_eq!(arch_for((12, 0)), None);
        assert_eq!(arch_for((10, 3)), None);
    }
}
