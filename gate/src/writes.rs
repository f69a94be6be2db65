//! Writes into the memex: the one rule every write obeys.
//!
//! A write puts text into a visible object, and what a visible object
//! holds is public: every skill is lent it, and the gate no longer takes
//! it for private text anywhere. So a write of text the gate would change
//! — private text in any form it finds, or a secret — would declassify
//! it. Every write the model or a skill asks for passes
//! [`Gate::check_write`] before anything is written: the host's write
//! tools on the texts they write ([`Gate::check_write_parts`]), the
//! skills' tools on their arguments ([`Gate::check_write_arguments`]), and
//! the memex writes of the host API (`memex_write`, the computed-context
//! write-back) on the texts of an edit. A write is checked as the file
//! will hold it — its parts each alone *and* joined in the order they are
//! written — so a private run cut into pieces that each pass alone (a
//! title ending where its body begins) is found whole. A write refused
//! writes nothing, and its answer is [`WRITE_REFUSED`] on every path,
//! whichever part of it was private and whether it was private text or a
//! secret.

use foveal_memex::snapshot::MemexSnapshot;

use crate::Gate;
use crate::private::Runs as _;

/// The answer to every write refused because what it would write holds
/// private text or a secret.
pub const WRITE_REFUSED: &str =
    "refused: the text to write holds private text or a secret; nothing was written";

/// A write [`Gate::check_write`] refused; it says [`WRITE_REFUSED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRefused;

impl std::fmt::Display for WriteRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(WRITE_REFUSED)
    }
}

impl std::error::Error for WriteRefused {}

impl Gate {
    /// Whether `texts` may be written into the memex of `memex`: refused
    /// when the gate would change any of them — a private passage, or a
    /// secret by the host's own patterns ([`Gate::clean_quietly`], which
    /// logs nothing of the text).
    pub fn check_write<'a>(
        &self,
        texts: impl IntoIterator<Item = &'a str>,
        memex: &MemexSnapshot,
    ) -> Result<(), WriteRefused> {
        for text in texts {
            if self.clean_quietly(text, memex).is_some() {
                return Err(WriteRefused);
            }
        }
        Ok(())
    }

    /// [`check_write`](Self::check_write) on the `parts` of one write, in
    /// the order the file will hold them (a title, then a body): each part
    /// alone, and all of them joined by line breaks — the gate's runs of
    /// words cross lines in what is written, so a private run split across
    /// two parts that end up side by side is found.
    pub fn check_write_parts(
        &self,
        parts: &[&str],
        memex: &MemexSnapshot,
    ) -> Result<(), WriteRefused> {
        let whole = parts.join("\n");
        self.check_write(
            std::iter::once(whole.as_str()).chain(parts.iter().copied()),
            memex,
        )
    }

    /// [`check_write`](Self::check_write) on `text`, except that a
    /// private passage spanning exactly one of the byte ranges `own` of it
    /// does not refuse it: words the host writes there from a fixed
    /// vocabulary of its own (a knowledge node's `:KIND: gotcha`), which
    /// quote nothing, even where a private line is that one word. A
    /// passage holding more than such a word — a run of five crossing it,
    /// a shorter private line it is part of — refuses it, and so does a
    /// secret anywhere.
    pub fn check_write_except(
        &self,
        text: &str,
        own: &[std::ops::Range<usize>],
        memex: &MemexSnapshot,
    ) -> Result<(), WriteRefused> {
        if !self.secrets.find(text).is_empty() {
            return Err(WriteRefused);
        }
        let matcher = crate::logs::unredacted(|| self.private_matcher(memex));
        let Some(matcher) = matcher.as_ref() else {
            return Ok(());
        };
        let mut spans = Vec::new();
        matcher.find(text, false, &mut spans);
        let all_own = spans.iter().all(|span| {
            own.iter()
                .any(|range| range.start == span.start && range.end == span.end)
        });
        if all_own { Ok(()) } else { Err(WriteRefused) }
    }

    /// [`check_write`](Self::check_write) on a tool's JSON arguments:
    /// every string (keys included) and number, at any depth, each on its
    /// own, all of them joined in order, and the values alone (no key
    /// between them) joined in order — the host cannot know which of them
    /// a skill's tool writes, nor what it writes beside what.
    pub fn check_write_arguments(
        &self,
        args: &serde_json::Value,
        memex: &MemexSnapshot,
    ) -> Result<(), WriteRefused> {
        let mut texts = Vec::new();
        leaves(args, &mut texts);
        let all: Vec<&str> = texts.iter().map(|(text, _)| text.as_str()).collect();
        self.check_write_parts(&all, memex)?;
        let values: Vec<&str> = texts
            .iter()
            .filter(|(_, key)| !key)
            .map(|(text, _)| text.as_str())
            .collect();
        let values = values.join("\n");
        self.check_write([values.as_str()], memex)
    }
}

