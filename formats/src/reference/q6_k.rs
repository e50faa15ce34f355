//! q6_k (PLACEHOLDER: being ported; replace this whole file).

use super::{ActBlock, WeightBlock};
use crate::Format;
use crate::blocks::*;

impl WeightBlock for BlockQ6K {
    const FORMAT: Format = Format::Q6_K;
    type Act = BlockQ8K;
    fn dequantize(_blocks: &[Self], _out: &mut [f32]) {
        unimplemented!("q6_k dequantize")
    }
    fn vec_dot(_w: &[Self], _a: &[Self::Act]) -> f32 {
        unimplemented!("q6_k vec_dot")
    }
}
