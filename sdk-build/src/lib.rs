//! Build-script helper for foveal skills: embeds the skill's literate source.
//!
//! `foveal skill-source NAME` prints what a skill is made of — its prose
//! (`README.md`, `*.org`, `*.md` at the crate root) followed by every file
//! under `src/`. This crate gathers those files at build time into
//! `$OUT_DIR/foveal-skill-source.txt`, which `foveal_sdk::export_skill!`
//! includes in the library. The text is therefore always the source the
//! library was built from, even after the crate has moved or changed.
//!
//! # Example
//!
//! `build.rs` of a skill crate:
//!
//! ```no_run
//! foveal_sdk_build::embed_source();
//! ```
//!
//! It reads the crate's own files at build time and writes one file into
//! `OUT_DIR`; it may not read outside the crate, and it depends on no other
//! foveal crate.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The name of the file written into `OUT_DIR`.
pub const SOURCE_FILE_NAME: &str = "foveal-skill-source.txt";

/// Gathers the crate's literate source into `$OUT_DIR` and tells cargo to
/// rebuild when any of it changes. Call it from `build.rs`.
///
/// # Panics
///
/// When run outside a build script (no `CARGO_MANIFEST_DIR` or `OUT_DIR`), or
/// when a source file cannot be read: a build script reports failure by
/// panicking, and a skill must not ship without its source.
pub fn embed_source() {
    let manifest_dir = PathBuf::from(env_var("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env_var("OUT_DIR"));
    let files = source_files(&manifest_dir)
        .unwrap_or_else(|e| panic!("listing the source of {}: {e}", manifest_dir.display()));
    for line in rerun_lines(&manifest_dir, &files) {
        println!("{line}");
    }
    let text = render(&manifest_dir, &files)
        .unwrap_or_else(|e| panic!("reading the source of {}: {e}", manifest_dir.display()));
    let target = out_dir.join(SOURCE_FILE_NAME);
    std::fs::write(&target, text).unwrap_or_else(|e| panic!("writing {}: {e}", target.display()));
}

/// What the build script tells cargo to watch: `src/` (cargo walks a
/// folder for changes), `Cargo.toml` and each literate file at the crate
/// root — never the crate folder itself, which holds `target/` when the
/// crate is not in a workspace, so that every build would change it and
/// run the build again.
pub fn rerun_lines(crate_dir: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut lines = vec![
        format!("cargo:rerun-if-changed={}", crate_dir.join("src").display()),
        format!(
            "cargo:rerun-if-changed={}",
            crate_dir.join("Cargo.toml").display()
        ),
    ];
    for file in files {
        // Files under `src/` are covered by the folder.
        if file.starts_with("src") || file.as_os_str() == "Cargo.toml" {
            continue;
        }
        lines.push(format!(
            "cargo:rerun-if-changed={}",
            crate_dir.join(file).display()
        ));
    }
    lines
}

fn env_var(name: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is not set: call embed_source() from build.rs"))
}

/// The files that make up a skill's literate source, relative to the crate
/// root: first the prose at the root (`README*`, then other `*.org` and
/// `*.md`, each group sorted by name), then `Cargo.toml`, then everything
/// under `src/`, sorted by path.
pub fn source_files(crate_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut readmes = Vec::new();
    let mut prose = Vec::new();
    for entry in std::fs::read_dir(crate_dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("readme") {
            readmes.push(PathBuf::from(name));
        } else if lower.ends_with(".org") || lower.ends_with(".md") {
            prose.push(PathBuf::from(name));
        }
    }
    readmes.sort();
    prose.sort();
    let mut files = readmes;
    files.append(&mut prose);
    if crate_dir.join("Cargo.toml").is_file() {
        files.push(PathBuf::from("Cargo.toml"));
    }
    let mut code = Vec::new();
    let src = crate_dir.join("src");
    if src.is_dir() {
        collect_tree(crate_dir, &src, &mut code)?;
    }
    code.sort();
    files.append(&mut code);
    Ok(files)
}

fn collect_tree(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect_tree(root, &path, out)?;
        } else if kind.is_file() {
            let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            out.push(relative);
        }
    }
    Ok(())
}

/// Concatenates `files` (relative to `crate_dir`) under `==> path <==`
/// banners, the way `head` prints several files. Bytes that are not UTF-8
/// are replaced, so a stray binary file cannot break the build.
pub fn render(crate_dir: &Path, files: &[PathBuf]) -> std::io::Result<String> {
    let mut text = String::new();
    for (i, file) in files.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        let bytes = std::fs::read(crate_dir.join(file))?;
        // Forward slashes on every platform: the text is for people and tests.
        let shown = file.to_string_lossy().replace('\\', "/");
        let _ = writeln!(text, "==> {shown} <==");
        text.push_str(&String::from_utf8_lossy(&bytes));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_comes_first_then_manifest_then_sorted_sources() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/inner")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "// lib").unwrap();
        std::fs::write(root.join("src/inner/a.rs"), "// a").unwrap();
        std::fs::write(root.join("notes.org"), "* notes").unwrap();
        std::fs::write(root.join("README.md"), "# readme").unwrap();
        std::fs::write(root.join("Cargo.toml"), "[package]").unwrap();
        std::fs::write(root.join("build.rs"), "fn main(){}").unwrap();

        let files = source_files(root).unwrap();
        let shown: Vec<_> = files
            .iter()
            .map(|f| f.to_string_lossy().replace('\\', "/"))
            .collect();
        assert_eq!(
            shown,
            [
                "README.md",
                "notes.org",
                "Cargo.toml",
                "src/inner/a.rs",
                "src/lib.rs"
            ]
        );

        let text = render(root, &files).unwrap();
        assert!(text.starts_with("==> README.md <==\n# readme\n"));
        assert!(text.contains("\n==> src/lib.rs <==\n// lib\n"));
    }

    #[test]
    fn only_src_the_manifest_and_the_literate_files_are_watched() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("target/release")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "// lib").unwrap();
        std::fs::write(root.join("README.md"), "# r").unwrap();
        std::fs::write(root.join("notes.org"), "* n").unwrap();
        std::fs::write(root.join("Cargo.toml"), "[package]").unwrap();
        let files = source_files(root).unwrap();
        let lines = rerun_lines(root, &files);
        let watched: Vec<String> = lines
            .iter()
            .map(|l| {
                let path = l.strip_prefix("cargo:rerun-if-changed=").unwrap();
                std::path::Path::new(path)
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(watched, ["src", "Cargo.toml", "README.md", "notes.org"]);
        assert!(!lines.iter().any(|l| l.ends_with(&*root.to_string_lossy())));
    }

    #[test]
    fn non_utf8_bytes_are_replaced_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), b"ok \xff\xfe end").unwrap();
        let files = source_files(dir.path()).unwrap();
        let text = render(dir.path(), &files).unwrap();
        assert!(text.contains("ok \u{fffd}\u{fffd} end"));
    }
}
