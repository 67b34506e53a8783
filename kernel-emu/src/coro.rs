//! The emulated threads of a run as stackful coroutines on the caller's OS
//! thread: their stacks, kept between runs; the loop that resumes the
//! baton's holder; the suspension of a thread that waits for the baton.
//!
//! One emulated thread runs at a time (the seeded scheduler hands a baton,
//! `State::current`), so a run needs no more than one CPU. Each emulated
//! thread is a coroutine with its own stack ([`corosensei`]); a thread that
//! hands the baton on suspends ([`suspend`]) and the run's loop ([`drive`])
//! resumes the new holder. A hand-off is a user-space stack switch (tens of
//! nanoseconds), where an OS thread per emulated thread made it an OS context
//! switch (a futex wake and a futex wait, about 8 us of kernel time each on
//! the 2-core CI machine: 4.9 million of them in `kernel-tests`' emulator
//! suite). The schedule is the scheduler's alone, so runs, reports and seeds
//! are the same as with OS threads.
//!
//! Stacks are mapped once (with a guard page) and kept for the next run: a
//! fresh stack costs page faults on its first use, which tests that make many
//! small launches would pay for every thread of every launch. A thread that
//! overflows its stack faults on the guard page; on Unix a signal handler
//! (module `overflow`) then stops the process with a line that names the
//! stack size's variable (`KERNEL_EMU_STACK_KIB`), where the fault would
//! otherwise be a bare segmentation fault.

use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::sync::{Mutex, MutexGuard};

/// An emulated thread: a coroutine that runs the kernel on its own stack.
pub(crate) struct Thread {
    co: Coroutine<(), (), (), DefaultStack>,
    /// Its stack's size (as asked for: the key of the kept stacks).
    bytes: usize,
    /// Its guard page's addresses, `[lo, hi)`.
    guard: (usize, usize),
}

/// The coroutine's handle to suspend itself (it lives on the coroutine's
/// stack while the coroutine runs).
pub(crate) type Suspender = Yielder<(), ()>;

/// Stacks kept between runs, with their sizes.
static STACKS: Mutex<Vec<(usize, DefaultStack)>> = Mutex::new(Vec::new());

/// The most stacks kept between runs (two runs of the largest grid).
const MAX_KEPT: usize = 2 * crate::MAX_THREADS;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A stack of `bytes` (plus a guard page): a kept one, or a new mapping.
fn take_stack(bytes: usize) -> std::io::Result<DefaultStack> {
    let kept = {
        let mut kept = lock(&STACKS);
        kept.iter().rposition(|(s, _)| *s == bytes).map(|i| kept.swap_remove(i).1)
    };
    match kept {
        Some(s) => Ok(s),
        None => DefaultStack::new(bytes),
    }
}

fn give_back(bytes: usize, stack: DefaultStack) {
    let mut kept = lock(&STACKS);
    if kept.len() < MAX_KEPT {
        kept.push((bytes, stack));
    }
}

/// Makes the coroutine of one emulated thread, which runs `body` on a stack of
/// `bytes` when first resumed.
///
/// # Safety
///
/// Everything `body` borrows must outlive the coroutine: the caller drives it
/// to completion ([`drive`]) or drops it before those borrows end (dropping a
/// suspended coroutine unwinds its stack).
pub(crate) unsafe fn spawn<'a>(bytes: usize, body: impl FnOnce(&Suspender) + 'a) -> std::io::Result<Thread> {
    let stack = take_stack(bytes)?;
    // `DefaultStack`'s limit is the start of its mapping, whose first page
    // is the guard page.
    let limit = stack.limit().get();
    let guard = (limit, limit + page_size());
    // SAFETY: the caller keeps `body`'s borrows alive for the coroutine's
    // life (above); the stack is ours (taken from the pool or new).
    let co = unsafe { Coroutine::with_stack_unchecked(stack, move |s: &Suspender, ()| body(s)) };
    Ok(Thread { co, bytes, guard })
}

fn page_size() -> usize {
    #[cfg(unix)]
    {
        // SAFETY: sysconf reads a constant of the system.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 {
            return p as usize;
        }
    }
    4096
}

/// Runs the threads of one run to their end: resumes the baton's holder
/// (`holder` reads it: `Some(tid)`, or `None` when no thread holds it) until
/// every thread has returned, or, once `aborted` says the run stopped, each
/// thread left in turn (each then unwinds at once).
///
/// Panics (a bug of the emulator itself, not of the kernel: each thread's
/// body catches the kernel's panics) when the baton's holder has already
/// returned, when no thread holds the baton but some have not returned, or
/// when an aborted thread suspends instead of unwinding.
pub(crate) fn drive(threads: &mut [Option<Thread>], mut holder: impl FnMut() -> (Option<usize>, bool)) {
    #[cfg(unix)]
    overflow::install();
    loop {
        let (current, aborted) = holder();
        let tid = if aborted {
            match threads.iter().position(Option::is_some) {
                Some(t) => t,
                None => return,
            }
        } else {
            match current {
                Some(t) => t,
                None => {
                    let left = threads.iter().filter(|t| t.is_some()).count();
                    assert!(left == 0, "kernel-emu bug: no thread holds the baton but {left} have not returned");
                    return;
                }
            }
        };
        let thread = threads[tid]
            .as_mut()
            .unwrap_or_else(|| panic!("kernel-emu bug: the baton went to thread {tid}, which has returned"));
        #[cfg(unix)]
        overflow::GUARD.with(|g| g.set(thread.guard));
        let turn = thread.co.resume(());
        #[cfg(unix)]
        overflow::GUARD.with(|g| g.set((0, 0)));
        match turn {
            CoroutineResult::Return(()) => {
                let thread = threads[tid].take().expect("resumed above");
                give_back(thread.bytes, thread.co.into_stack());
            }
            CoroutineResult::Yield(()) => {
                assert!(!aborted, "kernel-emu bug: thread {tid} of a stopped run suspended instead of unwinding");
            }
        }
    }
}

