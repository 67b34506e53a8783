#![allow(unused)]
use kernel_device::prelude::*;

pub trait Elem: Copy {}
impl Elem for f32 {}

// Every listed type must satisfy the type parameter's bounds: `u8` does not.
#[kernel(instances(E = [f32, u8], (2)))]
pub fn k<E: Elem, const S: usize>(x: Gmem<E>) {}

fn main() {}
