//! Contract 3: what to trim, and in which order, so that a prompt fits.
//!
//! One call plans one round; the host applies the plan, counts again and
//! calls again with the levels applied so far, until the answer is
//! "fits". Each round goes down the levels it has not applied yet and
//! stops at the first that makes the total fit:
//!
//! 1. **L1** — logs to their last five lines (the host lists logs oldest
//!    first, so these are the newest).
//!
//!    **L1b** — the tool calls and tool results of the conversation
//!    history, cut with a note. The host does the cutting (a call's
//!    arguments travel beside its message's text, which is all this hook
//!    sees), so a round that reaches L1b asks for it and stops, like an
//!    L3 re-rendering; the next round plans on the new counts. Before L2:
//!    a past call's arguments were written by the model and acted on,
//!    their result is recorded (and a write is in the memex), so they are
//!    worth less than the user's standing mandates or the context.
//! 2. **L2** — the prefix rebuilt without the standing mandates.
//! 3. **L3** — when the host can re-render the context (the awareness
//!    skill is loaded) and the other sections leave room: re-render it at
//!    exactly that room, its budget-aware mode keeping the foveal subtree
//!    and dropping detail by priority. Otherwise (or when a re-rendering
//!    still does not fit) the seed's one-line summary
//!    `[Context trimmed: N items]`, N being the context's non-empty lines.
//! 4. **L4** — the oldest conversation history, message by message; the
//!    slot of the newest dropped message says how many were dropped.
//!    **L4b** — the oldest items of the context window (seed 002, what the
//!    user attached), as few as make it fit, replaced by a marker saying
//!    how many. After the history: the user chose those items for the
//!    question at hand, where old messages are only its background; before
//!    the message: it is the question itself.
//! 5. **L5** — the middle of the user's message, cut out and replaced by a
//!    marker saying how much was cut, keeping as much of its start and end
//!    as fits.
//!
//! When even L5 cannot make room — the sections no level may touch (this
//! cycle's tool result, skills' components, the prefix without mandates) exceed the
//! budget alone — the answer is [`SkillError::DOES_NOT_FIT`], which the
//! host reports as an error: never an over-budget prompt.

use abi_stable::std_types::{RArc, ROption, RString, RVec};
use foveal_sdk::SkillError;
use foveal_sdk::prompt::{
    BudgetPlan, BudgetRequest, PrefixRequest, SectionEdit, SectionKind, TrimLevels,
};

use crate::prefix::PrefixCache;

/// Log lines L1 keeps (seed 003).
pub const LOG_LINES_KEPT: usize = 5;

/// The start of the seed's one-line context summary.
pub const SUMMARY_PREFIX: &str = "[Context trimmed: ";

/// Derived texts kept between rounds and cycles, so that an unchanged
/// over-budget prompt is planned without counting anything again.
#[derive(Debug, Default)]
pub struct Trims {
    logs: Option<(String, RArc<RString>, u32)>,
    summary: Option<(usize, RArc<RString>, u32)>,
    message: Option<(String, u32, RArc<RString>, u32)>,
}

