//! A collective matmul on several devices of one host: the all-gather of
//! `A` (row-sharded, one `M x K` shard per device) overlapped with
//! `A · Bᵀ`, where each device holds its own `B` (`N x K`, e.g. a column
//! block of the weights).
//!
//! The schedule is a ring: at step `s` device `d` multiplies the shard of
//! device `d - s` (its own at step 0, the one received at step `s - 1`
//! after that) with [`Matmul`] on its compute stream, while its copy
//! engine forwards that shard to device `d + 1` over NVLink
//! (`cuMemcpyPeerAsync` on a second stream: no SM is taken from the
//! matmul). Step `s + 1` on device `d + 1` waits for that copy (an event),
//! so the copies of step `s` hide under the matmuls of step `s`. This is
//! the host-orchestrated form (as PyTorch's async tensor parallelism
//! does); a single persistent kernel that forwards tiles with TMA and
//! waits on peer semaphores is not written yet.
//!
//! On emulated devices the same schedule runs with host copies, one
//! step at a time (correctness only).
use crate::matmul::{check_problem, Matmul, MatmulError};
use kernel_host::cudarc::driver::{sys, CudaEvent, CudaStream};
use kernel_host::group::{DeviceGroup, PeerBuffer};
use kernel_host::Error;
use kernel_device::f16;
use std::sync::Arc;

/// The all-gather matmul on a group: one [`Matmul`] and one copy stream per
/// device.
pub struct AllGatherMatmul<'g> {
    group: &'g DeviceGroup,
    matmuls: Vec<Matmul<'g>>,
    copy_streams: Vec<Arc<CudaStream>>,
}

fn invalid(problem: String) -> MatmulError {
    MatmulError::Cuda(Error::InvalidArgument { function: "AllGatherMatmul::run", problem })
}

fn cuda(call: &'static str) -> impl FnOnce(kernel_host::cudarc::driver::DriverError) -> MatmulError {
    move |e| MatmulError::Cuda(Error::Cuda { call, cuda: kernel_host::CudaError::from_driver(e) })
}

