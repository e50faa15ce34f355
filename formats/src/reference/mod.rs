//! The scalar reference: bit-identical to ggml 0.26.0's x86 AVX2 kernels.
//!
//! Each weight format implements [`WeightBlock`]; each activation format implements
//! [`ActBlock`]. The dot products emulate the AVX2 lane order (8 int32 lanes per block,
//! one f32 accumulator per lane, fused multiply-adds, `hsum_float_8`) rather than porting
//! ggml's `_generic` kernels, which give other bits (`shared/REFERENCE.md`). Each module
//! names the ggml file and function it follows.
//!
//! The byte-level functions at the bottom ([`dequantize_row`], [`quantize_row`],
//! [`vec_dot`], [`dot_tokens`]) take raw ggml block bytes (any alignment), validate every
//! length and shape, and never panic.
//!
//! ## Activation bytes of -128
//!
//! The AVX2 sign trick (`_mm256_sign_epi8`) gives the wrong sign for an activation byte of
//! -128 against a negative weight, and `maddubs` can saturate. ggml's quantizers never emit
//! -128 for finite inputs. The reference emulates the instructions exactly, so it equals ggml
//! even then; the `qkern` API rejects imported activations that contain -128 (see
//! [`ActBlock::has_minus_128`]) so that no fast path needs to reproduce the wart.

use bytemuck::Pod;

use crate::{Format, ShapeError};

pub mod simd;

pub mod iq2_s;
pub mod iq2_xs;
pub mod iq2_xxs;
pub mod iq3_s;
pub mod iq3_xxs;
pub mod iq4_nl;
pub mod iq4_xs;
pub mod nvfp4;
pub mod q4_k;
pub mod q5_1;
pub mod q5_k;
pub mod q6_k;
pub mod q8_0;
pub mod q8_1;
pub mod q8_k;

// Each module is public: `reference::q4_k::vec_dot_q4_k` etc. are the per-format oracles.

/// A weight block: dequantize and dot with its activation block, as ggml's x86 build does.
pub trait WeightBlock: Pod + Send + Sync + 'static {
    /// The ggml format of this block.
    const FORMAT: Format;
    /// Elements per block.
    const ELEMS: usize = Self::FORMAT.block_elems();
    /// The activation block this format pairs with (ggml's `vec_dot_type`).
    type Act: ActBlock;
    /// `dequantize_row_*` for one row of blocks; `out.len() == blocks.len() * ELEMS`.
    fn dequantize(blocks: &[Self], out: &mut [f32]);
    /// `ggml_vec_dot_*` (AVX2 branch, `nrc = 1`) of one weight row with one activation row
    /// of the same number of elements.
    fn vec_dot(w: &[Self], a: &[Self::Act]) -> f32;
}

/// An activation block: quantize f32 rows as ggml-cpu's x86 `from_float` does.
pub trait ActBlock: Pod + Send + Sync + 'static {
    /// The ggml format of this block.
    const FORMAT: Format;
    /// Elements per block.
    const ELEMS: usize = Self::FORMAT.block_elems();
    /// x86 `quantize_row_*` of one row; `x.len() == out.len() * ELEMS`.
    fn quantize(x: &[f32], out: &mut [Self]);
    /// Dequantize (for tests and debugging; `dequantize_row_*`).
    fn dequantize(blocks: &[Self], out: &mut [f32]);
    /// Whether any quant byte is -128 (never produced by ggml's quantizers for finite input).
    fn has_minus_128(&self) -> bool;
}

/// View a byte slice as blocks: borrowed when it is aligned for `B`, copied otherwise.
/// Trailing bytes that do not fill a block are ignored (callers check lengths first).
pub fn blocks_of<B: Pod>(bytes: &[u8]) -> std::borrow::Cow<'_, [B]> {
    let n = core::mem::size_of::<B>();
    let whole = &bytes[..bytes.len() / n * n];
    match bytemuck::try_cast_slice(whole) {
        Ok(b) => std::borrow::Cow::Borrowed(b),
        Err(_) => std::borrow::Cow::Owned(whole.chunks_exact(n).map(bytemuck::pod_read_unaligned).collect()),
    }
}

/// Run `f` with the weight-block type of `format`, or return `None` for a non-weight format.
#[macro_export]
#[doc(hidden)]
macro_rules! with_weight_block {
    ($format:expr, $B:ident => $body:expr) => {{
        use $crate::blocks::*;
        match $format {
            $crate::Format::Q8_0 => {
                type $B = BlockQ8_0;
                Some($body)
            }
            $crate::Format::Q5_1 => {
                type $B = BlockQ5_1;
                Some($body)
            }
            $crate::Format::Q4_K => {
                type $B = BlockQ4K;
                Some($body)
            }
            $crate::Format::Q5_K => {
                type $B = BlockQ5K;
                Some($body)
            }
            $crate::Format::Q6_K => {
                type $B = BlockQ6K;
                Some($body)
            }
            $crate::Format::IQ2_XXS => {
                type $B = BlockIq2Xxs;
                Some($body)
            }
            $crate::Format::IQ2_XS => {
                type $B = BlockIq2Xs;
                Some($body)
            }
            $crate::Format::IQ2_S => {
                type $B = BlockIq2S;
                Some($body)
            }
            $crate::Format::IQ3_XXS => {
                type $B = BlockIq3Xxs;
                Some($body)
            }
            $crate::Format::IQ3_S => {
                type $B = BlockIq3S;
                Some($body)
            }
            $crate::Format::IQ4_NL => {
                type $B = BlockIq4Nl;
                Some($body)
            }
            $crate::Format::IQ4_XS => {
                type $B = BlockIq4Xs;
                Some($body)
            }
            $crate::Format::NVFP4 => {
                type $B = BlockNvfp4;
                Some($body)
            }
            _ => None,
        }
    }};
}

