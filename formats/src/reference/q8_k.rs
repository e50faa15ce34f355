//! q8_k (PLACEHOLDER: being ported; replace this whole file).

use super::{ActBlock, WeightBlock};
use crate::Format;
use crate::blocks::*;

impl ActBlock for BlockQ8K {
    const FORMAT: Format = Format::Q8_K;
    fn quantize(_x: &[f32], _out: &mut [Self]) {
        unimplemented!("q8_k quantize")
    }
    fn dequantize(_blocks: &[Self], _out: &mut [f32]) {
        unimplemented!("q8_k dequantize")
    }
    fn has_minus_128(&self) -> bool {
        self.qs.contains(&-128)
    }
}
