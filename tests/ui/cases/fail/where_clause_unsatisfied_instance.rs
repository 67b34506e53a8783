#![allow(unused)]
use kernel_device::prelude::*;

pub struct Stages<const N: usize>;
pub trait Supported {}
impl Supported for Stages<2> {}

// A `where` clause bounds the const generics; every listed instance must
// satisfy it: `(3)` does not.
#[kernel(instances((2), (3)))]
pub fn k<const S: usize>(x: *mut f32, #[scratch] bufs: Smem<[[f32; 32]; S]>)
where
    Stages<S>: Supported,
{
}

fn main() {}
