//! nvfp4 (PLACEHOLDER: being ported; replace this whole file).

use super::{ActBlock, WeightBlock};
use crate::Format;
use crate::blocks::*;

impl WeightBlock for BlockNvfp4 {
    const FORMAT: Format = Format::NVFP4;
    type Act = BlockQ8_0;
    fn dequantize(_blocks: &[Self], _out: &mut [f32]) {
        unimplemented!("nvfp4 dequantize")
    }
    fn vec_dot(_w: &[Self], _a: &[Self::Act]) -> f32 {
        unimplemented!("nvfp4 vec_dot")
    }
}
