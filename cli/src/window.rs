//! `foveal window add | list | rm | clear`: the context window (seed 002),
//! on the running host's session through the control socket, or on the
//! saved window when no host runs.
//!
//! The client reads what `--file` names (relative paths from where the
//! command runs) and sends the text; the skill checks the item, the host
//! saves the window. An invalid item — an unknown type, no content, a
//! `--lines` range outside the file, a file that cannot be read — is an
//! error on stderr, exit 1, and nothing is added.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::exit::Exit;
use foveal_agent::config::Config;
use foveal_agent::control::{self, ClientError, Reply, Request};
use foveal_prompt::window::{AddRequest, Window, WindowError, WindowOp};

/// The largest item the command line sends (the control socket takes
/// requests of at most 1 MiB).
pub const MAX_ITEM_BYTES: usize = 512 * 1024;

/// What `foveal window add` was given.
#[derive(Debug, Clone, Default)]
pub struct AddArgs {
    /// `--type`.
    pub kind: Option<String>,
    /// `--file`.
    pub file: Option<PathBuf>,
    /// `--lines A-B`.
    pub lines: Option<String>,
    /// `--language`.
    pub language: Option<String>,
    /// `TEXT`.
    pub text: Option<String>,
}

/// A refusal of the command line itself, before anything is sent.
fn refuse(message: impl std::fmt::Display) -> Exit {
    eprintln!("error: {message}");
    Exit::NotFound
}

/// The operation `foveal window add` asks for: the file read, the lines
/// cut, the metadata made.
pub fn add_op(args: &AddArgs, stdin: &mut dyn FnMut() -> Option<String>) -> Result<WindowOp, Exit> {
    let mut metadata = serde_json::Map::new();
    let (content, default_kind) = match (&args.file, &args.text) {
        (Some(_), Some(_)) => {
            return Err(refuse(
                "give TEXT or --file PATH, not both (the file's text is the item's content)",
            ));
        }
        (None, Some(text)) => {
            if args.lines.is_some() {
                return Err(refuse("--lines needs --file PATH"));
            }
            (text.clone(), "code")
        }
        (None, None) => {
            if args.lines.is_some() {
                return Err(refuse("--lines needs --file PATH"));
            }
            match stdin() {
                Some(text) => (text, "code"),
                None => {
                    return Err(refuse(
                        "nothing to add: give TEXT, --file PATH, or pipe the text in (`cargo test 2>&1 | foveal window add --type error`)",
                    ));
                }
            }
        }
        (Some(path), None) => {
            let text = read_text(path).map_err(refuse)?;
            metadata.insert("filename".into(), json!(path.display().to_string()));
            match &args.lines {
                None => (text, "file"),
                Some(range) => {
                    let (start, end) = parse_lines(range).map_err(refuse)?;
                    let total = text.lines().count();
                    if end > total {
                        return Err(refuse(format!(
                            "--lines {range} is outside {}, which has {total} line{}",
                            path.display(),
                            if total == 1 { "" } else { "s" }
                        )));
                    }
                    let region: Vec<&str> =
                        text.lines().skip(start - 1).take(end - start + 1).collect();
                    metadata.insert("start_line".into(), json!(start));
                    metadata.insert("end_line".into(), json!(end));
                    (region.join("\n"), "code")
                }
            }
        }
    };
    if content.len() > MAX_ITEM_BYTES {
        return Err(refuse(format!(
            "the item is {} bytes; the window takes at most {} KiB at once — attach a part of it (--lines A-B)",
            content.len(),
            MAX_ITEM_BYTES / 1024
        )));
    }
    if let Some(language) = &args.language {
        metadata.insert("language".into(), json!(language));
    }
    Ok(WindowOp::Add(AddRequest {
        kind: Some(args.kind.clone().unwrap_or_else(|| default_kind.to_owned())),
        content: Some(content),
        metadata: (!metadata.is_empty()).then_some(metadata),
        item: None,
    }))
}

