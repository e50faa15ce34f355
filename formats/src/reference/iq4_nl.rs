//! iq4_nl (PLACEHOLDER: being ported; replace this whole file).

use super::{ActBlock, WeightBlock};
use crate::Format;
use crate::blocks::*;

impl WeightBlock for BlockIq4Nl {
    const FORMAT: Format = Format::IQ4_NL;
    type Act = BlockQ8_0;
    fn dequantize(_blocks: &[Self], _out: &mut [f32]) {
        unimplemented!("iq4_nl dequantize")
    }
    fn vec_dot(_w: &[Self], _a: &[Self::Act]) -> f32 {
        unimplemented!("iq4_nl vec_dot")
    }
}
