//! NCCL collectives on a [`DeviceGroup`] of GPUs (cudarc's NCCL bindings,
//! one communicator per GPU driven from this thread): the engine users
//! already run for collectives, usable beside our kernels on the same
//! streams, and the baseline of the multi-GPU benchmarks.
//!
//! `libnccl` is loaded at run time: [`Nccl::new`] reports
//! [`Error::Nccl`] when it is missing (pip's `nvidia-nccl-cu12`/`-cu13`
//! install it as `site-packages/nvidia/nccl/lib/libnccl.so.2`; cudarc looks
//! for `libnccl.so`, so link that name to it in a directory on
//! `LD_LIBRARY_PATH`). On emulated devices every call is
//! [`Error::GpuOnly`].
use crate::group::{DeviceGroup, PeerBuffer};
use crate::runtime::{Error, Result};
use cudarc::nccl::safe::{Comm, ReduceOp};
use cudarc::nccl::NcclType;

/// One NCCL communicator per GPU of a group, on each GPU's stream (the
/// stream our launches use, so collectives and kernels are ordered).
pub struct Nccl {
    comms: Vec<Comm>,
}

fn nccl_err(call: &'static str) -> impl FnOnce(cudarc::nccl::result::NcclError) -> Error {
    move |e| Error::Nccl { call, reason: format!("{e:?}") }
}

impl Nccl {
    /// Communicators for every GPU of `group` (`ncclCommInitAll`).
    pub fn new(group: &DeviceGroup) -> Result<Nccl> {
        if !group.is_gpu() {
            return Err(Error::GpuOnly { what: "NCCL collectives (`kernel_host::nccl`)" });
        }
        // SAFETY: only probes whether the library can be opened.
        if !unsafe { cudarc::nccl::sys::is_culib_present() } {
            return Err(Error::Nccl {
                call: "dlopen(libnccl.so)",
                reason: "libnccl was not found: install NCCL (pip's nvidia-nccl-cu12/-cu13 puts libnccl.so.2 in \
                         site-packages/nvidia/nccl/lib), link libnccl.so to it and add that directory to \
                         LD_LIBRARY_PATH"
                    .into(),
            });
        }
        let streams = (0..group.len())
            .map(|d| group.device(d).as_gpu().map(|g| g.stream().clone()).expect("a GPU group"))
            .collect();
        let comms = Comm::from_devices(streams).map_err(nccl_err("ncclCommInitAll"))?;
        Ok(Nccl { comms })
    }

    fn check(&self, function: &'static str, parts: usize) -> Result<()> {
        if parts != self.comms.len() {
            return Err(Error::InvalidArgument {
                function,
                problem: format!("a peer buffer of {parts} devices with communicators for {}", self.comms.len()),
            });
        }
        Ok(())
    }

    /// `recv` on every device = every device's `send`, in rank order
    /// (`ncclAllGather` in one group call). `recv` holds `count * send.len()`
    /// elements per device.
    pub fn all_gather<T: NcclType>(&self, send: &PeerBuffer<T>, recv: &mut PeerBuffer<T>) -> Result<()> {
        self.check("Nccl::all_gather", send.devices())?;
        self.check("Nccl::all_gather", recv.devices())?;
        if recv.len() != send.len() * self.comms.len() {
            return Err(Error::InvalidArgument {
                function: "Nccl::all_gather",
                problem: format!(
                    "recv holds {} elements per device; an all-gather of {} elements from {} devices needs {}",
                    recv.len(),
                    send.len(),
                    self.comms.len(),
                    send.len() * self.comms.len()
                ),
            });
        }
        cudarc::nccl::result::group_start().map_err(nccl_err("ncclGroupStart"))?;
        for (d, comm) in self.comms.iter().enumerate() {
            comm.all_gather(send.part(d).cuda()?, recv.part_mut(d).cuda_mut()?).map_err(nccl_err("ncclAllGather"))?;
        }
        cudarc::nccl::result::group_end().map_err(nccl_err("ncclGroupEnd"))?;
        Ok(())
    }

    /// `recv` on every device = the element-wise sum of every device's
    /// `send` (`ncclAllReduce`, in one group call).
    pub fn all_reduce_sum<T: NcclType>(&self, send: &PeerBuffer<T>, recv: &mut PeerBuffer<T>) -> Result<()> {
        self.check("Nccl::all_reduce_sum", send.devices())?;
        self.check("Nccl::all_reduce_sum", recv.devices())?;
        if recv.len() != send.len() {
            return Err(Error::InvalidArgument {
                function: "Nccl::all_reduce_sum",
                problem: format!("send holds {} elements per device and recv {}: they must be equal", send.len(), recv.len()),
            });
        }
        cudarc::nccl::result::group_start().map_err(nccl_err("ncclGroupStart"))?;
        for (d, comm) in self.comms.iter().enumerate() {
            comm.all_reduce(send.part(d).cuda()?, recv.part_mut(d).cuda_mut()?, &ReduceOp::Sum).map_err(nccl_err("ncclAllReduce"))?;
        }
        cudarc::nccl::result::group_end().map_err(nccl_err("ncclGroupEnd"))?;
        Ok(())
    }

    /// `recv` on device `d` = block `d` of the element-wise sum of every
    /// device's `send` (`ncclReduceScatter`, in one group call): `send`
    /// holds `count x recv.len()` elements per device, block `d` at
    /// `d x recv.len()`.
    pub fn reduce_scatter_sum<T: NcclType>(&self, send: &PeerBuffer<T>, recv: &mut PeerBuffer<T>) -> Result<()> {
        self.check("Nccl::reduce_scatter_sum", send.devices())?;
        self.check("Nccl::reduce_scatter_sum", recv.devices())?;
        if send.len() != recv.len() * self.comms.len() {
            return Err(Error::InvalidArgument {
                function: "Nccl::reduce_scatter_sum",
                problem: format!(
                    "send holds {} elements per device; a reduce-scatter into {} elements on each of {} devices needs {}",
                    send.len(),
                    recv.len(),
                    self.comms.len(),
                    recv.len() * self.comms.len()
                ),
            });
        }
        cudarc::nccl::result::group_start().map_err(nccl_err("ncclGroupStart"))?;
        for (d, comm) in self.comms.iter().enumerate() {
            comm.reduce_scatter(send.part(d).cuda()?, recv.part_mut(d).cuda_mut()?, &ReduceOp::Sum).map_err(nccl_err("ncclReduceScatter"))?;
        }
        cudarc::nccl::result::group_end().map_err(nccl_err("ncclGroupEnd"))?;
        Ok(())
    }
}
