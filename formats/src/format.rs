//! The `Format` enum: ggml's type ids and names, block geometry, activation pairing.

use core::fmt;
use core::str::FromStr;

/// A ggml tensor type that qkern understands. The discriminant is ggml's `ggml_type` id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
#[allow(non_camel_case_types)]
pub enum Format {
    F32 = 0,
    F16 = 1,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    BF16 = 30,
    NVFP4 = 40,
}

/// An id or name that is not a format qkern supports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("unknown ggml type id {0} (qkern supports: {list})", list = Format::names())]
    UnknownId(u32),
    #[error("unknown format name {0:?} (qkern supports: {list})", list = Format::names())]
    UnknownName(String),
}

impl Format {
    /// Every supported format, in ggml id order.
    pub const ALL: [Format; 18] = [
        Format::F32,
        Format::F16,
        Format::Q5_1,
        Format::Q8_0,
        Format::Q8_1,
        Format::Q4_K,
        Format::Q5_K,
        Format::Q6_K,
        Format::Q8_K,
        Format::IQ2_XXS,
        Format::IQ2_XS,
        Format::IQ3_XXS,
        Format::IQ4_NL,
        Format::IQ3_S,
        Format::IQ2_S,
        Format::IQ4_XS,
        Format::BF16,
        Format::NVFP4,
    ];

    /// The quantized weight formats (those with a `vec_dot` against a q8 activation).
    pub const WEIGHTS: [Format; 13] = [
        Format::Q5_1,
        Format::Q8_0,
        Format::Q4_K,
        Format::Q5_K,
        Format::Q6_K,
        Format::IQ2_XXS,
        Format::IQ2_XS,
        Format::IQ3_XXS,
        Format::IQ4_NL,
        Format::IQ3_S,
        Format::IQ2_S,
        Format::IQ4_XS,
        Format::NVFP4,
    ];

    /// The activation formats that weights are dotted with.
    pub const ACTIVATIONS: [Format; 3] = [Format::Q8_0, Format::Q8_1, Format::Q8_K];

    /// The float row formats (router weights, activations in f32).
    pub const FLOATS: [Format; 3] = [Format::F32, Format::F16, Format::BF16];

    /// Whether this is one of the IQ2/IQ3 formats, whose 256-weight blocks hold indices into
    /// ggml's E8-lattice grids (`iq2xxs_grid` .. `iq3s_grid`) with sign masks. Their blocks are
    /// only 2-byte aligned (66 to 110 bytes), and the GPU backends give them their own kernels
    /// and storage order.
    pub const fn is_iq_grid(self) -> bool {
        matches!(self, Format::IQ2_XXS | Format::IQ2_XS | Format::IQ2_S | Format::IQ3_XXS | Format::IQ3_S)
    }

    /// ggml's `ggml_type` id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// Parse ggml's type id.
    pub const fn from_id(id: u32) -> Result<Format, FormatError> {
        Ok(match id {
            0 => Format::F32,
            1 => Format::F16,
            7 => Format::Q5_1,
            8 => Format::Q8_0,
            9 => Format::Q8_1,
            12 => Format::Q4_K,
            13 => Format::Q5_K,
            14 => Format::Q6_K,
            15 => Format::Q8_K,
            16 => Format::IQ2_XXS,
            17 => Format::IQ2_XS,
            18 => Format::IQ3_XXS,
            20 => Format::IQ4_NL,
            21 => Format::IQ3_S,
            22 => Format::IQ2_S,
            23 => Format::IQ4_XS,
            30 => Format::BF16,
            40 => Format::NVFP4,
            _ => return Err(FormatError::UnknownId(id)),
        })
    }

