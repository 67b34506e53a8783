//! Typed kernel arguments.
//!
//! A kernel's parameters are the tuple `K::Params` (`#[kernel]` writes it from
//! the kernel's signature). A launch takes a tuple of host values, one per
//! parameter; [`KernelArg`] maps each host value to the bit-identical device
//! value (`&CudaSlice<T>` to `*const T`, `&mut CudaSlice<T>` to `*mut T`,
//! scalars to themselves), and [`ParamList`] builds the `void**` array of
//! pointers to those values that `cuLaunchKernelEx` copies parameters from.
//!
//! Getting a buffer's device address from cudarc yields a [`SyncOnDrop`]
//! guard that records the buffer's read/write event on the launch stream when
//! it drops (cudarc's cross-stream tracking). [`ArgSink`] keeps those guards
//! until the launch has been submitted.

use super::tma::TensorMap;
use cudarc::driver::{
    sys, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop,
};
use kernel_device::layout::TileLayout;
use kernel_device::tma::TensorMapParam;
use kernel_device::Semaphore;
use std::ffi::c_void;

// Device addresses are 64-bit; a host pointer must hold one unchanged.
const _: () = assert!(
    std::mem::size_of::<usize>() == 8,
    "the runtime needs a 64-bit host"
);

/// Collects what packing arguments produces besides the parameter values: the
/// cudarc guards that must outlive the launch call.
pub struct ArgSink<'a> {
    /// The launch stream; `None` packs without one (unit tests), each buffer
    /// then synchronizing on its own stream and no guard being kept.
    stream: Option<&'a CudaStream>,
    guards: Vec<SyncOnDrop<'a>>,
}

impl<'a> ArgSink<'a> {
    /// A sink for a launch on `stream`.
    pub(crate) fn new(stream: &'a CudaStream) -> Self {
        ArgSink {
            stream: Some(stream),
            guards: Vec::new(),
        }
    }

    /// Keeps `guard` to record the buffer's use after the launch, or, for
    /// a buffer of another context ([`records_use`] false), lets it go
    /// without recording.
    fn keep(&mut self, guard: SyncOnDrop<'a>, record: bool) {
        if record {
            self.guards.push(guard);
        } else {
            // A `SyncOnDrop` holds only references: forgetting it leaks
            // nothing and skips its `cuEventRecord`.
            std::mem::forget(guard);
        }
    }

    /// A sink with no launch stream, for packing scalars in tests.
    #[cfg(test)]
    pub(crate) fn detached() -> Self {
        ArgSink {
            stream: None,
            guards: Vec::new(),
        }
    }

    /// The device address of `buf` for a kernel that reads it: the launch
    /// stream waits for earlier writes to `buf`, and the read is recorded when
    /// the sink drops (after the launch).
    pub fn read<T, S: DevicePtr<T> + ?Sized>(&mut self, buf: &'a S) -> sys::CUdeviceptr {
        match self.stream {
            Some(stream) => {
                let (ptr, guard) = buf.device_ptr(stream);
                self.keep(guard, records_use(buf.stream(), stream));
                ptr
            }
            None => {
                let own = buf.stream().clone();
                let (ptr, _guard) = buf.device_ptr(&own);
                ptr
            }
        }
    }

    /// The device address of `buf` for a kernel that writes it: the launch
    /// stream waits for earlier reads and writes of `buf`, and the write is
    /// recorded when the sink drops (after the launch).
    pub fn write<T, S: DevicePtrMut<T> + ?Sized>(&mut self, buf: &'a mut S) -> sys::CUdeviceptr {
        match self.stream {
            Some(stream) => {
                let record = records_use(buf.stream(), stream);
                let (ptr, guard) = buf.device_ptr_mut(stream);
                self.keep(guard, record);
                ptr
            }
            None => {
                let own = buf.stream().clone();
                let (ptr, _guard) = buf.device_ptr_mut(&own);
                ptr
            }
        }
    }
}

