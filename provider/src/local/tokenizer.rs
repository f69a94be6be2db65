//! The model's tokenizer, built from the GGUF file's `tokenizer.ggml.*`
//! metadata: a byte-level BPE (GPT-2 style) with its vocabulary and merges.
//!
//! The pre-tokenizer (how text is cut into words before the merges) is
//! named by `tokenizer.ggml.pre`, as llama.cpp reads it, and is the one of
//! the model's own `tokenizer.json` ([`pre_tokenizer`]): `smollm` (and no
//! name: SmolLM2's files) every digit on its own, then GPT-2's byte-level
//! split **without** a prefix space; `qwen2` Qwen2's regex (single
//! digits); `llama-bpe` Llama 3's (digits in threes); `gpt-2` / `default`
//! GPT-2's. Another name is refused with the list. (A tokenizer built
//! from the GGUF metadata alone, as candle's `TokenizerFromGguf` does for
//! `smollm`, adds a space before the text and so gets other ids.)
//!
//! Special tokens (`<|im_start|>`, `<|im_end|>`, … — token types 3,
//! CONTROL, and 4, USER_DEFINED, in the metadata) are never recognised
//! inside text: the chat template's rendering is split into them and text
//! ([`Piece::Special`], see [`super::template`]), so a message that
//! *contains* the text `<|im_end|>` cannot end its turn early.
//! [`LocalTokenizer::encode_chat`] does recognise them, for text that is a
//! rendered template. A control token decodes to nothing; a user-defined
//! one (Qwen's `<tool_call>`, `<think>`) to its text.
//!
//! Decoding is incremental and byte-exact ([`TextDecoder`]): each token's
//! bytes are appended to a buffer and only whole UTF-8 characters are
//! handed on.

use std::collections::HashMap;

use candle_core::quantized::gguf_file;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{PreTokenizerWrapper, Tokenizer};

/// One part of a rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A special token, by its text (`<|im_start|>`).
    Special(String),
    /// Text, tokenized as text.
    Text(String),
}

/// The tokenizer of the model file.
pub(crate) struct LocalTokenizer {
    bpe: Tokenizer,
    /// Special tokens (types 3 and 4) by text.
    specials: HashMap<String, u32>,
    /// Each token's bytes.
    bytes: Vec<Vec<u8>>,
    /// `tokenizer.ggml.bos_token_id`.
    pub(crate) bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub(crate) eos: Option<u32>,
    /// Other tokens that end a turn: `tokenizer.ggml.eot_token_id`,
    /// `tokenizer.ggml.eom_token_id`, and those of [`STOP_TEXTS`] that are
    /// control tokens.
    turn_ends: Vec<u32>,
}

impl std::fmt::Debug for LocalTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalTokenizer")
            .field("vocab", &self.bytes.len())
            .field("specials", &self.specials.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .finish()
    }
}

/// GGUF's token type of a control token.
const CONTROL: i64 = 3;
/// GGUF's token type of a token added to the vocabulary (not a control
/// token, but never split either).
const USER_DEFINED: i64 = 4;

/// Tokens that end a reply when the vocabulary has them as control tokens,
/// besides the GGUF's end-of-sequence, end-of-turn and end-of-message
/// tokens: ChatML's end of turn and end of text, Llama 3's, Phi's and
/// Gemma's.
const STOP_TEXTS: [&str; 6] = [
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<end_of_turn>",
];

