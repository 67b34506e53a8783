//! The errors a run reports, and the run's summary.
use std::fmt;

/// What a successful [`run`](crate::run) did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunReport {
    /// Scheduling points passed by all threads together (every synchronizing
    /// call and every [`yield_point`](crate::yield_point) counts one).
    pub steps: u64,
    /// Emulated GPU threads that ran (grid size x block size).
    pub threads: usize,
    /// Clusters canceled by cluster launch control (they never ran).
    pub canceled_clusters: u32,
    /// Warnings of the run (also printed to stderr when it ends), e.g. a
    /// pipeline that never reused a slot ([`warn_once`](crate::warn_once)).
    pub warnings: Vec<String>,
}

/// Why a run failed. The first error stops the run; the `Display` form names
/// the kernel, the rule and the thread(s) involved, in a few lines. The
/// `Debug` form is bounded too (long thread lists are cut).
#[derive(Clone, PartialEq, Eq)]
pub enum EmuError {
    /// An emulated thread panicked (the kernel's own `panic!`, an assertion,
    /// an out-of-bounds slice index, ...).
    Panic {
        kernel: String,
        /// `blockIdx` of the panicking thread.
        cta: [u32; 3],
        /// `threadIdx` of the panicking thread.
        thread: [u32; 3],
        /// The panic message (payload as a string).
        message: String,
        /// `file:line:column` of the panic, when the emulator's panic hook saw it.
        location: Option<String>,
    },
    /// No thread can run and some are blocked: one line per blocked thread,
    /// `"cta (x,y,z) thread (x,y,z) [warp w]: waiting on <reason>"`, then
    /// any `"note: ..."` lines (e.g. an mbarrier whose phase completed
    /// before all its arriving threads arrived).
    Deadlock {
        kernel: String,
        blocked: Vec<String>,
    },
    /// The run passed `max_steps` scheduling points without finishing: one
    /// line per live thread with what it last yielded on (or waits for).
    NoProgress {
        kernel: String,
        steps: u64,
        spinning: Vec<String>,
    },
    /// A synchronization or addressing rule was broken. `rule` names it,
    /// `where_` says which thread (and source location) broke it, or
    /// `"launch"` / `"kernel end"`, and `detail` gives the values involved.
    Misuse {
        kernel: String,
        rule: String,
        where_: String,
        detail: String,
    },
    /// The launch is larger than the emulator runs (64 CTAs, 4096 threads),
    /// or the host could not map the stacks of its threads.
    TooLarge { kernel: String, detail: String },
    /// Two accesses to the same bytes, at least one a write, that no
    /// synchronization orders (happens-before; see `kernel_emu::race`).
    Race {
        kernel: String,
        /// e.g. `"write-read race on shared memory"`.
        rule: String,
        /// The earlier access: `"write by cta (0,0,0) thread (3,0,0) [warp
        /// 0, lane 3] at src/k.rs:10:5"`, or by an asynchronous operation
        /// with its issuer.
        first: String,
        /// The access that found the race.
        second: String,
        /// The space and byte range of the second access.
        range: String,
        /// How to order them.
        fix: String,
    },
}

/// Lines shown by `Debug` for the thread lists of a deadlock or a no-progress
/// report, and the longest string shown.
const DEBUG_LINES: usize = 8;
const DEBUG_CHARS: usize = 400;

fn cut(s: &str) -> String {
    if s.len() <= DEBUG_CHARS {
        return s.to_string();
    }
    let mut end = DEBUG_CHARS;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

struct Lines<'a>(&'a [String]);

impl fmt::Debug for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut l = f.debug_list();
        for s in self.0.iter().take(DEBUG_LINES) {
            l.entry(&cut(s));
        }
        if self.0.len() > DEBUG_LINES {
            l.entry(&format_args!("... and {} more lines", self.0.len() - DEBUG_LINES));
        }
        l.finish()
    }
}

