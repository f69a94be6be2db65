//! The KV cache: each layer's keys and values of every position read so
//! far, kept between requests.
//!
//! A layer's keys are one `Vec<f32>` of `positions × kv_dim` (position
//! major, then head, then dimension), and its values another. The vectors
//! grow in chunks of [`CHUNK`] positions, never past the context; a
//! position's keys are written in place, never concatenated. Truncating
//! (to reuse a prefix) only moves the length: the memory stays for the
//! next request.

/// Positions added to the cache's room at a time.
pub(crate) const CHUNK: usize = 256;

/// The keys and values of every layer.
#[derive(Debug)]
pub(crate) struct KvCache {
    layers: Vec<LayerCache>,
    kv_dim: usize,
    /// Positions filled, the same in every layer.
    len: usize,
    /// Positions there is room for.
    capacity: usize,
    /// The most positions it may hold: the context.
    max: usize,
}

#[derive(Debug, Default)]
struct LayerCache {
    keys: Vec<f32>,
    values: Vec<f32>,
}

impl KvCache {
    /// An empty cache for `layers` layers of `kv_dim` floats a position,
    /// holding at most `max` positions.
    pub(crate) fn new(layers: usize, kv_dim: usize, max: usize) -> Self {
        Self {
            layers: (0..layers).map(|_| LayerCache::default()).collect(),
            kv_dim,
            len: 0,
            capacity: 0,
            max,
        }
    }

    /// Positions filled.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes allocated for keys and values.
    pub(crate) fn bytes(&self) -> usize {
        self.layers.len() * 2 * self.capacity * self.kv_dim * std::mem::size_of::<f32>()
    }

    /// Forgets the positions from `len` on.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Makes room for `len` positions in all, a chunk at a time. `len`
    /// must not pass the context.
    pub(crate) fn reserve(&mut self, len: usize) {
        assert!(len <= self.max, "the KV cache holds {} positions", self.max);
        if len <= self.capacity {
            return;
        }
        let capacity = len.div_ceil(CHUNK).saturating_mul(CHUNK).min(self.max);
        let floats = capacity * self.kv_dim;
        for layer in &mut self.layers {
            for v in [&mut layer.keys, &mut layer.values] {
                v.reserve_exact(floats - v.len());
                v.resize(floats, 0.0);
            }
        }
        self.capacity = capacity;
    }

    /// Layer `layer`'s keys and values at positions `start..start + n`,
    /// to write (room must have been made with [`reserve`](Self::reserve)).
    pub(crate) fn slots_mut(
        &mut self,
        layer: usize,
        start: usize,
        n: usize,
    ) -> (&mut [f32], &mut [f32]) {
        let range = start * self.kv_dim..(start + n) * self.kv_dim;
        let layer = &mut self.layers[layer];
        (&mut layer.keys[range.clone()], &mut layer.values[range])
    }

    /// Layer `layer`'s keys and values of positions `0..n`.
    pub(crate) fn layer(&self, layer: usize, n: usize) -> (&[f32], &[f32]) {
        let end = n * self.kv_dim;
        let layer = &self.layers[layer];
        (&layer.keys[..end], &layer.values[..end])
    }

    /// Counts `n` more positions as filled, once every layer has written
    /// them.
    pub(crate) fn advance(&mut self, n: usize) {
        debug_assert!(self.len + n <= self.capacity);
        self.len += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_grows_a_chunk_at_a_time_up_to_the_context_and_truncation_keeps_the_room() {
        let mut cache = KvCache::new(2, 4, 600);
        cache.reserve(1);
        assert_eq!(cache.capacity, CHUNK);
        cache.reserve(CHUNK);
        assert_eq!(cache.capacity, CHUNK);
        cache.reserve(CHUNK + 1);
        assert_eq!(cache.capacity, 2 * CHUNK);
        cache.reserve(590);
        assert_eq!(cache.capacity, 600, "never past the context");
        assert_eq!(cache.bytes(), 2 * 2 * 600 * 4 * 4);

        let (keys, values) = cache.slots_mut(1, 3, 2);
        keys.fill(1.0);
        values.fill(2.0);
        cache.advance(5);
        let (keys, values) = cache.layer(1, 5);
        assert_eq!(&keys[12..], &[1.0; 8]);
        assert_eq!(&values[..12], &[0.0; 12]);
        cache.truncate(3);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.capacity, 600);
    }
}
