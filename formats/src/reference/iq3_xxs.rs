//! iq3_xxs (PLACEHOLDER: being ported; replace this whole file).

use super::{ActBlock, WeightBlock};
use crate::Format;
use crate::blocks::*;

impl WeightBlock for BlockIq3Xxs {
    const FORMAT: Format = Format::IQ3_XXS;
    type Act = BlockQ8K;
    fn dequantize(_blocks: &[Self], _out: &mut [f32]) {
        unimplemented!("iq3_xxs dequantize")
    }
    fn vec_dot(_w: &[Self], _a: &[Self::Act]) -> f32 {
        unimplemented!("iq3_xxs vec_dot")
    }
}
