//! The rules of a tiled TMA tensor map (`cuTensorMapEncodeTiled`, CUDA
//! Driver API §6.30 "Tensor Map Object Management",
//! <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html>),
//! checked by one pure function, [`check_map`], over a plain description
//! ([`MapDesc`]).
//!
//! Used by `kernel_host::TensorMapSpec::problems` (before the driver encodes
//! a map for the GPU) and by `kernel_host::emulate::EmuTensorMap` (the
//! emulator's maps), so a map the emulator accepts is one the driver
//! accepts. Each problem is a [`MapProblem`] whose `Display` names the
//! field, its value, the rule (with the driver's wording) and, where there is
//! one, the fix.
//!
//! Only non-interleaved maps (`CU_TENSOR_MAP_INTERLEAVE_NONE`) are
//! described. The out-of-bounds NaN fill rule depends on the driver's data
//! type enum, so it stays with the host's encoding.
//!
//! | field | rule | driver text |
//! |---|---|---|
//! | element size | 1, 2, 4 or 8 bytes | the data types of `CUtensorMapDataType` (packed 4/6-bit types not offered) |
//! | rank (`dims.len()`) | 1..=[`MAX_RANK`] | `tensorRank` "must be non-zero and less than or equal to the maximum supported dimensionality of 5" |
//! | array lengths | `rank - 1` strides, `rank` box dims and element strides | the driver reads `rank` entries |
//! | `global_address` | non-null (this project's rule), multiple of [`GLOBAL_ALIGN`] | `globalAddress` "must be 16 byte aligned" |
//! | `dims[i]` | 1..=[`MAX_GLOBAL_DIM`] | `globalDim` "must be non-zero and less than or equal to 2^32" |
//! | `strides_bytes[i]` | multiple of [`GLOBAL_ALIGN`], < [`GLOBAL_STRIDE_LIMIT`] | `globalStrides` "must be a multiple of 16 and less than 2^40" |
//! | `strides_bytes[i]` | covers the dimension below | `globalStrides[0] = globalDim[0] * elementSizeInBytes + padding[0]`, `globalStrides[i] = globalStrides[i-1] * (globalDim[i] + padding[i])` |
//! | `box_dims[i]` | 1..=[`MAX_BOX_DIM`] | `boxDim` "must be non-zero and less than or equal to 256" |
//! | `box_dims[0]` | x element bytes a multiple of [`BOX_INNER_ALIGN`] | "`boxDim[0] * elementSizeInBytes(tensorDataType)` must be a multiple of 16 bytes" |
//! | `box_dims[0]` with a swizzle | x element bytes <= the swizzle span | "the bounding box inner dimension ... must be less than or equal to the swizzle size" |
//! | `element_strides[i]` | 1..=[`MAX_ELEMENT_STRIDE`] | `elementStrides` "must be non-zero and less than or equal to 8" |

use crate::Swizzle;
use core::fmt;

/// Most dimensions of a tensor map (`tensorRank` <= 5).
pub const MAX_RANK: usize = 5;
/// Largest extent of one global dimension (`globalDim[i]` <= 2^32).
pub const MAX_GLOBAL_DIM: u64 = 1 << 32;
/// Global strides must be below this (`globalStrides[i]` < 2^40).
pub const GLOBAL_STRIDE_LIMIT: u64 = 1 << 40;
/// Alignment of the global address and of every global stride, in bytes.
pub const GLOBAL_ALIGN: u64 = 16;
/// Largest extent of one box dimension (`boxDim[i]` <= 256).
pub const MAX_BOX_DIM: u32 = 256;
/// The box's inner dimension must be a multiple of this many bytes.
pub const BOX_INNER_ALIGN: u64 = 16;
/// Largest element stride (`elementStrides[i]` <= 8).
pub const MAX_ELEMENT_STRIDE: u32 = 8;

/// Where the rules come from (cited in every problem message).
pub const SOURCE: &str = "cuTensorMapEncodeTiled, CUDA Driver API §6.30";