/// A plan for one round, from the request and what the skill keeps.
pub fn plan(
    request: &BudgetRequest<'_>,
    prefixes: &mut PrefixCache,
    trims: &mut Trims,
    count: &dyn Fn(&str) -> u32,
) -> Result<BudgetPlan, SkillError> {
    let budget = u64::from(request.budget);
    let sections = request.sections.as_slice();
    let mut tokens: Vec<u64> = sections.iter().map(|s| u64::from(s.tokens)).collect();
    let mut total: u64 = tokens.iter().sum();
    if total <= budget {
        return Ok(BudgetPlan::fits(Some(percent(total, budget))));
    }
    let done = request.applied;
    let mut plan = Plan::default();
    let kind_at = |kind: SectionKind| sections.iter().position(|s| s.kind == kind);

    // L1: logs to their last five lines.
    if !done.contains(TrimLevels::LOGS) {
        for (i, section) in sections.iter().enumerate() {
            if section.kind != SectionKind::LOGS {
                continue;
            }
            let text = section.text.as_str();
            if text.lines().count() <= LOG_LINES_KEPT {
                continue;
            }
            let (kept, t) = match &trims.logs {
                Some((input, kept, t)) if input == text => (kept.clone(), *t),
                _ => {
                    let kept = last_lines(text, LOG_LINES_KEPT);
                    let t = count(&kept);
                    let kept = RArc::new(RString::from(kept));
                    trims.logs = Some((text.to_owned(), kept.clone(), t));
                    (kept, t)
                }
            };
            total = total - tokens[i] + u64::from(t);
            tokens[i] = u64::from(t);
            plan.replace(i, kept, TrimLevels::LOGS);
        }
        if total <= budget {
            return Ok(plan.finish());
        }
    }

    // L1b: the history's tool calls and results cut, by the host.
    if !done.contains(TrimLevels::TOOL_CALLS)
        && sections.iter().any(|s| s.kind == SectionKind::HISTORY)
    {
        plan.applied = plan.applied.union(TrimLevels::TOOL_CALLS);
        return Ok(plan.finish());
    }

    // L2: the prefix without the standing mandates.
    if !done.contains(TrimLevels::MANDATES)
        && !request.prefix.mandates.as_str().trim().is_empty()
        && let Some(i) = kind_at(SectionKind::PREFIX)
    {
        let without = PrefixRequest {
            mandates: "".into(),
            ..request.prefix
        };
        let (text, t) = prefixes.get_counted(&without, count);
        total = total - tokens[i] + u64::from(t);
        tokens[i] = u64::from(t);
        plan.replace(i, text, TrimLevels::MANDATES);
        if total <= budget {
            return Ok(plan.finish());
        }
    }

    // L3: the context, re-rendered at the room left, or summarised.
    if let Some(i) = kind_at(SectionKind::CONTEXT) {
        let text = sections[i].text.as_str();
        let summarised = text.starts_with(SUMMARY_PREFIX);
        if !done.contains(TrimLevels::CONTEXT) {
            let others = total - tokens[i];
            if request.context_renderable && others < budget {
                plan.applied = plan.applied.union(TrimLevels::CONTEXT);
                plan.context_budget = Some(u32::try_from(budget - others).unwrap_or(u32::MAX));
                return Ok(plan.finish());
            }
        }
        if !summarised {
            let (summary, t) = summary(text, trims, count);
            total = total - tokens[i] + u64::from(t);
            tokens[i] = u64::from(t);
            plan.replace(i, summary, TrimLevels::CONTEXT);
        }
        if total <= budget {
            return Ok(plan.finish());
        }
    }

    // L4: the oldest history first.
    if !done.contains(TrimLevels::HISTORY) {
        let history: Vec<usize> = (0..sections.len())
            .filter(|&i| sections[i].kind == SectionKind::HISTORY)
            .collect();
        let mut dropped = 0;
        let mut marker: Option<(String, u32)> = None;
        for &i in &history {
            if total <= budget {
                break;
            }
            total -= tokens[i];
            dropped += 1;
            let text = format!(
                "[{dropped} earlier message{} omitted to fit the token budget]",
                if dropped == 1 { "" } else { "s" }
            );
            let t = count(&text);
            total = total - marker.as_ref().map_or(0, |(_, t)| u64::from(*t)) + u64::from(t);
            marker = Some((text, t));
        }
        if let Some((text, _)) = marker {
            for &i in &history[..dropped - 1] {
                plan.drop(i, TrimLevels::HISTORY);
            }
            plan.replace(
                history[dropped - 1],
                RArc::new(RString::from(text)),
                TrimLevels::HISTORY,
            );
            if total <= budget {
                return Ok(plan.finish());
            }
        }
    }

    // L4b: the oldest items of the context window.
    if !done.contains(TrimLevels::WINDOW)
        && let Some(i) = kind_at(SectionKind::WINDOW)
    {
        let others = total - tokens[i];
        if let Some((text, t)) = window_without_oldest(
            sections[i].text.as_str(),
            budget.saturating_sub(others),
            count,
        ) {
            total = others + u64::from(t);
            tokens[i] = u64::from(t);
            plan.replace(i, RArc::new(RString::from(text)), TrimLevels::WINDOW);
            if total <= budget {
                return Ok(plan.finish());
            }
        }
    }

    // L5: the middle of the user's message.
    if !done.contains(TrimLevels::MESSAGE)
        && let Some(i) = sections
            .iter()
            .rposition(|s| s.kind == SectionKind::MESSAGE)
    {
        let others = total - tokens[i];
        if others < budget {
            let room = u32::try_from(budget - others).unwrap_or(u32::MAX);
            let text = sections[i].text.as_str();
            let cut = match &trims.message {
                Some((input, r, cut, t)) if *r == room && input == text => Some((cut.clone(), *t)),
                _ => cut_middle(text, room, count).map(|(cut, t)| {
                    let cut = RArc::new(RString::from(cut));
                    trims.message = Some((text.to_owned(), room, cut.clone(), t));
                    (cut, t)
                }),
            };
            if let Some((cut, _)) = cut {
                plan.replace(i, cut, TrimLevels::MESSAGE);
                return Ok(plan.finish());
            }
        }
    }

    let mut largest: Vec<(u32, u64)> = sections.iter().map(|s| s.id).zip(tokens).collect();
    largest.sort_by_key(|s| std::cmp::Reverse(s.1));
    let largest: Vec<String> = largest
        .iter()
        .take(3)
        .map(|(id, t)| format!("component {id}: {t} tokens"))
        .collect();
    Err(SkillError::new(
        SkillError::DOES_NOT_FIT,
        format!(
            "after every trimming level it still needs {total} tokens; the largest sections are {}",
            largest.join(", ")
        ),
    ))
}

