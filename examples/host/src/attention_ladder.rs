//! Host side of the attention ladder (`kernels::attention_ladder`, steps
//! 0-3): each step on a GPU or the CPU emulator through one [`Device`],
//! on a [`Problem`] of `[batch, seq, heads, head_dim]` f16 tensors, checked
//! against `kernel_ops::attention::reference_row` on sampled rows.
use crate::{invalid, Result};
use kernel_device::f16;
use kernel_host::{Buffer, Device, Program, TileMap};
use kernel_ops::attention::{reference_row, Options, Shape};
use kernels::attention_ladder::{step0_one_warpgroup::attention_step0, step1_producer::attention_step1, step2_two_consumers::attention_step2, Kv, Q128, Q64};

/// The steps, by index: what each adds.
pub const STEPS: [&str; 4] = [
    "step 0: one warpgroup, nothing overlapped",
    "step 1: producer warpgroup + K/V ring",
    "step 2: two consumer warpgroups",
    "step 3: ping-pong + intra-warpgroup overlap (kernel_ops::attention)",
];

/// One attention problem on a device: inputs, the output, and what the
/// check compares.
pub struct Problem {
    pub shape: Shape,
    pub opts: Options,
    q: (Vec<f32>, Buffer<f16>),
    k: (Vec<f32>, Buffer<f16>),
    v: (Vec<f32>, Buffer<f16>),
    pub o: Buffer<f16>,
    lse: Buffer<f32>,
}

impl Problem {
    /// iid N(0, 1) f16 inputs (seeds `seed`, `seed + 1`, `seed + 2`); O
    /// poisoned with NaN.
    pub fn new(dev: &Device, shape: Shape, causal: bool, seed: u64) -> Result<Problem> {
        let mk = |len: usize, s: u64| -> Result<(Vec<f32>, Buffer<f16>)> {
            let h = kernel_host::randn_f16(len, s);
            Ok((h.iter().map(|x| x.to_f32()).collect(), dev.upload(&h)?))
        };
        Ok(Problem {
            shape,
            opts: Options { causal, scale: None },
            q: mk(shape.q_len(), seed)?,
            k: mk(shape.kv_len(), seed + 1)?,
            v: mk(shape.kv_len(), seed + 2)?,
            o: dev.upload(&vec![f16::NAN; shape.q_len()])?,
            lse: dev.zeros(shape.lse_len())?,
        })
    }

    /// Relative Frobenius error of O on `rows` rows spread over the first
    /// and last (batch, head) against the f64 reference (an unwritten NaN
    /// makes it infinite).
    pub fn error(&self, dev: &Device, rows: usize) -> Result<f64> {
        let o = dev.download(&self.o)?;
        let Shape { batch, seq, heads, head_dim: d, .. } = self.shape;
        let (mut num, mut den) = (0f64, 0f64);
        for (b, h) in [(0, 0), (batch - 1, heads - 1)] {
            let n = rows.min(seq);
            for r in 0..n {
                let i = if n >= seq { r } else { r * (seq - 1) / (n - 1).max(1) };
                let (want, _) = reference_row(&self.q.0, &self.k.0, &self.v.0, self.shape, self.opts, (b, h, i));
                let at = ((b * seq + i) * heads + h) * d;
                for (g, w) in o[at..at + d].iter().zip(&want) {
                    num += (f64::from(g.to_f32()) - f64::from(*w)).powi(2);
                    den += f64::from(*w).powi(2);
                }
            }
        }
        Ok(if num.is_nan() { f64::INFINITY } else { (num / den).sqrt() })
    }
}

/// Runs step `step` (0-3) once on `p`: `prog` holds the examples' kernels
/// (`kernels::DEVICE_CODE`), `ops` kernel-ops' (`kernel_ops_kernels::DEVICE_CODE`, for step 3).
pub fn run(dev: &Device, prog: &Program, ops: &Program, step: usize, p: &mut Problem) -> Result<()> {
    let Shape { batch, seq, heads, kv_heads, head_dim } = p.shape;
    if step == 3 {
        // The library's two-consumer instance (its default at D 64 has three).
        let config = kernel_ops::attention::configs(head_dim).into_iter().find(|c| c.consumers == 2).ok_or_else(|| invalid("attention_ladder::run", format!("head_dim = {head_dim}: not built")))?;
        return kernel_ops::attention::attention_with(dev, ops, &p.q.1, &p.k.1, &p.v.1, &mut p.o, &mut p.lse, p.shape, p.opts, config).map_err(|e| match e {
            kernel_ops::Error::Runtime(e) => e.into(),
            other => invalid("attention_ladder::run", other.to_string()),
        });
    }
    if head_dim != 64 && head_dim != 128 {
        return Err(invalid("attention_ladder::run", format!("head_dim = {head_dim}: the ladder is built for 64 and 128")));
    }
    if heads % kv_heads != 0 || p.shape.q_len() == 0 {
        return Err(invalid("attention_ladder::run", format!("{:?}: kv_heads must divide heads, sizes at least 1", p.shape)));
    }
    let scale_log2 = p.opts.scale_for(head_dim) * std::f32::consts::LOG2_E;
    let (group, causal) = ((heads / kv_heads) as u32, p.opts.causal as u32);
    let (qc, kc) = (heads * head_dim, kv_heads * head_dim);
    macro_rules! launch {
        ($qt:ident, $kernel:ty, $d:literal, $bm:literal) => {{
            let qm = TileMap::<$qt<$d>, 3>::new_batched(&p.q.1, batch, seq, qc)?;
            let km = TileMap::<Kv<$d>, 3>::new_batched(&p.k.1, batch, seq, kc)?;
            let vm = TileMap::<Kv<$d>, 3>::new_batched(&p.v.1, batch, seq, kc)?;
            let om = TileMap::<$qt<$d>, 3>::new_batched_mut(&mut p.o, batch, seq, qc)?;
            let grid = (seq.div_ceil($bm) as u32, heads as u32, batch as u32);
            prog.kernel::<$kernel>()?.launch(grid, (&qm, &km, &vm, &om, seq as u32, group, scale_log2, causal))?;
        }};
    }
    match (step, head_dim) {
        (0, 64) => launch!(Q64, attention_step0<64>, 64, 64),
        (0, 128) => launch!(Q64, attention_step0<128>, 128, 64),
        (1, 64) => launch!(Q64, attention_step1<64, 3>, 64, 64),
        (1, 128) => launch!(Q64, attention_step1<128, 2>, 128, 64),
        (2, 64) => launch!(Q128, attention_step2<64, 3>, 64, 128),
        (2, 128) => launch!(Q128, attention_step2<128, 2>, 128, 128),
        (s, _) => return Err(invalid("attention_ladder::run", format!("step {s}: the ladder has steps 0 to 3"))),
    }
    Ok(())
}
