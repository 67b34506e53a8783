//! Launch metadata shared by the device and the host.
//!
//! `#[kernel]` implements [`KernelSpec`] for every kernel (and for every listed
//! instance of a const-generic kernel); `kernel-host` reads it to launch with
//! the right entry point, block shape, cluster shape and dynamic shared memory.
//! [`DeviceCode`] is what a kernels crate embeds for the host: one
//! [`DeviceImage`] per target architecture.

/// A 3-D extent or index (`dim3` in CUDA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }
    /// `x * y * z`.
    pub const fn volume(self) -> u32 {
        self.x * self.y * self.z
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3::new(x, 1, 1)
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3::new(x, y, 1)
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3::new(x, y, z)
    }
}

impl core::fmt::Display for Dim3 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

/// Shared memory one CTA may use on the H100 and the B200: 227 KB
/// (`cudaDevAttrMaxSharedMemoryPerBlockOptin` = 232448 bytes).
pub const MAX_SMEM_BYTES: usize = 232_448;

/// Most threads in one CTA.
pub const MAX_BLOCK_THREADS: u32 = 1024;

/// Most CTAs in a cluster with portable launch (16 needs a non-portable opt-in).
pub const MAX_CLUSTER_CTAS: u32 = 8;

/// Static description of a kernel entry point, implemented by `#[kernel]`.
///
/// A const-generic kernel implements it only for the instances it lists in
/// `instances(...)`, so launching any other instance does not compile.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a compiled kernel",
    label = "no entry point for this type",
    note = "a `#[kernel]` function with const generics is compiled only for the instances listed in \
            `#[kernel(instances(...))]`: add this instance there"
)]
pub trait KernelSpec {
    /// The PTX entry point (`.visible .entry NAME`).
    const NAME: &'static str;
    /// Threads per CTA.
    const BLOCK: Dim3;
    /// CTAs per cluster; `(1, 1, 1)` launches without a cluster.
    const CLUSTER: Dim3;
    /// Dynamic shared memory the kernel's scratch parameters need, in bytes.
    const SMEM_BYTES: u32;
    /// The kernel's non-scratch parameter types, as a tuple, in order.
    type Params;
}

/// A type that can be passed by value from the host to a kernel.
///
/// # Safety
/// The type's bytes must mean the same thing on the host and on the device
/// (plain data: integers, floats, raw device pointers, `#[repr(C)]` structs of
/// those), with no references and no host-only invariants.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a kernel parameter",
    label = "not a DeviceParam",
    note = "kernel parameters are copied from the host: use integers, floats, raw pointers \
            (`*const T` / `*mut T` to device memory) or a type implementing `DeviceParam`"
)]
pub unsafe trait DeviceParam: Copy {}

macro_rules! device_param {
    ($($t:ty),*) => { $(unsafe impl DeviceParam for $t {})* };
}
device_param!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, bool);
unsafe impl<T> DeviceParam for *const T {}
unsafe impl<T> DeviceParam for *mut T {}

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
