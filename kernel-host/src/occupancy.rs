//! How many CTAs of a kernel fit on one SM of a [`Device`](crate::Device):
//! [`Launcher::occupancy`](crate::Launcher::occupancy).
//!
//! On a GPU the number is the CUDA driver's
//! (`cuOccupancyMaxActiveBlocksPerMultiprocessor`, with the kernel's block
//! size and dynamic shared memory), explained by CUDA's occupancy rules
//! ([`kernel_spec::occupancy`]) on the loaded function's registers and
//! shared memory. On the CPU emulator it is those rules on the kernel's
//! ptxas report, embedded in the kernels crate's `DEVICE_CODE` (registers
//! per thread, static shared memory), for an SM of the architecture the
//! kernel is built for (H100/H200 and B200 share these limits): what the
//! kernel would get on that GPU, whatever the emulator runs.
use crate::runtime::{DeviceImage, Error, Result};
use kernel_spec::occupancy::occupancy;
/// The occupancy rules' types: what a CTA holds, and the limiting resource.
pub use kernel_spec::occupancy::{Limit, Resources};
use std::fmt;

/// How many CTAs of a kernel fit on one SM at once, and why
/// ([`Launcher::occupancy`](crate::Launcher::occupancy)). Its `Display`
/// names the kernel, the answer, the limiting resource and what would raise
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupancy {
    /// The kernel's PTX entry name.
    pub kernel: &'static str,
    /// CTAs resident on one SM at once: the driver's answer on a GPU, the
    /// calculator's ([`Occupancy::rules`]) on the emulator.
    pub blocks_per_sm: u32,
    /// Whether [`Occupancy::blocks_per_sm`] is the CUDA driver's answer.
    pub from_driver: bool,
    /// CUDA's occupancy rules on the kernel's resources: CTAs per SM by
    /// each limit, and the limiting one.
    pub rules: kernel_spec::occupancy::Occupancy,
}

impl Occupancy {
    /// The limit that bounds [`Occupancy::blocks_per_sm`] (by the rules).
    pub fn limit(&self) -> Limit {
        self.rules.limit
    }
}

impl fmt::Display for Occupancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.rules.resources;
        let source = if self.from_driver { "the CUDA driver" } else { "the occupancy rules on the ptxas report" };
        write!(
            f,
            "kernel `{}` ({} registers per thread, {} bytes of shared memory per block): {} block(s) per SM ({source}); ",
            self.kernel, r.registers, r.smem_bytes, self.blocks_per_sm
        )?;
        if self.from_driver && self.blocks_per_sm != self.rules.blocks {
            write!(f, "the occupancy rules say {} (the driver knows the GPU better): ", self.rules.blocks)?;
        }
        write!(f, "{}", self.rules)
    }
}

/// The emulator's answer for kernel `name` (`threads` per block, `dynamic_smem`
/// bytes of dynamic shared memory) from `image`'s ptxas report.
pub(crate) fn from_report(name: &'static str, threads: u32, dynamic_smem: u32, crate_name: &'static str, image: &'static DeviceImage) -> Result<Occupancy> {
    let entry = crate::ptxas::entry(image.ptxas_report, name).ok_or(Error::NoPtxasReport { kernel: name, crate_name, arch: image.arch })?;
    let rules = occupancy(Resources { threads, registers: entry.registers, smem_bytes: entry.static_smem + dynamic_smem });
    Ok(Occupancy { kernel: name, blocks_per_sm: rules.blocks, from_driver: false, rules })
}

/// The GPU's answer: the driver's number, with the rules on the loaded
/// function's `resources`.
pub(crate) fn from_driver(name: &'static str, blocks_per_sm: u32, resources: Resources) -> Occupancy {
    Occupancy { kernel: name, blocks_per_sm, from_driver: true, rules: occupancy(resources) }
}

#[cfg(test)]
mod tests {
    use super::*;

    static IMAGE: DeviceImage = DeviceImage {
        arch: "sm_90a",
        ptx: "",
        cubin: &[],
        ptxas_report: "ptxas info    : Compiling entry function 'matmul__128_256_4' for 'sm_90a'
ptxas info    : Function properties for matmul__128_256_4
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 2 barriers
ptxas info    : Compiling entry function 'axpy' for 'sm_90a'
ptxas info    : Function properties for axpy
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 2048 bytes smem
",
    };

    #[test]
    fn the_emulator_answers_from_the_ptxas_report() {
        // The persistent matmul: 384 threads at 168 registers, ~200 KB: 1 block.
        let o = from_report("matmul__128_256_4", 384, 200 * 1024, "k", &IMAGE).unwrap();
        assert_eq!((o.blocks_per_sm, o.from_driver, o.limit()), (1, false, Limit::Registers));
        let text = o.to_string();
        assert!(
            text.starts_with("kernel `matmul__128_256_4` (168 registers per thread, 204800 bytes of shared memory per block): 1 block(s) per SM"),
            "{text}"
        );
        // 128 threads at 32 registers with 2 KB of static SMEM: 16 blocks.
        let o = from_report("axpy", 128, 0, "k", &IMAGE).unwrap();
        assert_eq!((o.blocks_per_sm, o.rules.resources.smem_bytes), (16, 2048));
        // Not in the report (built without ptxas): the error says so and the fix.
        let e = from_report("nope", 128, 0, "my_kernels", &IMAGE).unwrap_err().to_string();
        assert!(e.contains("kernel `nope`") && e.contains("crate `my_kernels`") && e.contains("install-ptxas.sh"), "{e}");
    }

    #[test]
    fn the_gpu_answer_is_the_drivers_with_the_rules_beside_it() {
        let r = Resources { threads: 384, registers: 168, smem_bytes: 200 * 1024 };
        let o = from_driver("m", 1, r);
        assert!(o.to_string().contains("1 block(s) per SM (the CUDA driver); 1 block of 384 threads"), "{o}");
        let o = from_driver("m", 2, r);
        assert!(o.to_string().contains("the occupancy rules say 1"), "{o}");
    }
}