/// Whether a launch on `launch` records its use of a buffer whose own
/// stream is `buf`: only for a buffer of the launch's own context.
///
/// A kernel of one GPU of a group may take another GPU's buffer (a tensor
/// map over the next device's part, which the all-gather matmul's kernels
/// store to). cudarc would record that use as the buffer's event on the
/// launch stream, which `cuEventRecord` refuses
/// (`CUDA_ERROR_INVALID_CONTEXT`: the event belongs to the other
/// device's context). Such a launch is ordered by the group launch's
/// barriers instead (`kernel_host::group::GroupLauncher::launch`: every
/// device waits for every other before, and after, the kernels), so its
/// use of the buffer is not recorded; the launch stream still waits for
/// the buffer's earlier writes (waiting on another context's event is
/// allowed).
pub(crate) fn records_use(buf: &CudaStream, launch: &CudaStream) -> bool {
    buf.context().cu_ctx() == launch.context().cu_ctx()
}

/// A device address as a `*const T` (device addresses have no host
/// provenance).
fn const_ptr<T>(addr: sys::CUdeviceptr) -> *const T {
    std::ptr::without_provenance(addr as usize)
}

/// A device address as a `*mut T`.
fn mut_ptr<T>(addr: sys::CUdeviceptr) -> *mut T {
    std::ptr::without_provenance_mut(addr as usize)
}

/// A host value that can be passed for a kernel parameter of type `P`.
///
/// `P` is the parameter's ABI type (its `DeviceParam::Abi`, what
/// `KernelSpec::Params` lists): the parameter's own type for plain data,
/// `TensorMapParam<Tl>` for a `Tma<Tl>`. The value produced must have the
/// bits the kernel expects: a device address for a pointer parameter, the
/// value itself for a scalar, the encoded descriptor for a tensor map.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter of type `{P}`",
    label = "this argument does not fit the kernel parameter `{P}`",
    note = "pass `&CudaSlice<T>` (or `&CudaView<T>`) for `*const T` and `GmemRef<T>`, `&mut CudaSlice<T>` for `Gmem<T>`, `&mut CudaSlice<T>` (or \
            `&mut CudaViewMut<T>`) for `*mut T`, `&mut CudaSlice<u32>` for `Semaphore`, and a \
            value of exactly the parameter's type for a scalar (`n as u32` for `u32`: there are \
            no implicit conversions)"
)]
pub trait KernelArg<P: Copy> {
    /// The parameter value; buffer guards go to `sink`.
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> P
    where
        Self: 'a;
}

macro_rules! scalar_args {
    ($($t:ty),*) => {$(
        impl KernelArg<$t> for $t {
            fn into_param<'a>(self, _sink: &mut ArgSink<'a>) -> $t
            where
                Self: 'a,
            {
                self
            }
        }
    )*};
}
scalar_args!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, bool);

impl<T> KernelArg<*const T> for &CudaSlice<T> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> *const T
    where
        Self: 'a,
    {
        const_ptr(sink.read(self))
    }
}

impl<T> KernelArg<*const T> for &mut CudaSlice<T> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> *const T
    where
        Self: 'a,
    {
        const_ptr(sink.read(&*self))
    }
}

impl<T> KernelArg<*mut T> for &mut CudaSlice<T> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> *mut T
    where
        Self: 'a,
    {
        mut_ptr(sink.write(self))
    }
}

impl<T> KernelArg<*const T> for &CudaView<'_, T> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> *const T
    where
        Self: 'a,
    {
        const_ptr(sink.read(self))
    }
}

impl<T> KernelArg<*mut T> for &mut CudaViewMut<'_, T> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> *mut T
    where
        Self: 'a,
    {
        mut_ptr(sink.write(self))
    }
}

/// A bounds-checked global-memory view of the whole buffer.
impl<T: Copy> KernelArg<kernel_device::Gmem<T>> for &mut CudaSlice<T> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> kernel_device::Gmem<T>
    where
        Self: 'a,
    {
        let len = self.len();
        let ptr = mut_ptr::<T>(sink.write(self));
        // SAFETY: the start of a live allocation of `len` elements, borrowed
        // mutably for the launch.
        unsafe { kernel_device::Gmem::from_raw_parts(ptr, len) }
    }
}

/// A read-only bounds-checked view of the whole buffer.
impl<T: Copy> KernelArg<kernel_device::gmem::GmemRef<T>> for &CudaSlice<T> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> kernel_device::gmem::GmemRef<T>
    where
        Self: 'a,
    {
        let len = self.len();
        let ptr = const_ptr::<T>(sink.read(self));
        // SAFETY: the start of a live allocation of `len` elements, borrowed
        // for the launch.
        unsafe { kernel_device::gmem::GmemRef::from_raw_parts(ptr, len) }
    }
}

