//! L1b, the host's half: the tool calls and tool results of the
//! conversation history, cut with a note when the prompt is over its
//! budget.
//!
//! A tool call's arguments travel beside its message's text (the
//! request's `tool_calls`), so the token-economics skill, which sees the
//! sections' texts, cannot cut them: its plan asks for this level (by
//! applying [`TrimLevels::TOOL_CALLS`] with no edit) and the host cuts.
//! What is cut:
//!
//! - an assistant message's calls whose arguments are over
//!   [`KEPT_BYTES`]: when they are a JSON object, every string in them
//!   longer than [`HEAD_BYTES`] keeps its start and ends with
//!   `… [cut: 1,840 bytes of arguments]`, so the arguments stay JSON (a
//!   server may parse them) and the model still sees which tool it
//!   called with what; arguments that are not JSON, or still over twice
//!   [`KEPT_BYTES`] after that, become `{"note": "[cut: 2,013 bytes of
//!   arguments]"}`;
//! - a tool result (a `tool` message of the history) over [`KEPT_BYTES`]:
//!   its first [`HEAD_BYTES`], then `[cut: 3,120 bytes of this result]`.
//!
//! Which: every oversized call and result of the **past turns** at once —
//! a cut text is the same from one cycle to the next, so a provider that
//! keeps its KV cache reads the history again only from where it changed
//! — then, only while the prompt is still over its budget, those of the
//! **current turn** (the history after the turn's user message, in a
//! cycle that continues after tool calls), oldest first. The tool results
//! of this cycle (component 7000) are never cut: they are what the model
//! is asked about. The session keeps every call and result whole: the
//! cut is the prompt's only.
//!
//! [`TrimLevels::TOOL_CALLS`]: foveal_sdk::prompt::TrimLevels::TOOL_CALLS

use std::sync::Arc;

use foveal_sdk::Role;
use foveal_sdk::prompt::{SectionKind, ids};

use super::budget::Counter;
use super::{CallPart, PromptSection, Text, ToolCallRecord};

/// A call's arguments, or a tool result, of at most this many bytes is
/// never cut.
pub const KEPT_BYTES: usize = 512;

/// What is kept of a cut string or result: its first bytes (at a
/// character boundary).
pub const HEAD_BYTES: usize = 200;

/// Cuts the history's oversized tool calls and results: all of the past
/// turns', then the current turn's, oldest first, until the sections fit
/// `budget` tokens. Each cut section is counted again with `counter`.
/// Whether anything was cut.
pub(crate) fn cut(sections: &mut [PromptSection], budget: u32, counter: &mut Counter) -> bool {
    // A cycle that starts a turn has its pending event: the whole history
    // is past. One that continues after tool calls has none: its turn
    // began at the last user message of the history.
    let turn_start = if sections.iter().any(|s| s.id == ids::PENDING_EVENT) {
        sections.len()
    } else {
        sections
            .iter()
            .rposition(|s| s.kind == SectionKind::HISTORY && s.role == Role::USER)
            .unwrap_or(0)
    };
    let budget = u64::from(budget);
    let mut total: u64 = sections.iter().map(|s| u64::from(s.tokens)).sum();
    let mut any = false;
    for (i, section) in sections.iter_mut().enumerate() {
        if i >= turn_start && total <= budget {
            break;
        }
        let before = section.tokens;
        if cut_section(section) {
            any = true;
            let after = counter.section_tokens(section);
            section.tokens = after;
            total = total.saturating_sub(u64::from(before)) + u64::from(after);
        }
    }
    any
}

/// Cuts one history section's oversized calls or result; whether it did.
fn cut_section(section: &mut PromptSection) -> bool {
    if section.kind != SectionKind::HISTORY {
        return false;
    }
    let (call, text) = match &section.call {
        Some(CallPart::Calls(calls)) => {
            let cuts: Vec<Option<String>> =
                calls.iter().map(|c| cut_arguments(&c.arguments)).collect();
            if cuts.iter().all(Option::is_none) {
                return false;
            }
            let cut: Vec<ToolCallRecord> = calls
                .iter()
                .zip(cuts)
                .map(|(c, cut)| ToolCallRecord {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: cut.unwrap_or_else(|| c.arguments.clone()),
                })
                .collect();
            (Some(CallPart::Calls(Arc::from(cut))), None)
        }
        Some(CallPart::Result(_)) if section.role == Role::TOOL => {
            match cut_result(section.text.as_str()) {
                Some(text) => (None, Some(Text::Owned(text))),
                None => return false,
            }
        }
        _ => return false,
    };
    if let Some(call) = call {
        section.call = Some(call);
    }
    if let Some(text) = text {
        section.text = text;
    }
    true
}

