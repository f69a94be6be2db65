//! Embeds the SDK's source (`sdk/`, `sdk-build/`, `org/`: manifests,
//! READMEs, `src/`) and the workspace manifest in the binary, for
//! `foveal skill new` to write a copy of the SDK beside a new skill when
//! the checkout the binary was built from is gone.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const CRATES: [&str; 3] = ["sdk", "sdk-build", "org"];

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().expect("workspace root").to_path_buf();
    let mut files = Vec::new();
    for krate in CRATES {
        let dir = root.join(krate);
        for name in ["Cargo.toml", "README.md"] {
            if dir.join(name).is_file() {
                files.push(PathBuf::from(krate).join(name));
            }
        }
        collect(&root, &dir.join("src"), &mut files);
        println!(
            "cargo:rerun-if-changed={}",
            dir.join("Cargo.toml").display()
        );
        println!("cargo:rerun-if-changed={}", dir.join("README.md").display());
        println!("cargo:rerun-if-changed={}", dir.join("src").display());
    }
    files.sort();
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.toml").display()
    );
    let mut out = String::from(
        "/// The SDK's files: (path under the workspace root, text).\npub const SDK_FILES: &[(&str, &str)] = &[\n",
    );
    for file in &files {
        let shown = file.to_string_lossy().replace('\\', "/");
        let _ = writeln!(
            out,
            "    ({shown:?}, include_str!({:?})),",
            root.join(file).display().to_string()
        );
    }
    out.push_str("];\n");
    let _ = writeln!(
        out,
        "/// The workspace manifest (its `[workspace.package]` and `[workspace.dependencies]`).\npub const WORKSPACE_MANIFEST: &str = include_str!({:?});",
        root.join("Cargo.toml").display().to_string()
    );
    let target = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("sdk_files.rs");
    std::fs::write(&target, out).expect("write sdk_files.rs");
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
}