/// Run `f` with the activation-block type of `format`, or `None` for a non-activation format.
#[macro_export]
#[doc(hidden)]
macro_rules! with_act_block {
    ($format:expr, $B:ident => $body:expr) => {{
        use $crate::blocks::*;
        match $format {
            $crate::Format::Q8_0 => {
                type $B = BlockQ8_0;
                Some($body)
            }
            $crate::Format::Q8_1 => {
                type $B = BlockQ8_1;
                Some($body)
            }
            $crate::Format::Q8_K => {
                type $B = BlockQ8K;
                Some($body)
            }
            _ => None,
        }
    }};
}

fn check_bytes(what: &'static str, expected: usize, got: usize) -> Result<(), ShapeError> {
    if expected != got {
        return Err(ShapeError::ByteLength { what, expected, got });
    }
    Ok(())
}

fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), ShapeError> {
    if expected != got {
        return Err(ShapeError::Length { what, expected, got });
    }
    Ok(())
}

/// Dequantize one or more rows of `format` (`out.len()` elements in all) to f32, as ggml's
/// `to_float`. Float formats (f32, f16, bf16) and activation formats are accepted too.
pub fn dequantize_row(format: Format, bytes: &[u8], out: &mut [f32]) -> Result<(), ShapeError> {
    let rb = format.row_bytes(out.len())?;
    check_bytes("dequantize input", rb, bytes.len())?;
    match format {
        Format::F32 => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
            return Ok(());
        }
        Format::F16 => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = crate::fp::f16_to_f32(half::f16::from_le_bytes([c[0], c[1]]));
            }
            return Ok(());
        }
        Format::BF16 => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = crate::fp::bf16_to_f32(half::bf16::from_le_bytes([c[0], c[1]]));
            }
            return Ok(());
        }
        _ => {}
    }
    if let Some(()) = with_weight_block!(format, B => <B as WeightBlock>::dequantize(&blocks_of::<B>(bytes), out)) {
        return Ok(());
    }
    with_act_block!(format, B => <B as ActBlock>::dequantize(&blocks_of::<B>(bytes), out))
        .ok_or(ShapeError::Role { format, role: "dequantizable" })
}

/// Quantize one row of f32 activations to `format` (q8_0, q8_1 or q8_K), exactly as
/// ggml-cpu's x86 `from_float`.
pub fn quantize_row(format: Format, x: &[f32], out: &mut [u8]) -> Result<(), ShapeError> {
    if !format.is_activation() {
        return Err(ShapeError::Role { format, role: "activation" });
    }
    let rb = format.row_bytes(x.len())?;
    check_bytes("quantize output", rb, out.len())?;
    with_act_block!(format, B => {
        let mut blocks = vec![<B as bytemuck::Zeroable>::zeroed(); x.len() / <B as ActBlock>::ELEMS];
        <B as ActBlock>::quantize(x, &mut blocks);
        out.copy_from_slice(bytemuck::cast_slice(&blocks));
    })
    .ok_or(ShapeError::Role { format, role: "activation" })
}

/// ggml's `vec_dot` (AVX2, `nrc = 1`) of one weight row of `cols` elements with one
/// activation row already quantized to `format.vec_dot_type()`.
pub fn vec_dot(format: Format, cols: usize, w: &[u8], a: &[u8]) -> Result<f32, ShapeError> {
    let mut out = [0f32];
    dot_tokens(format, cols, w, a, &mut out)?;
    Ok(out[0])
}

/// One weight row against `out.len()` activation rows (token-major, each
/// `act_format.row_bytes(cols)` bytes): `out[t] = vec_dot(row, token t)`.
pub fn dot_tokens(format: Format, cols: usize, w: &[u8], acts: &[u8], out: &mut [f32]) -> Result<(), ShapeError> {
    let act = format.vec_dot_type().ok_or(ShapeError::Role { format, role: "weight" })?;
    if out.is_empty() {
        return Err(ShapeError::ZeroTokens);
    }
    let wb = format.row_bytes(cols)?;
    check_bytes("weight row", wb, w.len())?;
    let ab = act.row_bytes(cols)?;
    let total = ab.checked_mul(out.len()).ok_or(ShapeError::Overflow)?;
    check_bytes("activation rows", total, acts.len())?;
    with_weight_block!(format, B => {
        let wblocks = blocks_of::<B>(w);
        for (o, a) in out.iter_mut().zip(acts.chunks_exact(ab)) {
            *o = <B as WeightBlock>::vec_dot(&wblocks, &blocks_of::<<B as WeightBlock>::Act>(a));
        }
    })
    .ok_or(ShapeError::Role { format, role: "weight" })
}

/// Element count check shared by the per-format modules (debug builds only: the byte-level
/// entry points above have validated every length already).
#[inline]
pub(crate) fn debug_check(what: &'static str, expected: usize, got: usize) {
    debug_assert!(check_len(what, expected, got).is_ok(), "{what}: expected {expected}, got {got}");
}