impl fmt::Debug for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmuError::Panic { kernel, cta, thread, message, location } => f
                .debug_struct("Panic")
                .field("kernel", kernel)
                .field("cta", cta)
                .field("thread", thread)
                .field("message", &cut(message))
                .field("location", location)
                .finish(),
            EmuError::Deadlock { kernel, blocked } => f
                .debug_struct("Deadlock")
                .field("kernel", kernel)
                .field("blocked", &Lines(blocked))
                .finish(),
            EmuError::NoProgress { kernel, steps, spinning } => f
                .debug_struct("NoProgress")
                .field("kernel", kernel)
                .field("steps", steps)
                .field("spinning", &Lines(spinning))
                .finish(),
            EmuError::Misuse { kernel, rule, where_, detail } => f
                .debug_struct("Misuse")
                .field("kernel", kernel)
                .field("rule", rule)
                .field("where_", where_)
                .field("detail", &cut(detail))
                .finish(),
            EmuError::TooLarge { kernel, detail } => {
                f.debug_struct("TooLarge").field("kernel", kernel).field("detail", detail).finish()
            }
            EmuError::Race { kernel, rule, first, second, range, fix } => f
                .debug_struct("Race")
                .field("kernel", kernel)
                .field("rule", rule)
                .field("first", first)
                .field("second", second)
                .field("range", range)
                .field("fix", fix)
                .finish(),
        }
    }
}

/// Groups of threads shown by `Display` before eliding the rest.
const SHOWN_GROUPS: usize = 24;
/// Threads named per group by `Display`.
const NAMED_PER_GROUP: usize = 4;

/// Writes per-thread lines `"<thread>: <what>"`, grouping the threads with
/// the same `<what>` (in order of first appearance) so that 100 threads
/// waiting on one barrier read as one entry.
fn write_grouped(f: &mut fmt::Formatter<'_>, lines: &[String]) -> fmt::Result {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for l in lines {
        let (who, what) = l.split_once(": ").unwrap_or((l.as_str(), ""));
        match groups.iter_mut().find(|(w, _)| *w == what) {
            Some((_, whos)) => whos.push(who),
            None => groups.push((what, vec![who])),
        }
    }
    for (what, whos) in groups.iter().take(SHOWN_GROUPS) {
        if whos.len() == 1 {
            write!(f, "\n  {}: {what}", whos[0])?;
            continue;
        }
        let named = whos
            .iter()
            .take(NAMED_PER_GROUP)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        let more = whos.len().saturating_sub(NAMED_PER_GROUP);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        write!(f, "\n  {} threads ({named}{more}): {what}", whos.len())?;
    }
    if groups.len() > SHOWN_GROUPS {
        write!(f, "\n  ... and {} more groups", groups.len() - SHOWN_GROUPS)?;
    }
    Ok(())
}

pub(crate) fn fmt3(v: [u32; 3]) -> String {
    format!("({},{},{})", v[0], v[1], v[2])
}

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmuError::Panic {
                kernel,
                cta,
                thread,
                message,
                location,
            } => {
                write!(
                    f,
                    "kernel `{kernel}`: cta {} thread {} panicked: {message}",
                    fmt3(*cta),
                    fmt3(*thread)
                )?;
                if let Some(l) = location {
                    write!(f, " (at {l})")?;
                }
                Ok(())
            }
            EmuError::Deadlock { kernel, blocked } => {
                let n = blocked.iter().filter(|l| !l.starts_with("note: ")).count();
                write!(
                    f,
                    "kernel `{kernel}`: deadlock: no emulated thread can run and {} {} blocked",
                    n,
                    if n == 1 { "is" } else { "are" }
                )?;
                write_grouped(f, blocked)
            }
            EmuError::NoProgress {
                kernel,
                steps,
                spinning,
            } => {
                write!(
                    f,
                    "kernel `{kernel}`: no progress: {steps} scheduling steps, more than max_steps, \
                     without finishing; live threads and what they last yielded on:"
                )?;
                write_grouped(f, spinning)
            }
            EmuError::Misuse {
                kernel,
                rule,
                where_,
                detail,
            } => {
                write!(
                    f,
                    "kernel `{kernel}`: misuse: {rule}\n  in {where_}\n  {detail}"
                )
            }
            EmuError::TooLarge { kernel, detail } => {
                write!(
                    f,
                    "kernel `{kernel}`: launch too large for the CPU emulator: {detail}"
                )
            }
            EmuError::Race {
                kernel,
                rule,
                first,
                second,
                range,
                fix,
            } => {
                write!(
                    f,
                    "kernel `{kernel}`: data race: {rule} at {range}\n  first:  {first}\n  second: {second}\n  fix: {fix}"
                )
            }
        }
    }
}

impl std::error::Error for EmuError {}