impl<'g> AllGatherMatmul<'g> {
    /// Loads the matmul on every device of `group` and makes a copy stream
    /// per GPU.
    pub fn new(group: &'g DeviceGroup) -> Result<Self, MatmulError> {
        let matmuls = (0..group.len()).map(|d| Matmul::new(group.device(d))).collect::<Result<Vec<_>, _>>()?;
        let copy_streams = (0..group.len())
            .filter_map(|d| group.device(d).as_gpu())
            .map(|g| g.context().new_stream().map_err(cuda("cuStreamCreate")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AllGatherMatmul { group, matmuls, copy_streams })
    }

    /// Autotunes each device's matmul for the `m x n x k` steps (the
    /// cached winner when there is one; [`Matmul::tune`]); GPU only.
    pub fn tune(&self, (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        for mm in &self.matmuls {
            mm.tune(m, n, k, false, 5, 20)?;
        }
        Ok(())
    }

    /// Gathers `a` and multiplies: on entry `a[j].part(j)` holds device
    /// `j`'s shard (`m x k`, row-major f16); on return `a[j].part(d)`
    /// holds it on every device `d`, and `c[j].part(d)` = shard `j` ·
    /// `b.part(d)`ᵀ (`m x n`): device `d`'s `C` in row blocks, block `j`
    /// for the rows of shard `j`. Asynchronous on GPUs (synchronize the
    /// group before reading `c`). Errors name the buffer and the shape.
    pub fn run(&self, a: &mut [PeerBuffer<f16>], b: &PeerBuffer<f16>, c: &mut [PeerBuffer<f16>], (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        let p = self.group.len();
        if a.len() != p || c.len() != p {
            return Err(invalid(format!(
                "{} A slots and {} C blocks for {p} devices: give one of each per device (shard j in slot j)",
                a.len(),
                c.len()
            )));
        }
        for (what, bufs) in [("a", &*a), ("c", &*c)] {
            if let Some(j) = bufs.iter().position(|x| x.devices() != p) {
                return Err(invalid(format!("{what}[{j}] has parts on {} devices; the group has {p}", bufs[j].devices())));
            }
        }
        if b.devices() != p {
            return Err(invalid(format!("b has parts on {} devices; the group has {p}", b.devices())));
        }
        check_problem((m, k), (n, k), (a[0].len(), b.len(), c[0].len()))?;
        if let Some(j) = (0..p).find(|&j| a[j].len() != a[0].len() || c[j].len() != c[0].len()) {
            return Err(invalid(format!("slot {j}: every A slot holds m x k and every C block m x n elements")));
        }
        if self.group.is_gpu() {
            self.run_gpu(a, b, c, (m, n, k))
        } else {
            self.run_emulated(a, b, c, (m, n, k))
        }
    }

    fn run_emulated(&self, a: &mut [PeerBuffer<f16>], b: &PeerBuffer<f16>, c: &mut [PeerBuffer<f16>], (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        let p = self.group.len();
        for s in 0..p {
            for d in 0..p {
                let j = (d + p - s) % p;
                self.matmuls[d].matmul(a[j].part(d), (m, k), b.part(d), (n, k), c[j].part_mut(d))?;
                if s + 1 < p {
                    let next = (d + 1) % p;
                    let shard = self.group.device(d).download(a[j].part(d))?;
                    self.group.device(next).write(a[j].part_mut(next), &shard)?;
                }
            }
        }
        Ok(())
    }

    fn run_gpu(&self, a: &mut [PeerBuffer<f16>], b: &PeerBuffer<f16>, c: &mut [PeerBuffer<f16>], (m, n, k): (usize, usize, usize)) -> Result<(), MatmulError> {
        let p = self.group.len();
        let gpus: Vec<_> = (0..p).map(|d| self.group.device(d).as_gpu().expect("a GPU group").clone()).collect();
        // Everything queued before (uploads, earlier launches) on every
        // device precedes the copies.
        self.group.barrier()?;
        for (g, cs) in gpus.iter().zip(&self.copy_streams) {
            cs.join(g.stream()).map_err(cuda("cuStreamWaitEvent"))?;
        }
        let bytes = m * k * std::mem::size_of::<f16>();
        // sent[d]: the event of device d's copy at the previous step.
        let mut sent: Vec<Option<CudaEvent>> = (0..p).map(|_| None).collect();
        for s in 0..p {
            let mut now: Vec<Option<CudaEvent>> = (0..p).map(|_| None).collect();
            for d in 0..p {
                let j = (d + p - s) % p;
                if s > 0 {
                    // Shard j came from device d - 1 at step s - 1.
                    let prev = (d + p - 1) % p;
                    let ev = sent[prev].as_ref().expect("the previous step's copy");
                    gpus[d].stream().wait(ev).map_err(cuda("cuStreamWaitEvent"))?;
                    self.copy_streams[d].wait(ev).map_err(cuda("cuStreamWaitEvent"))?;
                }
                self.matmuls[d].matmul(a[j].part(d), (m, k), b.part(d), (n, k), c[j].part_mut(d))?;
                if s + 1 < p {
                    let next = (d + 1) % p;
                    let (src, dst) = (a[j].part(d).address(), a[j].part(next).address());
                    // SAFETY: both allocations hold `bytes` (checked), on
                    // live contexts with peer access; the stream is d's.
                    let r = unsafe {
                        sys::cuMemcpyPeerAsync(
                            dst,
                            gpus[next].context().cu_ctx(),
                            src,
                            gpus[d].context().cu_ctx(),
                            bytes,
                            self.copy_streams[d].cu_stream(),
                        )
                    };
                    if r != sys::CUresult::CUDA_SUCCESS {
                        return Err(MatmulError::Cuda(Error::Cuda { call: "cuMemcpyPeerAsync", cuda: kernel_host::CudaError::from_result(r) }));
                    }
                    now[d] = Some(self.copy_streams[d].record_event(None).map_err(cuda("cuEventRecord"))?);
                }
            }
            sent = now;
        }
        // Later work on each device (downloads, the next call) follows its
        // copies, and every device's matmuls.
        for (g, cs) in gpus.iter().zip(&self.copy_streams) {
            g.stream().join(cs).map_err(cuda("cuStreamWaitEvent"))?;
        }
        self.group.barrier()?;
        Ok(())
    }
}
