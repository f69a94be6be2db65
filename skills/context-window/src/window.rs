//! The window: seed 002's context manager, bounded in items and in tokens.
//!
//! Items are kept in a [`Ring`] of `max_items` slots, oldest first. Adding
//! to a full window evicts the oldest in O(1) (the seed's `subseq` was
//! O(n): L-001). Each item's tokens — of its rendered block, counted when
//! it is added — are summed, and when `max_tokens` is set the oldest items
//! are evicted until the new one fits (the seed had no token bound: L-002);
//! each item is evicted at most once, so adding stays O(1) amortised. An
//! item larger than `max_tokens` on its own is refused, and nothing is
//! evicted for it.
//!
//! # Example
//!
//! ```ignore
//! let mut window = Window::new(Limits { max_items: 2, max_tokens: 0 })?;
//! window.add_content(ItemType::Code, "a".into(), None, 1, 3)?;
//! window.add_content(ItemType::Text, "b".into(), None, 2, 3)?;
//! let (_, evicted) = window.add_content(ItemType::Error, "c".into(), None, 3, 3)?;
//! assert_eq!(evicted[0].id, "ctx-1");
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::item::{Item, ItemType};
use crate::ring::Ring;

/// The default capacity (seed 002).
pub const DEFAULT_MAX_ITEMS: usize = 50;
/// The largest capacity (seed 002's schema).
pub const MAX_MAX_ITEMS: usize = 1000;

/// How large a window may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Items, 1 to 1000 (INV-005: never 0).
    pub max_items: usize,
    /// Tokens of all items' blocks together; 0 for no bound.
    pub max_tokens: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_items: DEFAULT_MAX_ITEMS,
            max_tokens: 0,
        }
    }
}

impl Limits {
    /// Checks the bounds (INV-005, which the seed only assumed).
    pub fn check(self) -> Result<Self, String> {
        if !(1..=MAX_MAX_ITEMS).contains(&self.max_items) {
            return Err(format!(
                "max_items must be from 1 to {MAX_MAX_ITEMS}, not {}",
                self.max_items
            ));
        }
        Ok(self)
    }
}

#[derive(Debug, Clone)]
struct Entry {
    item: Item,
    tokens: u32,
}

/// A sliding window of context items.
#[derive(Debug, Clone)]
pub struct Window {
    ring: Ring<Entry>,
    max_tokens: u32,
    tokens: u64,
    next_id: u64,
}

/// The window as JSON: seed 002's context-manager object (`items`,
/// `max_items`) with the token bound and the next id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// The items, oldest first.
    pub items: Vec<Item>,
    /// The capacity.
    pub max_items: usize,
    /// The token bound (0: none).
    #[serde(default)]
    pub max_tokens: u32,
    /// The number the next item's id gets (ids are never reused).
    #[serde(default)]
    pub next_id: u64,
}

impl Window {
    /// An empty window.
    pub fn new(limits: Limits) -> Result<Self, String> {
        let limits = limits.check()?;
        Ok(Self {
            ring: Ring::new(limits.max_items),
            max_tokens: limits.max_tokens,
            tokens: 0,
            next_id: 1,
        })
    }

    /// The capacity in items.
    pub fn max_items(&self) -> usize {
        self.ring.capacity()
    }

    /// The bound in tokens (0: none).
    pub fn max_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// The items' tokens together.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// How many items it holds.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// The items, oldest first.
    pub fn items(&self) -> impl DoubleEndedIterator<Item = &Item> + ExactSizeIterator + Clone {
        self.ring.iter().map(|e| &e.item)
    }

    /// The items with their tokens, oldest first.
    pub fn items_with_tokens(&self) -> impl DoubleEndedIterator<Item = (&Item, u32)> {
        self.ring.iter().map(|e| (&e.item, e.tokens))
    }

    /// The newest item's timestamp.
    fn newest_timestamp(&self) -> Option<i64> {
        self.ring.back().map(|e| e.item.timestamp)
    }

    /// Seed 002's `add-context` with raw content: the window gives the id
    /// (`ctx-N`) and the timestamp (`now`, or the newest item's if the
    /// clock went back: the window stays in chronological order,
    /// INV-002). `count` gives what the item costs in tokens (the host
    /// counts its rendered block, [`crate::render::block`]). Returns the
    /// item and the items evicted for it, oldest first.
    pub fn add_content(
        &mut self,
        kind: ItemType,
        content: String,
        metadata: Option<Map<String, Value>>,
        now: i64,
        count: &dyn Fn(&Item) -> u32,
    ) -> Result<(Item, Vec<Item>), String> {
        let item = self.prepare(kind, content, metadata, now)?;
        let tokens = count(&item);
        let evicted = self.push(item.clone(), tokens)?;
        Ok((item, evicted))
    }

    /// The item raw content would become, checked, without adding it.
    fn prepare(
        &self,
        kind: ItemType,
        content: String,
        metadata: Option<Map<String, Value>>,
        now: i64,
    ) -> Result<Item, String> {
        let timestamp = self.newest_timestamp().map_or(now, |t| now.max(t));
        let item = Item {
            id: format!("ctx-{}", self.next_id),
            kind,
            content,
            metadata,
            timestamp,
        };
        item.validate()?;
        Ok(item)
    }

