//! Server-sent events, as far as chat-completion streams use them: `data:`
//! lines, events ended by a blank line, comments and keep-alives.
//!
//! The decoder takes the body in whatever pieces the network delivers —
//! a line, a UTF-8 character or a `\r\n` may be split between two pieces —
//! and yields the data of each complete event. It follows the WHATWG
//! event-stream rules: lines end in `\n`, `\r\n` or `\r`; `data` lines of
//! one event are joined with `\n`; one space after the colon is dropped;
//! lines starting with `:` are comments; `event`, `id` and `retry` are
//! read and ignored. One leniency: data still pending when the body ends is
//! delivered, because some servers close right after `data: [DONE]`
//! without the blank line.

/// The longest line accepted. A chat-completion chunk is a few hundred
/// bytes; a line this long means the body is not an event stream.
pub(crate) const MAX_LINE_BYTES: usize = 8 << 20;

/// Why a body cannot be read as an event stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SseError {
    /// A line is not UTF-8.
    #[error("a line of the event stream is not UTF-8")]
    NotUtf8,
    /// A line is longer than [`MAX_LINE_BYTES`].
    #[error("a line of the event stream is longer than {MAX_LINE_BYTES} bytes")]
    LineTooLong,
}

/// Turns body bytes into the data of complete events.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    /// The bytes of the line being read.
    line: Vec<u8>,
    /// The data of the event being read.
    data: String,
    /// Whether the event being read has a `data` field (it may be empty).
    has_data: bool,
    /// The previous piece ended in `\r`: a `\n` starting this one belongs
    /// to the same line ending.
    skip_lf: bool,
}

impl SseDecoder {
    /// Reads one piece of the body; the data of each event it completes is
    /// pushed to `out`.
    pub(crate) fn push(&mut self, bytes: &[u8], out: &mut Vec<String>) -> Result<(), SseError> {
        let mut rest = bytes;
        if self.skip_lf {
            self.skip_lf = false;
            if let Some(after) = rest.strip_prefix(b"\n") {
                rest = after;
            }
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', rest) {
            self.extend_line(&rest[..end])?;
            self.end_line(out)?;
            let after = &rest[end + 1..];
            rest = if rest[end] == b'\r' {
                match after.first() {
                    Some(b'\n') => &after[1..],
                    Some(_) => after,
                    None => {
                        self.skip_lf = true;
                        after
                    }
                }
            } else {
                after
            };
        }
        self.extend_line(rest)
    }

    /// Whether a line has begun and not ended: a body that stops here was
    /// cut in the middle of an event.
    pub(crate) fn in_line(&self) -> bool {
        !self.line.is_empty()
    }

    /// The body has ended: an unterminated last line and any event still
    /// pending are delivered.
    pub(crate) fn finish(&mut self, out: &mut Vec<String>) -> Result<(), SseError> {
        if !self.line.is_empty() {
            self.end_line(out)?;
        }
        self.dispatch(out);
        Ok(())
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > MAX_LINE_BYTES {
            return Err(SseError::LineTooLong);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<String>) -> Result<(), SseError> {
        let line = std::mem::take(&mut self.line);
        let line = std::str::from_utf8(&line).map_err(|_| SseError::NotUtf8)?;
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // a comment: servers send these as keep-alives
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field == "data" {
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<String>) {
        if std::mem::take(&mut self.has_data) {
            out.push(std::mem::take(&mut self.data));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(pieces: &[&[u8]]) -> Result<Vec<String>, SseError> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for piece in pieces {
            decoder.push(piece, &mut out)?;
        }
        decoder.finish(&mut out)?;
        Ok(out)
    }

    #[test]
    fn events_end_at_blank_lines_and_data_lines_join_with_newlines() {
        let out = decode(&[b"data: one\n\ndata: two\ndata:three\n\n"]).unwrap();
        assert_eq!(out, ["one", "two\nthree"]);
    }

    #[test]
    fn comments_and_other_fields_are_ignored() {
        let out = decode(&[b": keep-alive\n\nevent: message\nid: 7\nretry: 10\ndata: x\n\n:\n\n"])
            .unwrap();
        assert_eq!(out, ["x"]);
    }

    #[test]
    fn every_line_ending_is_understood_even_split_between_pieces() {
        let out = decode(&[b"data: a\r", b"\n\r", b"\ndata: b\r\rdata: c\n\n"]).unwrap();
        assert_eq!(out, ["a", "b", "c"]);
    }

    #[test]
    fn a_piece_may_end_anywhere_even_inside_a_character() {
        let text = "data: {\"content\":\"h\u{e9}llo \u{1F600}\"}\n\ndata: [DONE]\n\n";
        let whole = decode(&[text.as_bytes()]).unwrap();
        for size in 1..8 {
            let pieces: Vec<&[u8]> = text.as_bytes().chunks(size).collect();
            assert_eq!(decode(&pieces).unwrap(), whole, "pieces of {size} bytes");
        }
        assert_eq!(whole[1], "[DONE]");
    }

    #[test]
    fn data_pending_at_the_end_of_the_body_is_delivered() {
        assert_eq!(decode(&[b"data: [DONE]"]).unwrap(), ["[DONE]"]);
        assert_eq!(decode(&[b"data: [DONE]\n"]).unwrap(), ["[DONE]"]);
        assert!(decode(&[b": only a comment\n"]).unwrap().is_empty());
    }

    #[test]
    fn an_empty_data_line_makes_an_event_with_empty_data() {
        assert_eq!(decode(&[b"data\n\ndata:\n\n"]).unwrap(), ["", ""]);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_an_error() {
        assert_eq!(decode(&[b"data: \xff\xfe\n\n"]), Err(SseError::NotUtf8));
    }
}
