//! A small seeded random stream (xoshiro256**) with the distributions the generator draws from.

/// A deterministic pseudo-random stream: the same seed gives the same sequence on every
/// platform.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A stream derived from `label` (FNV-1a over its bytes, expanded with splitmix64).
    pub(crate) fn from_label(label: &str) -> Rng {
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for b in label.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01B3);
        }
        let mut st = h;
        Rng {
            s: [
                splitmix64(&mut st),
                splitmix64(&mut st),
                splitmix64(&mut st),
                splitmix64(&mut st),
            ],
        }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn random(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (`n > 0`; 0 gives 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift; the bias is negligible for the sizes used here.
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform integer in `lo..=hi`.
    pub(crate) fn int(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below((hi - lo + 1) as usize) as i64
    }

    /// Uniform `usize` in `lo..=hi`.
    pub(crate) fn size(&mut self, lo: usize, hi: usize) -> usize {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }

    /// One element of a non-empty slice.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A standard normal deviate scaled to `mu`, `sigma` (Box–Muller).
    pub(crate) fn gauss(&mut self, mu: f64, sigma: f64) -> f64 {
        let u1 = 1.0 - self.random();
        let u2 = self.random();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        mu + sigma * z
    }

    /// `exp(gauss(mu, sigma))`.
    pub(crate) fn lognormal(&mut self, mu: f64, sigma: f64) -> f64 {
        self.gauss(mu, sigma).exp()
    }

    /// Exponential with rate `lambda`.
    pub(crate) fn exponential(&mut self, lambda: f64) -> f64 {
        -(1.0 - self.random()).ln() / lambda
    }

    /// An index drawn with cumulative weights `cum` (non-empty, increasing).
    pub(crate) fn weighted(&mut self, cum: &[f64]) -> usize {
        let total = cum.last().copied().unwrap_or(0.0);
        let x = self.random() * total;
        cum.partition_point(|&c| c <= x)
            .min(cum.len().saturating_sub(1))
    }

    /// Fisher–Yates shuffle.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// `k` distinct indices of `0..n`, in draw order.
    pub(crate) fn sample_indices(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        let k = k.min(n);
        for i in 0..k {
            let j = i + self.below(n - i);
            all.swap(i, j);
        }
        all.truncate(k);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    #[allow(clippy::many_single_char_names)]
    fn same_label_same_stream_and_ranges_hold() {
        let mut a = Rng::from_label("x");
        let mut b = Rng::from_label("x");
        let mut c = Rng::from_label("y");
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
        for _ in 0..10_000 {
            let x = a.int(3, 7);
            assert!((3..=7).contains(&x));
            let r = a.random();
            assert!((0.0..1.0).contains(&r));
        }
        let mean: f64 = (0..20_000).map(|_| a.exponential(1.0 / 11.0)).sum::<f64>() / 20_000.0;
        assert!((mean - 11.0).abs() < 0.6, "{mean}");
    }
}
