//! Device build pipeline: a kernels crate -> PTX (and cubin) per architecture,
//! embedded in the host program.
//!
//! Use it from the kernels crate's `build.rs` (with `kernel-host` as a build
//! dependency, `default-features = false`):
//!
//! ```no_run
//! fn main() {
//!     kernel_host::build::DeviceBuild::from_build_script().run_in_build_script();
//! }
//! ```
//!
//! and put `kernel_device::device_code!();` at the crate root: the host build
//! then has `pub static DEVICE_CODE: DeviceCode` with one image per
//! architecture.
//!
//! For each architecture the pipeline:
//! 1. runs `rustup run nightly cargo rustc --release --lib --crate-type cdylib
//!    -Zbuild-std=core --target nvptx64-nvidia-cuda -- --emit=asm -Zno-link`
//!    on the crate, in a clean environment (no `CARGO*`/`RUSTC*`/`RUSTFLAGS`
//!    from the outer build) and a target dir per architecture shared by
//!    every kernels crate and every host build of each
//!    ([`device_target_dir`], `target/nvptx-device-cargo/<arch>`, under a
//!    lock), so `core` and the device API are compiled once per
//!    architecture and other host features or profiles do not rebuild
//!    anything; the architectures build side by side; skipped when a
//!    freshness stamp says nothing it was built from changed (the compiler,
//!    the flags, every local source, manifest and the lock file); with fat LTO (one PTX
//!    module holding everything the kernels call, `core` included) and
//!    `-C panic=immediate-abort` (a panic is a `trap`);
//! 2. adds each kernel's `.maxntid` (from the `// kernel-meta` line `#[kernel]`
//!    emits), so ptxas allocates registers for the real block size, and
//!    its `.maxnreg` and `.minnctapersm` when it asks for them
//!    (`#[kernel(max_registers = R, min_blocks_per_sm = N)]`):
//!    [`apply_kernel_meta`];
//! 3. assembles the PTX with ptxas when one is found ([`find_ptxas_in`]:
//!    `KERNEL_PTXAS`, then `.tools/venv` above the crate, then the
//!    user-level tools dir `~/.cache/kernel-tools/venv` that
//!    `tools/setup.sh` fills, then `ptxas` on `PATH`), failing the build
//!    on a ptxas error or a "wgmma ... serialized" warning, and keeps
//!    ptxas's `-v` report (registers, shared memory, spills) in `OUT_DIR` and
//!    in the shared dir, where `tools/ptxas-report.sh [crate]` prints it;
//! 4. warns (`cargo:warning=`, one line per kernel) about every kernel whose
//!    ptxas report shows a stack frame or spills in local memory, naming
//!    the kernel, the bytes and the fix, unless the kernel opts out with
//!    `#[kernel(allow_spills = "reason")]` ([`local_memory_warnings`]);
//! 5. writes `device_code.rs` for `kernel_device::device_code!`.
use crate::ptxas::PtxasEntry;
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A device architecture the pipeline can build for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Hopper (H100/H200) with the arch-specific features (wgmma, setmaxnreg).
    Sm90a,
    /// Blackwell (B200) with the arch-specific features (tcgen05, TMEM).
    Sm100a,
}

impl Arch {
    pub const ALL: [Arch; 2] = [Arch::Sm90a, Arch::Sm100a];

    /// The PTX target name, e.g. `"sm_90a"`.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm90a => "sm_90a",
            Arch::Sm100a => "sm_100a",
        }
    }
    /// rustc codegen flags for this architecture. sm_100a needs PTX ISA 8.7;
    /// sm_90a asks for PTX ISA 8.1 (`cvt.rn.satfinite.{f16,bf16}.f32`).
    fn rustflags(self) -> &'static [&'static str] {
        match self {
            Arch::Sm90a => &["-Ctarget-cpu=sm_90a", "-Ctarget-feature=+ptx81"],
            Arch::Sm100a => &["-Ctarget-cpu=sm_100a", "-Ctarget-feature=+ptx87"],
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why the device build failed. `Display` says what to do.
#[derive(Debug)]
pub enum BuildError {
    /// `rustup run <toolchain> rustc` failed.
    NoNightly { toolchain: String, detail: String },
    /// The toolchain has no `rust-src` (needed by `-Zbuild-std=core`).
    NoRustSrc { toolchain: String },
    /// The nvptx64 compilation failed: rustc's diagnostics (`stderr`); the
    /// command is shown only with `KERNEL_BUILD_VERBOSE` set.
    Compile { arch: Arch, crate_name: String, command: String, stderr: String },
    /// ptxas rejected the PTX, or warned that wgmma is serialized.
    Ptxas { arch: Arch, ptxas: PathBuf, report: String },
    /// ptxas is required (`KERNEL_REQUIRE_PTXAS`, [`DeviceBuild::require_ptxas`])
    /// and was not found: where the build looked and the command that fixes it.
    NoPtxas { advice: String },
    Io { what: String, err: std::io::Error },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoNightly { toolchain, detail } => write!(
                f,
                "device build: the `{toolchain}` Rust toolchain is needed to compile kernels for nvptx64 \
                 (`-Zbuild-std`, `abi_ptx`, `asm!` on nvptx), and `rustup run {toolchain} rustc --version` failed: {detail}\n\
                 fix: rustup toolchain install {toolchain} --component rust-src"
            ),
            BuildError::NoRustSrc { toolchain } => write!(
                f,
                "device build: the `{toolchain}` toolchain has no rust-src component, which `-Zbuild-std=core` needs \
                 to build `core` for nvptx64-nvidia-cuda\nfix: rustup component add rust-src --toolchain {toolchain}"
            ),
            BuildError::Compile { arch, crate_name, command, stderr } => {
                write!(f, "{}\n", stderr.trim_end())?;
                write!(f, "device build of crate `{crate_name}` for {arch} (nvptx64-nvidia-cuda) failed: the errors above are rustc's")?;
                if std::env::var_os("KERNEL_BUILD_VERBOSE").is_some() {
                    write!(f, "\ncommand: {command}")
                } else {
                    write!(f, " (set KERNEL_BUILD_VERBOSE=1 to see the command)")
                }
            }
            BuildError::Ptxas { arch, ptxas, report } => write!(
                f,
                "ptxas ({}) rejected the {arch} PTX (an error, or the \"wgmma ... serialized\" warning, which \
                 means the accumulator registers were touched between wgmma issue and wait):\n{report}",
                ptxas.display()
            ),
            BuildError::NoPtxas { advice } => write!(f, "device build: ptxas is required (KERNEL_REQUIRE_PTXAS is set) but was not found; {advice}"),
            BuildError::Io { what, err } => write!(f, "device build: {what}: {err}"),
        }
    }
}

impl std::error::Error for BuildError {}

/// What one architecture's build produced.
#[derive(Debug, Clone)]
pub struct ArchOutput {
    pub arch: Arch,
    pub ptx: PathBuf,
    /// The cubin, when ptxas ran.
    pub cubin: Option<PathBuf>,
    /// ptxas `-v` output, when ptxas ran.
    pub ptxas_report: Option<String>,
}

/// The result of [`DeviceBuild::run`].
#[derive(Debug, Clone)]
pub struct BuildOutput {
    pub crate_name: String,
    pub archs: Vec<ArchOutput>,
    /// ptxas used, if any.
    pub ptxas: Option<PathBuf>,
    /// Source files the device code depends on (for `rerun-if-changed`).
    pub sources: BTreeSet<PathBuf>,
    /// The entry points that use local memory (a stack frame or spills),
    /// per architecture: see [`local_memory_uses`].
    pub local_memory: Vec<LocalMemoryUse>,
    /// What [`DeviceBuild::run_in_build_script`] prints as
    /// `cargo:warning=` lines: one per kernel in `local_memory` that does
    /// not opt out ([`local_memory_warnings`]).
    pub warnings: Vec<String>,
}

/// Builder for the device build of one kernels crate.
#[derive(Debug, Clone)]
pub struct DeviceBuild {
    crate_dir: PathBuf,
    crate_name: String,
    out_dir: PathBuf,
    archs: Vec<Arch>,
    toolchain: String,
    ptxas: Option<PathBuf>,
    require_ptxas: bool,
}

const NVPTX_TARGET: &str = "nvptx64-nvidia-cuda";

/// One architecture's build: its output, the sources it was built from,
/// and its entries that use local memory.
type ArchBuild = (ArchOutput, BTreeSet<PathBuf>, Vec<LocalMemoryUse>);

