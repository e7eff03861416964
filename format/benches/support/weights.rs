//! Synthetic trained-layer weights shared by the coder benchmarks
//! (`format/benches/coders.rs`, `bench/coders-ab/main.rs`).

/// FP32 bit patterns of normal(0, 0.04) samples (xorshift + Box-Muller, fixed seed).
pub fn f32_words(n: usize) -> Vec<u32> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let (u, v) = (next(), next());
            let g = (-2.0 * u.ln()).sqrt() * (2.0 * core::f64::consts::PI * v).cos();
            ((g * 0.04) as f32).to_bits()
        })
        .collect()
}

/// The BF16 word of an FP32 bit pattern (rounded).
pub fn bf16_of(x: u32) -> u16 {
    x.wrapping_add(0x8000).wrapping_shr(16) as u16
}
