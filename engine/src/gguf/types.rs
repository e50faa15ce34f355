//! ggml's tensor types as GGUF files name them (ggml 0.26.0: `enum ggml_type` in
//! `ggml/include/ggml.h`, block geometry from `type_traits[]` in `ggml/src/ggml.c`), and the
//! GGUF metadata value types (`enum gguf_type` in `ggml/include/gguf.h`).

use qkern::Format;

/// A ggml tensor type id that ggml 0.26.0 can store in a GGUF file (the removed ids 4, 5,
/// 31-33 and 36-38, whose block size ggml gives as 0, are not types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GgmlType(u32);

/// `(id, name, block elements, block bytes)` for every live ggml 0.26.0 type.
const TYPES: [(u32, &str, u32, u32); 36] = [
    (0, "f32", 1, 4),
    (1, "f16", 1, 2),
    (2, "q4_0", 32, 18),
    (3, "q4_1", 32, 20),
    (6, "q5_0", 32, 22),
    (7, "q5_1", 32, 24),
    (8, "q8_0", 32, 34),
    (9, "q8_1", 32, 36),
    (10, "q2_K", 256, 84),
    (11, "q3_K", 256, 110),
    (12, "q4_K", 256, 144),
    (13, "q5_K", 256, 176),
    (14, "q6_K", 256, 210),
    (15, "q8_K", 256, 292),
    (16, "iq2_xxs", 256, 66),
    (17, "iq2_xs", 256, 74),
    (18, "iq3_xxs", 256, 98),
    (19, "iq1_s", 256, 50),
    (20, "iq4_nl", 32, 18),
    (21, "iq3_s", 256, 110),
    (22, "iq2_s", 256, 82),
    (23, "iq4_xs", 256, 136),
    (24, "i8", 1, 1),
    (25, "i16", 1, 2),
    (26, "i32", 1, 4),
    (27, "i64", 1, 8),
    (28, "f64", 1, 8),
    (29, "iq1_m", 256, 56),
    (30, "bf16", 1, 2),
    (34, "tq1_0", 256, 54),
    (35, "tq2_0", 256, 66),
    (39, "mxfp4", 32, 17),
    (40, "nvfp4", 64, 36),
    (41, "q1_0", 128, 18),
    (42, "q2_0", 64, 18),
    (u32::MAX, "", 0, 0),
];

/// ggml's `GGML_TYPE_COUNT` in 0.26.0.
pub const GGML_TYPE_COUNT: u32 = 43;

impl GgmlType {
    fn entry(self) -> &'static (u32, &'static str, u32, u32) {
        // Every GgmlType was made from a table entry.
        TYPES.iter().find(|t| t.0 == self.0).unwrap_or(&TYPES[TYPES.len() - 1])
    }

    /// The type with ggml id `id`, if ggml 0.26.0 has it.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TYPES[..TYPES.len() - 1].iter().find(|t| t.0 == id).map(|t| GgmlType(t.0))
    }

    /// Every live ggml type, in id order.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TYPES[..TYPES.len() - 1].iter().map(|t| GgmlType(t.0))
    }

    pub fn id(self) -> u32 {
        self.0
    }

    /// `ggml_type_name`.
    pub fn name(self) -> &'static str {
        self.entry().1
    }

    /// `ggml_blck_size`.
    pub fn block_elems(self) -> u64 {
        self.entry().2 as u64
    }

    /// `ggml_type_size`.
    pub fn block_bytes(self) -> u64 {
        self.entry().3 as u64
    }

    /// The qkern format of this type, where qkern has one.
    pub fn format(self) -> Option<Format> {
        Format::from_id(self.0).ok()
    }
}

impl From<Format> for GgmlType {
    fn from(f: Format) -> GgmlType {
        GgmlType(f.id())
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A GGUF metadata value type (`enum gguf_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    Str = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::Str,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    pub fn from_id(id: u32) -> Option<ValueType> {
        ValueType::ALL.get(id as usize).copied()
    }

    pub fn id(self) -> u32 {
        self as u32
    }

    /// `gguf_type_name`.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::Str => "str",
            ValueType::Array => "arr",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }

    /// Bytes of one encoded value: fixed for scalars; the minimum (an empty string or array)
    /// for strings and arrays.
    pub fn min_bytes(self) -> u64 {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::Str => 8,
            ValueType::Array => 12,
        }
    }
}

impl std::fmt::Display for ValueType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