impl LocalTokenizer {
    /// Reads the tokenizer from the model file's metadata.
    pub(crate) fn from_gguf(content: &gguf_file::Content) -> Result<Self, String> {
        let get = |key: &str| {
            content
                .metadata
                .get(key)
                .ok_or_else(|| format!("the GGUF metadata has no `{key}`"))
        };
        let model = get("tokenizer.ggml.model")?
            .to_string()
            .map_err(|e| e.to_string())?;
        if model != "gpt2" {
            return Err(format!(
                "the tokenizer is `{model}`, not the byte-level BPE (`gpt2`) this provider reads"
            ));
        }
        let strings = |key: &str| -> Result<Vec<String>, String> {
            get(key)?
                .to_vec()
                .map_err(|e| format!("`{key}`: {e}"))?
                .iter()
                .map(|v| v.to_string().cloned().map_err(|e| format!("`{key}`: {e}")))
                .collect()
        };
        let tokens = strings("tokenizer.ggml.tokens")?;
        let merges = strings("tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| match m.split_once(' ') {
                Some((a, b)) => Ok((a.to_owned(), b.to_owned())),
                None => Err(format!("the merge {m:?} is not two tokens")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let types: Vec<i64> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|e| e.to_string())?
                .iter()
                .map(|t| t.to_i32().map(i64::from).map_err(|e| e.to_string()))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let id = |key: &str| {
            content
                .metadata
                .get(key)
                .and_then(|v| v.to_u32().ok())
                .filter(|&id| (id as usize) < tokens.len())
        };

        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| format!("cannot build the BPE model: {e}"))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let pre = match content.metadata.get("tokenizer.ggml.pre") {
            Some(v) => Some(
                v.to_string()
                    .map_err(|e| format!("`tokenizer.ggml.pre`: {e}"))?,
            ),
            None => None,
        };
        tokenizer.with_pre_tokenizer(Some(pre_tokenizer(pre.map(String::as_str))?));

        let unicode_to_byte = unicode_to_byte();
        let specials = tokens
            .iter()
            .zip(&types)
            .enumerate()
            .filter(|(_, (_, ty))| **ty == CONTROL || **ty == USER_DEFINED)
            .map(|(i, (t, _))| (t.clone(), i as u32))
            .collect::<HashMap<_, _>>();
        let control = tokens
            .iter()
            .zip(&types)
            .filter(|(_, ty)| **ty == CONTROL)
            .map(|(t, _)| t.as_str())
            .collect::<std::collections::HashSet<_>>();
        let bytes = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if control.contains(t.as_str()) {
                    // Control tokens are never shown as text.
                    return Vec::new();
                }
                if specials.contains_key(t) {
                    // Added tokens are stored as their text, not in the
                    // byte-level alphabet.
                    return t.as_bytes().to_vec();
                }
                t.chars()
                    .map(|c| unicode_to_byte.get(&c).copied())
                    .collect::<Option<Vec<u8>>>()
                    // Not byte-level text (should not happen): its UTF-8.
                    .unwrap_or_else(|| tokens[i].as_bytes().to_vec())
            })
            .collect();
        let eot = ["tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"]
            .into_iter()
            .filter_map(id)
            .collect();
        let control_ids = STOP_TEXTS
            .iter()
            .filter(|text| control.contains(*text))
            .filter_map(|text| specials.get(*text).copied())
            .collect::<Vec<_>>();
        Ok(Self {
            bos: id("tokenizer.ggml.bos_token_id"),
            eos: id("tokenizer.ggml.eos_token_id"),
            turn_ends: [eot, control_ids].concat(),
            bpe: tokenizer,
            specials,
            bytes,
        })
    }

    /// Tokens that end a reply: the end-of-sequence token, the
    /// end-of-turn and end-of-message tokens the GGUF names, and the
    /// control tokens among `<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`,
    /// `<|eom_id|>`, `<|end|>` and `<end_of_turn>`.
    pub(crate) fn stop_tokens(&self) -> Vec<u32> {
        let mut stop: Vec<u32> = self
            .eos
            .into_iter()
            .chain(self.turn_ends.iter().copied())
            .collect();
        stop.sort_unstable();
        stop.dedup();
        stop
    }

    /// The id of a special token.
    pub(crate) fn special(&self, text: &str) -> Option<u32> {
        self.specials.get(text).copied()
    }

    /// Tokens of plain text: special tokens in it are text too.
    pub(crate) fn encode_text(&self, text: &str) -> Result<Vec<u32>, String> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        self.bpe
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| format!("cannot tokenize the prompt: {e}"))
    }

    /// Tokens of a rendered prompt.
    pub(crate) fn encode_pieces(&self, pieces: &[Piece]) -> Result<Vec<u32>, String> {
        let mut ids = Vec::new();
        for piece in pieces {
            match piece {
                Piece::Special(name) => ids.push(
                    self.special(name)
                        .ok_or_else(|| format!("the model has no special token {name}"))?,
                ),
                Piece::Text(text) => ids.extend(self.encode_text(text)?),
            }
        }
        Ok(ids)
    }

    #[cfg(test)]
    /// Tokens of text in which the special tokens' texts are special
    /// tokens, as in a rendered chat template.
    pub(crate) fn encode_chat(&self, text: &str) -> Result<Vec<u32>, String> {
        let mut ids = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let next = self
                .specials
                .iter()
                .filter_map(|(name, &id)| rest.find(name.as_str()).map(|at| (at, name.len(), id)))
                .min_by_key(|&(at, len, _)| (at, std::cmp::Reverse(len)));
            match next {
                Some((at, len, id)) => {
                    ids.extend(self.encode_text(&rest[..at])?);
                    ids.push(id);
                    rest = &rest[at + len..];
                }
                None => {
                    ids.extend(self.encode_text(rest)?);
                    break;
                }
            }
        }
        Ok(ids)
    }

    /// The bytes a token stands for (none for a special token).
    pub(crate) fn token_bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// The whole text of some tokens (special tokens leave nothing).
    pub(crate) fn decode(&self, ids: &[u32]) -> String {
        let mut decoder = TextDecoder::default();
        let mut text = String::new();
        for &id in ids {
            text.push_str(&decoder.push(self.token_bytes(id)));
        }
        text.push_str(&decoder.finish());
        text
    }
}