    /// Seed 002's `add-context` with an existing item. Its id must be one
    /// this window has not given (`ctx-N` with N at least the next id:
    /// ids are never reused, so a command naming an id cannot reach a
    /// later item), and its timestamp not before the newest item's
    /// (INV-002). Returns the items evicted for it, oldest first.
    pub fn add(&mut self, item: Item, tokens: u32) -> Result<Vec<Item>, String> {
        item.validate()?;
        let number = item.number().expect("validated");
        if number < self.next_id {
            return Err(format!(
                "id {} is taken: this window has given ids up to ctx-{}; leave the id out to get a new one",
                item.id,
                self.next_id - 1
            ));
        }
        if let Some(newest) = self.newest_timestamp()
            && item.timestamp < newest
        {
            return Err(format!(
                "{}: timestamp {} is before the newest item's ({newest}); the window is in chronological order",
                item.id, item.timestamp
            ));
        }
        self.push(item, tokens)
    }

    /// Appends a checked item, evicting what it needs: O(1) amortised.
    fn push(&mut self, item: Item, tokens: u32) -> Result<Vec<Item>, String> {
        if self.max_tokens > 0 && tokens > self.max_tokens {
            return Err(format!(
                "{} takes {tokens} tokens, more than the window holds (max_tokens {}); attach a smaller part (--lines) or raise window.max_tokens",
                item.id, self.max_tokens
            ));
        }
        let number = item.number().expect("validated");
        let mut evicted = Vec::new();
        if self.max_tokens > 0 {
            while self.tokens + u64::from(tokens) > u64::from(self.max_tokens) {
                let Some(old) = self.ring.pop_front() else {
                    break;
                };
                self.tokens -= u64::from(old.tokens);
                evicted.push(old.item);
            }
        }
        if let Some(old) = self.ring.push_back(Entry { item, tokens }) {
            self.tokens -= u64::from(old.tokens);
            evicted.push(old.item);
        }
        self.tokens += u64::from(tokens);
        self.next_id = self.next_id.max(number + 1);
        Ok(evicted)
    }

    /// Removes the item `id` (L-004: the seed could only clear all).
    pub fn remove(&mut self, id: &str) -> Result<Item, String> {
        let Some(index) = self.items().position(|i| i.id == id) else {
            let ids: Vec<&str> = self.items().map(|i| i.id.as_str()).collect();
            return Err(if ids.is_empty() {
                format!("no item {id} in the window: it is empty")
            } else {
                format!(
                    "no item {id} in the window; its items are {}",
                    ids.join(", ")
                )
            });
        };
        let entry = self.ring.remove(index).expect("the index is in range");
        self.tokens -= u64::from(entry.tokens);
        Ok(entry.item)
    }

    /// Seed 002's `clear-context`: drops every item; returns how many.
    /// Ids go on from where they were.
    pub fn clear(&mut self) -> usize {
        let n = self.ring.len();
        self.ring.clear();
        self.tokens = 0;
        n
    }

    /// Seed 002's `get-context`: the items of the given types (all when
    /// none), the most recent `limit` of them (all when none), in
    /// chronological order.
    pub fn get(&self, types: &[ItemType], limit: Option<usize>) -> Vec<&Item> {
        let limit = limit.unwrap_or(usize::MAX);
        let mut out: Vec<&Item> = self
            .items()
            .rev()
            .filter(|i| types.is_empty() || types.contains(&i.kind))
            .take(limit)
            .collect();
        out.reverse();
        out
    }

    /// Seed 002's `context-to-string` ([`crate::render`]).
    pub fn render(&self) -> String {
        crate::render::render(self.items())
    }

    /// The rendering within `budget` tokens: the newest items whose blocks
    /// fit (the header counted as `header_tokens`), oldest first; and how
    /// many older items were left out.
    pub fn render_within(&self, budget: u32, header_tokens: u32) -> (String, usize) {
        let mut room = u64::from(budget).saturating_sub(u64::from(header_tokens));
        let mut kept = 0;
        for entry in self.ring.iter().rev() {
            if u64::from(entry.tokens) > room {
                break;
            }
            room -= u64::from(entry.tokens);
            kept += 1;
        }
        let skip = self.len() - kept;
        (crate::render::render(self.items().skip(skip)), skip)
    }

    /// The window as JSON.
    pub fn state(&self) -> State {
        State {
            items: self.items().cloned().collect(),
            max_items: self.max_items(),
            max_tokens: self.max_tokens,
            next_id: self.next_id,
        }
    }

    /// A window from its JSON and the limits in force now (which win over
    /// the state's: the configuration may have changed). Every item is
    /// checked: ids unique and increasing, timestamps in order. When the
    /// limits are smaller than the state, the oldest items are evicted and
    /// returned. `count` gives an item's tokens.
    pub fn from_state(
        state: State,
        limits: Limits,
        count: &dyn Fn(&Item) -> u32,
    ) -> Result<(Self, Vec<Item>), String> {
        let mut window = Self::new(limits)?;
        let mut evicted = Vec::new();
        let mut previous: Option<(u64, i64)> = None;
        for (n, item) in state.items.into_iter().enumerate() {
            item.validate().map_err(|e| format!("item {n}: {e}"))?;
            let number = item.number().expect("validated");
            if let Some((last, time)) = previous {
                if number <= last {
                    return Err(format!(
                        "item {n}: id {} does not come after ctx-{last}",
                        item.id
                    ));
                }
                if item.timestamp < time {
                    return Err(format!(
                        "item {n}: {} is older than the item before it",
                        item.id
                    ));
                }
            }
            previous = Some((number, item.timestamp));
            let tokens = count(&item);
            if limits.max_tokens > 0 && tokens > limits.max_tokens {
                // Too large on its own for the bound in force now: it
                // goes, the items around it stay.
                window.next_id = window.next_id.max(number + 1);
                evicted.push(item);
                continue;
            }
            evicted.extend(window.push(item, tokens)?);
        }
        window.next_id = window.next_id.max(state.next_id);
        Ok((window, evicted))
    }
}
