//! Writes into the memex: the one rule every write obeys.
//!
//! A write puts text into a visible object, and what a visible object
//! holds is public: every skill is lent it, and the gate no longer takes
//! it for private text anywhere. So a write of text the gate would change
//! — private text in any form it finds, or a secret — would declassify
//! it. Every write the model or a skill asks for passes
//! [`Gate::check_write`] before anything is written: the host's write
//! tools and the skills' write and dangerous tools on their arguments
//! ([`Gate::check_write_arguments`]), and the memex writes of the host API
//! (`memex_write`, the computed-context write-back) on each text. A write
//! refused writes nothing, and its answer is [`WRITE_REFUSED`] on every
//! path, whichever part of it was private and whether it was private text
//! or a secret.

use foveal_memex::snapshot::MemexSnapshot;

use crate::Gate;

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

    /// [`check_write`](Self::check_write) on a tool's JSON arguments:
    /// every string (keys included) and number, at any depth, each on its
    /// own — the host cannot know which of them a skill's tool writes.
    pub fn check_write_arguments(
        &self,
        args: &serde_json::Value,
        memex: &MemexSnapshot,
    ) -> Result<(), WriteRefused> {
        let mut texts = Vec::new();
        leaves(args, &mut texts);
        self.check_write(texts.iter().map(String::as_str), memex)
    }
}

/// The strings, keys and numbers of `value`, as written.
fn leaves(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(text) => out.push(text.clone()),
        serde_json::Value::Number(number) => out.push(number.to_string()),
        serde_json::Value::Array(items) => items.iter().for_each(|item| leaves(item, out)),
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                out.push(key.clone());
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
}