/// A call's arguments cut as this level cuts them, or none when they are
/// short enough to keep (the module's documentation says how).
pub fn cut_arguments(arguments: &str) -> Option<String> {
    if arguments.len() <= KEPT_BYTES {
        return None;
    }
    if let Ok(mut value) = serde_json::from_str::<serde_json::Value>(arguments)
        && value.is_object()
    {
        let mut shortened = false;
        shorten_strings(&mut value, &mut shortened);
        if !shortened && arguments.len() <= 2 * KEPT_BYTES {
            return None;
        }
        let text = value.to_string();
        if shortened && text.len() <= 2 * KEPT_BYTES {
            return Some(text);
        }
    }
    Some(
        serde_json::json!({
            "note": format!("[cut: {} bytes of arguments]", thousands(arguments.len()))
        })
        .to_string(),
    )
}

/// A tool result cut as this level cuts it, or none when it is short
/// enough to keep.
pub fn cut_result(text: &str) -> Option<String> {
    if text.len() <= KEPT_BYTES {
        return None;
    }
    let end = floor_boundary(text, HEAD_BYTES);
    Some(format!(
        "{}…\n[cut: {} bytes of this result]",
        &text[..end],
        thousands(text.len() - end)
    ))
}

/// Every string of `value` longer than [`HEAD_BYTES`] cut to its start
/// and a note; `shortened` is set when one was.
fn shorten_strings(value: &mut serde_json::Value, shortened: &mut bool) {
    match value {
        serde_json::Value::String(s) if s.len() > HEAD_BYTES => {
            let end = floor_boundary(s, HEAD_BYTES);
            let removed = s.len() - end;
            s.truncate(end);
            s.push_str("… [cut: ");
            s.push_str(&thousands(removed));
            s.push_str(" bytes of arguments]");
            *shortened = true;
        }
        serde_json::Value::Array(items) => {
            for item in items {
                shorten_strings(item, shortened);
            }
        }
        serde_json::Value::Object(map) => {
            for item in map.values_mut() {
                shorten_strings(item, shortened);
            }
        }
        _ => {}
    }
}

