//! The KV cache: each layer's keys and values of every position read so
//! far, kept between requests, as f16.
//!
//! A layer is one `Vec` of f16 (their bits, `u16`) in blocks of
//! [`KEY_BLOCK`] positions. A block holds, for each key/value head, a
//! *tile*: the head's keys transposed (`head_dim × KEY_BLOCK`: dimension,
//! then position), then its values (`KEY_BLOCK × head_dim`: position, then
//! dimension). Attention reads a head's tiles one after the other, each
//! a contiguous 4 KB for 64-float heads ([`super::attention`]): the
//! scores of sixteen keys are one vector multiply–add per dimension, the
//! values are summed sixteen dimensions at a time.
//!
//! Keys and values are rounded to f16 when written (and clamped to its
//! range), as llama.cpp's cache keeps them: half the memory of f32 and
//! half the bytes attention reads per token, for a difference in the
//! logits far below that of the weights' quantisation.
//!
//! The room grows in chunks of [`CHUNK`] positions, never past the
//! context (rounded up to whole blocks); growing appends blocks, and a
//! position's keys and values are written in place. Truncating (to reuse
//! a prefix) only moves the length: the memory stays for the next
//! request.

use half::f16;

/// Positions added to the cache's room at a time.
pub(crate) const CHUNK: usize = 256;

/// Positions per block: keys the attention scores at once.
pub(crate) const KEY_BLOCK: usize = 16;

/// The keys and values of every layer.
#[derive(Debug)]
pub(crate) struct KvCache {
    /// Each layer's blocks.
    layers: Vec<Vec<u16>>,
    kv_heads: usize,
    head_dim: usize,
    /// Positions filled, the same in every layer.
    len: usize,
    /// Positions there is room for: a multiple of [`KEY_BLOCK`].
    room: usize,
    /// The most positions it may hold: the context.
    max: usize,
}

/// One layer's keys and values, to read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LayerView<'a> {
    /// The blocks: `room / KEY_BLOCK × kv_heads` tiles.
    data: &'a [u16],
    kv_heads: usize,
    head_dim: usize,
}

impl<'a> LayerView<'a> {
    /// The tile of head `head` in block `block`: `head_dim × KEY_BLOCK`
    /// keys (key `j`'s dimension `d` at `d·KEY_BLOCK + j`), then
    /// `KEY_BLOCK × head_dim` values (at `KEY_BLOCK·head_dim + j·head_dim + d`).
    #[inline]
    pub(crate) fn tile(&self, block: usize, head: usize) -> &'a [u16] {
        let size = tile_size(self.head_dim);
        &self.data[(block * self.kv_heads + head) * size..][..size]
    }
}

/// f16 of one head's tile: its keys and values of a block.
pub(crate) const fn tile_size(head_dim: usize) -> usize {
    2 * head_dim * KEY_BLOCK
}

/// `x` as the bits of the nearest f16, clamped to its finite range (so
/// that a weight of 0 times a value is 0, never NaN).
pub(crate) fn to_f16(x: f32) -> u16 {
    f16::from_f32(x.clamp(-65504.0, 65504.0)).to_bits()
}

/// The f32 of f16 bits.
#[inline]
pub(crate) fn from_f16(bits: u16) -> f32 {
    f16::from_bits(bits).to_f32()
}

impl KvCache {
    /// An empty cache for `layers` layers of `kv_heads` heads of
    /// `head_dim` floats, holding at most `max` positions.
    pub(crate) fn new(layers: usize, kv_heads: usize, head_dim: usize, max: usize) -> Self {
        Self {
            layers: vec![Vec::new(); layers],
            kv_heads,
            head_dim,
            len: 0,
            room: 0,
            max,
        }
    }

    /// Positions filled.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes allocated for keys and values.
    pub(crate) fn bytes(&self) -> usize {
        self.layers.len() * 2 * self.room * self.kv_heads * self.head_dim * size_of::<u16>()
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
        let size = room / KEY_BLOCK * self.kv_heads * tile_size(self.head_dim);
        for layer in &mut self.layers {
            layer.reserve_exact(size - layer.len());
            layer.resize(size, 0);
        }
        self.room = room;
    }

    /// Writes layer `layer`'s keys and values of positions `start..`:
    /// `keys` and `values` are `n × kv_heads·head_dim` (room must have
    /// been made with [`reserve`](Self::reserve)).
    pub(crate) fn write(&mut self, layer: usize, start: usize, keys: &[f32], values: &[f32]) {
        let (hd, kv_heads) = (self.head_dim, self.kv_heads);
        let size = tile_size(hd);
        let data = &mut self.layers[layer];
        for (i, (k, v)) in keys
            .chunks_exact(kv_heads * hd)
            .zip(values.chunks_exact(kv_heads * hd))
            .enumerate()
        {
            let (block, j) = ((start + i) / KEY_BLOCK, (start + i) % KEY_BLOCK);
            for g in 0..kv_heads {
                let tile = &mut data[(block * kv_heads + g) * size..][..size];
                let (tk, tv) = tile.split_at_mut(hd * KEY_BLOCK);
                for d in 0..hd {
                    tk[d * KEY_BLOCK + j] = to_f16(k[g * hd + d]);
                }
                for (t, &x) in tv[j * hd..(j + 1) * hd].iter_mut().zip(&v[g * hd..]) {
                    *t = to_f16(x);
                }
            }
        }
    }

    /// Layer `layer`'s keys and values.
    pub(crate) fn layer(&self, layer: usize) -> LayerView<'_> {
        LayerView {
            data: &self.layers[layer],
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
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
        // Position 19 of layer 1: keys (1, 2 | 3, 4), values 5..8.
        cache.write(1, 19, &[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]);
        cache.advance(20);
        cache.reserve(CHUNK);
        assert_eq!(cache.room, CHUNK);
        cache.reserve(CHUNK + 1);
        assert_eq!(cache.room, 2 * CHUNK);
        cache.reserve(590);
        assert_eq!(cache.room, 608, "the context in whole key blocks");
        assert_eq!(cache.bytes(), 2 * 2 * 608 * 4 * 2);

        let view = cache.layer(1);
        // Block 1, position 3 in it.
        let (h0, h1) = (view.tile(1, 0), view.tile(1, 1));
        let key = |t: &[u16], d: usize| from_f16(t[d * KEY_BLOCK + 3]);
        let value = |t: &[u16], d: usize| from_f16(t[2 * KEY_BLOCK + 3 * 2 + d]);
        assert_eq!(
            [key(h0, 0), key(h0, 1), key(h1, 0), key(h1, 1)],
            [1.0, 2.0, 3.0, 4.0]
        );
        assert_eq!(
            [value(h0, 0), value(h0, 1), value(h1, 0), value(h1, 1)],
            [5.0, 6.0, 7.0, 8.0]
        );
        assert_eq!(key(h0, 0) + from_f16(h0[2]), 1.0, "position 2 is empty");
        cache.truncate(3);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.room, 608);
    }

    #[test]
    fn values_are_rounded_to_f16_and_clamped_to_its_range() {
        assert_eq!(from_f16(to_f16(0.1)), 0.099_975_586);
        assert_eq!(from_f16(to_f16(1e9)), 65504.0);
        assert_eq!(from_f16(to_f16(f32::NEG_INFINITY)), -65504.0);
    }
}
