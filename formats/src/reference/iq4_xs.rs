//! iq4_xs (PLACEHOLDER: being ported; replace this whole file).

use super::{ActBlock, WeightBlock};
use crate::Format;
use crate::blocks::*;

impl WeightBlock for BlockIq4Xs {
    const FORMAT: Format = Format::IQ4_XS;
    type Act = BlockQ8K;
    fn dequantize(_blocks: &[Self], _out: &mut [f32]) {
        unimplemented!("iq4_xs dequantize")
    }
    fn vec_dot(_w: &[Self], _a: &[Self::Act]) -> f32 {
        unimplemented!("iq4_xs vec_dot")
    }
}