impl DeviceBuild {
    /// Build the crate at `crate_dir` (its lib is named `crate_name`, with
    /// `_` for `-`) into `out_dir`, for [`Arch::ALL`].
    pub fn new(crate_dir: impl Into<PathBuf>, crate_name: &str, out_dir: impl Into<PathBuf>) -> Self {
        DeviceBuild {
            crate_dir: crate_dir.into(),
            crate_name: crate_name.replace('-', "_"),
            out_dir: out_dir.into(),
            archs: Arch::ALL.to_vec(),
            toolchain: std::env::var("KERNEL_NIGHTLY_TOOLCHAIN").unwrap_or_else(|_| "nightly".to_string()),
            ptxas: None,
            require_ptxas: std::env::var_os("KERNEL_REQUIRE_PTXAS").is_some(),
        }
    }

    /// The crate whose `build.rs` is running (`CARGO_MANIFEST_DIR`,
    /// `CARGO_PKG_NAME`, `OUT_DIR`).
    ///
    /// # Panics
    /// Outside a build script (those variables unset).
    pub fn from_build_script() -> Self {
        let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("DeviceBuild::from_build_script: `{k}` is unset; call it from build.rs"));
        DeviceBuild::new(var("CARGO_MANIFEST_DIR"), &var("CARGO_PKG_NAME"), var("OUT_DIR"))
    }

    /// Architectures to build (default: sm_90a and sm_100a).
    pub fn archs(mut self, archs: &[Arch]) -> Self {
        self.archs = archs.to_vec();
        self
    }

    /// The nightly toolchain name (default `nightly`, or `KERNEL_NIGHTLY_TOOLCHAIN`).
    pub fn toolchain(mut self, name: &str) -> Self {
        self.toolchain = name.to_string();
        self
    }

    /// Use this ptxas instead of searching for one.
    pub fn ptxas(mut self, path: impl Into<PathBuf>) -> Self {
        self.ptxas = Some(path.into());
        self
    }

    /// Fail when no ptxas is found (default: only when `KERNEL_REQUIRE_PTXAS`
    /// is set; CI sets it).
    pub fn require_ptxas(mut self, yes: bool) -> Self {
        self.require_ptxas = yes;
        self
    }

    /// Runs the pipeline from a `build.rs`: writes `device_code.rs` into
    /// `OUT_DIR` and prints `cargo:rerun-if-changed` lines. On the nvptx64
    /// build of the same crate (which this pipeline itself starts) it does
    /// nothing.
    ///
    /// On failure it prints the [`BuildError`] to stderr (for a compile
    /// error: rustc's diagnostics and one line naming the crate and the
    /// architecture; no panic, no backtrace, no environment) and exits with
    /// status 1, which cargo reports as the build script's failure.
    pub fn run_in_build_script(self) {
        if std::env::var("TARGET").map(|t| t == NVPTX_TARGET).unwrap_or(false) {
            return;
        }
        let out = match self.run() {
            Ok(o) => o,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        // Only after success: a failed build script reruns anyway, and
        // these lines would only add noise to cargo's failure report.
        for var in ["KERNEL_PTXAS", "KERNEL_TOOLS_DIR", "XDG_CACHE_HOME", "HOME", "KERNEL_NIGHTLY_TOOLCHAIN", "KERNEL_REQUIRE_PTXAS", "KERNEL_BUILD_VERBOSE", "PATH"] {
            println!("cargo:rerun-if-env-changed={var}");
        }
        for src in &out.sources {
            println!("cargo:rerun-if-changed={}", src.display());
        }
        for w in &out.warnings {
            println!("cargo:warning={w}");
        }
        if out.ptxas.is_none() {
            // Rebuild once ptxas is installed where the fix puts it (a path
            // that does not exist yet makes cargo rerun this script on every
            // build until it does: only while ptxas is missing).
            if let Some(d) = PtxasLookup::from_env(&self.crate_dir).tools_dir {
                println!("cargo:rerun-if-changed={}", d.join("venv").display());
            }
            println!(
                "cargo:warning=ptxas not found: the PTX of `{}` was not assembled (no ptxas report; the driver will JIT it); {}",
                out.crate_name,
                ptxas_missing_advice(&self.crate_dir)
            );
        }
    }

    /// Runs the pipeline and writes `device_code.rs` into the output dir.
    pub fn run(&self) -> Result<BuildOutput, BuildError> {
        let toolchain_id = check_toolchain(&self.toolchain)?;
        let ptxas = match &self.ptxas {
            Some(p) => Some(p.clone()),
            None => find_ptxas(&self.crate_dir),
        };
        if ptxas.is_none() && self.require_ptxas {
            return Err(BuildError::NoPtxas { advice: ptxas_missing_advice(&self.crate_dir) });
        }
        std::fs::create_dir_all(&self.out_dir).map_err(|err| BuildError::Io { what: format!("create {}", self.out_dir.display()), err })?;
        // The architectures build side by side (each in its own target dir,
        // under its own lock: see `compile`).
        let built: Vec<Result<ArchBuild, BuildError>> = std::thread::scope(|sc| {
            let (ptxas, toolchain_id) = (ptxas.as_deref(), toolchain_id.as_str());
            let jobs: Vec<_> = self.archs.iter().map(|&arch| sc.spawn(move || self.build_arch(arch, toolchain_id, ptxas))).collect();
            jobs.into_iter().map(|j| j.join().expect("a device build thread panicked")).collect()
        });
        let mut archs = Vec::new();
        let mut sources = BTreeSet::new();
        let mut local_memory = Vec::new();
        sources.insert(self.crate_dir.join("Cargo.toml"));
        for b in built {
            let (arch, srcs, local) = b?;
            sources.extend(srcs);
            archs.push(arch);
            local_memory.extend(local);
        }
        let warnings = local_memory_warnings(&local_memory);
        let out = BuildOutput { crate_name: self.crate_name.clone(), archs, ptxas, sources, local_memory, warnings };
        write(&self.out_dir.join("device_code.rs"), device_code_rs(&out).as_bytes())?;
        Ok(out)
    }

    /// One architecture: compile, add the kernels' metadata, write the PTX,
    /// assemble it when `ptxas` is given; with the sources it was built from.
    /// The entries that use local memory come with it.
    fn build_arch(&self, arch: Arch, toolchain_id: &str, ptxas: Option<&Path>) -> Result<ArchBuild, BuildError> {
        let (ptx_text, sources) = self.compile(arch, toolchain_id)?;
        let ptx_text = apply_kernel_meta(&ptx_text);
        let ptx = self.out_dir.join(format!("{}_{}.ptx", self.crate_name, arch.name()));
        write(&ptx, ptx_text.as_bytes())?;
        let (cubin, report) = match ptxas {
            Some(p) => {
                let cubin = self.out_dir.join(format!("{}_{}.cubin", self.crate_name, arch.name()));
                let report = self.assemble_shared(p, arch, &ptx_text, &ptx, &cubin)?;
                write(&self.out_dir.join(format!("{}_{}.ptxas.txt", self.crate_name, arch.name())), report.as_bytes())?;
                (Some(cubin), Some(report))
            }
            None => (None, None),
        };
        let local = report.as_deref().map(|r| local_memory_uses(&ptx_text, r)).unwrap_or_default();
        Ok((ArchOutput { arch, ptx, cubin, ptxas_report: report }, sources, local))
    }

    /// ptxas on `ptx`, or the cubin and report of the shared device dir when
    /// they were made from the same PTX text (another host build of the
    /// crate). The shared dir keeps the latest report: `tools/ptxas-report.sh`
    /// prints it.
    fn assemble_shared(&self, ptxas: &Path, arch: Arch, text: &str, ptx: &Path, cubin: &Path) -> Result<String, BuildError> {
        let shared = shared_device_dir(&self.out_dir, &self.crate_name);
        let (s_ptx, s_cubin, s_report) = (
            shared.join(format!("{}.ptx", arch.name())),
            shared.join(format!("{}.cubin", arch.name())),
            shared.join(format!("{}.ptxas.txt", arch.name())),
        );
        let same = std::fs::read_to_string(&s_ptx).is_ok_and(|t| t == text);
        if same && s_cubin.is_file() {
            if let Ok(report) = std::fs::read_to_string(&s_report) {
                if std::fs::copy(&s_cubin, cubin).is_ok() {
                    return Ok(report);
                }
            }
        }
        let report = assemble(ptxas, arch, ptx, cubin)?;
        // Best effort: a failed copy only costs a later ptxas run.
        let _ = std::fs::create_dir_all(&shared);
        let _ = std::fs::copy(cubin, &s_cubin);
        let _ = std::fs::write(&s_report, report.as_bytes());
        let _ = std::fs::write(&s_ptx, text.as_bytes());
        Ok(report)
    }

    /// Compiles the crate for one architecture; returns the PTX text and the
    /// source files it was built from.
    fn compile(&self, arch: Arch, toolchain_id: &str) -> Result<(String, BTreeSet<PathBuf>), BuildError> {
        let target_dir = device_target_dir(&self.out_dir, arch);
        std::fs::create_dir_all(&target_dir).map_err(|err| BuildError::Io { what: format!("create {}", target_dir.display()), err })?;
        // One device build at a time per architecture: every kernels crate
        // (and every host build of each) shares the dir.
        let lock_path = target_dir.join(".lock");
        let lock = std::fs::File::create(&lock_path).map_err(|err| BuildError::Io { what: format!("create {}", lock_path.display()), err })?;
        lock.lock().map_err(|err| BuildError::Io { what: format!("lock {}", lock_path.display()), err })?;
        let mut rustflags: Vec<&str> = arch.rustflags().to_vec();
        rustflags.extend(["-Cpanic=immediate-abort", "-Zunstable-options"]);
        // The PTX of the last build, if nothing it was built from changed
        // since: the nvptx cargo run would compile the crate again (cargo
        // never sees the PTX as the crate's output), once per host build
        // that runs this build script (`cargo doc`, `cargo test`, a release
        // build, maturin: each its own OUT_DIR).
        let shared = shared_device_dir(&self.out_dir, &self.crate_name);
        let (stamp_path, raw_ptx) = (shared.join(format!("{}.stamp", arch.name())), shared.join(format!("{}.s", arch.name())));
        let key = format!("{toolchain_id}\nflags: {}\n", rustflags.join(" "));
        if let Some(sources) = fresh_stamp(&stamp_path, &key) {
            if let Ok(ptx) = std::fs::read_to_string(&raw_ptx) {
                return Ok((ptx, sources));
            }
        }
        let started = std::time::SystemTime::now();
        let manifest = self.crate_dir.join("Cargo.toml");
        let mut cmd = clean_command("rustup");
        cmd.args(["run", &self.toolchain, "cargo", "rustc", "--release", "--lib", "--crate-type", "cdylib"])
            .arg("--manifest-path")
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&target_dir)
            .args(["-Zbuild-std=core", "--target", NVPTX_TARGET])
            .args(["--config", "profile.release.lto=\"fat\"", "--config", "profile.release.codegen-units=1"])
            .args(["--config", "profile.release.debug=0", "--config", "profile.release.incremental=false"])
            .args(["--", "--emit=asm", "-Zno-link"])
            .env("CARGO_ENCODED_RUSTFLAGS", rustflags.join("\x1f"))
            // `#[kernel]` emits PTX entries only in this crate, not in the
            // kernels crates it depends on (kernel_macros::kernel,
            // `is_device_build_root`): their kernels are in their own
            // DEVICE_CODE.
            .env(kernel_spec::DEVICE_CRATE_ENV, &self.crate_name);
        let shown = format!("CARGO_ENCODED_RUSTFLAGS='{}' {:?}", rustflags.join(" "), cmd);
        let output = cmd.output().map_err(|err| BuildError::Io { what: "run rustup".into(), err })?;
        if !output.status.success() {
            // Drop cargo's progress lines; keep the diagnostics.
            let stderr: String = String::from_utf8_lossy(&output.stderr)
                .lines()
                .filter(|l| !l.trim_start().starts_with("Compiling ") && !l.trim_start().starts_with("Finished "))
                .map(|l| format!("{l}\n"))
                .collect();
            return Err(BuildError::Compile { arch, crate_name: self.crate_name.clone(), command: shown, stderr });
        }
        let release = target_dir.join(NVPTX_TARGET).join("release");
        let ptx_path = release.join("deps").join(format!("{}.s", self.crate_name));
        let ptx = std::fs::read_to_string(&ptx_path)
            .map_err(|err| BuildError::Io { what: format!("read the PTX {} (is the lib named `{}`?)", ptx_path.display(), self.crate_name), err })?;
        // Sources of this crate and of every local crate it was built from
        // (device crates, proc macros such as kernel-macros): cargo's
        // dep-info of the build, not the whole dir's, which other crates share.
        let dep_info = release.join(format!("{}.d", self.crate_name));
        let sources = dep_info_sources(&dep_info, &self.crate_dir)
            .map_err(|err| BuildError::Io { what: format!("read cargo's dep-info {}", dep_info.display()), err })?;
        // Best effort: without a stamp the next run only compiles again.
        let _ = std::fs::create_dir_all(&shared);
        let _ = std::fs::remove_file(&stamp_path);
        if std::fs::write(&raw_ptx, ptx.as_bytes()).is_ok() {
            if let Some(stamp) = make_stamp(&key, &sources, &self.crate_dir, started) {
                let _ = std::fs::write(&stamp_path, stamp);
            }
        }
        Ok((ptx, sources))
    }
}

