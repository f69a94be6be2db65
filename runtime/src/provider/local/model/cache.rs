//! The KV cache: each layer's keys and values of every position read so
//! far, kept between requests.
//!
//! A layer's values are one `Vec<f32>` of `positions × kv_dim` (position
//! major, then head, then dimension). Its keys are stored transposed,
//! `kv_heads × head_dim × room` (head, then dimension, then position), so
//! that attention scores a query against eight or sixteen consecutive
//! keys with one vector operation per dimension ([`super::attention`]).
//! The room grows in chunks of [`CHUNK`] positions, never past the
//! context (rounded up to whole blocks of [`KEY_BLOCK`]); a position's
//! keys and values are written in place. Truncating (to reuse a prefix)
//! only moves the length: the memory stays for the next request.

/// Positions added to the cache's room at a time.
pub(crate) const CHUNK: usize = 256;

/// Keys the attention scores at once: the room is a multiple of it, so a
/// block of keys read past the filled positions stays inside the buffer.
pub(crate) const KEY_BLOCK: usize = 16;

/// The keys and values of every layer.
#[derive(Debug)]
pub(crate) struct KvCache {
    layers: Vec<LayerCache>,
    kv_heads: usize,
    head_dim: usize,
    /// Positions filled, the same in every layer.
    len: usize,
    /// Positions there is room for.
    room: usize,
    /// The most positions it may hold: the context.
    max: usize,
}

#[derive(Debug, Default)]
struct LayerCache {
    /// `kv_heads × head_dim × room`.
    keys: Vec<f32>,
    /// `room × kv_heads·head_dim`.
    values: Vec<f32>,
}

/// One layer's keys (transposed) and values, to read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LayerView<'a> {
    /// Key `j`'s dimension `d` of head `g` is at `(g·head_dim + d)·stride + j`.
    pub(crate) keys: &'a [f32],
    /// Floats between one dimension's keys and the next's: the room.
    pub(crate) stride: usize,
    /// Value `j` of head `g` is `values[j·kv_dim + g·head_dim..][..head_dim]`.
    pub(crate) values: &'a [f32],
}

impl KvCache {
    /// An empty cache for `layers` layers of `kv_heads` heads of
    /// `head_dim` floats, holding at most `max` positions.
    pub(crate) fn new(layers: usize, kv_heads: usize, head_dim: usize, max: usize) -> Self {
        Self {
            layers: (0..layers).map(|_| LayerCache::default()).collect(),
            kv_heads,
            head_dim,
            len: 0,
            room: 0,
            max,
        }
    }

    fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Positions filled.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes allocated for keys and values.
    pub(crate) fn bytes(&self) -> usize {
        self.layers.len() * 2 * self.room * self.kv_dim() * std::mem::size_of::<f32>()
    }

    /// Forgets the positions from `len` on.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Makes room for `len` positions in all, a chunk at a time. `len`
    /// must not pass the context.
    pub(crate) fn reserve(&mut self, len: usize) {
        assert!(len <= self.max, "the KV cache holds {} positions", self.max);
        if len <= self.room {
            return;
        }
        let room = len
            .div_ceil(CHUNK)
            .saturating_mul(CHUNK)
            .min(self.max.next_multiple_of(KEY_BLOCK));
        let (kv_dim, old) = (self.kv_dim(), self.room);
        for layer in &mut self.layers {
            let mut keys = vec![0.0; kv_dim * room];
            for (new, old) in keys
                .chunks_exact_mut(room)
                .zip(layer.keys.chunks_exact(old.max(1)))
            {
                new[..old.len()].copy_from_slice(old);
            }
            layer.keys = keys;
            layer
                .values
                .reserve_exact(room * kv_dim - layer.values.len());
            layer.values.resize(room * kv_dim, 0.0);
        }
        self.room = room;
    }

    /// Writes layer `layer`'s keys and values of positions `start..`:
    /// `keys` and `values` are `n × kv_dim` (room must have been made
    /// with [`reserve`](Self::reserve)).
    pub(crate) fn write(&mut self, layer: usize, start: usize, keys: &[f32], values: &[f32]) {
        let (kv_dim, room) = (self.kv_dim(), self.room);
        let layer = &mut self.layers[layer];
        layer.values[start * kv_dim..start * kv_dim + values.len()].copy_from_slice(values);
        for (i, row) in keys.chunks_exact(kv_dim).enumerate() {
            for (c, &k) in row.iter().enumerate() {
                layer.keys[c * room + start + i] = k;
            }
        }
    }

    /// Layer `layer`'s keys and values.
    pub(crate) fn layer(&self, layer: usize) -> LayerView<'_> {
        let layer = &self.layers[layer];
        LayerView {
            keys: &layer.keys,
            stride: self.room,
            values: &layer.values,
        }
    }

    /// Counts `n` more positions as filled, once every layer has written
    /// them.
    pub(crate) fn advance(&mut self, n: usize) {
        debug_assert!(self.len + n <= self.room);
        self.len += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_grows_a_chunk_at_a_time_up_to_the_context_keeping_what_it_holds() {
        let mut cache = KvCache::new(2, 2, 2, 600);
        cache.reserve(1);
        assert_eq!(cache.room, CHUNK);
        // Position 3 of layer 1: keys (1, 2 | 3, 4), values 5..8.
        cache.write(1, 3, &[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]);
        cache.advance(4);
        cache.reserve(CHUNK);
        assert_eq!(cache.room, CHUNK);
        cache.reserve(CHUNK + 1);
        assert_eq!(cache.room, 2 * CHUNK);
        cache.reserve(590);
        assert_eq!(cache.room, 608, "the context in whole key blocks");
        assert_eq!(cache.bytes(), 2 * 2 * 608 * 4 * 4);

        let view = cache.layer(1);
        assert_eq!(view.stride, 608);
        let key = |c: usize, j: usize| view.keys[c * view.stride + j];
        assert_eq!(
            [key(0, 3), key(1, 3), key(2, 3), key(3, 3)],
            [1.0, 2.0, 3.0, 4.0]
        );
        assert_eq!(key(0, 2), 0.0);
        assert_eq!(&view.values[12..16], &[5.0, 6.0, 7.0, 8.0]);
        cache.truncate(3);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.room, 608);
    }
}
