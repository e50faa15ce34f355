//! iq2_s (PLACEHOLDER: being ported; replace this whole file).

use super::{ActBlock, WeightBlock};
use crate::Format;
use crate::blocks::*;

impl WeightBlock for BlockIq2S {
    const FORMAT: Format = Format::IQ2_S;
    type Act = BlockQ8K;
    fn dequantize(_blocks: &[Self], _out: &mut [f32]) {
        unimplemented!("iq2_s dequantize")
    }
    fn vec_dot(_w: &[Self], _a: &[Self::Act]) -> f32 {
        unimplemented!("iq2_s vec_dot")
    }
}