/// Where each item block of a rendered context window starts: its
/// `### ` heading, outside any fence (a fence closes on a line of at least
/// as many backticks as opened it, and nothing else).
fn window_blocks(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut fence: Option<usize> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        let ticks = bare.bytes().take_while(|&b| b == b'`').count();
        match fence {
            None if bare.starts_with("### ") => starts.push(offset),
            None if ticks >= 3 => fence = Some(ticks),
            Some(n) if ticks >= n && ticks == bare.len() => fence = None,
            _ => {}
        }
        offset += line.len();
    }
    starts
}

/// The window with as few of its oldest items dropped as makes it fit in
/// `room` tokens, a marker saying how many; all of them when it must. None
/// when it has no item blocks, or when even the marker alone does not fit.
fn window_without_oldest(
    text: &str,
    room: u64,
    count: &dyn Fn(&str) -> u32,
) -> Option<(String, u32)> {
    let starts = window_blocks(text);
    let n = starts.len();
    if n == 0 {
        return None;
    }
    let header = &text[..starts[0]];
    let build = |dropped: usize| -> String {
        let plural = if dropped == 1 { "" } else { "s" };
        if dropped == n {
            format!("{header}[{dropped} attached item{plural} left out to fit the token budget]\n")
        } else {
            format!(
                "{header}[{dropped} older attached item{plural} left out to fit the token budget]\n\n{}",
                &text[starts[dropped]..]
            )
        }
    };
    let fits = |dropped: usize| {
        let candidate = build(dropped);
        let t = count(&candidate);
        (u64::from(t) <= room).then_some((candidate, t))
    };
    // The fewest items dropped that fit, by bisection (fewer kept, fewer
    // tokens); all of them, with the marker alone, at worst.
    let mut best = fits(n);
    best.as_ref()?;
    let (mut lo, mut hi) = (1, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match fits(mid) {
            Some(found) => {
                best = Some(found);
                hi = mid;
            }
            None => lo = mid + 1,
        }
    }
    if lo < n
        && let Some(found) = fits(lo)
    {
        best = Some(found);
    }
    best
}

/// Contract 5: the share of the budget used, 0–100, clamped.
pub fn percent(total: u64, budget: u64) -> u8 {
    if budget == 0 {
        return 100;
    }
    u8::try_from((total.saturating_mul(100) / budget).min(100)).unwrap_or(100)
}

/// The edits of one round.
#[derive(Debug, Default)]
struct Plan {
    applied: TrimLevels,
    edits: Vec<SectionEdit>,
    context_budget: Option<u32>,
}

impl Plan {
    fn replace(&mut self, index: usize, text: RArc<RString>, level: TrimLevels) {
        self.edits.retain(|e| e.index as usize != index);
        self.edits.push(SectionEdit {
            index: index as u32,
            text: ROption::RSome(text),
        });
        self.applied = self.applied.union(level);
    }

    fn drop(&mut self, index: usize, level: TrimLevels) {
        self.edits.push(SectionEdit {
            index: index as u32,
            text: ROption::RNone,
        });
        self.applied = self.applied.union(level);
    }

