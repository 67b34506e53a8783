//! Reading ptxas's `-v` report: per entry point, its registers, static
//! shared memory, stack frame and spills.
//!
//! The device build ([`crate::build`]) keeps the report of each
//! architecture in the kernels crate's `DEVICE_CODE`
//! (`DeviceImage::ptxas_report`); the build reads it to warn about stack
//! frames and spills, and the host's occupancy query on the emulator reads
//! it for the registers a kernel uses. The report of one entry (ptxas
//! 13.0) reads:
//!
//! ```text
//! ptxas info    : Compiling entry function 'attention_bwd__128_2' for 'sm_90a'
//! ptxas info    : Function properties for attention_bwd__128_2
//!     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
//! ptxas info    : Used 168 registers, used 16 barriers, 8 bytes cumulative stack size
//! ptxas info    : Compile time = 198.615 ms
//! ```
//!
//! with `, N bytes smem` in the `Used` line when the entry has static shared
//! memory.

/// One entry point of a ptxas `-v` report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasEntry {
    /// The PTX entry name (`attention_bwd__128_2`).
    pub name: String,
    /// The architecture it was compiled for (`sm_90a`).
    pub arch: String,
    /// Registers per thread.
    pub registers: u32,
    /// Named barriers used.
    pub barriers: u32,
    /// Static shared memory in bytes (dynamic shared memory is the launch's).
    pub static_smem: u32,
    /// Bytes of the per-thread stack frame in local memory: arrays indexed
    /// at run time and spill slots.
    pub stack_frame: u32,
    /// Bytes of registers spilled to local memory (stores).
    pub spill_stores: u32,
    /// Bytes of spilled registers loaded back.
    pub spill_loads: u32,
}

impl PtxasEntry {
    /// Whether the entry uses local memory: a stack frame or spills.
    pub fn uses_local_memory(&self) -> bool {
        self.stack_frame > 0 || self.spill_stores > 0 || self.spill_loads > 0
    }
}

/// The numbers in `text`, in order (`"8 bytes stack frame, 4 bytes ..."` ->
/// `[8, 4, ..]`).
fn numbers(text: &str) -> impl Iterator<Item = u32> + '_ {
    text.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).filter_map(|w| w.parse().ok())
}

/// `N` of `"... N <what>"` in a comma-separated `Used` line.
fn field(line: &str, what: &str) -> Option<u32> {
    line.split(',').find_map(|part| part.trim().strip_suffix(what)?.trim().rsplit(' ').next()?.parse().ok())
}

/// Every entry point of a ptxas `-v` report, in the report's order. Lines
/// it does not know are skipped; an entry whose numbers are missing has 0
/// for them.
pub fn entries(report: &str) -> Vec<PtxasEntry> {
    let mut out = Vec::new();
    for block in report.split("Compiling entry function '").skip(1) {
        let Some((name, rest)) = block.split_once('\'') else { continue };
        let arch = rest.split('\'').nth(1).unwrap_or("").to_string();
        let mut e = PtxasEntry { name: name.to_string(), arch, ..PtxasEntry::default() };
        // The stack line follows "Function properties for <name>" (callees
        // not inlined have their own such lines, after the entry's).
        let lines: Vec<&str> = block.lines().collect();
        let props = lines.iter().position(|l| l.trim_end().ends_with(&format!("Function properties for {name}")));
        let stack = match props {
            Some(i) => lines.get(i + 1).copied().filter(|l| l.contains("bytes stack frame")),
            None => lines.iter().copied().find(|l| l.contains("bytes stack frame")),
        };
        if let Some(line) = stack {
            let n: Vec<u32> = numbers(line).collect();
            if let [frame, stores, loads] = n[..] {
                (e.stack_frame, e.spill_stores, e.spill_loads) = (frame, stores, loads);
            }
        }
        if let Some(used) = lines.iter().find_map(|l| l.split("ptxas info    : Used ").nth(1)) {
            e.registers = numbers(used).next().unwrap_or(0);
            e.barriers = field(used, "barriers").unwrap_or(0);
            e.static_smem = field(used, "bytes smem").unwrap_or(0);
        }
        out.push(e);
    }
    out
}

/// The entry `name` of a ptxas `-v` report, if it is there.
pub fn entry(report: &str, name: &str) -> Option<PtxasEntry> {
    entries(report).into_iter().find(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Excerpts of real ptxas 13.0 reports (kernel-ops' kernels, and a
    /// kernel with static shared memory).
    const REPORT: &str = "ptxas version: Cuda compilation tools, release 13.0, V13.0.88
ptxas warning : Registers are spilled to local memory in function 'grouped_matmul_fp8_blockscaled__4', 24 bytes spill stores, 48 bytes spill loads
ptxas info    : (C7519) warpgroup.arrive is injected in around line 44803 by compiler to allow use of registers in GMMA in function 'attention_fwd_bf16__256_80_5_2'
ptxas warning : Registers are spilled to local memory in function 'attention_bwd__128_2', 4 bytes spill stores, 4 bytes spill loads
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'softmax_f16__1' for 'sm_90a'
ptxas info    : Function properties for softmax_f16__1
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 25 registers, used 2 barriers
ptxas info    : Compile time = 11.371 ms
ptxas info    : Compiling entry function 'grouped_matmul_fp8_blockscaled__4' for 'sm_90a'
ptxas info    : Function properties for grouped_matmul_fp8_blockscaled__4
    24 bytes stack frame, 24 bytes spill stores, 48 bytes spill loads
ptxas info    : Used 168 registers, used 2 barriers, 24 bytes cumulative stack size
ptxas info    : Compile time = 128.193 ms
ptxas info    : Compiling entry function 'attention_bwd__128_2' for 'sm_90a'
ptxas info    : Function properties for attention_bwd__128_2
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers, 8 bytes cumulative stack size
ptxas info    : Compile time = 198.615 ms
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Compile time = 9.217 ms
ptxas info    : Function properties for f
    64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
";

    #[test]
    fn each_entry_with_its_registers_smem_and_local_memory() {
        let es = entries(REPORT);
        let names: Vec<&str> = es.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["softmax_f16__1", "grouped_matmul_fp8_blockscaled__4", "attention_bwd__128_2", "k"]);
        assert_eq!(
            es[0],
            PtxasEntry { name: "softmax_f16__1".into(), arch: "sm_90a".into(), registers: 25, barriers: 2, ..PtxasEntry::default() }
        );
        assert!(!es[0].uses_local_memory());
        let g = &es[1];
        assert_eq!((g.registers, g.stack_frame, g.spill_stores, g.spill_loads), (168, 24, 24, 48));
        let a = &es[2];
        assert_eq!((a.registers, a.barriers, a.stack_frame, a.spill_stores, a.spill_loads), (168, 16, 8, 4, 4));
        assert!(a.uses_local_memory());
        // Static shared memory; a callee's stack line after it is not the entry's.
        let k = &es[3];
        assert_eq!((k.registers, k.barriers, k.static_smem, k.stack_frame), (8, 1, 4096, 0));
        assert_eq!(entry(REPORT, "k").as_ref(), Some(k));
        assert_eq!(entry(REPORT, "nope"), None);
    }

    #[test]
    fn an_empty_report_has_no_entries() {
        assert!(entries("").is_empty());
        assert!(entries("ptxas version: unknown\n").is_empty());
    }
}
