//! The first examples on the CPU emulator (no GPU needed): the same kernels,
//! inputs and CPU references as on the GPU.
use crate::{check, inputs, ExampleError, Outcome, Result};
use kernel_host::emulate::{EmuError, Emulator};
use kernels::first;

impl From<EmuError> for ExampleError {
    fn from(e: EmuError) -> Self {
        ExampleError::Emulator(e)
    }
}

/// (a) `y = x + 1` over a grid of 2 blocks.
pub fn increment(emu: &Emulator) -> Result<Outcome> {
    let blocks = 2u32;
    let n = (blocks * first::INCREMENT_BLOCK) as usize;
    let x = inputs(n, 1);
    let mut y = vec![f32::NAN; n];
    emu.launch::<first::increment, _>(blocks, (&x[..], &mut y[..], n as u32))?;
    let want: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
    check("increment", &y, &want)
}

/// (b) Producer and consumer warpgroups through a 2-slot SMEM queue.
pub fn producer_consumer(emu: &Emulator) -> Result<Outcome> {
    let steps = 6u32;
    let n = steps as usize * first::QUEUE_ITEM;
    let x = inputs(n, 2);
    let mut y = vec![f32::NAN; n];
    emu.launch::<first::producer_consumer, _>(1u32, (&x[..], &mut y[..], steps))?;
    let want: Vec<f32> = x.iter().map(|v| (v + 1.0) + 1.0).collect();
    check("producer_consumer", &y, &want)
}

/// (c) Clusters of 2 CTAs swap data through distributed shared memory.
pub fn cluster_exchange(emu: &Emulator) -> Result<Outcome> {
    let ctas = 4u32;
    let len = first::EXCHANGE_LEN;
    let n = ctas as usize * len;
    let x = inputs(n, 3);
    let mut y = vec![f32::NAN; n];
    emu.launch::<first::cluster_exchange, _>(ctas, (&x[..], &mut y[..]))?;
    let mut want = vec![0f32; n];
    for cta in 0..ctas as usize {
        let peer = cta ^ 1;
        for t in 0..len {
            want[cta * len + t] = x[peer * len + t] * 2.0 + (peer % 2) as f32;
        }
    }
    check("cluster_exchange", &y, &want)
}

/// (d) Block 0 signals block 1 through a global semaphore.
pub fn semaphore_signal(emu: &Emulator) -> Result<Outcome> {
    let n = first::MESSAGE_LEN;
    let x = inputs(n, 4);
    let mut scratch = vec![f32::NAN; n];
    let mut y = vec![f32::NAN; n];
    let mut sem = vec![0u32; 1];
    emu.launch::<first::semaphore_signal, _>(2u32, (&x[..], &mut scratch[..], &mut y[..], &mut sem[..]))?;
    let want: Vec<f32> = x.iter().map(|v| v * 3.0).collect();
    let out = check("semaphore_signal", &y, &want)?;
    if sem[0] != 0 {
        return Err(ExampleError::Mismatch { example: "semaphore_signal (semaphore value)", index: 0, got: sem[0] as f32, want: 0.0, wrong: 1 });
    }
    Ok(out)
}

/// An example on the emulator.
pub type EmulatedExample = (&'static str, fn(&Emulator) -> Result<Outcome>);

/// The first examples, in order.
pub const FIRST_EXAMPLES: [EmulatedExample; 4] = [
    ("increment", increment),
    ("producer_consumer", producer_consumer),
    ("cluster_exchange", cluster_exchange),
    ("semaphore_signal", semaphore_signal),
];