/// Where a kernels crate's device build keeps its PTX, cubin and ptxas
/// report per architecture (`<arch>.ptx`, `<arch>.cubin`,
/// `<arch>.ptxas.txt`, which `tools/ptxas-report.sh` prints):
/// `<dir>/nvptx-device/<crate>`, where `<dir>` holds the profile directory
/// that contains `out_dir` (`target/` for `target/debug/build/<pkg>-<hash>/out`),
/// so every host build of the crate (any features, any profile) finds the
/// cubin of the same PTX there instead of running ptxas again. An `out_dir`
/// outside a cargo `build/` directory keeps its own
/// (`<out_dir>/nvptx-device/<crate>`).
pub fn shared_device_dir(out_dir: &Path, crate_name: &str) -> PathBuf {
    device_base(out_dir).join("nvptx-device").join(crate_name)
}

/// The cargo target dir of the nvptx64 builds for `arch`:
/// `<dir>/nvptx-device-cargo/<arch>`, `<dir>` as for [`shared_device_dir`].
/// One per architecture for every kernels crate and every host build of
/// each, so `core`, `kernel-device` and the proc macros are compiled once
/// per architecture, not once per crate and architecture (a fresh build of
/// this workspace compiled `core` six times, 17 s each).
///
/// Sharing is sound with `#[kernel]`'s rule that PTX entries are emitted
/// only in the crate the device build is for (`kernel_spec::DEVICE_CRATE_ENV`):
/// a kernels crate built as another's dependency is an rlib compiled with
/// the other's name in that variable, and the crate built for itself
/// emits PTX only (no rlib), which cargo compiles on every run; so a
/// cached rlib never holds entries.
pub fn device_target_dir(out_dir: &Path, arch: Arch) -> PathBuf {
    device_base(out_dir).join("nvptx-device-cargo").join(arch.name())
}

/// The directory holding the profile directory that contains `out_dir`
/// (`target/` for `target/debug/build/<pkg>-<hash>/out`), or `out_dir`.
fn device_base(out_dir: &Path) -> &Path {
    out_dir
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent()?.parent())
        .unwrap_or(out_dir)
}

/// A command with the outer cargo build's environment removed (it would leak
/// into the nested nvptx build and break it), keeping CARGO_HOME/RUSTUP_HOME.
fn clean_command(program: &str) -> Command {
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        let strip = (k.starts_with("CARGO") && k != "CARGO_HOME")
            || k.starts_with("RUSTC")
            || k == "RUSTUP_TOOLCHAIN"
            || k == "RUSTFLAGS"
            || k == "RUSTDOCFLAGS"
            || k == "DEBUG"
            || k == "OPT_LEVEL"
            || k == "PROFILE"
            || k == "TARGET"
            || k == "HOST"
            || k == "OUT_DIR"
            || k == "NUM_JOBS";
        if strip {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd
}

/// Checks the toolchain (nightly with rust-src); returns its `rustc -vV`
/// (release, commit, LLVM version), which identifies the compiler in the
/// device build's freshness stamps.
fn check_toolchain(toolchain: &str) -> Result<String, BuildError> {
    let out = clean_command("rustup").args(["run", toolchain, "rustc", "--print", "sysroot"]).output();
    let sysroot = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => return Err(BuildError::NoNightly { toolchain: toolchain.into(), detail: String::from_utf8_lossy(&o.stderr).trim().to_string() }),
        Err(e) => return Err(BuildError::NoNightly { toolchain: toolchain.into(), detail: format!("could not run rustup: {e}") }),
    };
    let core = Path::new(&sysroot).join("lib/rustlib/src/rust/library/core/Cargo.toml");
    if !core.exists() {
        return Err(BuildError::NoRustSrc { toolchain: toolchain.into() });
    }
    match clean_command("rustup").args(["run", toolchain, "rustc", "-vV"]).output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(BuildError::NoNightly { toolchain: toolchain.into(), detail: String::from_utf8_lossy(&o.stderr).trim().to_string() }),
        Err(e) => Err(BuildError::NoNightly { toolchain: toolchain.into(), detail: format!("could not run rustup: {e}") }),
    }
}