/// A tiled, non-interleaved tensor map as `cuTensorMapEncodeTiled` takes
/// it. Arrays are innermost dimension first: a row-major `rows x cols`
/// matrix has `dims = [cols, rows]`, `strides_bytes = [row stride in
/// bytes]`. The field names are the ones the problems name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapDesc<'a> {
    /// Bytes of one element (`elementSizeInBytes(tensorDataType)`).
    pub elem_bytes: u64,
    /// Address of element `(0, 0, ...)` (`globalAddress`).
    pub global_address: u64,
    /// Extent of each dimension in elements (`globalDim`); its length is the
    /// rank.
    pub dims: &'a [u64],
    /// Byte stride of dimensions `1..rank` (`globalStrides`, `rank - 1`
    /// entries; dimension 0 is contiguous).
    pub strides_bytes: &'a [u64],
    /// The box one copy moves, in elements per dimension (`boxDim`).
    pub box_dims: &'a [u32],
    /// Traversal step per dimension (`elementStrides`), usually all 1.
    pub element_strides: &'a [u32],
    /// Shared-memory swizzle mode of the box.
    pub swizzle: Swizzle,
}

/// One broken rule of a [`MapDesc`]. Its `Display` names the field, the
/// value, the rule (citing [`SOURCE`]) and the fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapProblem<'a> {
    /// The element size is not 1, 2, 4 or 8 bytes.
    ElemBytes { bytes: u64 },
    /// The rank (`dims.len()`) is 0 or over [`MAX_RANK`].
    Rank { rank: usize },
    /// `strides_bytes` does not have `rank - 1` entries.
    StridesLen { len: usize, dims: &'a [u64] },
    /// `box_dims` does not have `rank` entries.
    BoxDimsLen { len: usize, dims: &'a [u64] },
    /// `element_strides` does not have `rank` entries.
    ElementStridesLen { len: usize, dims: &'a [u64] },
    /// `global_address` is 0.
    NullAddress,
    /// `global_address` is not a multiple of [`GLOBAL_ALIGN`].
    MisalignedAddress { address: u64 },
    /// `dims[index]` is 0 or over [`MAX_GLOBAL_DIM`].
    GlobalDim { index: usize, dim: u64 },
    /// `strides_bytes[index]` is not a multiple of [`GLOBAL_ALIGN`].
    StrideAlign { index: usize, stride: u64, elem_bytes: u64 },
    /// `strides_bytes[index]` is not below [`GLOBAL_STRIDE_LIMIT`].
    StrideTooLarge { index: usize, stride: u64 },
    /// `strides_bytes[index]` is less than the span of dimension `index`
    /// (its stride, the element size for 0, times its extent).
    StrideTooSmall { index: usize, stride: u64, span: u128, elem_bytes: u64 },
    /// `box_dims[index]` is 0 or over [`MAX_BOX_DIM`].
    BoxDim { index: usize, extent: u32 },
    /// `box_dims[0] * elem_bytes` is not a multiple of [`BOX_INNER_ALIGN`].
    BoxInnerAlign { extent: u32, elem_bytes: u64 },
    /// `box_dims[0] * elem_bytes` is more than the swizzle span.
    BoxInnerOverSwizzle { extent: u32, elem_bytes: u64, swizzle: Swizzle },
    /// `element_strides[index]` is 0 or over [`MAX_ELEMENT_STRIDE`].
    ElementStride { index: usize, stride: u32 },
}

impl fmt::Display for MapProblem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MapProblem::ElemBytes { bytes } => write!(
                f,
                "the element size is {bytes} bytes: a tensor map's elements are 1, 2, 4 or 8 \
                 bytes (the data types of CUtensorMapDataType; {SOURCE})"
            ),
            MapProblem::Rank { rank } => write!(
                f,
                "`dims` has {rank} entries (the tensor rank): the rank must be 1..={MAX_RANK} \
                 (tensorRank: \"non-zero and less than or equal to the maximum supported \
                 dimensionality of 5\"; {SOURCE})"
            ),
            MapProblem::StridesLen { len, dims } => write!(
                f,
                "`strides_bytes` has {len} entries but the rank is {} (`dims` = {dims:?}): it \
                 needs rank - 1 = {} (globalStrides: the byte strides of dimensions 1..rank; \
                 dimension 0 is contiguous)",
                dims.len(),
                dims.len().saturating_sub(1)
            ),
            MapProblem::BoxDimsLen { len, dims } => write!(
                f,
                "`box_dims` has {len} entries but the rank is {} (`dims` = {dims:?}): it needs one \
                 per dimension (boxDim)",
                dims.len()
            ),
            MapProblem::ElementStridesLen { len, dims } => write!(
                f,
                "`element_strides` has {len} entries but the rank is {} (`dims` = {dims:?}): it \
                 needs one per dimension (elementStrides; use 1 for a dense box)",
                dims.len()
            ),
            MapProblem::NullAddress => write!(
                f,
                "`global_address` = 0x0: a null address (this project's rule: a map must point \
                 at the tensor's memory)"
            ),
            MapProblem::MisalignedAddress { address } => write!(
                f,
                "`global_address` = {address:#x}: must be a multiple of {GLOBAL_ALIGN} (it is {} \
                 bytes past one) (globalAddress: \"must be 16 byte aligned\"; {SOURCE}); start \
                 the tensor on a 16-byte boundary",
                address % GLOBAL_ALIGN
            ),
            MapProblem::GlobalDim { index, dim } => write!(
                f,
                "`dims[{index}]` = {dim}: must be in 1..=2^32 = {MAX_GLOBAL_DIM} (globalDim: \
                 \"non-zero and less than or equal to 2^32\"; {SOURCE})"
            ),
            MapProblem::StrideAlign { index, stride, elem_bytes } => write!(
                f,
                "`strides_bytes[{index}]` = {stride} (the byte stride of dimension {}): must be a \
                 multiple of {GLOBAL_ALIGN} (globalStrides: \"must be a multiple of 16\"; \
                 {SOURCE}); for a row-major matrix, pad each row to a multiple of 16 bytes ({} \
                 elements of {elem_bytes} bytes)",
                index + 1,
                GLOBAL_ALIGN / elem_bytes.clamp(1, GLOBAL_ALIGN)
            ),
            MapProblem::StrideTooLarge { index, stride } => write!(
                f,
                "`strides_bytes[{index}]` = {stride}: must be less than 2^40 = \
                 {GLOBAL_STRIDE_LIMIT} (globalStrides: \"less than 2^40\"; {SOURCE})"
            ),
            MapProblem::StrideTooSmall { index, stride, span, elem_bytes } => {
                write!(f, "`strides_bytes[{index}]` = {stride}: less than ")?;
                if index == 0 {
                    write!(f, "`dims[0]` x {elem_bytes} bytes")?;
                } else {
                    write!(f, "`strides_bytes[{}]` x `dims[{index}]`", index - 1)?;
                }
                write!(
                    f,
                    " = {span}: dimension {}'s stride must cover a whole span of dimension \
                     {index} (globalStrides[{index}] = ",
                    index + 1
                )?;
                if index == 0 {
                    write!(f, "elementSizeInBytes")?;
                } else {
                    write!(f, "globalStrides[{}]", index - 1)?;
                }
                write!(
                    f,
                    " * (globalDim[{index}] + padding), padding >= 0; {SOURCE}); for a row-major \
                     matrix the row stride is at least a row"
                )
            }
            MapProblem::BoxDim { index, extent } => write!(
                f,
                "`box_dims[{index}]` = {extent}: must be in 1..={MAX_BOX_DIM} (boxDim: \"non-zero \
                 and less than or equal to 256\"; {SOURCE})"
            ),
            MapProblem::BoxInnerAlign { extent, elem_bytes } => write!(
                f,
                "`box_dims[0]` = {extent}: the box's inner dimension is {extent} x {elem_bytes} \
                 bytes = {} bytes, which must be a multiple of {BOX_INNER_ALIGN} (boxDim: \
                 \"boxDim[0] * elementSizeInBytes(tensorDataType) must be a multiple of 16 \
                 bytes\"; {SOURCE})",
                u64::from(extent) * elem_bytes
            ),
            MapProblem::BoxInnerOverSwizzle { extent, elem_bytes, swizzle } => write!(
                f,
                "`box_dims[0]` = {extent}: the box's inner dimension is {extent} x {elem_bytes} \
                 bytes = {} bytes, more than the {}-byte span of `swizzle` = {swizzle:?} (\"the \
                 bounding box inner dimension ... must be less than or equal to the swizzle \
                 size\"; {SOURCE}); use a box of at most {} elements, or a wider swizzle",
                u64::from(extent) * elem_bytes,
                swizzle.bytes(),
                swizzle.bytes() as u64 / elem_bytes.max(1)
            ),
            MapProblem::ElementStride { index, stride } => write!(
                f,
                "`element_strides[{index}]` = {stride}: must be in 1..={MAX_ELEMENT_STRIDE} \
                 (elementStrides: \"non-zero and less than or equal to 8\"; {SOURCE})"
            ),
        }
    }
}

