//! q5_1 (PLACEHOLDER: being ported; replace this whole file).

use super::{ActBlock, WeightBlock};
use crate::Format;
use crate::blocks::*;

impl WeightBlock for BlockQ5_1 {
    const FORMAT: Format = Format::Q5_1;
    type Act = BlockQ8_1;
    fn dequantize(_blocks: &[Self], _out: &mut [f32]) {
        unimplemented!("q5_1 dequantize")
    }
    fn vec_dot(_w: &[Self], _a: &[Self::Act]) -> f32 {
        unimplemented!("q5_1 vec_dot")
    }
}
