//! Host stand-ins for device operations.
//!
//! The host build of a kernels crate type-checks kernel bodies and carries
//! their launch metadata; it does not run them. Running a kernel without a GPU
//! is the job of the CPU emulator, which will give every operation a software
//! body beside its PTX body. Until then, reaching a device operation on the
//! host is reported here, naming the operation.

/// Reports that `op` was called on the host, where it has no implementation.
#[cold]
#[track_caller]
// Every operation has an emulator body now; kept for operations added
// without one.
#[allow(dead_code)]
pub(crate) fn no_emulator(op: &'static str) -> ! {
    panic!(
        "kernel-device: `{op}` is a GPU operation and was called on the host; \
         launch the kernel on a GPU through kernel-host (this operation has no CPU emulator body)"
    )
}

/// `device!("ptx.op", { nvptx64 body })`: the PTX body on nvptx64, the host
/// stand-in (no emulator body yet) elsewhere.
/// `device!("ptx.op", { nvptx64 body }, host: { emulator body })`: the PTX
/// body on nvptx64, the CPU emulator's body (crate `kernel-emu`) elsewhere.
/// `device!("ptx.op", { nvptx64 body }, host |op| { emulator body })`: as
/// the previous, with `op: &'static str` bound to the operation's name in
/// the emulator body (for its reports), so the name is written once.
///
/// The emulator body is one call into `kernel-emu` (which owns the
/// emulator's semantics), or a short expression of the device API's own
/// types.
macro_rules! device {
    ($op:literal, $body:block, host |$name:ident| $host:block) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            $body
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let $name: &'static str = $op;
            $host
        }
    }};
    ($op:literal, $body:block, host: $host:block) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            $body
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            $host
        }
    }};
    ($op:literal, $body:block) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            $body
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            $crate::host::no_emulator($op)
        }
    }};
}
