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
}

/// Why a run failed. The first error stops the run; the `Display` form names
/// the kernel, the rule and the thread(s) involved.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// `"cta (x,y,z) thread (x,y,z) [warp w]: waiting on <reason>"`.
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
    /// or the host could not start the OS threads for it.
    TooLarge { kernel: String, detail: String },
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
                write!(
                    f,
                    "kernel `{kernel}`: deadlock: no emulated thread can run and {} {} blocked",
                    blocked.len(),
                    if blocked.len() == 1 { "is" } else { "are" }
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
                    "kernel `{kernel}`: misuse: {rule}, in {where_}: {detail}"
                )
            }
            EmuError::TooLarge { kernel, detail } => {
                write!(
                    f,
                    "kernel `{kernel}`: launch too large for the CPU emulator: {detail}"
                )
            }
        }
    }
}

impl std::error::Error for EmuError {}