    /// ggml's type name, exactly as `ggml_type_name` spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Format::F32 => "f32",
            Format::F16 => "f16",
            Format::Q5_1 => "q5_1",
            Format::Q8_0 => "q8_0",
            Format::Q8_1 => "q8_1",
            Format::Q4_K => "q4_K",
            Format::Q5_K => "q5_K",
            Format::Q6_K => "q6_K",
            Format::Q8_K => "q8_K",
            Format::IQ2_XXS => "iq2_xxs",
            Format::IQ2_XS => "iq2_xs",
            Format::IQ3_XXS => "iq3_xxs",
            Format::IQ4_NL => "iq4_nl",
            Format::IQ3_S => "iq3_s",
            Format::IQ2_S => "iq2_s",
            Format::IQ4_XS => "iq4_xs",
            Format::BF16 => "bf16",
            Format::NVFP4 => "nvfp4",
        }
    }

    /// Parse ggml's type name, case-insensitively (`Q4_K`, `q4_k`, `IQ2_XXS`, ...).
    pub fn from_name(name: &str) -> Result<Format, FormatError> {
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| FormatError::UnknownName(name.to_string()))
    }

    fn names() -> String {
        Format::ALL.map(Format::name).join(", ")
    }

    /// Elements per block (1 for float rows).
    pub const fn block_elems(self) -> usize {
        match self {
            Format::F32 | Format::F16 | Format::BF16 => 1,
            Format::Q5_1 | Format::Q8_0 | Format::Q8_1 | Format::IQ4_NL => 32,
            Format::NVFP4 => 64,
            _ => 256,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            Format::F32 => 4,
            Format::F16 | Format::BF16 => 2,
            Format::Q5_1 => 24,
            Format::Q8_0 => 34,
            Format::Q8_1 => 36,
            Format::Q4_K => 144,
            Format::Q5_K => 176,
            Format::Q6_K => 210,
            Format::Q8_K => 292,
            Format::IQ2_XXS => 66,
            Format::IQ2_XS => 74,
            Format::IQ3_XXS => 98,
            Format::IQ4_NL => 18,
            Format::IQ3_S => 110,
            Format::IQ2_S => 82,
            Format::IQ4_XS => 136,
            Format::NVFP4 => 36,
        }
    }

    /// ggml's `vec_dot_type`: the activation format this weight format is dotted with.
    /// `None` for activation-only formats (q8_1, q8_K) and the float rows.
    pub const fn vec_dot_type(self) -> Option<Format> {
        match self {
            Format::Q8_0 | Format::NVFP4 | Format::IQ4_NL => Some(Format::Q8_0),
            Format::Q5_1 => Some(Format::Q8_1),
            Format::Q4_K
            | Format::Q5_K
            | Format::Q6_K
            | Format::IQ2_XXS
            | Format::IQ2_XS
            | Format::IQ2_S
            | Format::IQ3_XXS
            | Format::IQ3_S
            | Format::IQ4_XS => Some(Format::Q8_K),
            _ => None,
        }
    }

    /// Whether this is a quantized weight format (has a `vec_dot`).
    pub const fn is_weight(self) -> bool {
        self.vec_dot_type().is_some()
    }

    /// Whether this is one of the activation formats (q8_0, q8_1, q8_K).
    pub const fn is_activation(self) -> bool {
        matches!(self, Format::Q8_0 | Format::Q8_1 | Format::Q8_K)
    }

    /// Whether this is a float row format (f32, f16, bf16).
    pub const fn is_float(self) -> bool {
        matches!(self, Format::F32 | Format::F16 | Format::BF16)
    }

    /// Bytes of a row of `cols` elements. Fails when `cols` is not a multiple of the block
    /// size or the product overflows.
    pub fn row_bytes(self, cols: usize) -> Result<usize, crate::ShapeError> {
        let be = self.block_elems();
        if cols == 0 {
            return Err(crate::ShapeError::ZeroCols);
        }
        if !cols.is_multiple_of(be) {
            return Err(crate::ShapeError::ColsNotBlockMultiple { format: self, cols, block: be });
        }
        (cols / be).checked_mul(self.block_bytes()).ok_or(crate::ShapeError::Overflow)
    }

    /// Byte offsets, within one block, of the block's fp16 scale fields (`d`, and `m`, `dmin`
    /// or `s` where the block has one; `ggml-common.h` layouts, checked against
    /// [`crate::blocks`]): where a synthetic block gets finite scales, or a test plants a NaN.
    /// Empty where a block has none: the float rows, q8_K (an f32 `d`), nvfp4 (ue4m3 bytes).
    pub const fn f16_scale_offsets(self) -> &'static [usize] {
        match self {
            Format::Q5_1 | Format::Q8_1 | Format::Q4_K | Format::Q5_K => &[0, 2],
            Format::Q6_K => &[208],
            Format::Q8_0
            | Format::IQ2_XXS
            | Format::IQ2_XS
            | Format::IQ2_S
            | Format::IQ3_XXS
            | Format::IQ3_S
            | Format::IQ4_NL
            | Format::IQ4_XS => &[0],
            Format::F32 | Format::F16 | Format::BF16 | Format::Q8_K | Format::NVFP4 => &[],
        }
    }

    /// Bytes of a `rows` x `cols` matrix, checked.
    pub fn matrix_bytes(self, rows: usize, cols: usize) -> Result<usize, crate::ShapeError> {
        if rows == 0 {
            return Err(crate::ShapeError::ZeroRows);
        }
        self.row_bytes(cols)?.checked_mul(rows).ok_or(crate::ShapeError::Overflow)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = FormatError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::from_name(s)
    }
}