    fn finish(self) -> BudgetPlan {
        BudgetPlan {
            fits: false,
            applied: self.applied,
            edits: RVec::from(self.edits),
            context_budget: self.context_budget.into(),
            usage_percent: ROption::RNone,
        }
    }
}

/// The last `n` lines of `text` (without the line break before them).
fn last_lines(text: &str, n: usize) -> String {
    let trimmed = text.trim_end_matches('\n');
    let mut start = trimmed.len();
    for _ in 0..n {
        match trimmed[..start].rfind('\n') {
            Some(at) => start = at,
            None => return trimmed.to_owned(),
        }
    }
    trimmed[start + 1..].to_owned()
}

/// The seed's one-line summary of a context: how many non-empty lines it
/// had (the seed called them items).
fn summary(text: &str, trims: &mut Trims, count: &dyn Fn(&str) -> u32) -> (RArc<RString>, u32) {
    let items = text.lines().filter(|l| !l.trim().is_empty()).count();
    if let Some((n, summary, t)) = &trims.summary
        && *n == items
    {
        return (summary.clone(), *t);
    }
    let text = format!("{SUMMARY_PREFIX}{items} items]");
    let t = count(&text);
    let summary = RArc::new(RString::from(text));
    trims.summary = Some((items, summary.clone(), t));
    (summary, t)
}