/// A read-only bounds-checked view of the view's elements.
impl<T: Copy> KernelArg<kernel_device::gmem::GmemRef<T>> for &CudaView<'_, T> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> kernel_device::gmem::GmemRef<T>
    where
        Self: 'a,
    {
        let len = self.len();
        let ptr = const_ptr::<T>(sink.read(self));
        // SAFETY: as for `&CudaSlice<T>`.
        unsafe { kernel_device::gmem::GmemRef::from_raw_parts(ptr, len) }
    }
}

impl KernelArg<Semaphore> for &mut CudaSlice<u32> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> Semaphore
    where
        Self: 'a,
    {
        let ptr = mut_ptr::<u32>(sink.write(self));
        // SAFETY: `ptr` is the start of a live `CudaSlice<u32>` allocation
        // (device allocations are at least 256-byte aligned), which the
        // borrow keeps alive for the launch; the kernel uses it as a
        // semaphore, which is what passing it for a `Semaphore` means.
        unsafe { Semaphore::from_ptr(ptr) }
    }
}

/// A shared borrow is accepted too; the kernel still writes the counter, so
/// prefer `&mut` when other streams may use the buffer (cudarc then orders
/// the launch after their reads).
impl KernelArg<Semaphore> for &CudaSlice<u32> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> Semaphore
    where
        Self: 'a,
    {
        let ptr = mut_ptr::<u32>(sink.read(self));
        // SAFETY: as for `&mut CudaSlice<u32>` above.
        unsafe { Semaphore::from_ptr(ptr) }
    }
}

/// A TMA tensor map for a `Tma<Tl>` parameter: the 128 encoded bytes, by
/// value. Only a map made for the same tile type `Tl` fits, so the box and
/// swizzle the kernel's copies assume are the map's. The launch is ordered
/// after earlier writes to the map's buffer (as for `&CudaSlice`).
impl<Tl: TileLayout, const RANK: usize> KernelArg<TensorMapParam<Tl, RANK>>
    for &TensorMap<'_, Tl, RANK>
{
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> TensorMapParam<Tl, RANK>
    where
        Self: 'a,
    {
        let _address = sink.read(self.buffer());
        self.param()
    }
}

/// A tuple of parameter values, as the launch passes them: one pointer per
/// parameter, in order.
pub trait ParamList {
    /// The number of parameters.
    const LEN: usize;
    /// Pointers to each value in `self`, for `cuLaunchKernelEx`'s
    /// `kernelParams`. They point into `self`: `self` must not move while
    /// they are used.
    fn param_ptrs(&mut self) -> Vec<*mut c_void>;
}

/// A tuple of host arguments for a kernel whose parameters are `Params`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not match the kernel's parameters `{Params}`",
    label = "expected one argument per kernel parameter, as a tuple",
    note = "pass the arguments as a tuple in parameter order, e.g. `(&input, &mut output, n)`; \
            one argument is `(x,)`, none is `()`. Each argument must fit its parameter: \
            `&CudaSlice<T>` for `*const T`, `&mut CudaSlice<T>` for `*mut T`, `&mut \
            CudaSlice<u32>` for `Semaphore`, and exactly the parameter's type for a scalar"
)]
pub trait KernelArgs<Params> {
    /// Converts every argument into its parameter value; buffer guards go to
    /// `sink`.
    fn pack<'a>(self, sink: &mut ArgSink<'a>) -> Params
    where
        Self: 'a;
}

macro_rules! tuple_args {
    ($(($A:ident, $P:ident, $a:ident)),*) => {
        impl<$($A, $P),*> KernelArgs<($($P,)*)> for ($($A,)*)
        where
            $($P: Copy, $A: KernelArg<$P>,)*
        {
            #[allow(unused_variables, clippy::unused_unit)]
            fn pack<'a>(self, sink: &mut ArgSink<'a>) -> ($($P,)*)
            where
                Self: 'a,
            {
                let ($($a,)*) = self;
                ($($a.into_param(sink),)*)
            }
        }

        impl<$($P: Copy),*> ParamList for ($($P,)*) {
            const LEN: usize = <[&str]>::len(&[$(stringify!($P)),*]);
            fn param_ptrs(&mut self) -> Vec<*mut c_void> {
                let ($($a,)*) = self;
                vec![$(std::ptr::from_mut::<$P>($a).cast::<c_void>()),*]
            }
        }
    };
}