impl TryFrom<u32> for Format {
    type Error = FormatError;
    fn try_from(id: u32) -> Result<Self, Self::Error> {
        Format::from_id(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_scale_offsets_match_the_block_structs() {
        use crate::blocks::*;
        use core::mem::offset_of;
        let expect: [(Format, &[usize]); 18] = [
            (Format::F32, &[]),
            (Format::F16, &[]),
            (Format::BF16, &[]),
            (Format::Q8_K, &[]),
            (Format::NVFP4, &[]),
            (Format::Q5_1, &[offset_of!(BlockQ5_1, d), offset_of!(BlockQ5_1, m)]),
            (Format::Q8_1, &[offset_of!(BlockQ8_1, d), offset_of!(BlockQ8_1, s)]),
            (Format::Q4_K, &[offset_of!(BlockQ4K, d), offset_of!(BlockQ4K, dmin)]),
            (Format::Q5_K, &[offset_of!(BlockQ5K, d), offset_of!(BlockQ5K, dmin)]),
            (Format::Q6_K, &[offset_of!(BlockQ6K, d)]),
            (Format::Q8_0, &[offset_of!(BlockQ8_0, d)]),
            (Format::IQ2_XXS, &[offset_of!(BlockIq2Xxs, d)]),
            (Format::IQ2_XS, &[offset_of!(BlockIq2Xs, d)]),
            (Format::IQ2_S, &[offset_of!(BlockIq2S, d)]),
            (Format::IQ3_XXS, &[offset_of!(BlockIq3Xxs, d)]),
            (Format::IQ3_S, &[offset_of!(BlockIq3S, d)]),
            (Format::IQ4_NL, &[offset_of!(BlockIq4Nl, d)]),
            (Format::IQ4_XS, &[offset_of!(BlockIq4Xs, d)]),
        ];
        for (f, offs) in expect {
            assert_eq!(f.f16_scale_offsets(), offs, "{f}");
            assert!(offs.iter().all(|&o| o + 2 <= f.block_bytes()), "{f}");
        }
        let mut seen: Vec<Format> = expect.iter().map(|e| e.0).collect();
        seen.sort_by_key(|f| f.id());
        assert_eq!(seen, Format::ALL);
    }

    #[test]
    fn ids_and_names_roundtrip() {
        for f in Format::ALL {
            assert_eq!(Format::from_id(f.id()), Ok(f));
            assert_eq!(Format::from_name(f.name()), Ok(f));
            assert_eq!(Format::from_name(&f.name().to_uppercase()), Ok(f));
            assert_eq!(f.to_string().parse::<Format>(), Ok(f));
        }
    }

    #[test]
    fn unknown_ids_and_names_are_errors() {
        for id in [2, 3, 6, 10, 11, 19, 24, 29, 39, 41, 43, 1000, u32::MAX] {
            assert_eq!(Format::from_id(id), Err(FormatError::UnknownId(id)));
        }
        assert!(matches!(Format::from_name("q4_0"), Err(FormatError::UnknownName(_))));
        assert!(matches!(Format::from_name(""), Err(FormatError::UnknownName(_))));
        let msg = Format::from_id(2).unwrap_err().to_string();
        assert!(msg.contains("unknown ggml type id 2") && msg.contains("iq4_xs"), "{msg}");
    }

    #[test]
    fn row_bytes_checks() {
        assert_eq!(Format::Q4_K.row_bytes(4096), Ok(16 * 144));
        assert_eq!(Format::Q8_0.row_bytes(32), Ok(34));
        assert!(Format::Q4_K.row_bytes(640).is_err());
        assert!(Format::Q8_0.row_bytes(0).is_err());
        assert_eq!(Format::Q8_0.matrix_bytes(usize::MAX, 32), Err(crate::ShapeError::Overflow));
    }
}
