//! The baton's hand-off made cheap (Linux): one CPU per run, no wake-up
//! preemption, the machine's futex hash.
//!
//! A run hands one baton between its OS threads (one emulated thread runs at
//! a time), so it never uses more than one CPU's worth of work, and every
//! scheduling point that picks another thread is an OS context switch
//! (a futex wake of the next thread, a futex wait of this one). Three
//! settings make that switch cheaper; none changes the schedule, so every
//! result and report is the same with or without them (the seeded scheduler
//! alone picks who runs):
//!
//! - **one CPU per run**: left to the OS, the threads spread over the CPUs
//!   and each hand-off wakes a thread on another CPU (an inter-processor
//!   interrupt, a VM exit on a virtual machine). Each run takes the allowed
//!   CPU (the caller's affinity mask) with the fewest runs of this process
//!   on it now ([`take_cpu`]), so runs started from parallel test threads
//!   land on different CPUs, and each OS thread that runs one of its
//!   emulated threads pins itself there ([`pin_thread`]);
//! - **`SCHED_BATCH`** for those threads: the woken thread does not preempt
//!   its waker (which would switch to it, find the state locked, and switch
//!   back) but runs when the waker sleeps a moment later;
//! - **the global futex hash**: since Linux 6.16 a process's futexes hash
//!   into a private table sized from its thread count at the time; a run's
//!   thousands of waiting threads made chains that every wake walked. The
//!   first run sets the process back to the machine's hash (`prctl`).
//!
//! Measured on the 2-core CI machine (`kernel-ops` norms tests): a cluster
//! norm test 29.9 s -> 16.4 s by the CPU alone; the backward norm test 16.4
//! s -> 12.2 s by the hash, -> 9.0 s by `SCHED_BATCH` (involuntary context
//! switches 402 k -> 23 k). Set `KERNEL_EMU_PIN=0` to leave the threads to
//! the OS scheduler (all three off).

/// A run's CPU (`None`: not pinned); dropping it frees the CPU's count.
pub(crate) struct RunCpu {
    pub(crate) cpu: Option<usize>,
}

/// Takes the least used allowed CPU for a run; `None` where pinning is off
/// (not Linux, `KERNEL_EMU_PIN=0`, one allowed CPU, or the affinity call
/// failed).
pub(crate) fn take_cpu() -> RunCpu {
    let wanted = std::env::var("KERNEL_EMU_PIN").map_or(true, |v| v.trim() != "0");
    #[cfg(target_os = "linux")]
    {
        RunCpu { cpu: if wanted { linux::take() } else { None } }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = wanted;
        RunCpu { cpu: None }
    }
}

/// Pins the calling OS thread to `cpu`; false if that failed.
pub(crate) fn pin_thread(cpu: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        linux::pin(cpu)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        false
    }
}

impl Drop for RunCpu {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(cpu) = self.cpu {
            linux::give_back(cpu);
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::sync::Mutex;

    /// Runs on each CPU now (index: CPU number), in this process.
    static USERS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

    const SET_BYTES: usize = std::mem::size_of::<libc::cpu_set_t>();

    /// The CPUs the calling thread may run on.
    pub(super) fn allowed() -> Option<Vec<usize>> {
        // SAFETY: `cpu_set_t` is a plain bit array for which all zeros is
        // valid; `sched_getaffinity(0, ..)` (the calling thread) writes at
        // most `SET_BYTES` bytes into it; `CPU_ISSET` reads bit `c <
        // CPU_SETSIZE` of it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, SET_BYTES, &mut set) != 0 {
                return None;
            }
            Some((0..8 * SET_BYTES).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
        }
    }

    pub(super) fn take() -> Option<usize> {
        static FUTEX_HASH: std::sync::Once = std::sync::Once::new();
        FUTEX_HASH.call_once(|| {
            // PR_FUTEX_HASH (78), PR_FUTEX_HASH_SET_SLOTS (1), 0 slots: the
            // global hash (Linux 6.16+; older kernels refuse, harmlessly).
            // SAFETY: a prctl with integer arguments only.
            unsafe { libc::prctl(78, 1, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong) };
        });
        let allowed = allowed()?;
        if allowed.len() < 2 {
            return None;
        }
        let mut users = USERS.lock().unwrap_or_else(|e| e.into_inner());
        if users.len() < 8 * SET_BYTES {
            users.resize(8 * SET_BYTES, 0);
        }
        let cpu = *allowed.iter().min_by_key(|&&c| users[c]).expect("two or more allowed CPUs");
        users[cpu] += 1;
        Some(cpu)
    }

    pub(super) fn give_back(cpu: usize) {
        USERS.lock().unwrap_or_else(|e| e.into_inner())[cpu] -= 1;
    }

    pub(super) fn pin(cpu: usize) -> bool {
        // SAFETY: as in `allowed`: a zeroed `cpu_set_t`, bit `cpu <
        // CPU_SETSIZE` set (`cpu` came from `allowed`), passed with its size;
        // the call changes only the calling thread's affinity.
        unsafe {
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut one);
            // SCHED_BATCH: no wake-up preemption (priority 0, the only
            // one the policy has; no privilege needed). Failure only costs
            // speed.
            let batch = libc::sched_param { sched_priority: 0 };
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &batch);
            libc::sched_setaffinity(0, SET_BYTES, &one) == 0
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_run_takes_an_allowed_cpu_and_its_threads_pin_there() {
        let before = linux::allowed().unwrap();
        if before.len() < 2 || std::env::var("KERNEL_EMU_PIN").is_ok_and(|v| v.trim() == "0") {
            eprintln!("skipped: pinning is off here (allowed CPUs {before:?})");
            return;
        }
        let run = take_cpu();
        let cpu = run.cpu.expect("two or more CPUs: the run takes one");
        assert!(before.contains(&cpu), "{cpu} is not in the allowed {before:?}");
        let on = std::thread::spawn(move || {
            assert!(pin_thread(cpu));
            linux::allowed().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(on, vec![cpu], "the thread runs on the run's CPU only");
        assert_eq!(linux::allowed().unwrap(), before, "the caller itself is not pinned");
    }
}