/// `text` with its middle replaced by a marker, as long as fits in `room`
/// tokens: the same number of bytes kept at each end (at character
/// boundaries), the most that fits, found by bisection. None when not even
/// the marker alone fits.
fn cut_middle(text: &str, room: u32, count: &dyn Fn(&str) -> u32) -> Option<(String, u32)> {
    let build = |keep: usize| -> String {
        let head_end = floor_boundary(text, keep);
        let tail_start = ceil_boundary(text, text.len() - keep).max(head_end);
        let cut = text[head_end..tail_start].chars().count();
        format!(
            "{}\n[… {cut} characters cut from the middle of this message to fit the token budget …]\n{}",
            &text[..head_end],
            &text[tail_start..]
        )
    };
    let fits = |keep: usize| {
        let candidate = build(keep);
        let t = count(&candidate);
        (t <= room).then_some((candidate, t))
    };
    let mut best = fits(0)?;
    let (mut lo, mut hi) = (0, text.len() / 2);
    // Invariant: `lo` fits; find the largest `keep` that does.
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        match fits(mid) {
            Some(found) => {
                best = found;
                lo = mid;
            }
            None => hi = mid - 1,
        }
    }
    Some(best)
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use foveal_sdk::prompt::BudgetSection;

    fn leak(s: String) -> &'static str {
        Box::leak(s.into_boxed_str())
    }

    /// One token per byte: the skill's arithmetic without a tokenizer.
    fn bytes(text: &str) -> u32 {
        text.len() as u32
    }

    fn section(id: u32, kind: SectionKind, text: &str) -> BudgetSection<'_> {
        BudgetSection {
            id,
            kind,
            text: text.into(),
            tokens: text.len() as u32,
        }
    }

    fn request<'a>(
        budget: u32,
        sections: &'a [BudgetSection<'a>],
        applied: TrimLevels,
        renderable: bool,
    ) -> BudgetRequest<'a> {
        BudgetRequest {
            budget,
            prefix: PrefixRequest {
                assistant_name: "A".into(),
                identity: "".into(),
                feedback: "".into(),
                mandates: "".into(),
                tools: "No tools".into(),
            },
            sections: sections.into(),
            applied,
            context_renderable: renderable,
            exact: true,
        }
    }

    fn run(request: &BudgetRequest<'_>) -> Result<BudgetPlan, SkillError> {
        plan(
            request,
            &mut PrefixCache::default(),
            &mut Trims::default(),
            &bytes,
        )
    }

    const WINDOW: &str = "## Context\n\n### Code (from a.rs)\n````rust\n```\n### not a heading\n```\n````\n\n### Text\n```text\nsecond\n```\n\n### Error\n```text\nthird\n```\n";

    #[test]
    fn the_window_loses_its_oldest_items_after_the_history_and_before_the_message() {
        assert_eq!(
            window_blocks(WINDOW).len(),
            3,
            "a heading inside a fence is content"
        );
        let s = [
            section(0, SectionKind::PREFIX, "p"),
            section(3000, SectionKind::WINDOW, WINDOW),
            section(
                5000,
                SectionKind::HISTORY,
                leak("an old message ".repeat(10)),
            ),
            section(6000, SectionKind::MESSAGE, "the question"),
        ];
        // The history goes first (once the host cut its tool calls).
        let total: u32 = s.iter().map(|s| s.tokens).sum();
        let first = run(&request(total - 1, &s, TrimLevels::TOOL_CALLS, false)).unwrap();
        assert_eq!(first.applied, TrimLevels::HISTORY);
        // Then the oldest items, as few as fit, with a marker.
        let without_history = [s[0], s[1], s[3]];
        let budget = 1 + 100 + 12;
        let plan = run(&request(
            budget,
            &without_history,
            TrimLevels::HISTORY,
            false,
        ))
        .unwrap();
        assert_eq!(plan.applied, TrimLevels::WINDOW);
        let text = plan.edits[0].text.as_ref().unwrap().as_str().to_owned();
        assert_eq!(
            text,
            "## Context\n\n[2 older attached items left out to fit the token budget]\n\n### Error\n```text\nthird\n```\n"
        );
        assert!(1 + text.len() + 12 <= budget as usize);
        // With no room for any item: the marker alone.
        let plan = run(&request(
            1 + 80 + 12,
            &without_history,
            TrimLevels::HISTORY,
            false,
        ))
        .unwrap();
        assert_eq!(
            plan.edits[0].text.as_ref().unwrap().as_str(),
            "## Context\n\n[3 attached items left out to fit the token budget]\n"
        );
    }

    #[test]
    fn a_prompt_that_fits_reports_its_usage() {
        let s = [section(0, SectionKind::PREFIX, leak("x".repeat(50)))];
        let plan = run(&request(200, &s, TrimLevels::NONE, false)).unwrap();
        assert!(plan.fits);
        assert_eq!(plan.usage_percent.into_option(), Some(25));
    }

    #[test]
    fn logs_are_cut_to_their_last_five_lines_first() {
        let logs = "1\n2\n3\n4\n5\n6\n7\n";
        let s = [
            section(0, SectionKind::PREFIX, "p"),
            section(2500, SectionKind::LOGS, logs),
        ];
        let plan = run(&request(11, &s, TrimLevels::NONE, false)).unwrap();
        assert!(!plan.fits);
        assert_eq!(plan.applied, TrimLevels::LOGS);
        assert_eq!(
            plan.edits[0].text.as_ref().unwrap().as_str(),
            "3\n4\n5\n6\n7"
        );
    }

    #[test]
    fn mandates_go_second_by_rebuilding_the_prefix_without_them() {
        let mut prefixes = PrefixCache::default();
        let full = PrefixRequest {
            assistant_name: "A".into(),
            identity: "".into(),
            feedback: "".into(),
            mandates: "- always cite ids\n- never guess".into(),
            tools: "No tools".into(),
        };
        let (text, _) = prefixes.get(&full);
        let s = [section(0, SectionKind::PREFIX, text.as_str())];
        let mut request = request(40, &s, TrimLevels::NONE, false);
        request.prefix = full;
        let plan = plan(&request, &mut prefixes, &mut Trims::default(), &bytes).unwrap();
        assert_eq!(plan.applied, TrimLevels::MANDATES);
        let without = plan.edits[0].text.as_ref().unwrap();
        assert_eq!(without.as_str(), "IDENTITY: A\n\nTOOLS:\nNo tools\n");
    }

    #[test]
    fn the_context_is_re_rendered_at_the_room_left_when_it_can_be() {
        let ctx = leak("c".repeat(100));
        let s = [
            section(0, SectionKind::PREFIX, leak("p".repeat(10))),
            section(2000, SectionKind::CONTEXT, ctx),
        ];
        let plan = run(&request(60, &s, TrimLevels::NONE, true)).unwrap();
        assert_eq!(plan.applied, TrimLevels::CONTEXT);
        assert!(plan.edits.is_empty());
        assert_eq!(plan.context_budget.into_option(), Some(50));
        // Without a renderer: the seed's summary.
        let plan = run(&request(60, &s, TrimLevels::NONE, false)).unwrap();
        let summary = plan.edits.last().unwrap().text.as_ref().unwrap();
        assert_eq!(summary.as_str(), "[Context trimmed: 1 items]");
    }

    #[test]
    fn history_goes_oldest_first_with_a_marker() {
        let s = [
            section(0, SectionKind::PREFIX, "p"),
            section(5000, SectionKind::HISTORY, leak("a".repeat(100))),
            section(5000, SectionKind::HISTORY, leak("b".repeat(100))),
            section(5000, SectionKind::HISTORY, leak("c".repeat(10))),
            section(6000, SectionKind::MESSAGE, "hi"),
        ];
        let plan = run(&request(120, &s, TrimLevels::TOOL_CALLS, false)).unwrap();
        assert_eq!(plan.applied, TrimLevels::HISTORY);
        assert_eq!(plan.edits[0].index, 1);
        assert!(plan.edits[0].text.is_none());
        assert_eq!(plan.edits[1].index, 2);
        assert_eq!(
            plan.edits[1].text.as_ref().unwrap().as_str(),
            "[2 earlier messages omitted to fit the token budget]"
        );
    }

    #[test]
    fn the_histories_tool_calls_are_asked_for_after_the_logs_and_before_the_mandates() {
        let logs = "1\n2\n3\n4\n5\n6\n7\n";
        let s = [
            section(0, SectionKind::PREFIX, "p"),
            section(2500, SectionKind::LOGS, logs),
            section(5000, SectionKind::HISTORY, leak("a".repeat(100))),
            section(6000, SectionKind::MESSAGE, "hi"),
        ];
        let mut full = request(110, &s, TrimLevels::NONE, false);
        full.prefix.mandates = "- always cite ids".into();
        // L1 is applied in the same round; L1b is asked for, with no edit
        // of its own, and the round stops there.
        let first = run(&full).unwrap();
        assert!(!first.fits);
        assert_eq!(first.applied, TrimLevels::LOGS | TrimLevels::TOOL_CALLS);
        assert_eq!(first.edits.len(), 1);
        assert_eq!(first.edits[0].index, 1);
        assert!(first.context_budget.is_none());
        // The next round goes on with L2, then the history.
        let mut next = request(110, &s, TrimLevels::LOGS | TrimLevels::TOOL_CALLS, false);
        next.prefix.mandates = "- always cite ids".into();
        let second = run(&next).unwrap();
        assert!(second.applied.contains(TrimLevels::MANDATES));
        assert!(!second.applied.contains(TrimLevels::TOOL_CALLS));
        // Without a history there is nothing to ask for.
        let without = [s[0], s[1], s[3]];
        let plan = run(&request(12, &without, TrimLevels::NONE, false)).unwrap();
        assert_eq!(plan.applied, TrimLevels::LOGS);
    }

    #[test]
    fn an_oversized_message_loses_its_middle() {
        let message = leak(format!("START {} END", "middle ".repeat(200)));
        let s = [
            section(0, SectionKind::PREFIX, "p"),
            section(6000, SectionKind::MESSAGE, message),
        ];
        let plan = run(&request(300, &s, TrimLevels::NONE, false)).unwrap();
        assert_eq!(plan.applied, TrimLevels::MESSAGE);
        let cut = plan.edits[0].text.as_ref().unwrap();
        assert!(cut.starts_with("START ") && cut.ends_with(" END"), "{cut}");
        assert!(cut.contains("characters cut from the middle"), "{cut}");
        assert!(cut.len() <= 299 && cut.len() > 250, "{}", cut.len());
    }

    #[test]
    fn when_nothing_can_make_room_the_answer_is_does_not_fit() {
        let s = [
            section(0, SectionKind::PREFIX, leak("p".repeat(500))),
            section(6000, SectionKind::MESSAGE, "hi"),
        ];
        let err = run(&request(100, &s, TrimLevels::NONE, false)).unwrap_err();
        assert_eq!(err.code, SkillError::DOES_NOT_FIT);
        assert!(
            err.message.contains("component 0: 500 tokens"),
            "{}",
            err.message
        );
    }

    #[test]
    fn usage_is_clamped() {
        assert_eq!(percent(0, 100), 0);
        assert_eq!(percent(4600, 16384), 28);
        assert_eq!(percent(500, 100), 100);
    }

    #[test]
    fn last_lines_keep_the_newest() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(last_lines("a\nb", 5), "a\nb");
    }
}
