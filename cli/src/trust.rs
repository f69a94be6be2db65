//! `foveal skill trust FILE…`: puts library builds on the allow-list.
//!
//! Prints each file's digest as `sha256sum` does (`sha256:<hex>  FILE`) and
//! adds the digests to `plugins.trusted` of the config file in use — the one
//! [`Config::load`](foveal_agent::config::Config::load) found — editing it in place
//! with `toml_edit`, so its comments, order and spacing stay as they were.
//! With no config file in use it says which file to create and prints what
//! to put in it. The allow-list is enforced only with
//! `plugins.require_trusted = true` ([`foveal_registry::trust`]).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::exit::Exit;
use foveal_agent::config::Config;
use foveal_registry::trust::Sha256;

/// `foveal skill trust FILE…`.
pub fn run(config: &Config, files: &[PathBuf]) -> anyhow::Result<Exit> {
    // Every file first: one that cannot be read saves nothing.
    let mut digests = Vec::with_capacity(files.len());
    for file in files {
        let digest =
            Sha256::of_file(file).with_context(|| format!("cannot read {}", file.display()))?;
        digests.push(digest);
    }
    let mut out = std::io::stdout().lock();
    for (file, digest) in files.iter().zip(&digests) {
        writeln!(out, "{digest}  {}", file.display())?;
    }
    out.flush()?;
    for file in files {
        // Trusted or not, a file others can change is refused at load.
        if let Ok(Err(fault)) = foveal_registry::trust::check_path(file) {
            eprintln!("warning: {fault}: until then foveal refuses to load it");
        }
    }

    let Some(path) = &config.file else {
        let create = foveal_agent::config::user_file(&foveal_agent::config::process_env)
            .unwrap_or_else(|| PathBuf::from("config/foveal.toml"));
        eprintln!(
            "no config file is in use, so nothing was saved; create {} (or pass --config FILE) with:\n\n{}",
            create.display(),
            new_section(&digests)
        );
        return Ok(Exit::NotFound);
    };
    let added = add_trusted(path, &digests)?;
    let known = digests.len() - added;
    let count = |n: usize| {
        if n == 1 {
            "1 digest".to_owned()
        } else {
            format!("{n} digests")
        }
    };
    match (added, known) {
        (0, _) => eprintln!("already in plugins.trusted of {}", path.display()),
        (n, 0) => eprintln!(
            "added {} to plugins.trusted of {}",
            count(n),
            path.display()
        ),
        (n, k) => eprintln!(
            "added {} to plugins.trusted of {} ({} already there)",
            count(n),
            path.display(),
            count(k)
        ),
    }
    if !config.plugins.require_trusted {
        eprintln!(
            "note: plugins.require_trusted is false, so libraries not on the list load too; set it to true to run only these"
        );
    }
    Ok(Exit::Ok)
}

/// The `[plugins]` table to paste into a new config file.
fn new_section(digests: &[Sha256]) -> String {
    let mut text = String::from("[plugins]\nrequire_trusted = true\ntrusted = [\n");
    for digest in digests {
        text.push_str(&format!("    \"{digest}\",\n"));
    }
    text.push_str("]\n");
    text
}

/// Adds the digests not yet listed to `plugins.trusted` of the TOML file at
/// `path`, keeping everything else of the file as it is; returns how many
/// were added.
pub fn add_trusted(path: &Path, digests: &[Sha256]) -> anyhow::Result<usize> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let (edited, added) = with_trusted(&text, digests)
        .with_context(|| format!("cannot edit config file {}", path.display()))?;
    if added > 0 {
        replace_file(path, &edited)
            .with_context(|| format!("cannot write config file {}", path.display()))?;
    }
    Ok(added)
}

