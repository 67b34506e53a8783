//! Launch arguments made from cached tensor-map bytes: the encoded map of a
//! `Tma<Tl>` parameter plus the buffer it addresses, so the launch orders
//! itself after earlier writes to (or accesses of) that buffer, as
//! `&TensorMap` does.
use kernel_device::TileLayout;
use kernel_host::{ArgSink, CudaSlice, KernelArg, TensorMapParam};
use kernel_device::f16;

/// A cached map of a buffer the kernel reads.
pub struct ReadMap<'b, Tl: TileLayout> {
    param: TensorMapParam<Tl>,
    buf: &'b CudaSlice<f16>,
}

impl<'b, Tl: TileLayout> ReadMap<'b, Tl> {
    /// `param` must have been encoded for `buf` (same address and shape).
    pub fn new(param: TensorMapParam<Tl>, buf: &'b CudaSlice<f16>) -> Self {
        ReadMap { param, buf }
    }
}

impl<Tl: TileLayout> KernelArg<TensorMapParam<Tl>> for ReadMap<'_, Tl> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> TensorMapParam<Tl>
    where
        Self: 'a,
    {
        let _ = sink.read(self.buf);
        self.param
    }
}

/// A cached map of a buffer the kernel writes.
pub struct WriteMap<'b, Tl: TileLayout> {
    param: TensorMapParam<Tl>,
    buf: &'b mut CudaSlice<f16>,
}

impl<'b, Tl: TileLayout> WriteMap<'b, Tl> {
    /// `param` must have been encoded for `buf` (same address and shape).
    pub fn new(param: TensorMapParam<Tl>, buf: &'b mut CudaSlice<f16>) -> Self {
        WriteMap { param, buf }
    }
}

impl<Tl: TileLayout> KernelArg<TensorMapParam<Tl>> for WriteMap<'_, Tl> {
    fn into_param<'a>(self, sink: &mut ArgSink<'a>) -> TensorMapParam<Tl>
    where
        Self: 'a,
    {
        let _ = sink.write(self.buf);
        self.param
    }
}
