//! `qkern-cpu` owns the CPU backend.
