//! What the grouped benchmarks (`grouped_bench`, `grouped_fp8_bench`)
//! share: their arguments and the problems' group sizes. Included by both
//! with `#[path]` (a file of `src/bin/common/` is no binary of its own).

/// The command line: `[--quick] [--iters N] [--rounds N] [--warmup-ms MS]
/// [--out DIR]`.
pub struct Args {
    pub quick: bool,
    pub iters: usize,
    pub rounds: usize,
    pub warmup_ms: f64,
    pub out: String,
}

/// Parses the command line (defaults: 30 iterations, 3 rounds, 300 ms).
pub fn parse() -> Result<Args, String> {
    let mut a = Args { quick: false, iters: 30, rounds: 3, warmup_ms: 300.0, out: ".".into() };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let val = || v.get(i + 1).cloned().ok_or(format!("{} needs a value", v[i]));
        match v[i].as_str() {
            "--quick" => {
                a.quick = true;
                i += 1;
                continue;
            }
            "--iters" => a.iters = val()?.parse().map_err(|e| format!("--iters: {e}"))?,
            "--rounds" => a.rounds = val()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--warmup-ms" => a.warmup_ms = val()?.parse().map_err(|e| format!("--warmup-ms: {e}"))?,
            "--out" => a.out = val()?,
            other => return Err(format!("unknown argument {other}: see the module docs")),
        }
        i += 2;
    }
    Ok(a)
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