/// A device build's freshness stamp: `key` (the compiler's `rustc -vV` and
/// the flags), then one line `<mtime in ns> <path>` per input: the sources
/// (cargo's dep-info: every local crate's `.rs` files, the proc macros' and
/// build scripts' included), the `Cargo.toml` of each package they belong
/// to, and the `Cargo.lock` of the crate's workspace. `None` (no stamp) if
/// an input cannot be read or changed after the build started at `started`
/// (an edit during the build).
fn make_stamp(key: &str, sources: &BTreeSet<PathBuf>, crate_dir: &Path, started: std::time::SystemTime) -> Option<String> {
    let mut inputs: BTreeSet<PathBuf> = sources.clone();
    for src in sources {
        if let Some(manifest) = src.ancestors().skip(1).map(|d| d.join("Cargo.toml")).find(|m| m.is_file()) {
            inputs.insert(manifest);
        }
    }
    if let Some(lock) = crate_dir.ancestors().map(|d| d.join("Cargo.lock")).find(|l| l.is_file()) {
        inputs.insert(lock);
    }
    let mut stamp = key.to_string();
    for p in &inputs {
        let mtime = std::fs::metadata(p).and_then(|m| m.modified()).ok()?;
        if mtime > started {
            return None;
        }
        stamp.push_str(&format!("{} {}\n", mtime.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos(), p.display()));
    }
    Some(stamp)
}

/// The sources of the stamp at `path` if its key is `key` and every input
/// still has its recorded mtime (see [`make_stamp`]); else `None`.
fn fresh_stamp(path: &Path, key: &str) -> Option<BTreeSet<PathBuf>> {
    let text = std::fs::read_to_string(path).ok()?;
    let rest = text.strip_prefix(key)?;
    let mut sources = BTreeSet::new();
    for line in rest.lines() {
        let (ns, p) = line.split_once(' ')?;
        let p = PathBuf::from(p);
        let mtime = std::fs::metadata(&p).and_then(|m| m.modified()).ok()?;
        if mtime.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos().to_string() != ns {
            return None;
        }
        if p.extension().is_some_and(|x| x == "rs") {
            sources.insert(p);
        }
    }
    Some(sources)
}

/// The PyPI wheel that ships the ptxas the project pins (ptxas only is
/// used; installed with `--no-deps`). `tools/install-ptxas.sh` installs the
/// same one (a unit test keeps the two in step).
pub const PTXAS_WHEEL: &str = "nvidia-cuda-nvcc==13.0.88";

/// Where a ptxas was found, in the order [`find_ptxas`] looks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PtxasSource {
    /// `KERNEL_PTXAS` (taken as given, even if it is not a file: then
    /// running it fails with that path in the error).
    EnvVar,
    /// `.tools/venv` of a directory enclosing the kernels crate: this
    /// repository's, for the crates inside it.
    RepoVenv,
    /// The user-level tools directory ([`user_tools_dir`]), which
    /// `tools/setup.sh` / `tools/install-ptxas.sh` fill: every kernels crate
    /// of the user finds it, inside this repository or not.
    UserCache,
    /// `ptxas` on `PATH` (e.g. a CUDA toolkit's).
    Path,
}

/// What [`find_ptxas_in`] looks at: environment values and the kernels
/// crate's directory. [`PtxasLookup::from_env`] fills it from the process
/// environment.
#[derive(Clone, Debug, Default)]
pub struct PtxasLookup {
    /// `KERNEL_PTXAS`.
    pub kernel_ptxas: Option<PathBuf>,
    /// The kernels crate's directory (its ancestors are searched for
    /// `.tools/venv`).
    pub crate_dir: PathBuf,
    /// The user-level tools directory ([`user_tools_dir`]).
    pub tools_dir: Option<PathBuf>,
    /// `PATH`.
    pub path: Option<std::ffi::OsString>,
}

impl PtxasLookup {
    /// The lookup for the kernels crate at `crate_dir` with this process's
    /// environment.
    pub fn from_env(crate_dir: &Path) -> Self {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        PtxasLookup {
            kernel_ptxas: var("KERNEL_PTXAS").map(PathBuf::from),
            crate_dir: crate_dir.to_path_buf(),
            tools_dir: user_tools_dir(var("KERNEL_TOOLS_DIR"), var("XDG_CACHE_HOME"), var("HOME")),
            path: var("PATH"),
        }
    }
}

/// The user-level tools directory, where `tools/install-ptxas.sh` puts
/// ptxas (`<dir>/venv`) for every kernels crate of the user:
/// `$KERNEL_TOOLS_DIR` if set, else `$XDG_CACHE_HOME/kernel-tools`, else
/// `$HOME/.cache/kernel-tools` (`None` with none of the three).
pub fn user_tools_dir(
    kernel_tools_dir: Option<std::ffi::OsString>,
    xdg_cache_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    if let Some(d) = kernel_tools_dir {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = xdg_cache_home {
        return Some(PathBuf::from(d).join("kernel-tools"));
    }
    home.map(|h| PathBuf::from(h).join(".cache").join("kernel-tools"))
}

/// The file system as [`find_ptxas_in`] sees it (a fake one in tests).
pub trait PtxasFs {
    fn is_file(&self, path: &Path) -> bool;
    /// The entries of directory `dir` (full paths; empty if it is none).
    fn entries(&self, dir: &Path) -> Vec<PathBuf>;
}

/// The real file system.
pub struct RealFs;

impl PtxasFs for RealFs {
    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }
    fn entries(&self, dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir).map(|r| r.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        v.sort();
        v
    }
}

/// The PyPI wheel's ptxas inside the Python venv `venv`
/// (`lib/python3.*/site-packages/nvidia/cu13/bin/ptxas`), if there.
fn venv_ptxas(fs: &impl PtxasFs, venv: &Path) -> Option<PathBuf> {
    fs.entries(&venv.join("lib"))
        .into_iter()
        .map(|py| py.join("site-packages/nvidia/cu13/bin/ptxas"))
        .find(|p| fs.is_file(p))
}

/// Chooses ptxas, in this order (the first found wins):
/// 1. `KERNEL_PTXAS`;
/// 2. `.tools/venv` of the kernels crate's directory or an ancestor: this
///    repository's, for the crates inside it;
/// 3. `<user tools dir>/venv` ([`user_tools_dir`]:
///    `$KERNEL_TOOLS_DIR`, `$XDG_CACHE_HOME/kernel-tools` or
///    `~/.cache/kernel-tools`), which `tools/setup.sh` fills: any kernels
///    crate, outside this repository too;
/// 4. `ptxas` on `PATH`.
///
/// The project's pinned ptxas (2, 3) comes before `PATH`, which may hold a
/// CUDA toolkit's of another version. A pure function of `lookup` and `fs`.
pub fn find_ptxas_in(lookup: &PtxasLookup, fs: &impl PtxasFs) -> Option<(PtxasSource, PathBuf)> {
    if let Some(p) = &lookup.kernel_ptxas {
        return Some((PtxasSource::EnvVar, p.clone()));
    }
    for dir in lookup.crate_dir.ancestors() {
        if let Some(p) = venv_ptxas(fs, &dir.join(".tools").join("venv")) {
            return Some((PtxasSource::RepoVenv, p));
        }
    }
    if let Some(p) = lookup.tools_dir.as_ref().and_then(|d| venv_ptxas(fs, &d.join("venv"))) {
        return Some((PtxasSource::UserCache, p));
    }
    for dir in std::env::split_paths(lookup.path.as_deref().unwrap_or_default()) {
        let p = dir.join("ptxas");
        if fs.is_file(&p) {
            return Some((PtxasSource::Path, p));
        }
    }
    None
}

/// The ptxas the device build of the crate at `start` uses: see
/// [`find_ptxas_in`] for the order.
pub fn find_ptxas(start: &Path) -> Option<PathBuf> {
    find_ptxas_in(&PtxasLookup::from_env(start), &RealFs).map(|(_, p)| p)
}

/// The one command that installs ptxas where [`find_ptxas`] finds it for
/// every kernels crate: this repository's `tools/install-ptxas.sh` (by
/// absolute path) when `repo` has it, else the equivalent pip commands into
/// the user-level tools directory (`tools_dir`, or `<dir>` when unknown).
pub fn ptxas_fix(repo: Option<&Path>, tools_dir: Option<&Path>) -> String {
    if let Some(script) = repo.map(|r| r.join("tools").join("install-ptxas.sh")) {
        return script.display().to_string();
    }
    let venv = tools_dir.map(|d| d.join("venv").display().to_string()).unwrap_or_else(|| "~/.cache/kernel-tools/venv".into());
    format!("python3 -m venv {venv} && {venv}/bin/pip install --no-deps {PTXAS_WHEEL}")
}

