//! A ring buffer of fixed capacity: the window's storage.
//!
//! Seed 002 evicted with `(subseq items 1)` and a new array: O(n) in the
//! capacity on every add once full (its L-001). Here the slots are
//! allocated once; the oldest item is at `head`, and pushing onto a full
//! ring overwrites it and moves `head` on: O(1), no allocation, no move of
//! the other items.
//!
//! Removing one item from the middle (`remove`, which the seed did not
//! have: L-004) shifts the items after it by one slot, O(n): it is a
//! user's command, not the hot path.

/// A FIFO ring of at most `capacity` values, oldest first.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    slots: Box<[Option<T>]>,
    /// The slot of the oldest value.
    head: usize,
    len: usize,
}

impl<T> Ring<T> {
    /// An empty ring of `capacity` slots (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            slots: (0..capacity).map(|_| None).collect(),
            head: 0,
            len: 0,
        }
    }

    /// How many values it holds at most.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// How many values it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it holds `capacity` values.
    pub fn is_full(&self) -> bool {
        self.len == self.slots.len()
    }

    fn slot(&self, index: usize) -> usize {
        let i = self.head + index;
        if i >= self.slots.len() {
            i - self.slots.len()
        } else {
            i
        }
    }

    /// Appends `value` as the newest. On a full ring the oldest value is
    /// evicted to make room and returned: O(1) either way.
    pub fn push_back(&mut self, value: T) -> Option<T> {
        if self.is_full() {
            let evicted = self.slots[self.head].replace(value);
            self.head = self.slot(1);
            evicted
        } else {
            let at = self.slot(self.len);
            self.slots[at] = Some(value);
            self.len += 1;
            None
        }
    }

    /// Removes and returns the oldest value: O(1).
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots[self.head].take();
        self.head = self.slot(1);
        self.len -= 1;
        value
    }

    /// The value at `index`, 0 being the oldest.
    pub fn get(&self, index: usize) -> Option<&T> {
        if index >= self.len {
            return None;
        }
        self.slots[self.slot(index)].as_ref()
    }

    /// The newest value.
    pub fn back(&self) -> Option<&T> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// Removes the value at `index` (0 the oldest), keeping the order of
    /// the others: O(n).
    pub fn remove(&mut self, index: usize) -> Option<T> {
        if index >= self.len {
            return None;
        }
        let value = self.slots[self.slot(index)].take();
        for i in index..self.len - 1 {
            let (from, to) = (self.slot(i + 1), self.slot(i));
            self.slots[to] = self.slots[from].take();
        }
        self.len -= 1;
        value
    }

    /// Drops every value; the slots stay allocated.
    pub fn clear(&mut self) {
        for slot in self.slots.iter_mut() {
            *slot = None;
        }
        self.head = 0;
        self.len = 0;
    }

    /// The values, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator + Clone {
        (0..self.len).map(move |i| {
            self.slots[self.slot(i)]
                .as_ref()
                .expect("the slots from head to head + len are filled")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn a_full_ring_evicts_the_oldest() {
        let mut ring = Ring::new(3);
        assert_eq!(ring.push_back(1), None);
        assert_eq!(ring.push_back(2), None);
        assert_eq!(ring.push_back(3), None);
        assert!(ring.is_full());
        assert_eq!(ring.push_back(4), Some(1));
        assert_eq!(ring.iter().copied().collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(ring.get(0), Some(&2));
        assert_eq!(ring.back(), Some(&4));
        assert_eq!(ring.remove(1), Some(3));
        assert_eq!(ring.iter().copied().collect::<Vec<_>>(), [2, 4]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32),
        Pop,
        Remove(usize),
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => any::<u32>().prop_map(Op::Push),
            2 => Just(Op::Pop),
            2 => (0usize..12).prop_map(Op::Remove),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// The ring behaves as a bounded `VecDeque` that drops its front.
        #[test]
        fn the_ring_is_a_bounded_fifo(capacity in 1usize..10, ops in proptest::collection::vec(op(), 0..200)) {
            let mut ring = Ring::new(capacity);
            let mut model: VecDeque<u32> = VecDeque::new();
            let cap = capacity;
            for op in ops {
                match op {
                    Op::Push(v) => {
                        let evicted = ring.push_back(v);
                        model.push_back(v);
                        let expected = if model.len() > cap { model.pop_front() } else { None };
                        prop_assert_eq!(evicted, expected);
                    }
                    Op::Pop => prop_assert_eq!(ring.pop_front(), model.pop_front()),
                    Op::Remove(i) => prop_assert_eq!(ring.remove(i), model.remove(i)),
                    Op::Clear => { ring.clear(); model.clear(); }
                }
                prop_assert!(ring.len() <= ring.capacity());
                prop_assert_eq!(ring.iter().copied().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
                prop_assert_eq!(ring.len(), model.len());
            }
        }
    }
}