/// The strings, keys and numbers of `value`, as written and in order, each
/// with whether it is a key.
fn leaves(value: &serde_json::Value, out: &mut Vec<(String, bool)>) {
    match value {
        serde_json::Value::String(text) => out.push((text.clone(), false)),
        serde_json::Value::Number(number) => out.push((number.to_string(), false)),
        serde_json::Value::Array(items) => items.iter().for_each(|item| leaves(item, out)),
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                out.push((key.clone(), true));
                leaves(item, out);
            }
        }
        serde_json::Value::Null | serde_json::Value::Bool(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use foveal_memex::Memex;
    use foveal_memex::privacy::PrivacyTags;

    #[test]
    fn a_write_of_private_text_or_a_secret_is_refused_and_public_text_passes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.org"),
            "* Work\nShip the launch.\n* Diary :@personal:\n:PROPERTIES:\n:PIN: 4471\n:END:\nMet Ann at the harbour on a windy morning.\n",
        )
        .unwrap();
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        let snapshot = memex.snapshot();
        let gate = Gate::new(PrivacyTags::new(["@personal"]), &[], true).unwrap();
        let refused = |args: serde_json::Value| gate.check_write_arguments(&args, &snapshot);
        for args in [
            serde_json::json!({"title": "met ANN at the harbour on a windy morning"}),
            serde_json::json!({"title": "Notes", "body": "Met Ann at the\nharbour on a windy morning"}),
            serde_json::json!({"edits": [{"value": "key AKIAIOSFODNN7EXAMPLE"}]}),
            serde_json::json!({"pin": 4471}),
        ] {
            assert_eq!(refused(args.clone()), Err(WriteRefused), "{args}");
        }
        assert_eq!(
            refused(serde_json::json!({"title": "Ship the launch", "n": 3})),
            Ok(())
        );
        assert_eq!(
            gate.check_write(["Met Ann at the harbour on a windy morning"], &snapshot)
                .unwrap_err()
                .to_string(),
            WRITE_REFUSED
        );
    }

    /// A word of the host's own vocabulary (`:KIND: gotcha`) is written
    /// wherever it stands, even where a private headline is titled with
    /// it; a longer private passage through it, and a secret, still refuse
    /// the write.
    ///
    /// Until issue 28 (F6) the one-word private line `Gotcha` was private
    /// text, refused alone and let through only at the byte range the host
    /// names. A one-word line of letters now protects nothing on its own (a
    /// common word is not a secret because a private headline is titled
    /// with it), so it passes everywhere; the exception of
    /// `check_write_except` still holds for what it covers.
    #[test]
    fn a_word_of_the_hosts_own_passes_only_where_the_host_writes_it_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.org"),
            "* Work\nShip the launch.\n* Diary :@personal:\n** Gotcha\nMet Ann at the gotcha harbour on a windy morning.\n",
        )
        .unwrap();
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        let snapshot = memex.snapshot();
        let gate = Gate::new(PrivacyTags::new(["@personal"]), &[], true).unwrap();
        // `gotcha` alone is a private line of one word: it protects
        // nothing, so it is written as a write of its own too.
        assert_eq!(gate.check_write(["gotcha"], &snapshot), Ok(()));
        let at = |text: &str| {
            let start = text.find("gotcha").unwrap();
            start..start + "gotcha".len()
        };
        let check = |text: &str, own: &std::ops::Range<usize>| {
            gate.check_write_except(text, std::slice::from_ref(own), &snapshot)
        };
        let text = "Emails compare\nKIND\ngotcha\nSOURCE\nt-model";
        assert_eq!(check(text, &at(text)), Ok(()));
        assert_eq!(gate.check_write_except(text, &[], &snapshot), Ok(()));
        let twice = "gotcha\nKIND\ngotcha";
        assert_eq!(gate.check_write_except(twice, &[], &snapshot), Ok(()));
        // A run of five through it, and a secret, refuse.
        let run = "Met Ann at the\ngotcha\nharbour";
        assert_eq!(check(run, &at(run)), Err(WriteRefused));
        let secret = "KIND\ngotcha\nkey AKIAIOSFODNN7EXAMPLE";
        assert_eq!(check(secret, &at(secret)), Err(WriteRefused));
    }

    /// A private run cut into pieces that each pass alone: a title ending
    /// where its body begins, items of a list, values under two keys.
    /// Each piece alone passed, and once written side by side every run of
    /// the sentence was in visible text, so the gate stopped redacting it.
    #[test]
    fn a_private_run_split_across_the_parts_of_a_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.org"),
            "* Work\nShip the launch.\n* Diary :@personal:\nMet Ann at the harbour on a windy morning.\n",
        )
        .unwrap();
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        let snapshot = memex.snapshot();
        let gate = Gate::new(PrivacyTags::new(["@personal"]), &[], true).unwrap();
        // Each piece alone passes: the positive control of the split.
        for piece in [
            "Met Ann at the",
            "harbour on a",
            "the harbour on a",
            "windy morning",
        ] {
            assert_eq!(gate.check_write([piece], &snapshot), Ok(()), "{piece}");
        }
        assert_eq!(
            gate.check_write_parts(&["Met Ann at the", "harbour on a"], &snapshot),
            Err(WriteRefused)
        );
        assert_eq!(
            gate.check_write_parts(&["the harbour on a", "windy morning"], &snapshot),
            Err(WriteRefused)
        );
        for args in [
            serde_json::json!({"notes": ["Met Ann at the", "harbour on a"]}),
            serde_json::json!({"a": "Met Ann at the", "b": "harbour on a"}),
            serde_json::json!({"title": "the harbour on a", "z": {"body": "windy morning"}}),
        ] {
            assert_eq!(
                gate.check_write_arguments(&args, &snapshot),
                Err(WriteRefused),
                "{args}"
            );
        }
        // Public pieces side by side still pass.
        assert_eq!(
            gate.check_write_parts(&["Met Ann at the", "office"], &snapshot),
            Ok(())
        );
        assert_eq!(
            gate.check_write_arguments(
                &serde_json::json!({"a": "Met Ann at the", "b": "office today"}),
                &snapshot
            ),
            Ok(())
        );
    }
}
