//! The gated MLP example (`kernels::gated::reglu`) on either backend:
//! inputs, launch and the CPU reference.
use crate::Result;
use kernel_device::f16;
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error, Device, TileMap};
use kernel_ops_kernels::gemm_multi::{ATileOf, BTileOf, EpiTileOf, TK};
use kernels::gated::reglu;

/// Runs `relu(X · W1ᵀ) * (X · W3ᵀ)` at `m x n x k` (iid N(0,1) f16 inputs)
/// on `dev` and returns its relative Frobenius error against the CPU
/// (every row).
pub fn reglu_error(dev: &Device, m: usize, n: usize, k: usize) -> Result<f64> {
    let (xh, w1h, w3h) = (randn_f16(m * k, 21), randn_f16(n * k, 22), randn_f16(n * k, 23));
    let (x, w1, w3) = (dev.upload(&xh)?, dev.upload(&w1h)?, dev.upload(&w3h)?);
    let mut out = dev.upload(&vec![f16::NAN; m * n])?;
    let (mt, nt, ks) = (m.div_ceil(128) as u32, n.div_ceil(128) as u32, k.div_ceil(TK) as u32);
    {
        let xm = TileMap::<ATileOf<128>>::new_2d(&x, m, k)?;
        let w1m = TileMap::<BTileOf<128>>::new_2d(&w1, n, k)?;
        let w3m = TileMap::<BTileOf<128>>::new_2d(&w3, n, k)?;
        let om = TileMap::<EpiTileOf<128>>::new_2d_mut(&mut out, m, n)?;
        let prog = dev.load(&kernels::DEVICE_CODE)?;
        prog.kernel::<reglu>()?.launch_sync(dev.sm_count().min(mt * nt), (&xm, &w1m, &w3m, &om, mt, nt, ks))?;
    }
    let (g, u) = (reference_gemm_nt(m, n, k, &xh, &w1h), reference_gemm_nt(m, n, k, &xh, &w3h));
    let want: Vec<f32> = g.iter().zip(&u).map(|(&g, &u)| g.max(0.0) * u).collect();
    Ok(rel_frobenius_error(&dev.download(&out)?, &want))
}
