#!/usr/bin/env python3
"""Independent encoder for the tcgen05 descriptors, transcribed from the PTX
ISA tables (not from kernel-device's Rust code):

* Instruction descriptor, PTX ISA 9.7.16.4.2 Table 42 (.kind::tf32/f16/f8f6f4/i8):
  the table is written below as a list of (first bit, width, field) rows.
* Shared memory descriptor, PTX ISA 9.7.16.4.1.

Run: python3 tests/encodings/tcgen05_desc.py
Its output is recorded in kernel-device/src/tcgen05.rs
(`descriptors_match_the_independent_python_encoder`).
"""

# (first bit, width, field name) -- Table 42, row by row.
IDESC_TABLE = [
    (0, 2, "sparsity_selector"),
    (2, 1, "sparsity"),
    (3, 1, "saturate"),
    (4, 2, "dtype"),
    (6, 1, "reserved6"),
    (7, 3, "atype"),
    (10, 3, "btype"),
    (13, 1, "negate_a"),
    (14, 1, "negate_b"),
    (15, 1, "transpose_a"),
    (16, 1, "transpose_b"),
    (17, 6, "n_shr3"),
    (23, 1, "reserved23"),
    (24, 5, "m_shr4"),
    (29, 1, "reserved29"),
    (30, 2, "max_shift"),
]
DTYPE = {"f16": 0, "f32": 1, "s32": 2}
ATYPE = {  # per kind
    "f16": 0, "bf16": 1,          # .kind::f16
    "e4m3": 0, "e5m2": 1,         # .kind::f8f6f4
    "u8": 0, "s8": 1,             # .kind::i8
}

SDESC_TABLE = [
    (0, 14, "start"),
    (16, 14, "lbo"),
    (32, 14, "sbo"),
    (46, 3, "fixed_001"),
    (49, 3, "base_offset"),
    (52, 1, "lbo_mode"),
    (53, 8, "fixed_0"),
    (61, 3, "swizzle"),
]
SWIZZLE = {"none": 0, "128B_base32B": 1, "128B": 2, "64B": 4, "32B": 6}


def pack(table, fields):
    word = 0
    for lo, width, name in table:
        v = fields.get(name, 0)
        assert 0 <= v < (1 << width), (name, v)
        word |= v << lo
    return word


def idesc(d, a, b, m, n, trans_a=0, trans_b=0):
    return pack(IDESC_TABLE, dict(dtype=DTYPE[d], atype=ATYPE[a], btype=ATYPE[b],
                                  transpose_a=trans_a, transpose_b=trans_b,
                                  n_shr3=n >> 3, m_shr4=m >> 4))


def encode(x):  # matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4
    return (x & 0x3FFFF) >> 4


def sdesc(start, lbo, sbo, swizzle):
    return pack(SDESC_TABLE, dict(start=encode(start), lbo=encode(lbo), sbo=encode(sbo),
                                  fixed_001=1, swizzle=SWIZZLE[swizzle]))


if __name__ == "__main__":
    cases = [
        ("f32", "f16", "f16", 128, 128, 0, 0),
        ("f32", "f16", "f16", 128, 256, 0, 1),
        ("f32", "bf16", "bf16", 64, 64, 0, 0),
        ("f16", "f16", "f16", 128, 16, 0, 0),
        ("f32", "e4m3", "e4m3", 128, 256, 0, 0),
        ("s32", "s8", "s8", 128, 128, 0, 0),
    ]
    for c in cases:
        print(f"idesc {c}: {idesc(*c):#010x}")
    for c in [(0x400, 16, 1024, "128B"), (0x12340, 8192, 1024, "128B"),
              (0x800, 16, 512, "64B"), (0x100, 16, 256, "32B")]:
        print(f"sdesc {c}: {sdesc(*c):#018x}")