for_each_tuple_arity!(tuple_args);

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs `args` for `Params` with no launch stream.
    fn pack<P, A: KernelArgs<P>>(args: A) -> P {
        let mut sink = ArgSink::detached();
        args.pack(&mut sink)
    }

    /// Reads the value behind a `kernelParams` entry.
    ///
    /// # Safety
    /// `ptr` points to a live, initialized `T`.
    unsafe fn at<T: Copy>(ptr: *mut c_void) -> T {
        // SAFETY: caller contract.
        unsafe { *ptr.cast::<T>() }
    }

    #[test]
    fn packs_a_scalar_tuple_into_pointers_to_its_values() {
        type Params = (u8, i16, u32, i64, f32, f64, bool, usize);
        // Integer and float literals take the parameter's type.
        let mut params: Params = pack((7, -300, 0xdead_beef, -5, 1.5, -2.25, true, 99usize));
        assert_eq!(params, (7, -300, 0xdead_beef, -5, 1.5, -2.25, true, 99));
        assert_eq!(<Params as ParamList>::LEN, 8);

        let ptrs = params.param_ptrs();
        assert_eq!(ptrs.len(), 8);
        // SAFETY: each pointer points into `params`, alive and unmoved, at the
        // field of the type read.
        unsafe {
            assert_eq!(at::<u8>(ptrs[0]), 7);
            assert_eq!(at::<i16>(ptrs[1]), -300);
            assert_eq!(at::<u32>(ptrs[2]), 0xdead_beef);
            assert_eq!(at::<i64>(ptrs[3]), -5);
            assert_eq!(at::<f32>(ptrs[4]).to_bits(), 1.5f32.to_bits());
            assert_eq!(at::<f64>(ptrs[5]).to_bits(), (-2.25f64).to_bits());
            assert!(at::<bool>(ptrs[6]));
            assert_eq!(at::<usize>(ptrs[7]), 99);
        }
        // The pointers are the fields' own addresses (what CUDA copies from).
        assert_eq!(ptrs[0], std::ptr::from_mut(&mut params.0).cast());
        assert_eq!(ptrs[3], std::ptr::from_mut(&mut params.3).cast());
        assert_eq!(ptrs[7], std::ptr::from_mut(&mut params.7).cast());
    }

    #[test]
    fn packs_single_and_empty_tuples() {
        let mut one: (u64,) = pack((u64::MAX - 1,));
        let ptrs = one.param_ptrs();
        assert_eq!(ptrs.len(), 1);
        // SAFETY: points to `one.0`.
        assert_eq!(unsafe { at::<u64>(ptrs[0]) }, u64::MAX - 1);

        let mut none: () = pack(());
        assert!(none.param_ptrs().is_empty());
        assert_eq!(<() as ParamList>::LEN, 0);
    }

    #[test]
    fn packs_twelve_parameters_in_order() {
        type P12 = (u32, u32, u32, u32, u32, u32, u32, u32, u32, u32, u32, u32);
        let mut p: P12 = pack((0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
        let ptrs = p.param_ptrs();
        assert_eq!(ptrs.len(), 12);
        for (i, &ptr) in ptrs.iter().enumerate() {
            // SAFETY: every entry points to a `u32` field of `p`.
            assert_eq!(unsafe { at::<u32>(ptr) }, i as u32);
        }
    }

    #[test]
    fn device_addresses_convert_bit_identically() {
        let addr: sys::CUdeviceptr = 0x7f12_3456_7800;
        assert_eq!(const_ptr::<f32>(addr) as usize as u64, addr);
        assert_eq!(mut_ptr::<u32>(addr) as usize as u64, addr);
        assert_eq!(
            std::mem::size_of::<*const f32>(),
            std::mem::size_of::<sys::CUdeviceptr>()
        );
        assert_eq!(std::mem::size_of::<Semaphore>(), std::mem::size_of::<u64>());
    }
}
