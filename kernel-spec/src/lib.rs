//! What every side of the project must agree on, defined once: the
//! `#[kernel]` macro, the CPU emulator, the device API and the host runtime
//! all depend on this crate, and none of them defines a hardware limit, an
//! encoding or a rule of its own (`tests/one_definition.rs` greps the
//! workspace for copies).
//!
//! | module | what | used by |
//! |---|---|---|
//! | [`dim3`] | [`Dim3`], CUDA's `dim3` | everyone; re-exported as `kernel_device::Dim3` |
//! | [`limits`] | the launch limits: threads per CTA, `block.z`, cluster CTAs (portable and not), dynamic SMEM per CTA, grid extents, the register file | `kernel-macros` (options), `kernel_device::launch` (re-exports), `kernel-host`, `kernel-emu` |
//! | [`occupancy`] | how many CTAs of a kernel fit on one SM (CUDA's occupancy calculator: registers, shared memory, threads, blocks) | `kernel_host`'s occupancy query, `#[kernel(min_blocks_per_sm, max_registers)]` |
//! | [`registers`] | a kernel's entry register count ([`entry_registers`](registers::entry_registers)), the CTA's register pool and `setmaxnreg`'s rule | `#[warp_specialize(.., registers = [..])]` (compile time), `kernel_emu::wgmma::setmaxnreg_inc`/`_dec` (run time) |
//! | [`launch`] | [`check_launch`](launch::check_launch) and its parts, and [`LaunchProblem`](launch::LaunchProblem) whose message names the rule, the values and the fix | `#[kernel]` (block and cluster options), `kernel_host::check_launch`, `Emulator::launch`, `kernel_emu::run` |
//! | [`swizzle`] | [`Swizzle`], the TMA/wgmma swizzle modes, and `find_swizzle` | `kernel_device::layout` (re-exports; its type-level layouts build on it), the host's tensor maps, the emulator |
//! | [`tmem_frag`] | the `tcgen05.ld`/`st` data-movement shapes and their fragment layouts ([`Shape`](tmem_frag::Shape)) | `kernel_emu::tmem` (moves the data by it), `kernel_device::tmem` (re-exports) |
//! | [`tensor_map`] | the tiled tensor-map limits and rules, [`check_map`](tensor_map::check_map) over a [`MapDesc`](tensor_map::MapDesc) | `kernel_host::TensorMapSpec::problems` (GPU maps), `kernel_host::emulate::EmuTensorMap` (the emulator's maps) |
//!
//! `no_std`, no `alloc`, no dependencies: it builds for
//! `nvptx64-nvidia-cuda`, for the host and inside the proc-macro. Checks
//! return one problem (`Result`) or report each through a callback; every
//! problem type's `Display` is the message users see, so the wording of a
//! rule lives here once and each caller only wraps it in its own error type.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(test)]
extern crate std;

pub mod desc_tcgen05;
pub mod desc_wgmma;
pub mod dim3;
pub mod launch;
pub mod limits;
pub mod occupancy;
pub mod registers;
pub mod swizzle;
pub mod tensor_map;
pub mod tmem_frag;

pub use dim3::Dim3;
pub use swizzle::Swizzle;

/// The environment variable `kernel_host::build` sets for a kernels crate's
/// nvptx build to the name of the crate being built; `#[kernel]` emits PTX
/// entry points only in that crate, so a kernels crate that depends on
/// another (for its building blocks, or to re-export its kernels) does not
/// compile the other's kernels into its own image.
pub const DEVICE_CRATE_ENV: &str = "KERNEL_DEVICE_CRATE";

/// The line `kernel_device::wgmma::pin_entry_registers` leaves in a kernel's
/// PTX, which the build (`kernel_host::build`) turns into `.minnctapersm 1`
/// on the kernel's entry.
pub const PIN_ENTRY_REGISTERS_MARKER: &str = "// kernel-meta: minnctapersm 1";
