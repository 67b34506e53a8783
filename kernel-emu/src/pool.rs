//! The OS threads of the runs, kept between runs.
//!
//! A run needs one OS thread per emulated GPU thread (up to 4096). Starting
//! and ending them for every run (their stacks mapped, zeroed by page faults
//! and unmapped each time) cost about as much as the emulated code in tests
//! that make many small launches; so a thread that ran one emulated thread
//! waits, idle, for the next run's, and ends after [`IDLE_EXIT`] without
//! one. Nothing of a run stays on its threads: the emulated thread's context
//! is cleared when its kernel returns (`thread_main`), and the run's CPU is
//! set again by the next job (module `pin`).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How long an idle thread waits for a job before it ends.
pub(crate) const IDLE_EXIT: Duration = Duration::from_secs(5);

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Worker {
    job: Mutex<Option<Job>>,
    cv: Condvar,
}

/// The idle threads, with their stack sizes.
static IDLE: Mutex<Vec<(usize, Arc<Worker>)>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The jobs of one run: started, finished, and the first panic that escaped
/// one (a bug of the emulator itself: `thread_main` catches the kernel's).
pub(crate) struct Jobs {
    state: Mutex<(usize, usize, Option<Box<dyn Any + Send>>)>,
    cv: Condvar,
    cpu: Option<usize>,
}

impl Jobs {
    pub(crate) fn new(cpu: Option<usize>) -> Arc<Jobs> {
        Arc::new(Jobs { state: Mutex::new((0, 0, None)), cv: Condvar::new(), cpu })
    }

    /// Starts `f` on an idle thread of `stack` bytes, or on a new one.
    /// Err: the OS would not start a thread (then `f` does not run).
    ///
    /// The caller must call [`Jobs::wait`] (or drop the [`Wait`] guard of
    /// [`Jobs::guard`]) before anything `f` borrows goes away: `f`'s
    /// lifetime is erased here, and `wait` returns only after every started
    /// job has returned.
    pub(crate) fn start<'a>(self: &Arc<Self>, stack: usize, f: Box<dyn FnOnce() + Send + 'a>) -> std::io::Result<()> {
        let jobs = self.clone();
        let cpu = self.cpu;
        let job: Box<dyn FnOnce() + Send + 'a> = Box::new(move || {
            if let Some(cpu) = cpu {
                crate::pin::pin_thread(cpu);
            }
            let escaped = catch_unwind(AssertUnwindSafe(f)).err();
            let mut s = lock(&jobs.state);
            s.1 += 1;
            if s.2.is_none() {
                s.2 = escaped;
            }
            jobs.cv.notify_all();
        });
        // SAFETY: only the lifetime changes. The job's borrows (of `f`)
        // outlive it: the run waits in `Jobs::wait` (guaranteed by the
        // `Wait` guard, on unwinding too) until the job has returned, and a
        // job that did not start is dropped here, in the caller.
        let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + 'a>, Job>(job) };
        lock(&self.state).0 += 1;
        let idle = {
            let mut idle = lock(&IDLE);
            idle.iter().rposition(|(s, _)| *s == stack).map(|i| idle.swap_remove(i).1)
        };
        let result = match idle {
            Some(w) => {
                *lock(&w.job) = Some(job);
                w.cv.notify_one();
                Ok(())
            }
            None => {
                let w = Arc::new(Worker { job: Mutex::new(Some(job)), cv: Condvar::new() });
                let w2 = w.clone();
                let spawned = std::thread::Builder::new().name("kernel-emu".into()).stack_size(stack).spawn(move || worker(w2, stack));
                // Not started: drop the job here (its borrows are alive).
                spawned.map(|_| ()).inspect_err(|_| drop(lock(&w.job).take()))
            }
        };
        if result.is_err() {
            lock(&self.state).0 -= 1;
        }
        result
    }

    /// A guard that waits for every started job when dropped.
    pub(crate) fn guard(self: &Arc<Self>) -> Wait {
        Wait(self.clone())
    }

    /// Waits until every started job has returned; resumes a panic that
    /// escaped one.
    fn wait(&self) -> Option<Box<dyn Any + Send>> {
        let mut s = lock(&self.state);
        while s.1 < s.0 {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.2.take()
    }
}

/// Waits for a run's jobs (see [`Jobs::guard`]).
pub(crate) struct Wait(Arc<Jobs>);

impl Wait {
    /// Waits now, and re-raises a panic that escaped a job.
    pub(crate) fn finish(self) {
        // (The drop's wait then returns at once.)
        let escaped = self.0.wait();
        drop(self);
        if let Some(p) = escaped {
            std::panic::resume_unwind(p);
        }
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        self.0.wait();
    }
}

fn worker(w: Arc<Worker>, stack: usize) {
    loop {
        let job = {
            let mut slot = lock(&w.job);
            loop {
                if let Some(job) = slot.take() {
                    break job;
                }
                let (s, timeout) = w.cv.wait_timeout(slot, IDLE_EXIT).unwrap_or_else(|e| e.into_inner());
                slot = s;
                if timeout.timed_out() && slot.is_none() {
                    // Leave, unless a run took this thread meanwhile (its
                    // job is then on the way).
                    drop(slot);
                    let mut idle = lock(&IDLE);
                    if let Some(i) = idle.iter().position(|(_, x)| Arc::ptr_eq(x, &w)) {
                        idle.swap_remove(i);
                        return;
                    }
                    drop(idle);
                    slot = lock(&w.job);
                }
            }
        };
        job();
        lock(&IDLE).push((stack, w.clone()));
    }
}
