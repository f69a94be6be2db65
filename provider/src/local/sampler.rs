//! Choosing the next token from the model's logits: the repeat penalty,
//! then the most likely token (greedy) or a draw from the softmax at a
//! temperature, from a seeded generator.
//!
//! It chooses what candle-transformers' `LogitsProcessor` (`ArgMax` and
//! `All { temperature }`) and `utils::apply_repeat_penalty` choose, on the
//! same seed: the same generator (rand's `StdRng`) and the same weighted
//! draw. Tests hold the two equal; candle-transformers is only their
//! reference (a dev-dependency), so the host's build does not compile all
//! of candle's models for these few lines.

use rand::SeedableRng as _;
use rand::distr::Distribution as _;
use rand::distr::weighted::WeightedIndex;
use rand::rngs::StdRng;

/// Divides a positive logit by `penalty` and multiplies a negative one,
/// once for each distinct token of `recent`; ids out of range are ignored.
pub(crate) fn apply_repeat_penalty(logits: &mut [f32], penalty: f32, recent: &[u32]) {
    let mut seen = std::collections::HashSet::with_capacity(recent.len());
    for &token in recent {
        if !seen.insert(token) {
            continue;
        }
        if let Some(logit) = logits.get_mut(token as usize) {
            if *logit >= 0.0 {
                *logit /= penalty;
            } else {
                *logit *= penalty;
            }
        }
    }
}

/// Greedy, or seeded draws at a temperature.
#[derive(Debug)]
pub(crate) struct Sampler {
    temperature: Option<f32>,
    rng: StdRng,
    /// The probabilities, kept between tokens.
    probabilities: Vec<f32>,
}

impl Sampler {
    /// Greedy when `temperature` is `None`, or not above 0.
    pub(crate) fn new(seed: u64, temperature: Option<f32>) -> Self {
        Self {
            temperature: temperature.filter(|t| *t > 0.0),
            rng: StdRng::seed_from_u64(seed),
            probabilities: Vec::new(),
        }
    }

    /// The next token. Greedy takes the first of the highest logits; a
    /// draw takes token `i` with probability softmax(logits / t)ᵢ. `None`
    /// when there are no logits, or none that is a number (greedy), or no
    /// token can be drawn (a probability not a number).
    pub(crate) fn sample(&mut self, logits: &[f32]) -> Option<u32> {
        let Some(temperature) = self.temperature else {
            return argmax(logits);
        };
        self.softmax(logits, temperature);
        let choice = WeightedIndex::new(&self.probabilities).ok()?;
        Some(choice.sample(&mut self.rng) as u32)
    }

    /// softmax(logits / t) into `self.probabilities`: the quotient as an
    /// f32 product by 1/t, minus the largest, exponentiated, each divided
    /// by the sum (candle's `affine` and `softmax_last_dim` in that order).
    fn softmax(&mut self, logits: &[f32], temperature: f32) {
        let scale = (1.0 / f64::from(temperature)) as f32;
        let p = &mut self.probabilities;
        p.clear();
        p.extend(logits.iter().map(|&l| l * scale));
        let max = p.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for v in p.iter_mut() {
            *v = (*v - max).exp();
            sum += *v;
        }
        for v in p.iter_mut() {
            *v /= sum;
        }
    }
}

/// The index of the first of the largest values, as candle's `argmax`
/// takes it; NaNs are passed over (`None` when there is nothing else).
fn argmax(values: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in values.iter().enumerate() {
        if v.is_nan() {
            continue;
        }
        if best.is_none_or(|(_, b)| b < v) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};
    use candle_transformers::generation::{LogitsProcessor, Sampling};

    /// Logits of a small vocabulary, with ties and negative values.
    fn logits(seed: u64, n: usize) -> Vec<f32> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..n)
            .map(|_| ((rng.f32() - 0.5) * 16.0 * 4.0).round() / 4.0)
            .collect()
    }

    fn tensor(values: &[f32]) -> Tensor {
        Tensor::from_vec(values.to_vec(), values.len(), &Device::Cpu).unwrap()
    }

    #[test]
    fn greedy_picks_what_candles_argmax_picks() {
        for seed in 0..200 {
            let values = logits(seed, 1 + seed as usize % 50);
            let mut ours = Sampler::new(1, None);
            let mut candle = LogitsProcessor::from_sampling(1, Sampling::ArgMax);
            assert_eq!(
                ours.sample(&values),
                Some(candle.sample(&tensor(&values)).unwrap()),
                "{values:?}"
            );
        }
        assert_eq!(argmax(&[]), None);
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -2.0]), Some(1));
        assert_eq!(argmax(&[f32::NAN, 2.0, f32::NAN]), Some(1));
        assert_eq!(argmax(&[f32::NAN]), None);
    }

    #[test]
    fn draws_at_a_temperature_follow_candles_on_the_same_seed() {
        for (seed, temperature) in [(299_792_458, 0.7), (1, 1.0), (42, 0.2), (7, 2.5)] {
            let mut ours = Sampler::new(seed, Some(temperature));
            let mut candle = LogitsProcessor::from_sampling(
                seed,
                Sampling::All {
                    temperature: f64::from(temperature),
                },
            );
            for step in 0..300 {
                let values = logits(step, 64);
                assert_eq!(
                    ours.sample(&values),
                    Some(candle.sample(&tensor(&values)).unwrap()),
                    "seed {seed}, temperature {temperature}, step {step}"
                );
            }
        }
    }

    #[test]
    fn a_zero_or_negative_temperature_is_greedy() {
        let values = [0.5, 4.0, 1.0];
        for t in [Some(0.0), Some(-1.0), None] {
            let mut sampler = Sampler::new(3, t);
            for _ in 0..20 {
                assert_eq!(sampler.sample(&values), Some(1));
            }
        }
    }

    #[test]
    fn draws_follow_the_probabilities() {
        // softmax([0, ln 3]) = [1/4, 3/4].
        let values = [0.0, 3f32.ln()];
        let mut sampler = Sampler::new(11, Some(1.0));
        let ones = (0..4000)
            .filter(|_| sampler.sample(&values) == Some(1))
            .count();
        assert!((2850..3150).contains(&ones), "{ones} of 4000");
    }

    #[test]
    fn nothing_to_draw_is_none_not_a_panic() {
        assert_eq!(Sampler::new(1, Some(1.0)).sample(&[]), None);
        assert_eq!(Sampler::new(1, None).sample(&[]), None);
        assert_eq!(Sampler::new(1, Some(1.0)).sample(&[f32::NAN, 1.0]), None);
        assert_eq!(Sampler::new(1, None).sample(&[f32::NAN]), None);
    }

    #[test]
    fn the_repeat_penalty_is_candles() {
        for seed in 0..100 {
            let values = logits(seed, 40);
            let recent: Vec<u32> = logits(seed + 1000, 30)
                .iter()
                .map(|v| (v.abs() * 3.0) as u32 % 45)
                .collect();
            let mut ours = values.clone();
            apply_repeat_penalty(&mut ours, 1.1, &recent);
            let candle =
                candle_transformers::utils::apply_repeat_penalty(&tensor(&values), 1.1, &recent)
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap();
            assert_eq!(ours, candle, "{recent:?}");
        }
    }
}