/// The largest character boundary of `text` at or before `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `n` with a comma between each group of three digits (`2,013`).
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn journal_arguments(bytes: usize) -> String {
        let text: String = "The walk by the river was long and quiet. "
            .chars()
            .cycle()
            .take(bytes)
            .collect();
        serde_json::json!({"title": "Tuesday", "text": text}).to_string()
    }

    fn section(role: Role, id: u32, text: &str, call: Option<CallPart>) -> PromptSection {
        let kind = match id {
            ids::CONVERSATION_HISTORY => SectionKind::HISTORY,
            ids::PENDING_EVENT => SectionKind::MESSAGE,
            _ => SectionKind::FIXED,
        };
        PromptSection {
            id,
            key: Cow::Borrowed("test"),
            name: Cow::Borrowed("test"),
            role,
            kind,
            text: Text::Owned(text.to_owned()),
            tokens: 0,
            call,
        }
    }

    fn calls(id: &str, arguments: &str) -> Option<CallPart> {
        Some(CallPart::Calls(Arc::from(vec![ToolCallRecord {
            id: id.to_owned(),
            name: "add_journal_entry".to_owned(),
            arguments: arguments.to_owned(),
        }])))
    }

    fn total(sections: &[PromptSection]) -> u32 {
        sections.iter().map(|s| s.tokens).sum()
    }

    fn arguments_of(section: &PromptSection) -> &str {
        match &section.call {
            Some(CallPart::Calls(calls)) => calls[0].arguments.as_str(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(2013), "2,013");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn short_arguments_and_results_are_kept() {
        assert_eq!(cut_arguments(r#"{"id": "docs"}"#), None);
        assert_eq!(cut_arguments(&journal_arguments(400)), None);
        assert_eq!(cut_result(&"x".repeat(KEPT_BYTES)), None);
    }

    #[test]
    fn long_json_arguments_stay_json_with_each_long_string_cut() {
        let arguments = journal_arguments(2000);
        let cut = cut_arguments(&arguments).unwrap();
        let value: serde_json::Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(value["title"], "Tuesday");
        let text = value["text"].as_str().unwrap();
        assert!(text.starts_with("The walk by the river"), "{text}");
        assert!(
            text.ends_with("… [cut: 1,800 bytes of arguments]"),
            "{text}"
        );
        assert!(cut.len() < KEPT_BYTES, "{}", cut.len());
    }

    #[test]
    fn arguments_that_are_not_json_or_stay_long_become_a_note() {
        let bad = format!("{{\"text\": \"{}", "a".repeat(2000));
        assert_eq!(bad.len(), 2010);
        assert_eq!(
            cut_arguments(&bad).unwrap(),
            r#"{"note":"[cut: 2,010 bytes of arguments]"}"#
        );
        // Many short strings: nothing to shorten, still long.
        let many: serde_json::Map<String, serde_json::Value> = (0..200)
            .map(|i| (format!("k{i}"), serde_json::Value::from("short")))
            .collect();
        let many = serde_json::Value::Object(many).to_string();
        let cut = cut_arguments(&many).unwrap();
        assert!(cut.starts_with(r#"{"note":"[cut: "#), "{cut}");
    }

    #[test]
    fn a_long_result_keeps_its_start_and_says_how_much_was_cut() {
        // `é` is two bytes, across the 200th: the cut comes before it.
        let result = format!("{}é{}", "a".repeat(199), "z".repeat(3000));
        let cut = cut_result(&result).unwrap();
        assert_eq!(
            cut,
            format!("{}…\n[cut: 3,002 bytes of this result]", "a".repeat(199))
        );
    }

    #[test]
    fn past_turns_are_cut_whole_and_the_current_turn_only_as_far_as_needed() {
        let long = journal_arguments(2000);
        let result = "r".repeat(1000);
        let mut sections = [
            section(Role::SYSTEM, ids::SYSTEM_PROMPT, "system", None),
            // A past turn.
            section(Role::USER, ids::CONVERSATION_HISTORY, "write it", None),
            section(
                Role::ASSISTANT,
                ids::CONVERSATION_HISTORY,
                "",
                calls("call_0", &long),
            ),
            section(
                Role::TOOL,
                ids::CONVERSATION_HISTORY,
                &result,
                Some(CallPart::Result(Arc::from("call_0"))),
            ),
            // The current turn, continuing after two calls.
            section(Role::USER, ids::CONVERSATION_HISTORY, "and again", None),
            section(
                Role::ASSISTANT,
                ids::CONVERSATION_HISTORY,
                "",
                calls("call_1", &long),
            ),
            section(
                Role::TOOL,
                ids::CONVERSATION_HISTORY,
                &result,
                Some(CallPart::Result(Arc::from("call_1"))),
            ),
            section(
                Role::ASSISTANT,
                ids::CONVERSATION_HISTORY,
                "",
                calls("call_2", &long),
            ),
            section(Role::TOOL, ids::TOOL_RESULT, &result, None),
        ];
        let mut counter = Counter::new(crate::prompt::budget::Memo::default());
        for s in &mut sections {
            let n = counter.section_tokens(s);
            s.tokens = n;
        }
        let full = total(&sections);
        // The past turn's call and result are over 2,900 bytes; cutting
        // them alone is enough.
        let mut fits_after_past = sections.clone();
        assert!(cut(&mut fits_after_past, full - 2000, &mut counter));
        assert!(arguments_of(&fits_after_past[2]).contains("[cut: "));
        assert!(
            fits_after_past[3]
                .text
                .as_str()
                .ends_with("[cut: 800 bytes of this result]")
        );
        for (kept, whole) in fits_after_past[4..].iter().zip(&sections[4..]) {
            assert_eq!(kept.text.as_str(), whole.text.as_str());
            assert_eq!(kept.call, whole.call);
        }
        assert!(total(&fits_after_past) <= full - 2000);
        // A smaller budget: the current turn's, oldest first, as far as
        // needed: its first call, not its second, nor this cycle's result.
        let past_saved = full - total(&fits_after_past);
        let mut current = sections.clone();
        assert!(cut(&mut current, full - past_saved - 1000, &mut counter));
        assert!(arguments_of(&current[5]).contains("[cut: "));
        assert_eq!(arguments_of(&current[7]), long);
        assert_eq!(current[8].text.as_str(), result);
        // A budget nothing can reach: every call and result of the
        // history is cut, and still nothing of this cycle.
        let mut all = sections.clone();
        assert!(cut(&mut all, 1, &mut counter));
        assert!(arguments_of(&all[7]).contains("[cut: "));
        assert_eq!(all[8].text.as_str(), result);
        // Each section's count is its text and its calls.
        for s in &all {
            assert_eq!(s.tokens, counter.section_tokens(s));
        }
    }

    #[test]
    fn a_turn_that_starts_has_only_past_turns_and_nothing_short_is_cut() {
        let long = journal_arguments(2000);
        let mut sections = [
            section(Role::USER, ids::CONVERSATION_HISTORY, "write it", None),
            section(
                Role::ASSISTANT,
                ids::CONVERSATION_HISTORY,
                "",
                calls("call_0", &long),
            ),
            section(
                Role::ASSISTANT,
                ids::CONVERSATION_HISTORY,
                "",
                calls("call_1", r#"{"id": "docs"}"#),
            ),
            section(Role::USER, ids::PENDING_EVENT, "now", None),
        ];
        let mut counter = Counter::new(crate::prompt::budget::Memo::default());
        // Even under the budget: the level was asked for, and the past
        // turns' oversized calls are cut whole.
        assert!(cut(&mut sections, u32::MAX, &mut counter));
        assert!(arguments_of(&sections[1]).contains("[cut: "));
        assert_eq!(arguments_of(&sections[2]), r#"{"id": "docs"}"#);
        let mut short = [sections[2].clone(), sections[3].clone()];
        assert!(!cut(&mut short, 0, &mut counter));
    }
}