/// Checks `map` against every rule in the module's table and calls `report`
/// once per broken rule, in the table's order (element size, rank, array
/// lengths, address, dims, strides, box, element strides). Returns how many
/// it reported: 0 for a valid map. Pure, no allocation.
pub fn check_map<'a>(map: &MapDesc<'a>, mut report: impl FnMut(MapProblem<'a>)) -> usize {
    let mut n = 0;
    let mut push = |p: MapProblem<'a>| {
        n += 1;
        report(p)
    };
    let rank = map.dims.len();
    let e = map.elem_bytes;

    if !matches!(e, 1 | 2 | 4 | 8) {
        push(MapProblem::ElemBytes { bytes: e });
    }
    // tensorRank: "non-zero and less than or equal to ... 5".
    if rank == 0 || rank > MAX_RANK {
        push(MapProblem::Rank { rank });
    }
    // One stride per dimension above the innermost; one box extent and one
    // element stride per dimension.
    if rank >= 1 && map.strides_bytes.len() != rank - 1 {
        push(MapProblem::StridesLen { len: map.strides_bytes.len(), dims: map.dims });
    }
    if map.box_dims.len() != rank {
        push(MapProblem::BoxDimsLen { len: map.box_dims.len(), dims: map.dims });
    }
    if map.element_strides.len() != rank {
        push(MapProblem::ElementStridesLen { len: map.element_strides.len(), dims: map.dims });
    }

    // globalAddress: "must be 16 byte aligned".
    if map.global_address == 0 {
        push(MapProblem::NullAddress);
    } else if !map.global_address.is_multiple_of(GLOBAL_ALIGN) {
        push(MapProblem::MisalignedAddress { address: map.global_address });
    }

    // globalDim: "non-zero and less than or equal to 2^32".
    for (index, &dim) in map.dims.iter().enumerate() {
        if dim == 0 || dim > MAX_GLOBAL_DIM {
            push(MapProblem::GlobalDim { index, dim });
        }
    }

    // globalStrides: "a multiple of 16 and less than 2^40", and each one
    // covers the dimension below (globalStrides[0] = globalDim[0] *
    // elementSize + padding[0]; globalStrides[i] = globalStrides[i-1] *
    // (globalDim[i] + padding[i])).
    for (index, &stride) in map.strides_bytes.iter().enumerate() {
        if !stride.is_multiple_of(GLOBAL_ALIGN) {
            push(MapProblem::StrideAlign { index, stride, elem_bytes: e });
        }
        if stride >= GLOBAL_STRIDE_LIMIT {
            push(MapProblem::StrideTooLarge { index, stride });
        }
        // The span of dimension `index`: its stride (the element size for
        // 0) times its extent. Only for strides of existing dimensions:
        // extra entries are a length mismatch, reported above.
        let below = if index == 0 { Some(e) } else { map.strides_bytes.get(index - 1).copied() };
        if let (Some(below), Some(&d), true) = (below, map.dims.get(index), index + 1 < rank) {
            let span = u128::from(below) * u128::from(d);
            if u128::from(stride) < span {
                push(MapProblem::StrideTooSmall { index, stride, span, elem_bytes: e });
            }
        }
    }

    // boxDim: "non-zero and less than or equal to 256".
    for (index, &extent) in map.box_dims.iter().enumerate() {
        if extent == 0 || extent > MAX_BOX_DIM {
            push(MapProblem::BoxDim { index, extent });
        }
    }
    if let Some(&extent) = map.box_dims.first() {
        let inner = u64::from(extent) * e;
        // "When interleave is CU_TENSOR_MAP_INTERLEAVE_NONE, { boxDim[0] *
        // elementSizeInBytes( tensorDataType ) } must be a multiple of 16
        // bytes."
        if extent != 0 && !inner.is_multiple_of(BOX_INNER_ALIGN) {
            push(MapProblem::BoxInnerAlign { extent, elem_bytes: e });
        }
        // "When interleave is CU_TENSOR_MAP_INTERLEAVE_NONE and swizzle is
        // not CU_TENSOR_MAP_SWIZZLE_NONE, the bounding box inner dimension
        // ... must be less than or equal to the swizzle size."
        let span = map.swizzle.bytes() as u64;
        if span != 0 && inner > span {
            push(MapProblem::BoxInnerOverSwizzle { extent, elem_bytes: e, swizzle: map.swizzle });
        }
    }

    // elementStrides: "non-zero and less than or equal to 8".
    for (index, &stride) in map.element_strides.iter().enumerate() {
        if stride == 0 || stride > MAX_ELEMENT_STRIDE {
            push(MapProblem::ElementStride { index, stride });
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::{String, ToString};
    use std::vec::Vec;

    /// A valid rank-2 f16 map: a 256 x 192 row-major matrix, 64 x 128 box,
    /// 128B swizzle.
    fn valid() -> MapDesc<'static> {
        MapDesc {
            elem_bytes: 2,
            global_address: 0x7f00_0000_0000,
            dims: &[192, 256],
            strides_bytes: &[384],
            box_dims: &[64, 128],
            element_strides: &[1, 1],
            swizzle: Swizzle::B128,
        }
    }

    fn problems(map: &MapDesc<'_>) -> Vec<String> {
        let mut v = Vec::new();
        let n = check_map(map, |p| v.push(p.to_string()));
        assert_eq!(n, v.len());
        v
    }

    #[test]
    fn accepts_valid_maps() {
        assert_eq!(problems(&valid()), Vec::<String>::new());
        let r1 = MapDesc { elem_bytes: 4, dims: &[1024], strides_bytes: &[], box_dims: &[256], element_strides: &[1], swizzle: Swizzle::None, ..valid() };
        assert_eq!(problems(&r1), Vec::<String>::new());
        let r5 = MapDesc {
            dims: &[64, 2, 3, 4, 5],
            strides_bytes: &[128, 256, 768, 3072],
            box_dims: &[64, 1, 1, 1, 1],
            element_strides: &[1, 1, 1, 1, 2],
            ..valid()
        };
        assert_eq!(problems(&r5), Vec::<String>::new());
        // 2^32 rows is the largest extent.
        assert_eq!(problems(&MapDesc { dims: &[192, 1 << 32], ..valid() }), Vec::<String>::new());
    }

    #[test]
    fn rejects_each_field_naming_it_its_value_and_the_rule() {
        let cases: [(MapDesc<'static>, MapProblem<'static>, &str); 9] = [
            (MapDesc { elem_bytes: 3, dims: &[16, 4], strides_bytes: &[48], box_dims: &[16, 4], swizzle: Swizzle::None, ..valid() }, MapProblem::ElemBytes { bytes: 3 }, "1, 2, 4 or 8"),
            (MapDesc { global_address: 0x1008, ..valid() }, MapProblem::MisalignedAddress { address: 0x1008 }, "8 bytes past"),
            (MapDesc { global_address: 0, ..valid() }, MapProblem::NullAddress, "null"),
            (MapDesc { dims: &[192, 0], ..valid() }, MapProblem::GlobalDim { index: 1, dim: 0 }, "1..=2^32"),
            (MapDesc { strides_bytes: &[1 << 40], ..valid() }, MapProblem::StrideTooLarge { index: 0, stride: 1 << 40 }, "less than 2^40"),
            (MapDesc { strides_bytes: &[256], ..valid() }, MapProblem::StrideTooSmall { index: 0, stride: 256, span: 384, elem_bytes: 2 }, "`dims[0]` x 2 bytes = 384"),
            (MapDesc { box_dims: &[64, 257], ..valid() }, MapProblem::BoxDim { index: 1, extent: 257 }, "1..=256"),
            (MapDesc { box_dims: &[12, 128], ..valid() }, MapProblem::BoxInnerAlign { extent: 12, elem_bytes: 2 }, "12 x 2 bytes = 24 bytes"),
            (MapDesc { element_strides: &[1, 9], ..valid() }, MapProblem::ElementStride { index: 1, stride: 9 }, "1..=8"),
        ];
        for (map, want, needle) in cases {
            let mut got = Vec::new();
            check_map(&map, |p| got.push(p));
            assert_eq!(got, [want], "{map:?}");
            let msg = want.to_string();
            assert!(msg.contains(needle) && msg.contains("§6.30") || matches!(want, MapProblem::NullAddress), "{msg}");
        }
    }

    #[test]
    fn the_box_fits_the_swizzle_span() {
        let p = problems(&MapDesc { box_dims: &[128, 128], ..valid() });
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("256 bytes, more than the 128-byte span of `swizzle` = B128"), "{}", p[0]);
        assert!(p[0].contains("at most 64 elements"), "{}", p[0]);
        assert_eq!(problems(&MapDesc { swizzle: Swizzle::B32, box_dims: &[16, 128], ..valid() }).len(), 0);
        assert_eq!(problems(&MapDesc { swizzle: Swizzle::None, box_dims: &[192, 128], ..valid() }).len(), 0);
    }

    #[test]
    fn rank_and_array_lengths() {
        let p = problems(&MapDesc { dims: &[], strides_bytes: &[], box_dims: &[], element_strides: &[], ..valid() });
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("`dims` has 0 entries") && p[0].contains("1..=5"), "{}", p[0]);
        let p = problems(&MapDesc { strides_bytes: &[384, 384], box_dims: &[64], element_strides: &[1, 1, 1], ..valid() });
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].contains("`strides_bytes` has 2 entries") && p[0].contains("rank - 1 = 1"));
        assert!(p[1].contains("`box_dims` has 1 entries"));
        assert!(p[2].contains("`element_strides` has 3 entries"));
        // Rank 3: dimension 2's stride must cover dimension 1's span.
        let p = problems(&MapDesc { dims: &[64, 4, 2], strides_bytes: &[128, 256], box_dims: &[64, 4, 2], element_strides: &[1, 1, 1], ..valid() });
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("`strides_bytes[1]` = 256") && p[0].contains("`strides_bytes[0]` x `dims[1]` = 512"), "{}", p[0]);
    }

    #[test]
    fn every_problem_is_reported() {
        let map = MapDesc { global_address: 0x1004, dims: &[100, 0], strides_bytes: &[200], box_dims: &[12, 300], element_strides: &[1, 9], ..valid() };
        let p = problems(&map);
        assert_eq!(p.len(), 6, "{p:#?}");
        assert!(p.iter().all(|m| m.contains("cuTensorMapEncodeTiled")), "{p:#?}");
    }
}