/// The repository kernel-host was built from, when its `tools/` is there
/// (a path or git dependency; not a registry copy).
fn kernel_repo() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?.to_path_buf();
    repo.join("tools").join("install-ptxas.sh").is_file().then_some(repo)
}

/// What to say when no ptxas was found for the crate at `crate_dir`.
fn ptxas_missing_advice(crate_dir: &Path) -> String {
    let lookup = PtxasLookup::from_env(crate_dir);
    let looked = match &lookup.tools_dir {
        Some(d) => format!("KERNEL_PTXAS, .tools/venv above the crate, {}, PATH", d.join("venv").display()),
        None => "KERNEL_PTXAS, .tools/venv above the crate, PATH (HOME is unset: no user-level tools dir)".into(),
    };
    format!("looked in: {looked}; fix: {}", ptxas_fix(kernel_repo().as_deref(), lookup.tools_dir.as_deref()))
}

/// Runs `ptxas -arch=<arch> -v` and returns its report.
fn assemble(ptxas: &Path, arch: Arch, ptx: &Path, cubin: &Path) -> Result<String, BuildError> {
    let output = Command::new(ptxas)
        .arg(format!("-arch={}", arch.name()))
        .args(["-v", "--warn-on-spills", "-o"])
        .arg(cubin)
        .arg(ptx)
        .output()
        .map_err(|err| BuildError::Io { what: format!("run ptxas {}", ptxas.display()), err })?;
    let version = Command::new(ptxas)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains("release")).unwrap_or("unknown").to_string())
        .unwrap_or_default();
    let mut report = format!("ptxas version: {version}\n");
    report.push_str(&String::from_utf8_lossy(&output.stderr));
    report.push_str(&String::from_utf8_lossy(&output.stdout));
    if !output.status.success() || report.contains("serialized") {
        return Err(BuildError::Ptxas { arch, ptxas: ptxas.to_path_buf(), report });
    }
    Ok(report)
}

/// Source files listed in a dep-info (`.d`) file, minus the toolchain's
/// own (rust-src) and registry files. Relative paths are relative to the
/// workspace root, an ancestor of `crate_dir`.
fn dep_info_sources(dep_info: &Path, crate_dir: &Path) -> std::io::Result<BTreeSet<PathBuf>> {
    let mut out = BTreeSet::new();
    for line in std::fs::read_to_string(dep_info)?.lines() {
        let Some((_, rest)) = line.split_once(": ") else { continue };
        for f in rest.split_whitespace() {
            let is_ours = f.ends_with(".rs") && !f.contains("/rustlib/src/") && !f.contains("/registry/src/");
            if !is_ours {
                continue;
            }
            let p = Path::new(f);
            let resolved = if p.is_absolute() {
                Some(p.to_path_buf())
            } else {
                crate_dir.ancestors().map(|a| a.join(p)).find(|c| c.exists())
            };
            if let Some(r) = resolved {
                out.insert(r);
            }
        }
    }
    Ok(out)
}

/// What `#[kernel]` says about one PTX entry point, in the
/// `// kernel-meta entry=NAME ...` line it emits (see [`kernel_meta`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntryMeta {
    /// `maxntid=x,y,z`: the block shape, as `"x, y, z"`.
    pub maxntid: Option<String>,
    /// `reqnctapercluster=x,y,z`, as `"x, y, z"`.
    pub reqncta: Option<String>,
    /// `byaddr=MASK`: the parameters used by address (TMA descriptors).
    pub byaddr: u64,
    /// `minnctapersm=N`: `#[kernel(min_blocks_per_sm = N)]`.
    pub minnctapersm: Option<u32>,
    /// `maxnreg=R`: `#[kernel(max_registers = R)]`.
    pub maxnreg: Option<u32>,
    /// `allow_spills`: `#[kernel(allow_spills = "reason")]`, no warning
    /// about the entry's stack frame or spills.
    pub allow_spills: bool,
    /// `kernel=NAME`: the `#[kernel]` function's name.
    pub kernel: Option<String>,
    /// `instance=a,b`: the instance's const generic values.
    pub instance: Option<String>,
}

impl EntryMeta {
    /// The kernel as its author wrote it: `attention_bwd::<128, 2>` (the
    /// entry name when the line does not say).
    pub fn display_name(&self, entry: &str) -> String {
        match (&self.kernel, &self.instance) {
            (Some(k), Some(i)) => format!("{k}::<{}>", i.replace(',', ", ")),
            (Some(k), None) => k.clone(),
            (None, _) => entry.to_string(),
        }
    }
}

/// The `// kernel-meta entry=NAME maxntid=x,y,z cluster=.. [reqnctapercluster=x,y,z]
/// [minnctapersm=N] [maxnreg=R] [allow_spills] kernel=K [instance=a,b] byaddr=MASK`
/// lines `#[kernel]` emits into the PTX, by entry name.
pub fn kernel_meta(ptx: &str) -> std::collections::HashMap<String, EntryMeta> {
    let mut meta = std::collections::HashMap::new();
    for line in ptx.lines() {
        let Some(rest) = line.trim().strip_prefix("// kernel-meta ") else { continue };
        let mut entry = None;
        let mut m = EntryMeta::default();
        for kv in rest.split_whitespace() {
            match kv.split_once('=') {
                Some(("entry", v)) => entry = Some(v.to_string()),
                Some(("maxntid", v)) => m.maxntid = Some(v.replace(',', ", ")),
                Some(("reqnctapercluster", v)) => m.reqncta = Some(v.replace(',', ", ")),
                Some(("byaddr", v)) => m.byaddr = v.parse().unwrap_or(0),
                Some(("minnctapersm", v)) => m.minnctapersm = v.parse().ok(),
                Some(("maxnreg", v)) => m.maxnreg = v.parse().ok(),
                Some(("kernel", v)) => m.kernel = Some(v.to_string()),
                Some(("instance", v)) => m.instance = Some(v.to_string()),
                None if kv == "allow_spills" => m.allow_spills = true,
                _ => {}
            }
        }
        if let Some(e) = entry {
            meta.insert(e, m);
        }
    }
    meta
}