/// Turns token bytes into text without ever splitting a UTF-8 character:
/// bytes of a character that is not complete yet wait for the next token.
#[derive(Debug, Default)]
pub(crate) struct TextDecoder {
    pending: Vec<u8>,
}

impl TextDecoder {
    /// The text that the bytes so far complete.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(text) => {
                    out.push_str(text);
                    self.pending.clear();
                    return out;
                }
                Err(error) => {
                    let valid = error.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match error.error_len() {
                        // The end is the start of a character: wait.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        // Bytes that are no character: shown as U+FFFD.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// What is left at the end: an incomplete character as U+FFFD.
    pub(crate) fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }
}

/// GPT-2's byte-level alphabet, reversed: the character a byte is written
/// as in the vocabulary → the byte.
pub(crate) fn unicode_to_byte() -> HashMap<char, u8> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    let mut map = HashMap::with_capacity(256);
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        let c = if printable(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).expect("in the BMP")
        };
        map.insert(c, b);
    }
    map
}

/// The pre-tokenizers foveal knows, by `tokenizer.ggml.pre`.
pub(crate) const PRE_TOKENIZERS: &[&str] = &["smollm", "qwen2", "llama-bpe", "gpt-2", "default"];

/// Qwen2's split (its `tokenizer.json`), before the byte-level mapping.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Llama 3's: as Qwen2's, with digits in runs of up to three.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The pre-tokenizer `tokenizer.ggml.pre` names (`None`: SmolLM2's).
pub(crate) fn pre_tokenizer(name: Option<&str>) -> Result<PreTokenizerWrapper, String> {
    use tokenizers::SplitDelimiterBehavior;
    use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
    let split = |pattern: &str| -> Result<PreTokenizerWrapper, String> {
        let split = Split::new(
            SplitPattern::Regex(pattern.to_owned()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| format!("cannot build the pre-tokenizer: {e}"))?;
        Ok(PreTokenizerWrapper::Sequence(Sequence::new(vec![
            PreTokenizerWrapper::Split(split),
            PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, false, false)),
        ])))
    };
    match name {
        // SmolLM2's tokenizer.json: Digits(individual) + ByteLevel without
        // a prefix space.
        None | Some("smollm") => Ok(PreTokenizerWrapper::Sequence(Sequence::new(vec![
            PreTokenizerWrapper::Digits(Digits::new(true)),
            PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
        ]))),
        Some("qwen2") => split(QWEN2_SPLIT),
        Some("llama-bpe") => split(LLAMA3_SPLIT),
        Some("gpt-2" | "default") => Ok(PreTokenizerWrapper::ByteLevel(ByteLevel::new(
            false, true, true,
        ))),
        Some(other) => Err(format!(
            "its pre-tokenizer (tokenizer.ggml.pre) is {other:?}; foveal reads {}",
            PRE_TOKENIZERS.join(", ")
        )),
    }
}

#[cfg(test)]
mod pre_tokenizer_tests {
    use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

    use super::*;

    fn words(name: Option<&str>, text: &str) -> Vec<String> {
        let mut pre = PreTokenizedString::from(text);
        pre_tokenizer(name).unwrap().pre_tokenize(&mut pre).unwrap();
        pre.get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(w, _, _)| w.to_owned())
            .collect()
    }

    #[test]
    fn each_named_pre_tokenizer_cuts_text_as_its_models_tokenizer_json_does() {
        let text = "Hi there, it's 2024!\n\nOK";
        // Byte-level: Ġ is a space, Ċ a newline.
        assert_eq!(
            words(Some("qwen2"), text),
            [
                "Hi", "Ġthere", ",", "Ġit", "'s", "Ġ", "2", "0", "2", "4", "!ĊĊ", "OK"
            ]
        );
        assert_eq!(
            words(Some("llama-bpe"), text),
            [
                "Hi", "Ġthere", ",", "Ġit", "'s", "Ġ", "202", "4", "!ĊĊ", "OK"
            ]
        );
        assert_eq!(
            words(Some("smollm"), text),
            words(None, text),
            "SmolLM2's files name theirs smollm"
        );
        assert_eq!(
            words(None, text),
            [
                "Hi", "Ġthere", ",", "Ġit", "'s", "Ġ", "2", "0", "2", "4", "!", "Ċ", "Ċ", "OK"
            ]
        );
        assert_eq!(
            pre_tokenizer(Some("chameleon")).unwrap_err(),
            "its pre-tokenizer (tokenizer.ggml.pre) is \"chameleon\"; foveal reads smollm, qwen2, llama-bpe, gpt-2, default"
        );
    }
}