/// `text` with the digests not yet in `plugins.trusted` appended to it, and
/// how many that was.
fn with_trusted(text: &str, digests: &[Sha256]) -> anyhow::Result<(String, usize)> {
    use toml_edit::{Array, DocumentMut, Item, Value};
    let mut doc: DocumentMut = text.parse()?;
    let plugins = doc
        .entry("plugins")
        .or_insert_with(toml_edit::table)
        .as_table_like_mut()
        .context("`plugins` is not a table")?;
    if plugins.get("trusted").is_none() {
        plugins.insert("trusted", Item::Value(Value::Array(Array::new())));
    }
    let list = plugins
        .get_mut("trusted")
        .and_then(Item::as_array_mut)
        .context("`plugins.trusted` is not an array")?;
    // One digest a line, as a new list is written; an existing list on one
    // line stays on one line.
    let one_a_line = list.is_empty()
        || list.iter().any(|v| {
            v.decor()
                .prefix()
                .and_then(|p| p.as_str())
                .is_some_and(|p| p.contains('\n'))
        });
    let mut added = 0;
    for digest in digests {
        // Listed before, or given twice.
        let already = list
            .iter()
            .filter_map(|v| v.as_str().and_then(|s| s.trim().parse::<Sha256>().ok()))
            .any(|d| d == *digest);
        if already {
            continue;
        }
        if one_a_line {
            // A comment after the last entry (or alone in an empty list)
            // stays where it was: before the new entry.
            let trailing = list.trailing().as_str().unwrap_or_default();
            let before = if trailing.contains('#') {
                trailing.trim_end().to_owned()
            } else {
                String::new()
            };
            list.set_trailing("");
            let mut value = Value::from(digest.to_string());
            value.decor_mut().set_prefix(format!("{before}\n    "));
            list.push_formatted(value);
        } else {
            list.push(digest.to_string());
        }
        added += 1;
    }
    if one_a_line && added > 0 {
        list.set_trailing_comma(true);
        list.set_trailing("\n");
    }
    Ok((doc.to_string(), added))
}

/// Replaces the file at `path` (through a symlink, its target) with `text`
/// by writing a temporary file beside it and renaming it into place: a
/// crash leaves the old file or the new one, never half of one. The new
/// file gets the old one's permissions.
fn replace_file(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::os::unix::fs::PermissionsExt as _;
    let target = std::fs::canonicalize(path)?;
    let mode = std::fs::metadata(&target)?.permissions().mode();
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = target.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode & 0o7777)
            .open(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, &target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(n: u8) -> Sha256 {
        Sha256([n; 32])
    }

    #[test]
    fn a_new_list_goes_under_plugins_one_digest_a_line_and_comments_stay() {
        let text = "# my settings\n[plugins]\n# where skills live\ndir = \"p\" # here\n\n# the context\n[context]\nmax_tokens = 5\n";
        let (edited, added) = with_trusted(text, &[digest(1), digest(2)]).unwrap();
        assert_eq!(added, 2);
        let one = digest(1).to_string();
        let two = digest(2).to_string();
        assert_eq!(
            edited,
            format!(
                "# my settings\n[plugins]\n# where skills live\ndir = \"p\" # here\ntrusted = [\n    \"{one}\",\n    \"{two}\",\n]\n\n# the context\n[context]\nmax_tokens = 5\n"
            )
        );
        // Again: nothing to add, nothing changes.
        let (again, added) = with_trusted(&edited, &[digest(2), digest(1)]).unwrap();
        assert_eq!((again.as_str(), added), (edited.as_str(), 0));
    }

    #[test]
    fn an_existing_list_keeps_its_style() {
        let one = digest(1).to_string();
        let text = format!("[plugins]\ntrusted = [\"{one}\"]\n");
        let (edited, added) = with_trusted(&text, &[digest(1), digest(3)]).unwrap();
        assert_eq!(added, 1);
        assert_eq!(
            edited,
            format!("[plugins]\ntrusted = [\"{one}\", \"{}\"]\n", digest(3))
        );
        let text = format!("[plugins]\ntrusted = [\n  \"{one}\", # the first\n]\n");
        let (edited, _) = with_trusted(&text, &[digest(3)]).unwrap();
        assert_eq!(
            edited,
            format!(
                "[plugins]\ntrusted = [\n  \"{one}\", # the first\n    \"{}\",\n]\n",
                digest(3)
            )
        );
        let text = "[plugins]\ntrusted = [\n    # none yet\n]\n";
        let (edited, _) = with_trusted(text, &[digest(3)]).unwrap();
        assert_eq!(
            edited,
            format!(
                "[plugins]\ntrusted = [\n    # none yet\n    \"{}\",\n]\n",
                digest(3)
            )
        );
    }

    #[test]
    fn a_file_without_plugins_gets_the_table_and_a_wrong_type_is_an_error() {
        let (edited, _) = with_trusted("[context]\nmax_tokens = 5\n", &[digest(1)]).unwrap();
        assert!(
            edited.starts_with("[context]\nmax_tokens = 5\n\n[plugins]\ntrusted = [\n"),
            "{edited}"
        );
        let err = with_trusted("[plugins]\ntrusted = 3\n", &[digest(1)]).unwrap_err();
        assert_eq!(err.to_string(), "`plugins.trusted` is not an array");
    }
}
