//! Seed 002's invariants as property tests, over random sequences of
//! adds (raw content and existing items, with clocks that go back), removes,
//! clears and changes of limits, against a plain model of the window.

use std::collections::VecDeque;

use proptest::prelude::*;

use crate::item::{Item, ItemType};
use crate::window::{Limits, MAX_MAX_ITEMS, Window};

#[derive(Debug, Clone)]
enum Op {
    Add { kind: usize, len: usize, now: i64 },
    AddItem { skip: u64, len: usize, back: i64 },
    Remove(usize),
    Clear,
    Relimit { max_items: usize, max_tokens: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0usize..6, 1usize..40, -5i64..50).prop_map(|(kind, len, now)| Op::Add { kind, len, now }),
        2 => (0u64..3, 1usize..40, 0i64..3).prop_map(|(skip, len, back)| Op::AddItem { skip, len, back }),
        2 => (0usize..20).prop_map(Op::Remove),
        1 => Just(Op::Clear),
        1 => (1usize..12, prop_oneof![Just(0u32), 10u32..200]).prop_map(|(max_items, max_tokens)| Op::Relimit { max_items, max_tokens }),
    ]
}

/// Tokens of an item: its content's bytes (what the bound is checked on).
fn tokens(item: &Item) -> u32 {
    u32::try_from(item.content.len()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_invariants_hold_after_any_sequence(
        max_items in 1usize..12,
        max_tokens in prop_oneof![Just(0u32), 10u32..200],
        ops in proptest::collection::vec(op(), 0..120),
    ) {
        let mut limits = Limits { max_items, max_tokens };
        let mut window = Window::new(limits).unwrap();
        // The model: what the window should hold, oldest first.
        let mut model: VecDeque<Item> = VecDeque::new();
        let mut next_id = 1u64;
        let mut clock = 0i64;
        for op in ops {
            match op {
                Op::Add { kind, len, now } => {
                    let content = "x".repeat(len);
                    let t = u32::try_from(len).unwrap();
                    let result = window.add_content(ItemType::ALL[kind], content, None, now, &|_| t);
                    let Limits { max_items, max_tokens } = limits;
                    if max_tokens > 0 && t > max_tokens {
                        prop_assert!(result.is_err(), "an item over max_tokens was added");
                        continue;
                    }
                    let (item, evicted) = result.unwrap();
                    prop_assert_eq!(&item.id, &format!("ctx-{next_id}"));
                    next_id += 1;
                    // The newest item's time when the clock went back.
                    let newest = model.back().map(|i| i.timestamp);
                    prop_assert_eq!(item.timestamp, newest.map_or(now, |n| now.max(n)));
                    clock = clock.max(now);
                    model.push_back(item);
                    let mut expected = Vec::new();
                    while model.len() > max_items
                        || (max_tokens > 0 && model.iter().map(|i| u64::from(tokens(i))).sum::<u64>() > u64::from(max_tokens))
                    {
                        expected.push(model.pop_front().unwrap());
                    }
                    prop_assert_eq!(evicted, expected, "the oldest are evicted first");
                }
                Op::AddItem { skip, len, back } => {
                    let item = Item {
                        id: format!("ctx-{}", next_id + skip),
                        kind: ItemType::Text,
                        content: "y".repeat(len),
                        metadata: None,
                        timestamp: clock - back,
                    };
                    let t = tokens(&item);
                    let result = window.add(item.clone(), t);
                    let Limits { max_items, max_tokens } = limits;
                    if model.back().is_some_and(|newest| item.timestamp < newest.timestamp) {
                        prop_assert!(result.is_err(), "an item older than the newest was added");
                        continue;
                    }
                    if max_tokens > 0 && t > max_tokens {
                        prop_assert!(result.is_err());
                        continue;
                    }
                    result.unwrap();
                    next_id += skip + 1;
                    model.push_back(item);
                    while model.len() > max_items
                        || (max_tokens > 0 && model.iter().map(|i| u64::from(tokens(i))).sum::<u64>() > u64::from(max_tokens))
                    {
                        model.pop_front();
                    }
                    // An id already given is refused.
                    let again = Item { id: format!("ctx-{}", next_id - 1), ..model.back().unwrap().clone() };
                    prop_assert!(window.add(again, 1).is_err());
                }
                Op::Remove(i) => {
                    let id = format!("ctx-{}", i + 1);
                    let result = window.remove(&id);
                    match model.iter().position(|m| m.id == id) {
                        Some(at) => prop_assert_eq!(result.unwrap(), model.remove(at).unwrap()),
                        None => prop_assert!(result.is_err()),
                    }
                }
                Op::Clear => {
                    prop_assert_eq!(window.clear(), model.len());
                    model.clear();
                }
                Op::Relimit { max_items: m, max_tokens: t } => {
                    limits = Limits { max_items: m, max_tokens: t };
                    window = Window::from_state(window.state(), limits, &tokens).unwrap().0;
                    // Items too large for the new bound go; then the oldest.
                    model.retain(|i| t == 0 || tokens(i) <= t);
                    while model.len() > m
                        || (t > 0 && model.iter().map(|i| u64::from(tokens(i))).sum::<u64>() > u64::from(t))
                    {
                        model.pop_front();
                    }
                }
            }
            let items: Vec<&Item> = window.items().collect();
            // INV-001: capacity.
            prop_assert!(window.len() <= window.max_items());
            prop_assert!(window.max_items() == limits.max_items);
            // The token bound (L-002), and the sum kept right.
            let sum: u64 = items.iter().map(|i| u64::from(tokens(i))).sum();
            prop_assert_eq!(window.tokens(), sum);
            if limits.max_tokens > 0 {
                prop_assert!(sum <= u64::from(limits.max_tokens));
            }
            // INV-002: chronological order.
            prop_assert!(items.windows(2).all(|p| p[0].timestamp <= p[1].timestamp));
            // INV-003: the oldest at index 0 — exactly the model's order,
            // ids increasing.
            prop_assert_eq!(items.iter().map(|i| i.id.clone()).collect::<Vec<_>>(), model.iter().map(|i| i.id.clone()).collect::<Vec<_>>());
            prop_assert!(items.windows(2).all(|p| p[0].number() < p[1].number()));
            // get: the most recent N of the types, in chronological order.
            for (types, limit) in [(vec![], None), (vec![ItemType::Text], Some(2)), (vec![ItemType::Code, ItemType::Error], Some(1)), (vec![], Some(0))] {
                let got: Vec<String> = window.get(&types, limit).into_iter().map(|i| i.id.clone()).collect();
                let matching: Vec<String> = model.iter().filter(|i| types.is_empty() || types.contains(&i.kind)).map(|i| i.id.clone()).collect();
                let n = limit.unwrap_or(usize::MAX).min(matching.len());
                prop_assert_eq!(got, matching[matching.len() - n..].to_vec());
            }
            // The state round-trips.
            let (reopened, evicted) = Window::from_state(window.state(), limits, &tokens).unwrap();
            prop_assert!(evicted.is_empty());
            prop_assert_eq!(reopened.state(), window.state());
        }
    }

    /// INV-005: a window's capacity is from 1 to 1000, checked (the seed
    /// only assumed it).
    #[test]
    fn inv005_the_capacity_is_checked(max_items in 0usize..2000) {
        let made = Window::new(Limits { max_items, max_tokens: 0 });
        prop_assert_eq!(made.is_ok(), (1..=MAX_MAX_ITEMS).contains(&max_items));
        if let Ok(window) = made {
            prop_assert!(window.max_items() > 0);
        }
    }
}

/// INV-004 (the seed's adjustable vector with a fill pointer): here the
/// storage is a ring of exactly `max_items` slots, allocated once — adding
/// at capacity moves no other item.
#[test]
fn inv004_the_storage_is_allocated_once() {
    let mut window = Window::new(Limits {
        max_items: 3,
        max_tokens: 0,
    })
    .unwrap();
    for i in 0..10 {
        window
            .add_content(ItemType::Text, format!("{i}"), None, i, &|_| 1)
            .unwrap();
        assert_eq!(window.max_items(), 3);
    }
    let first = window.items().next().unwrap() as *const Item;
    window
        .add_content(ItemType::Text, "x".into(), None, 11, &|_| 1)
        .unwrap();
    let second = window.items().next().unwrap() as *const Item;
    // The item that was second is now first, in the slot it had.
    assert_ne!(first, second);
    assert_eq!(
        window
            .items()
            .map(|i| i.content.as_str())
            .collect::<Vec<_>>(),
        ["8", "9", "x"]
    );
}

/// L-001: at capacity an add evicts the oldest (see the benchmark for its
/// cost, O(1)).
#[test]
fn l001_an_add_at_capacity_evicts_exactly_the_oldest() {
    let mut window = Window::new(Limits {
        max_items: 1000,
        max_tokens: 0,
    })
    .unwrap();
    for i in 0..1000 {
        window
            .add_content(ItemType::Code, format!("{i}"), None, i, &|_| 1)
            .unwrap();
    }
    let (_, evicted) = window
        .add_content(ItemType::Code, "new".into(), None, 1000, &|_| 1)
        .unwrap();
    assert_eq!(evicted.len(), 1);
    assert_eq!(evicted[0].id, "ctx-1");
    assert_eq!(window.len(), 1000);
    assert_eq!(window.items().next().unwrap().id, "ctx-2");
}

/// L-002: a token bound evicts the oldest until the new item fits, and
/// refuses an item that can never fit.
#[test]
fn l002_the_token_bound_evicts_the_oldest_until_it_fits() {
    let mut window = Window::new(Limits {
        max_items: 50,
        max_tokens: 100,
    })
    .unwrap();
    for i in 0..4 {
        window
            .add_content(ItemType::Text, format!("{i}"), None, i, &|_| 30)
            .unwrap();
    }
    assert_eq!(window.len(), 3);
    let (_, evicted) = window
        .add_content(ItemType::Text, "big".into(), None, 9, &|_| 70)
        .unwrap();
    assert_eq!(
        evicted.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        ["ctx-2", "ctx-3"]
    );
    assert_eq!(window.tokens(), 100);
    let err = window
        .add_content(ItemType::Text, "huge".into(), None, 10, &|_| 101)
        .unwrap_err();
    assert!(
        err.contains("more than the window holds (max_tokens 100)"),
        "{err}"
    );
    assert_eq!(window.len(), 2, "nothing was evicted for a refused item");
}

/// L-004: one item can be removed by id; the others keep their order.
#[test]
fn l004_an_item_is_removed_by_id() {
    let mut window = Window::new(Limits::default()).unwrap();
    for i in 0..3 {
        window
            .add_content(ItemType::Text, format!("{i}"), None, i, &|_| 1)
            .unwrap();
    }
    assert_eq!(window.remove("ctx-2").unwrap().content, "1");
    assert_eq!(
        window.items().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        ["ctx-1", "ctx-3"]
    );
    let err = window.remove("ctx-2").unwrap_err();
    assert_eq!(
        err,
        "no item ctx-2 in the window; its items are ctx-1, ctx-3"
    );
}

/// A budget keeps the newest items that fit.
#[test]
fn a_budget_keeps_the_newest_items() {
    let mut window = Window::new(Limits::default()).unwrap();
    for i in 0..5 {
        window
            .add_content(ItemType::Text, format!("item {i}"), None, i, &|_| 10)
            .unwrap();
    }
    let (text, omitted) = window.render_within(25, 3);
    assert_eq!(omitted, 3);
    assert!(
        text.contains("item 3") && text.contains("item 4") && !text.contains("item 2"),
        "{text}"
    );
    let (none, omitted) = window.render_within(5, 3);
    assert_eq!((none.as_str(), omitted), ("", 5));
}
