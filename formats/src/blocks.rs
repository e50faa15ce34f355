//! One `#[repr(C)]` block struct per ggml format, `bytemuck::Pod`, with a compile-time size
//! assert beside each (layouts from ggml 0.26.0 `ggml/src/ggml-common.h`).

use bytemuck::{Pod, Zeroable};
use half::f16;

/// Elements per K-quant / IQ super-block (`QK_K`).
pub const QK_K: usize = 256;

macro_rules! assert_size {
    ($t:ty, $n:expr) => {
        const _: () = assert!(core::mem::size_of::<$t>() == $n);
        const _: () = assert!(core::mem::align_of::<$t>() <= 4);
    };
}

/// q8_0: 32 int8 quants and one fp16 scale.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8_0 {
    pub d: f16,
    pub qs: [i8; 32],
}
assert_size!(BlockQ8_0, 34);

/// q8_1: as q8_0 plus `s = d * sum(qs)` in fp16.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8_1 {
    pub d: f16,
    pub s: f16,
    pub qs: [i8; 32],
}
assert_size!(BlockQ8_1, 36);

/// q5_1: `x = d * q + m`, q in 0..32; low nibbles in `qs`, the fifth bits in `qh`.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5_1 {
    pub d: f16,
    pub m: f16,
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}
assert_size!(BlockQ5_1, 24);

/// q4_K: 8 sub-blocks of 32 with 6-bit scales and mins.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qs: [u8; 128],
}
assert_size!(BlockQ4K, 144);

/// q5_K: q4_K plus a fifth bit per element.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qh: [u8; 32],
    pub qs: [u8; 128],
}
assert_size!(BlockQ5K, 176);

/// q6_K: 16 sub-blocks of 16, 8-bit scales, 6-bit quants (4 low + 2 high bits).
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ6K {
    pub ql: [u8; 128],
    pub qh: [u8; 64],
    pub scales: [i8; 16],
    pub d: f16,
}
assert_size!(BlockQ6K, 210);

/// q8_K: the activation format of the K-quants and IQ formats; f32 scale, sums per 16.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; 256],
    pub bsums: [i16; 16],
}
assert_size!(BlockQ8K, 292);

/// iq2_xxs: 2.0625 bpw, grid indices and signs packed in `qs`.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockIq2Xxs {
    pub d: f16,
    pub qs: [u16; 32],
}
assert_size!(BlockIq2Xxs, 66);

/// iq2_xs: 2.3125 bpw.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockIq2Xs {
    pub d: f16,
    pub qs: [u16; 32],
    pub scales: [u8; 8],
}
assert_size!(BlockIq2Xs, 74);

/// iq2_s: 2.5625 bpw.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockIq2S {
    pub d: f16,
    pub qs: [u8; 64],
    pub qh: [u8; 8],
    pub scales: [u8; 8],
}
assert_size!(BlockIq2S, 82);

/// iq3_xxs: 3.0625 bpw.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockIq3Xxs {
    pub d: f16,
    pub qs: [u8; 96],
}
assert_size!(BlockIq3Xxs, 98);

/// iq3_s: 3.4375 bpw.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockIq3S {
    pub d: f16,
    pub qs: [u8; 64],
    pub qh: [u8; 8],
    pub signs: [u8; 32],
    pub scales: [u8; 4],
}
assert_size!(BlockIq3S, 110);

/// iq4_nl: 32 non-linear 4-bit values (`kvalues_iq4nl`), one fp16 scale.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockIq4Nl {
    pub d: f16,
    pub qs: [u8; 16],
}
assert_size!(BlockIq4Nl, 18);

/// iq4_xs: iq4_nl values in super-blocks of 256 with 6-bit sub-block scales.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockIq4Xs {
    pub d: f16,
    pub scales_h: u16,
    pub scales_l: [u8; 4],
    pub qs: [u8; 128],
}
assert_size!(BlockIq4Xs, 136);

/// nvfp4: 64 E2M1 values in 4 sub-blocks of 16, each with a UE4M3 scale.
/// Element j of a sub-block is the low nibble of byte j, element j+8 the high nibble.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockNvfp4 {
    pub d: [u8; 4],
    pub qs: [u8; 32],
}
assert_size!(BlockNvfp4, 36);
