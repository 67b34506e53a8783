//! [`Dim3`]: a 3-D extent or index, as CUDA's `dim3`.

/// A 3-D extent or index (`dim3` in CUDA): grid, block and cluster shapes,
/// CTA and thread indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    /// `(1, 1, 1)`: one CTA, one thread, no cluster.
    pub const ONE: Dim3 = Dim3::new(1, 1, 1);

    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }

    /// `x * y * z` (as `u32`; overflows for extents the hardware has no use
    /// for: see [`Dim3::volume_u64`]).
    pub const fn volume(self) -> u32 {
        self.x * self.y * self.z
    }

    /// `x * y * z` without overflow.
    pub const fn volume_u64(self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    /// Whether some dimension is 0.
    pub const fn has_zero(self) -> bool {
        self.x == 0 || self.y == 0 || self.z == 0
    }

    /// The extent along `axis` (`'x'`, `'y'`, anything else: `z`).
    pub const fn axis(self, axis: char) -> u32 {
        match axis {
            'x' => self.x,
            'y' => self.y,
            _ => self.z,
        }
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3::new(x, 1, 1)
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3::new(x, y, 1)
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3::new(x, y, z)
    }
}
impl From<[u32; 3]> for Dim3 {
    fn from([x, y, z]: [u32; 3]) -> Self {
        Dim3::new(x, y, z)
    }
}
impl From<Dim3> for [u32; 3] {
    fn from(d: Dim3) -> Self {
        [d.x, d.y, d.z]
    }
}

impl core::fmt::Display for Dim3 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}