/// Suspends the calling emulated thread (which has handed the baton on)
/// until [`drive`] resumes it.
pub(crate) fn suspend(s: &Suspender) {
    // A thread that suspended while unwinding would leave the OS thread's
    // panic count to the next thread resumed (`std::thread::panicking`):
    // scheduling points do nothing while unwinding (`enter`).
    assert!(!std::thread::panicking(), "kernel-emu bug: an unwinding emulated thread waited for the baton");
    s.suspend(());
}

/// A fault on a coroutine's guard page, reported as the stack overflow it is.
///
/// The handler (SIGSEGV and SIGBUS, on the OS thread's alternate signal
/// stack) compares the faulting address with the guard page of the
/// coroutine running on this OS thread ([`GUARD`], set around each resume):
/// on a match it writes one line naming `KERNEL_EMU_STACK_KIB` and aborts;
/// any other fault goes to the handler that was there before (the Rust
/// runtime's, which reports its own threads' overflows), by restoring it and
/// returning so the instruction faults again.
#[cfg(unix)]
mod overflow {
    use std::cell::Cell;
    use std::sync::OnceLock;

    thread_local! {
        /// The guard page of the coroutine this OS thread runs now
        /// (`(0, 0)`: none). Const-initialized: readable in the handler.
        pub(super) static GUARD: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
        /// Whether this OS thread's alternate signal stack was checked.
        static ALT_CHECKED: Cell<bool> = const { Cell::new(false) };
    }

    const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

    /// The actions that were installed before ours (for [`SIGNALS`]).
    struct Previous([libc::sigaction; 2]);
    // SAFETY: plain data (handler addresses, masks, flags), written once.
    unsafe impl Sync for Previous {}
    unsafe impl Send for Previous {}
    static PREVIOUS: OnceLock<Previous> = OnceLock::new();

    /// The handler's line (made at [`install`]: the handler cannot
    /// allocate).
    static MESSAGE: OnceLock<String> = OnceLock::new();

    extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let addr = unsafe { (*info).si_addr() } as usize;
        let (lo, hi) = GUARD.try_with(Cell::get).unwrap_or((0, 0));
        if lo <= addr && addr < hi {
            let line = MESSAGE.get().map_or(&b"kernel-emu: an emulated GPU thread overflowed its stack\n"[..], |m| m.as_bytes());
            // SAFETY: write(2) and abort(3) are async-signal-safe; `line`
            // is static data.
            unsafe {
                libc::write(2, line.as_ptr().cast(), line.len());
                libc::abort();
            }
        }
        if let Some(prev) = PREVIOUS.get() {
            let i = SIGNALS.iter().position(|&s| s == sig).unwrap_or(0);
            // SAFETY: reinstalls the action that was there before ours; the
            // faulting instruction then runs again and reaches it.
            unsafe { libc::sigaction(sig, &prev.0[i], std::ptr::null_mut()) };
        }
    }

    /// Installs the handler (once per process) and makes sure this OS
    /// thread has an alternate signal stack (the Rust runtime gives its own
    /// threads one; a thread started elsewhere, e.g. Python's, may have none).
    pub(super) fn install() {
        MESSAGE.get_or_init(|| {
            format!(
                "\nkernel-emu: an emulated GPU thread overflowed its stack (KERNEL_EMU_STACK_KIB, {} KiB by default): \
                 run again with a larger one, e.g. KERNEL_EMU_STACK_KIB=2048 (debug builds of kernels with large \
                 register arrays need more)\n",
                crate::DEFAULT_STACK_BYTES / 1024
            )
        });
        PREVIOUS.get_or_init(|| {
            // SAFETY: sigaction with a zeroed struct filled in here; the
            // previous actions are read into zeroed structs.
            unsafe {
                let mut ours: libc::sigaction = std::mem::zeroed();
                ours.sa_sigaction = handler as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize;
                ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut ours.sa_mask);
                let mut prev: [libc::sigaction; 2] = std::mem::zeroed();
                for (i, &sig) in SIGNALS.iter().enumerate() {
                    libc::sigaction(sig, &ours, &mut prev[i]);
                }
                Previous(prev)
            }
        });
        if !ALT_CHECKED.with(|c| c.replace(true)) {
            // SAFETY: reads this thread's alternate stack; installs a new
            // one (mapped, never unmapped: it must outlive the thread's
            // signals) only where there is none.
            unsafe {
                let mut cur: libc::stack_t = std::mem::zeroed();
                if libc::sigaltstack(std::ptr::null(), &mut cur) == 0 && cur.ss_flags & libc::SS_DISABLE != 0 {
                    let size = 64 * 1024;
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        size,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    );
                    if p != libc::MAP_FAILED {
                        let alt = libc::stack_t { ss_sp: p, ss_flags: 0, ss_size: size };
                        libc::sigaltstack(&alt, std::ptr::null_mut());
                    }
                }
            }
        }
    }
}