/// Applies the `// kernel-meta entry=NAME maxntid=x,y,z cluster=.. byaddr=MASK`
/// lines `#[kernel]` emits ([`kernel_meta`]):
/// * adds `.maxntid x, y, z` to entry NAME, between its parameter list and
///   its body, so ptxas budgets registers for the real block size;
/// * adds `.maxnreg R` where the line has `maxnreg=R`
///   (`#[kernel(max_registers = R)]`: ptxas uses at most R registers per
///   thread, spilling the rest);
/// * adds `.minnctapersm N` where the line has `minnctapersm=N`
///   (`#[kernel(min_blocks_per_sm = N)]`: ptxas keeps registers low enough
///   for N CTAs of the `.maxntid` block per SM);
/// * adds `.reqnctapercluster x, y, z` where the line has
///   `reqnctapercluster=x,y,z` (`#[kernel]` emits it for `arch = sm_100a`
///   kernels with a cluster: the cluster shape is then part of the kernel;
///   ptxas 13.0 assembles it for up to 16 CTAs on sm_90a and sm_100a and
///   checks no limit, so a non-portable size needs nothing more in the PTX:
///   its permission is the function attribute the host sets at load time);
/// * adds `.minnctapersm 1` to every entry whose body has the marker of
///   `kernel_device::wgmma::pin_entry_registers` (ptxas honours
///   `setmaxnreg` only where it can pin the register count at the
///   kernel's entry, which `.maxntid` alone does not always give:
///   NVIDIA/cutlass#3406), unless the line gives its own `minnctapersm`
///   (any count pins it). Opt-in, so no other kernel's SASS changes;
/// * raises the alignment of each parameter `i` with bit `i` of MASK set (a
///   TMA descriptor used by address, which must be 64-byte aligned) from
///   rustc's `.align 16` to `.align 64` (rustc cannot pass a by-value
///   parameter aligned to more than 16: TOOLCHAIN.md).
pub fn apply_kernel_meta(ptx: &str) -> String {
    let meta = kernel_meta(ptx);
    // Entries whose bodies ask for `.minnctapersm 1`.
    let mut reallocating = std::collections::HashSet::new();
    let mut entry: Option<&str> = None;
    for line in ptx.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix(".visible .entry ").or_else(|| t.strip_prefix(".entry ")) {
            entry = rest.split(['(', ' ']).next();
        } else if t == kernel_spec::PIN_ENTRY_REGISTERS_MARKER {
            if let Some(e) = entry {
                reallocating.insert(e.to_string());
            }
        }
    }
    let mut out = String::with_capacity(ptx.len() + 64 * meta.len());
    let mut current: Option<(&str, &EntryMeta)> = None;
    for line in ptx.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix(".visible .entry ").or_else(|| t.strip_prefix(".entry ")) {
            let name = rest.split(['(', ' ']).next().unwrap_or("");
            current = meta.get_key_value(name).map(|(k, v)| (k.as_str(), v));
        }
        if let Some((name, m)) = current {
            if t.starts_with(".param") && m.byaddr != 0 {
                // `.param .align 16 .b8 NAME_param_I[128]`
                let prefix = format!("{name}_param_");
                if let Some(pos) = t.find(&prefix) {
                    let idx: String = t[pos + prefix.len()..].chars().take_while(|c| c.is_ascii_digit()).collect();
                    if let Ok(i) = idx.parse::<u32>() {
                        if i < 64 && m.byaddr & (1u64 << i) != 0 {
                            out.push_str(&line.replacen(".align 16", ".align 64", 1));
                            out.push('\n');
                            continue;
                        }
                    }
                }
            }
            if t == "{" {
                if let Some(n) = &m.maxntid {
                    out.push_str(&format!(".maxntid {n}\n"));
                }
                if let Some(r) = m.maxnreg {
                    out.push_str(&format!(".maxnreg {r}\n"));
                }
                if let Some(n) = &m.reqncta {
                    out.push_str(&format!(".reqnctapercluster {n}\n"));
                }
                if let Some(n) = m.minnctapersm {
                    out.push_str(&format!(".minnctapersm {n}\n"));
                } else if reallocating.contains(name) {
                    out.push_str(".minnctapersm 1\n");
                }
                current = None;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// An entry point that uses local memory (a stack frame or spills) on one
/// architecture: ptxas's numbers, and what `#[kernel]` said about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalMemoryUse {
    /// The kernel as its author wrote it ([`EntryMeta::display_name`]).
    pub kernel: String,
    /// ptxas's report of the entry (name, architecture, bytes).
    pub ptxas: PtxasEntry,
    /// Whether the kernel opts out of the warning
    /// (`#[kernel(allow_spills = "reason")]`).
    pub allowed: bool,
}

/// The entries of one architecture's build that use local memory: the PTX
/// (for its `// kernel-meta` lines) and ptxas's `-v` report of it.
pub fn local_memory_uses(ptx: &str, report: &str) -> Vec<LocalMemoryUse> {
    let meta = kernel_meta(ptx);
    crate::ptxas::entries(report)
        .into_iter()
        .filter(PtxasEntry::uses_local_memory)
        .map(|e| {
            let m = meta.get(&e.name);
            LocalMemoryUse {
                kernel: m.map_or_else(|| e.name.clone(), |m| m.display_name(&e.name)),
                allowed: m.is_some_and(|m| m.allow_spills),
                ptxas: e,
            }
        })
        .collect()
}

/// The build's warnings (one line each, for `cargo:warning=`) about the
/// kernels in `uses` that do not opt out: one per kernel, its numbers on
/// every architecture, and the fix.
pub fn local_memory_warnings(uses: &[LocalMemoryUse]) -> Vec<String> {
    let mut order: Vec<&str> = Vec::new();
    for u in uses.iter().filter(|u| !u.allowed) {
        if !order.contains(&u.ptxas.name.as_str()) {
            order.push(&u.ptxas.name);
        }
    }
    order
        .into_iter()
        .map(|entry| {
            let mine: Vec<&LocalMemoryUse> = uses.iter().filter(|u| !u.allowed && u.ptxas.name == entry).collect();
            let kernel = &mine[0].kernel;
            let numbers: Vec<String> = mine
                .iter()
                .map(|u| {
                    let p = &u.ptxas;
                    format!("{}: {}-byte stack frame, {} bytes spill stores, {} bytes spill loads", p.arch, p.stack_frame, p.spill_stores, p.spill_loads)
                })
                .collect();
            let named = if kernel == entry { format!("kernel `{kernel}`") } else { format!("kernel `{kernel}` (PTX entry `{entry}`)") };
            let spills = mine.iter().any(|u| u.ptxas.spill_stores > 0);
            let why = if spills {
                "ptxas ran out of registers and spilled them to local memory (off-chip, cached in L1): keep fewer values live \
                 (smaller tiles, fewer accumulators) or allow more registers per thread (fewer threads per block, a higher \
                 `max_registers`, a lower `min_blocks_per_sm`); a stack frame beyond the spills is a per-thread array indexed by \
                 a run-time value: index it only by constants, unrolling the loop over it with `kernel_device::array::regs::unroll`"
            } else {
                "a per-thread array indexed by a run-time value (a loop over it that is not unrolled) is placed in local memory \
                 (off-chip, cached in L1), not in registers: index it only by constants, unrolling the loop with \
                 `kernel_device::array::regs::unroll(N, |i| ..)` or const generics"
            };
            format!(
                "{named} uses local memory ({}): {why}; if that is intended, say why with `#[kernel(.., allow_spills = \"reason\")]`",
                numbers.join("; ")
            )
        })
        .collect()
}

fn device_code_rs(out: &BuildOutput) -> String {
    let mut s = format!("::kernel_device::launch::DeviceCode {{\n    crate_name: {:?},\n    images: &[\n", out.crate_name);
    for a in &out.archs {
        let cubin = match &a.cubin {
            Some(c) => format!("include_bytes!({:?})", c.display().to_string()),
            None => "&[]".to_string(),
        };
        s.push_str(&format!(
            "        ::kernel_device::launch::DeviceImage {{ arch: {:?}, ptx: include_str!({:?}), cubin: {}, ptxas_report: {:?} }},\n",
            a.arch.name(),
            a.ptx.display().to_string(),
            cubin,
            a.ptxas_report.clone().unwrap_or_default()
        ));
    }
    s.push_str("    ],\n}\n");
    s
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), BuildError> {
    std::fs::write(path, bytes).map_err(|err| BuildError::Io { what: format!("write {}", path.display()), err })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_marker_gives_its_entry_minnctapersm_and_no_other() {
        let ptx = "// kernel-meta entry=a maxntid=384,1,1 cluster=1,1,1\n// kernel-meta entry=b maxntid=384,1,1 cluster=1,1,1\n.visible .entry a(\n)\n{\n\t// kernel-meta: minnctapersm 1\n\tret;\n}\n.visible .entry b(\n)\n{\n\tret;\n}\n";
        let out = apply_kernel_meta(ptx);
        assert!(out.contains(".visible .entry a(\n)\n.maxntid 384, 1, 1\n.minnctapersm 1\n{"), "{out}");
        assert!(out.contains(".visible .entry b(\n)\n.maxntid 384, 1, 1\n{"), "{out}");
    }

    #[test]
    fn maxntid_goes_between_params_and_body() {
        let ptx = "// kernel-meta entry=k maxntid=256,1,1 cluster=1,1,1\n\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\tret;\n}\n.visible .entry other(\n)\n{\n\tret;\n}\n";
        let out = apply_kernel_meta(ptx);
        assert!(out.contains(")\n.maxntid 256, 1, 1\n{\n\tret;"), "{out}");
        assert_eq!(out.matches(".maxntid").count(), 1, "only the annotated entry: {out}");
    }

    #[test]
    fn reqnctapercluster_only_where_the_meta_asks() {
        let ptx = "// kernel-meta entry=k maxntid=128,1,1 cluster=2,1,1 reqnctapercluster=2,1,1 byaddr=0\n// kernel-meta entry=h maxntid=128,1,1 cluster=2,1,1 byaddr=0\n.visible .entry k(\n)\n{\n}\n.visible .entry h(\n)\n{\n}\n";
        let out = apply_kernel_meta(ptx);
        assert!(out.contains(".entry k(\n)\n.maxntid 128, 1, 1\n.reqnctapercluster 2, 1, 1\n{"), "{out}");
        assert_eq!(out.matches(".reqnctapercluster").count(), 1, "only the entry whose meta asks: {out}");
    }

    /// A non-portable (16-CTA) cluster shape goes through unchanged.
    #[test]
    fn reqnctapercluster_of_16_ctas() {
        let ptx = "// kernel-meta entry=k maxntid=32,1,1 cluster=4,4,1 reqnctapercluster=4,4,1 byaddr=0\n.visible .entry k(\n)\n{\n}\n";
        let out = apply_kernel_meta(ptx);
        assert!(out.contains(".maxntid 32, 1, 1\n.reqnctapercluster 4, 4, 1\n{"), "{out}");
    }

    #[test]
    fn byaddr_params_get_64_byte_alignment() {
        let ptx = "// kernel-meta entry=k maxntid=128,1,1 cluster=1,1,1 byaddr=2\n.visible .entry k(\n\t.param .align 16 .b8 k_param_0[128],\n\t.param .align 16 .b8 k_param_1[128],\n\t.param .u32 k_param_2\n)\n{\n}\n";
        let out = apply_kernel_meta(ptx);
        assert!(out.contains(".param .align 16 .b8 k_param_0[128],"), "{out}");
        assert!(out.contains(".param .align 64 .b8 k_param_1[128],"), "{out}");
        assert!(out.contains(")\n.maxntid 128, 1, 1\n{"), "{out}");
    }

    #[test]
    fn maxnreg_and_minnctapersm_where_the_meta_asks() {
        let ptx = "// kernel-meta entry=k maxntid=128,1,1 cluster=1,1,1 minnctapersm=4 maxnreg=64 kernel=k byaddr=0\n\
                   // kernel-meta entry=p maxntid=384,1,1 cluster=1,1,1 minnctapersm=2 kernel=p byaddr=0\n\
                   .visible .entry k(\n)\n{\n}\n.visible .entry p(\n)\n{\n\t// kernel-meta: minnctapersm 1\n}\n";
        let out = apply_kernel_meta(ptx);
        assert!(out.contains(".entry k(\n)\n.maxntid 128, 1, 1\n.maxnreg 64\n.minnctapersm 4\n{"), "{out}");
        // The pin marker's `.minnctapersm 1` gives way to the kernel's own count.
        assert!(out.contains(".entry p(\n)\n.maxntid 384, 1, 1\n.minnctapersm 2\n{"), "{out}");
        assert_eq!(out.matches(".minnctapersm").count(), 2, "{out}");
    }

    #[test]
    fn meta_names_the_kernel_as_written() {
        let ptx = "// kernel-meta entry=attention_bwd__128_2 maxntid=384,1,1 cluster=1,1,1 allow_spills kernel=attention_bwd instance=128,2 byaddr=0\n\
                   // kernel-meta entry=axpy maxntid=128,1,1 cluster=1,1,1 kernel=axpy byaddr=0\n";
        let m = kernel_meta(ptx);
        let a = &m["attention_bwd__128_2"];
        assert!(a.allow_spills);
        assert_eq!(a.display_name("attention_bwd__128_2"), "attention_bwd::<128, 2>");
        assert!(!m["axpy"].allow_spills);
        assert_eq!(m["axpy"].display_name("axpy"), "axpy");
        assert_eq!(EntryMeta::default().display_name("raw_entry"), "raw_entry");
    }

    /// ptxas 13.0's report (excerpts) of the planted kernels of
    /// `kernel-host/tests/spill_warning.rs`: a 32-float array indexed in a
    /// loop, a kernel spilling under `max_registers = 32` (its meta line
    /// below does not opt out), and the attention backward's known spill.
    const SPILL_REPORT: &str = "ptxas version: Cuda compilation tools, release 13.0, V13.0.88
ptxas warning : Registers are spilled to local memory in function 'capped', 424 bytes spill stores, 392 bytes spill loads
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'uncapped' for 'sm_90a'
ptxas info    : Function properties for uncapped
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 62 registers, used 0 barriers
ptxas info    : Compile time = 20.347 ms
ptxas info    : Compiling entry function 'planted_local_array' for 'sm_90a'
ptxas info    : Function properties for planted_local_array
    128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 128 bytes cumulative stack size
ptxas info    : Compile time = 2.907 ms
ptxas info    : Compiling entry function 'capped__2' for 'sm_90a'
ptxas info    : Function properties for capped__2
    224 bytes stack frame, 424 bytes spill stores, 392 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 224 bytes cumulative stack size
ptxas info    : Compile time = 20.759 ms
ptxas info    : Compiling entry function 'known' for 'sm_90a'
ptxas info    : Function properties for known
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers, 8 bytes cumulative stack size
";

    #[test]
    fn local_memory_warns_per_kernel_with_bytes_and_fix_unless_allowed() {
        let ptx = "// kernel-meta entry=planted_local_array maxntid=128,1,1 cluster=1,1,1 kernel=planted_local_array byaddr=0\n\
                   // kernel-meta entry=capped__2 maxntid=128,1,1 cluster=1,1,1 maxnreg=32 kernel=capped instance=2 byaddr=0\n\
                   // kernel-meta entry=known maxntid=384,1,1 cluster=1,1,1 allow_spills kernel=known byaddr=0\n\
                   // kernel-meta entry=uncapped maxntid=256,1,1 cluster=1,1,1 kernel=uncapped byaddr=0\n";
        let mut uses = local_memory_uses(ptx, SPILL_REPORT);
        let names: Vec<(&str, bool)> = uses.iter().map(|u| (u.kernel.as_str(), u.allowed)).collect();
        assert_eq!(names, [("planted_local_array", false), ("capped::<2>", false), ("known", true)]);
        // The same kernels on a second architecture: one line per kernel.
        let sm100: Vec<LocalMemoryUse> = uses.iter().cloned().map(|mut u| {
            u.ptxas.arch = "sm_100a".into();
            u
        }).collect();
        uses.extend(sm100);
        let w = local_memory_warnings(&uses);
        assert_eq!(w.len(), 2, "{w:#?}");
        assert!(
            w[0].starts_with("kernel `planted_local_array` uses local memory (sm_90a: 128-byte stack frame, 0 bytes spill stores, 0 bytes spill loads; sm_100a: 128-byte"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("a per-thread array indexed by a run-time value") && w[0].contains("kernel_device::array::regs::unroll"), "{}", w[0]);
        assert!(w[0].ends_with("if that is intended, say why with `#[kernel(.., allow_spills = \"reason\")]`"), "{}", w[0]);
        assert!(w[1].starts_with("kernel `capped::<2>` (PTX entry `capped__2`) uses local memory (sm_90a: 224-byte stack frame, 424 bytes spill stores, 392 bytes spill loads"), "{}", w[1]);
        assert!(w[1].contains("ran out of registers"), "{}", w[1]);
        assert!(w.iter().all(|w| !w.contains('\n')), "one line each (cargo:warning)");
        // Without meta lines (no `#[kernel]`), the entry name and no opt-out.
        let raw = local_memory_uses("", SPILL_REPORT);
        assert_eq!(raw.iter().filter(|u| !u.allowed).count(), 3);
    }

    #[test]
    fn device_code_lists_each_arch() {
        let out = BuildOutput {
            crate_name: "kern".into(),
            archs: vec![
                ArchOutput { arch: Arch::Sm90a, ptx: "/o/kern_sm_90a.ptx".into(), cubin: Some("/o/kern_sm_90a.cubin".into()), ptxas_report: Some("r".into()) },
                ArchOutput { arch: Arch::Sm100a, ptx: "/o/kern_sm_100a.ptx".into(), cubin: None, ptxas_report: None },
            ],
            ptxas: None,
            sources: BTreeSet::new(),
            local_memory: Vec::new(),
            warnings: Vec::new(),
        };
        let s = device_code_rs(&out);
        assert!(s.contains("arch: \"sm_90a\", ptx: include_str!(\"/o/kern_sm_90a.ptx\"), cubin: include_bytes!(\"/o/kern_sm_90a.cubin\")"), "{s}");
        assert!(s.contains("arch: \"sm_100a\", ptx: include_str!(\"/o/kern_sm_100a.ptx\"), cubin: &[]"), "{s}");
    }

    #[test]
    fn a_compile_error_shows_rustc_and_one_line_not_the_command() {
        let e = BuildError::Compile {
            arch: Arch::Sm90a,
            crate_name: "my_kernels".into(),
            command: "CARGO_ENCODED_RUSTFLAGS='-Ctarget-cpu=sm_90a' \"rustup\" \"run\" ...".into(),
            stderr: "error[E0599]: no method named `exp` found for type `f32`\n --> src/lib.rs:3:7\n".into(),
        };
        let msg = e.to_string();
        assert!(msg.starts_with("error[E0599]"), "{msg}");
        assert!(msg.contains("device build of crate `my_kernels` for sm_90a"), "{msg}");
        assert!(!msg.contains("CARGO_ENCODED_RUSTFLAGS") && !msg.contains("rustup"), "{msg}");
        assert_eq!(msg.lines().count(), 3, "{msg}");
    }

    #[test]
    fn a_stamp_is_fresh_until_an_input_or_the_key_changes() {
        let dir = std::env::temp_dir().join(format!("kernel-host-stamp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("k/src")).unwrap();
        std::fs::write(dir.join("Cargo.lock"), "lock").unwrap();
        std::fs::write(dir.join("k/Cargo.toml"), "[package]").unwrap();
        let src = dir.join("k/src/lib.rs");
        std::fs::write(&src, "// v1").unwrap();
        let sources: BTreeSet<PathBuf> = [src.clone()].into();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
        let stamp = make_stamp("rustc X\nflags: a\n", &sources, &dir.join("k"), later).unwrap();
        // The package's manifest and the workspace's lock file are inputs too.
        assert_eq!(stamp.lines().count(), 5, "{stamp}");
        let path = dir.join("sm_90a.stamp");
        std::fs::write(&path, &stamp).unwrap();
        assert_eq!(fresh_stamp(&path, "rustc X\nflags: a\n"), Some(sources.clone()));
        assert_eq!(fresh_stamp(&path, "rustc Y\nflags: a\n"), None, "another compiler");
        assert_eq!(fresh_stamp(&path, "rustc X\nflags: b\n"), None, "other flags");
        let touched = std::time::SystemTime::now() + std::time::Duration::from_secs(7200);
        std::fs::File::options().write(true).open(dir.join("k/Cargo.toml")).unwrap().set_modified(touched).unwrap();
        assert_eq!(fresh_stamp(&path, "rustc X\nflags: a\n"), None, "a manifest changed");
        // An input edited after the build started: no stamp.
        assert_eq!(make_stamp("k", &sources, &dir.join("k"), std::time::SystemTime::UNIX_EPOCH), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn host_builds_with_other_features_and_crates_share_device_dirs() {
        let a = shared_device_dir(Path::new("/w/target/debug/build/kernels-0123/out"), "kernels");
        let b = shared_device_dir(Path::new("/w/target/release/build/kernels-4567/out"), "kernels");
        let c = shared_device_dir(Path::new("/w/target/x86_64-unknown-linux-gnu/debug/build/kernels-89ab/out"), "kernels");
        assert_eq!(a, Path::new("/w/target/nvptx-device/kernels"));
        assert_eq!(a, b);
        assert_eq!(c, Path::new("/w/target/x86_64-unknown-linux-gnu/nvptx-device/kernels"));
        assert_eq!(shared_device_dir(Path::new("/tmp/out"), "k"), Path::new("/tmp/out/nvptx-device/k"));
        // The cargo target dir: one per architecture, for every crate.
        assert_eq!(device_target_dir(Path::new("/w/target/debug/build/kernels-0123/out"), Arch::Sm90a), Path::new("/w/target/nvptx-device-cargo/sm_90a"));
        assert_eq!(device_target_dir(Path::new("/w/target/release/build/other-4567/out"), Arch::Sm90a), Path::new("/w/target/nvptx-device-cargo/sm_90a"));
        assert_eq!(device_target_dir(Path::new("/tmp/out"), Arch::Sm100a), Path::new("/tmp/out/nvptx-device-cargo/sm_100a"));
    }

    #[test]
    fn missing_rust_src_message_gives_the_fix() {
        let e = BuildError::NoRustSrc { toolchain: "nightly".into() };
        assert!(e.to_string().contains("rustup component add rust-src --toolchain nightly"));
        let e = BuildError::NoNightly { toolchain: "nightly".into(), detail: "x".into() };
        assert!(e.to_string().contains("rustup toolchain install nightly --component rust-src"));
    }

    #[test]
    fn unknown_toolchain_is_a_no_nightly_error() {
        match check_toolchain("no-such-toolchain-kernel-test") {
            Err(BuildError::NoNightly { .. }) => {}
            other => panic!("expected NoNightly, got {other:?}"),
        }
    }

    /// A fake file system: the listed files (and their parent directories).
    struct FakeFs(Vec<PathBuf>);

    impl PtxasFs for FakeFs {
        fn is_file(&self, path: &Path) -> bool {
            self.0.iter().any(|f| f == path)
        }
        fn entries(&self, dir: &Path) -> Vec<PathBuf> {
            let mut v: Vec<PathBuf> = self
                .0
                .iter()
                .filter_map(|f| f.strip_prefix(dir).ok()?.components().next().map(|c| dir.join(c)))
                .collect();
            v.sort();
            v.dedup();
            v
        }
    }

    const WHEEL_PTXAS: &str = "lib/python3.11/site-packages/nvidia/cu13/bin/ptxas";

    fn lookup(kernel_ptxas: Option<&str>, crate_dir: &str, tools_dir: Option<&str>, path: &str) -> PtxasLookup {
        PtxasLookup {
            kernel_ptxas: kernel_ptxas.map(PathBuf::from),
            crate_dir: crate_dir.into(),
            tools_dir: tools_dir.map(PathBuf::from),
            path: Some(path.into()),
        }
    }

    #[test]
    fn ptxas_lookup_order_env_repo_user_cache_path() {
        let repo = PathBuf::from("/repo/.tools/venv").join(WHEEL_PTXAS);
        let cache = PathBuf::from("/home/u/.cache/kernel-tools/venv").join(WHEEL_PTXAS);
        let on_path = PathBuf::from("/usr/local/cuda/bin/ptxas");
        let all = FakeFs(vec![repo.clone(), cache.clone(), on_path.clone()]);
        let inside = lookup(None, "/repo/examples/kernels", Some("/home/u/.cache/kernel-tools"), "/usr/bin:/usr/local/cuda/bin");
        let outside = lookup(None, "/tmp/outside/kernels", Some("/home/u/.cache/kernel-tools"), "/usr/bin:/usr/local/cuda/bin");
        // 1. KERNEL_PTXAS wins over everything, even when it is no file.
        let env = PtxasLookup { kernel_ptxas: Some("/opt/my/ptxas".into()), ..inside.clone() };
        assert_eq!(find_ptxas_in(&env, &all), Some((PtxasSource::EnvVar, "/opt/my/ptxas".into())));
        // 2. A crate inside the repository: the repository's .tools/venv.
        assert_eq!(find_ptxas_in(&inside, &all), Some((PtxasSource::RepoVenv, repo.clone())));
        // 3. A crate outside it: the user-level cache, before PATH.
        assert_eq!(find_ptxas_in(&outside, &all), Some((PtxasSource::UserCache, cache.clone())));
        // 4. Neither venv: PATH, in PATH's order.
        let path_only = FakeFs(vec![on_path.clone(), "/opt/late/ptxas".into()]);
        let late = lookup(None, "/tmp/outside/kernels", Some("/home/u/.cache/kernel-tools"), "/usr/bin:/usr/local/cuda/bin:/opt/late");
        assert_eq!(find_ptxas_in(&late, &path_only), Some((PtxasSource::Path, on_path)));
        // Nothing anywhere (and no user-level dir): none.
        assert_eq!(find_ptxas_in(&lookup(None, "/tmp/outside/kernels", None, "/usr/bin"), &FakeFs(vec![cache])), None);
        // A venv without the wheel's ptxas is skipped.
        let empty_venv = FakeFs(vec!["/repo/.tools/venv/lib/python3.11/site-packages/other".into(), repo.clone()]);
        assert_eq!(find_ptxas_in(&inside, &empty_venv), Some((PtxasSource::RepoVenv, repo)));
    }

    #[test]
    fn user_tools_dir_order() {
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(user_tools_dir(os("/t"), os("/x"), os("/h")), Some(PathBuf::from("/t")));
        assert_eq!(user_tools_dir(None, os("/x"), os("/h")), Some(PathBuf::from("/x/kernel-tools")));
        assert_eq!(user_tools_dir(None, None, os("/h")), Some(PathBuf::from("/h/.cache/kernel-tools")));
        assert_eq!(user_tools_dir(None, None, None), None);
    }

    #[test]
    fn missing_ptxas_gives_one_command() {
        // Built from this repository: its installer, by absolute path.
        let repo = kernel_repo().expect("kernel-host is built from the repository here");
        let fix = ptxas_fix(Some(&repo), Some(Path::new("/h/.cache/kernel-tools")));
        assert!(fix.ends_with("/tools/install-ptxas.sh") && Path::new(&fix).is_absolute(), "{fix}");
        // Without the repository: pip into the user-level venv, the pinned wheel.
        let fix = ptxas_fix(None, Some(Path::new("/h/.cache/kernel-tools")));
        assert_eq!(
            fix,
            format!("python3 -m venv /h/.cache/kernel-tools/venv && /h/.cache/kernel-tools/venv/bin/pip install --no-deps {PTXAS_WHEEL}")
        );
        let e = BuildError::NoPtxas { advice: ptxas_missing_advice(Path::new("/tmp/outside")) };
        assert!(e.to_string().contains("install-ptxas.sh"), "{e}");
    }

    /// The installer and the build's fallback command pin the same wheel.
    #[test]
    fn installer_pins_the_same_wheel() {
        let script = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/install-ptxas.sh")).unwrap();
        assert!(script.contains(PTXAS_WHEEL), "tools/install-ptxas.sh does not install {PTXAS_WHEEL}");
    }
}
