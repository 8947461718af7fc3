//! A tiny deterministic generator (xorshift64), so that synthetic series need no
//! dependency and are the same on every run.

pub struct Rng(pub u64);

impl Rng {
    /// The next value in [0, 1).
    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}
