//! Launch metadata shared by the device and the host.
//!
//! `#[kernel]` implements [`KernelSpec`] for every kernel (and for every listed
//! instance of a const-generic kernel); `kernel-host` reads it to launch with
//! the right entry point, block shape, cluster shape and dynamic shared memory.
//! [`DeviceCode`] is what a kernels crate embeds for the host: one
//! [`DeviceImage`] per target architecture. [`Dim3`] and the launch limits
//! are `kernel_spec`'s, re-exported here.

pub use kernel_spec::Dim3;
/// The launch limits, defined in [`kernel_spec::limits`].
pub use kernel_spec::limits::{
    MAX_BLOCK_THREADS, MAX_CLUSTER_CTAS, MAX_NON_PORTABLE_CLUSTER_CTAS, MAX_SMEM_BYTES,
};

/// Static description of a kernel entry point, implemented by `#[kernel]`.
///
/// A const-generic kernel implements it only for the instances it lists in
/// `instances(...)`, so launching any other instance does not compile.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a compiled kernel",
    label = "no entry point for this type",
    note = "a `#[kernel]` function with const or type generics is compiled only for the instances listed in \
            `#[kernel(instances(...))]`: add this instance there"
)]
pub trait KernelSpec {
    /// The PTX entry point (`.visible .entry NAME`): the function's name, or
    /// for an instance of a kernel with const generics the name, `__`, and
    /// the values joined by `_` (`swiglu::<3>` is `swiglu__3`,
    /// `matmul::<4, 8>` is `matmul__4_8`; see [`kernel`](macro@crate::kernel#ptx-entry-names)).
    const NAME: &'static str;
    /// Threads per CTA.
    const BLOCK: Dim3;
    /// CTAs per cluster; `(1, 1, 1)` launches without a cluster.
    const CLUSTER: Dim3;
    /// Whether the kernel opts in to non-portable cluster sizes (more than
    /// [`MAX_CLUSTER_CTAS`], at most [`MAX_NON_PORTABLE_CLUSTER_CTAS`] CTAs):
    /// `#[kernel(.., non_portable_cluster)]`. The host then sets
    /// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED` on the function
    /// when it loads it.
    const NON_PORTABLE_CLUSTER: bool = false;
    /// Dynamic shared memory the kernel's scratch parameters need, in bytes.
    const SMEM_BYTES: u32;
    /// Global memory the kernel's `#[global_scratch]` parameters need, in
    /// bytes (0: none). The host launcher allocates and zeroes this much
    /// before each launch, passes its address as a hidden last parameter
    /// (after [`KernelSpec::Params`]) and frees it after the launch
    /// ([`crate::global`]).
    const GLOBAL_SCRATCH_BYTES: usize = 0;
    /// What the host passes for the kernel's non-scratch parameters: their
    /// [`DeviceParam::Abi`] types, as a tuple, in order.
    type Params;
    /// The architectures the entry point is built for (`#[kernel(arch = ..)]`);
    /// empty means every architecture of the build.
    const ARCHS: &'static [&'static str] = &[];
}

/// The host (CPU emulator) entry of a kernel, implemented by `#[kernel]` on
/// non-nvptx targets: runs the kernel's prologue and body for the calling
/// emulated thread (`kernel_emu` provides the thread's identity).
pub trait HostEntry: KernelSpec {
    /// Runs one thread of the kernel with these parameter values. For
    /// by-address parameters (TMA descriptors) the address of the value in
    /// `params` stands for the parameter's address. `global_scratch` is the
    /// launch's zeroed [`KernelSpec::GLOBAL_SCRATCH_BYTES`] (null when 0),
    /// the same for every thread of the launch.
    fn run_thread(params: &Self::Params, global_scratch: *mut u8);
}

/// A type that can be passed from the host to a kernel.
///
/// The host passes [`DeviceParam::Abi`] (the bytes in the kernel's parameter
/// space); the kernel body receives `Self`, built by
/// [`DeviceParam::from_abi`]. For plain data both are the same type. A TMA
/// tensor map is different: its 128-byte descriptor must stay in parameter
/// space (a `__grid_constant__` parameter, whose *address* TMA instructions
/// take), so its body type holds that address ([`DeviceParam::BY_ADDRESS`]).
///
/// # Safety
/// `Abi`'s bytes must mean the same thing on the host and on the device
/// (plain data: integers, floats, raw device pointers, `#[repr(C)]` structs of
/// those), with no references and no host-only invariants; `from_abi` must
/// produce a valid `Self` from any value the host may pass.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a kernel parameter",
    label = "not a DeviceParam",
    note = "kernel parameters are copied from the host: use integers, floats, raw pointers \
            (`*const T` / `*mut T` to device memory) or a type implementing `DeviceParam`"
)]
pub unsafe trait DeviceParam: Sized {
    /// What the host passes, by value, in the kernel's parameter space.
    type Abi: Copy;
    /// Whether `from_abi` needs the generic address of the parameter (then
    /// `#[kernel]` computes it with `mov.b64 %rd, <entry>_param_<i>;
    /// cvta.param.u64 %rd, %rd;`, and the build pipeline aligns the
    /// parameter to 64 bytes).
    const BY_ADDRESS: bool = false;
    /// The body's value: `abi` itself for plain data. `param_addr` is the
    /// parameter's generic address when `BY_ADDRESS`, else 0.
    fn from_abi(abi: Self::Abi, param_addr: u64) -> Self;
}

macro_rules! device_param {
    ($($t:ty),*) => { $(
        // SAFETY: plain data.
        unsafe impl DeviceParam for $t {
            type Abi = $t;
            #[inline(always)]
            fn from_abi(abi: $t, _: u64) -> $t { abi }
        }
    )* };
}
device_param!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, bool);
// SAFETY: a device address is plain data; dereferencing is the kernel's `unsafe`.
unsafe impl<T> DeviceParam for *const T {
    type Abi = *const T;
    #[inline(always)]
    fn from_abi(abi: *const T, _: u64) -> *const T {
        abi
    }
}
// SAFETY: as for `*const T`.
unsafe impl<T> DeviceParam for *mut T {
    type Abi = *mut T;
    #[inline(always)]
    fn from_abi(abi: *mut T, _: u64) -> *mut T {
        abi
    }
}

/// Device code for one architecture, as produced by `kernel_host::build`.
#[derive(Clone, Copy, Debug)]
pub struct DeviceImage {
    /// The PTX target, e.g. `"sm_90a"`.
    pub arch: &'static str,
    /// The PTX module.
    pub ptx: &'static str,
    /// The cubin ptxas made from `ptx`, or empty when ptxas was not found.
    pub cubin: &'static [u8],
    /// ptxas `-v` output (registers, shared memory, spills), or empty.
    pub ptxas_report: &'static str,
}

/// Everything a kernels crate was built into: one image per architecture.
#[derive(Clone, Copy, Debug)]
pub struct DeviceCode {
    /// The kernels crate's name.
    pub crate_name: &'static str,
    pub images: &'static [DeviceImage],
}

impl DeviceCode {
    /// The image built for `arch` (e.g. `"sm_90a"`), if any.
    pub fn image(&self, arch: &str) -> Option<&'static DeviceImage> {
        self.images.iter().find(|i| i.arch == arch)
    }
}