/// The text of `path`, or why it cannot be attached.
fn read_text(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read {}: {e}; nothing was added", path.display()))?;
    if bytes.len() > MAX_ITEM_BYTES * 4 {
        return Err(format!(
            "{} is {} bytes, too large to attach whole; attach a part of it with --lines A-B",
            path.display(),
            bytes.len()
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        format!(
            "{} is not UTF-8 text; the window holds text only",
            path.display()
        )
    })
}

/// `A-B` (or `A`): 1-based, inclusive, `A <= B`.
pub fn parse_lines(range: &str) -> Result<(usize, usize), String> {
    let bad = || {
        format!(
            "--lines {range:?}: expected A-B, two line numbers from 1 with A <= B (e.g. 10-20), or one line number"
        )
    };
    let (a, b) = match range.split_once('-') {
        Some((a, b)) => (a.trim(), b.trim()),
        None => (range.trim(), range.trim()),
    };
    let a: usize = a.parse().map_err(|_| bad())?;
    let b: usize = b.parse().map_err(|_| bad())?;
    if a == 0 || b < a {
        return Err(bad());
    }
    Ok((a, b))
}

/// Reads stdin when it is not a terminal.
pub fn piped_stdin() -> Option<String> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return None;
    }
    let mut text = String::new();
    stdin.lock().read_to_string(&mut text).ok()?;
    let text = text.trim_end_matches(['\n', '\r']).to_owned();
    (!text.is_empty()).then_some(text)
}

/// Runs `op` on the running host's window, or on the saved one, and prints
/// the answer.
pub fn run(
    config: &Config,
    session: Option<&str>,
    op: &WindowOp,
    json: bool,
) -> anyhow::Result<Exit> {
    let mut answer: Option<Result<(String, Value), String>> = None;
    let mut other_session = None;
    let request = Request::Window {
        op: op.clone(),
        session: session.map(str::to_owned),
    };
    let result = crate::agent::runtime()?.block_on(control::request(
        &crate::agent::socket(config),
        &request,
        |reply| {
            match reply {
                Reply::Window { session, result } => answer = Some(Ok((session, result))),
                Reply::WindowError { message } | Reply::Error { message } => {
                    answer = Some(Err(message));
                }
                Reply::OtherSession { session } => other_session = Some(session),
                _ => return true,
            }
            false
        },
    ));
    let answer = match (result, answer) {
        (Ok(()), Some(answer)) => answer,
        (Ok(()), None) => match other_session {
            // The host runs another session: the asked one's saved window.
            Some(running) => {
                eprintln!(
                    "note: the running host's session is {running}; changing the saved window of session {}",
                    session.unwrap_or(&config.agent.session)
                );
                offline(config, session, op)
            }
            None => Err("the host closed the connection without answering".to_owned()),
        },
        // No host runs: the saved window.
        (Err(ClientError::Connect { .. }), _) => offline(config, session, op),
        (Err(error), _) => Err(error.to_string()),
    };
    match answer {
        Ok((session, result)) => {
            print(op, &session, &result, json)?;
            Ok(Exit::Ok)
        }
        Err(message) => Ok(refuse(message)),
    }
}

/// `op` on the saved window of `session` (the configuration's when none),
/// with the skill loaded in this process.
fn offline(
    config: &Config,
    session: Option<&str>,
    op: &WindowOp,
) -> Result<(String, Value), String> {
    let session = session.unwrap_or(&config.agent.session).to_owned();
    let registry = crate::skills::open_registry(config).map_err(|e| e.to_string())?;
    let window = Window::open(
        &config.data_dir,
        &session,
        config.window,
        Arc::new(registry),
    )
    .map_err(|e| e.to_string())?;
    window
        .apply(op)
        .map(|result| (session, result))
        .map_err(|error: WindowError| error.to_string())
}

