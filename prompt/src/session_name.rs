//! What may name a session: the settings, the context window and the
//! session store check names alike, without one of them importing another.

/// The session used when none is named.
pub const DEFAULT_SESSION: &str = "default";

/// Whether `name` can name a session file.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}
