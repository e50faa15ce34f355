//! `qkern-engine`: placeholder while the crate is written.