/// Prints the answer of `op`.
fn print(op: &WindowOp, session: &str, result: &Value, json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        let shown = match op {
            // The seed's context-manager object: items of its schema,
            // max_items; with the token bound and the tokens used.
            WindowOp::List { .. } => json!({
                "session": session,
                "items": result["items"],
                "max_items": result["max_items"],
                "max_tokens": result["max_tokens"],
                "tokens": result["total_tokens"],
            }),
            _ => {
                let mut shown = result.clone();
                shown["session"] = json!(session);
                shown
            }
        };
        serde_json::to_writer_pretty(&mut out, &shown)?;
        return writeln!(out);
    }
    match op {
        WindowOp::Add(_) => {
            let added = &result["added"];
            writeln!(
                out,
                "added {} ({}{}) to the window of session {session}",
                added["id"].as_str().unwrap_or("?"),
                added["type"].as_str().unwrap_or("?"),
                from(added)
                    .map(|f| format!(", from {f}"))
                    .unwrap_or_default()
            )?;
            for evicted in result["evicted"].as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "evicted {} (the oldest; the window is bounded by window.max_items and window.max_tokens)",
                    evicted["id"].as_str().unwrap_or("?")
                )?;
            }
        }
        WindowOp::List { .. } => {
            let items = result["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                return writeln!(out, "the window of session {session} is empty");
            }
            writeln!(out, "ID       TYPE          TOKENS  FROM / FIRST LINE")?;
            for (n, item) in items.iter().enumerate() {
                let tokens = result["tokens"][n].as_u64().unwrap_or(0);
                let first = item["content"]
                    .as_str()
                    .unwrap_or("")
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim();
                let shown = from(item).unwrap_or_else(|| first.chars().take(60).collect());
                writeln!(
                    out,
                    "{:<8} {:<13} {:>6}  {shown}",
                    item["id"].as_str().unwrap_or("?"),
                    item["type"].as_str().unwrap_or("?"),
                    tokens
                )?;
            }
            let max_tokens = result["max_tokens"].as_u64().unwrap_or(0);
            writeln!(
                out,
                "{} item{} of at most {}, {} token{}{} (session {session})",
                items.len(),
                if items.len() == 1 { "" } else { "s" },
                result["max_items"],
                result["total_tokens"],
                if result["total_tokens"] == 1 { "" } else { "s" },
                if max_tokens > 0 {
                    format!(" of at most {max_tokens}")
                } else {
                    String::new()
                }
            )?;
        }
        WindowOp::Remove { .. } => writeln!(
            out,
            "removed {} from the window of session {session}",
            result["removed"]["id"].as_str().unwrap_or("?")
        )?,
        WindowOp::Clear => {
            let n = result["cleared"].as_u64().unwrap_or(0);
            writeln!(
                out,
                "cleared {n} item{} from the window of session {session}",
                if n == 1 { "" } else { "s" }
            )?;
        }
    }
    Ok(())
}

/// `file:start-end` of an item's metadata.
fn from(item: &Value) -> Option<String> {
    let metadata = &item["metadata"];
    let file = metadata["filename"].as_str()?;
    Some(
        match (
            metadata["start_line"].as_u64(),
            metadata["end_line"].as_u64(),
        ) {
            (Some(a), Some(b)) => format!("{file}:{a}-{b}"),
            (Some(a), None) => format!("{file}:{a}"),
            _ => file.to_owned(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ranges_are_checked() {
        assert_eq!(parse_lines("10-20"), Ok((10, 20)));
        assert_eq!(parse_lines("7"), Ok((7, 7)));
        assert!(parse_lines("0-3").is_err());
        assert!(parse_lines("5-2").is_err());
        assert!(parse_lines("a-b").unwrap_err().contains("expected A-B"));
    }

    #[test]
    fn a_file_region_becomes_code_with_its_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.py");
        std::fs::write(&path, "a = 1\nb = 2\nc = 3\n").unwrap();
        let args = AddArgs {
            file: Some(path.clone()),
            lines: Some("2-3".into()),
            ..AddArgs::default()
        };
        let WindowOp::Add(request) = add_op(&args, &mut || None).unwrap() else {
            panic!("not an add");
        };
        assert_eq!(request.kind.as_deref(), Some("code"));
        assert_eq!(request.content.as_deref(), Some("b = 2\nc = 3"));
        let metadata = request.metadata.unwrap();
        assert_eq!(metadata["start_line"], 2);
        assert_eq!(metadata["end_line"], 3);
        let outside = AddArgs {
            lines: Some("3-4".into()),
            ..args.clone()
        };
        assert!(add_op(&outside, &mut || None).is_err());
        let whole = AddArgs {
            lines: None,
            ..args
        };
        let WindowOp::Add(request) = add_op(&whole, &mut || None).unwrap() else {
            panic!("not an add");
        };
        assert_eq!(request.kind.as_deref(), Some("file"));
    }
}
