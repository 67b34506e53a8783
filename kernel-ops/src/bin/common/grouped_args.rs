//! What the grouped benchmarks (`grouped_bench`, `grouped_fp8_bench`)
//! share: their arguments and the problems' group sizes. Included by both
//! with `#[path]` (a file of `src/bin/common/` is no binary of its own).

use clap::{CommandFactory, FromArgMatches, Parser};

/// The command line of both (each binary gives its own name and `about`
/// to [`parse`]).
#[derive(Parser)]
pub struct Args {
    /// Small problems only (total M 8192 at K x N = 2048 x 1536): a quick
    /// look, not the suite.
    #[arg(long)]
    pub quick: bool,
    /// CUDA-event-timed runs per round; the median is reported.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub iters: usize,
    /// Interleaved rounds over every contender; a contender's time is the
    /// median of its round medians.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub rounds: usize,
    /// Milliseconds of untimed runs first, so the GPU holds its steady clock.
    #[arg(long, value_name = "MS", default_value_t = 300.0)]
    pub warmup_ms: f64,
    /// Directory the Markdown and CSV results are written to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: String,
}

/// Parses the command line of the binary `name` (its `--help` opens with
/// `about`); a usage error exits 2 with clap's message.
pub fn parse(name: &'static str, about: &'static str) -> Args {
    let matches = Args::command().name(name).about(about).get_matches();
    Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Group sizes adding up to `m`: equal, or about `(g + 1)^-1.2`.
pub fn sizes(groups: usize, m: usize, skewed: bool) -> Vec<u32> {
    let w: Vec<f64> = (0..groups).map(|g| if skewed { ((g + 1) as f64).powf(-1.2) } else { 1.0 }).collect();
    let total: f64 = w.iter().sum();
    let mut s: Vec<u32> = w.iter().map(|x| (x / total * m as f64).floor() as u32).collect();
    let rest = m - s.iter().map(|&x| x as usize).sum::<usize>();
    s[0] += rest as u32;
    s
}

