//! `foveal skill new NAME`: writes a complete skill crate that builds as it
//! is — `Cargo.toml`, `build.rs`, `src/lib.rs` with working examples of the
//! chosen hooks, a test on `foveal_sdk::testing`, `README.md` (the literate
//! source `foveal skill-source` shows) and `.gitignore`.
//!
//! The SDK dependency is resolved so that the crate builds on this machine:
//! a path to the `sdk/` of the checkout this binary was built from, when
//! that checkout is still there; else a copy of the SDK's source, which the
//! binary carries, written beside the skill (`foveal-sdk/`). The generated
//! README says which.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::exit::Exit;
use foveal_agent::config::Config;

/// The hooks `--hooks` may name.
pub const HOOKS: [&str; 3] = ["components", "tools", "redact"];

/// The hooks a new skill gets when `--hooks` is not given.
pub const DEFAULT_HOOKS: [&str; 2] = ["components", "tools"];

/// Where the template's prompt component id is looked for: the free ids
/// between the host's `4000` (goals) and `5000` (history) slots, which no
/// first-party skill declares.
const COMPONENT_IDS: std::ops::RangeInclusive<u32> = 4100..=4999;

/// The checkout this binary was built from (`runtime/..`), known at
/// compile time; it may be gone at run time.
const CHECKOUT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// How the generated crate depends on the SDK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdkSource {
    /// The `sdk/` and `sdk-build/` of this checkout.
    Checkout(PathBuf),
    /// A copy of the SDK written beside the skill, in `foveal-sdk/`.
    Copy,
}

/// What `skill new` was asked for.
#[derive(Debug, Clone)]
pub struct NewOptions {
    /// The skill's name.
    pub name: String,
    /// The crate folder (default `./NAME`).
    pub path: Option<PathBuf>,
    /// The hooks, from `--hooks`.
    pub hooks: Option<String>,
    /// Write a copy of the SDK into the crate even when the checkout is
    /// there (`--vendor-sdk`).
    pub vendor_sdk: bool,
}

/// `foveal skill new NAME [--path DIR] [--hooks …]`.
pub fn run(config: &Config, options: &NewOptions) -> anyhow::Result<Exit> {
    let name = options.name.as_str();
    if let Err(reason) = check_new_name(name) {
        eprintln!(
            "error: invalid skill name {name:?}: {reason}. A skill name is lowercase ASCII letters, digits, '-' and '_', starts with a letter, and is at most 64 bytes (e.g. `reading-list`)"
        );
        return Ok(Exit::Usage);
    }
    let hooks = match parse_hooks(options.hooks.as_deref()) {
        Ok(hooks) => hooks,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(Exit::Usage);
        }
    };
    let dir = options.path.clone().unwrap_or_else(|| PathBuf::from(name));
    if let Err(message) = check_target(&dir) {
        eprintln!("error: {message}");
        return Ok(Exit::Usage);
    }
    let sdk = if options.vendor_sdk {
        SdkSource::Copy
    } else {
        sdk_source()
    };
    let component_id = if hooks.contains(&"components") {
        Some(free_component_id(config))
    } else {
        None
    };
    let template = Template {
        name,
        hooks: &hooks,
        component_id,
        sdk: &sdk,
    };
    let files = template.files();
    write_files(&dir, &files)?;
    if let SdkSource::Copy = sdk {
        for (path, text) in crate::sdk_copy::files()? {
            write_file(&dir.join("foveal-sdk").join(path), &text)?;
        }
    }
    if let SdkSource::Checkout(root) = &sdk
        && let Ok(lock) = std::fs::read(root.join("Cargo.lock"))
    {
        // The checkout's lock: the versions the SDK is tested with, all in
        // the local registry cache once the host is built, so the first
        // build needs no index update. Cargo drops the entries the skill
        // does not use.
        std::fs::write(dir.join("Cargo.lock"), lock)?;
    }

    let shown = dir.display();
    println!(
        "created skill `{name}` in {shown} (hooks: {})",
        hooks.join(", ")
    );
    match &sdk {
        SdkSource::Checkout(root) => println!(
            "foveal-sdk: path dependency on {} (the checkout this foveal was built from)",
            root.join("sdk").display()
        ),
        SdkSource::Copy => println!(
            "foveal-sdk: a copy of foveal-sdk {} written to {}/foveal-sdk ({})",
            foveal_sdk::SDK_VERSION,
            shown,
            if options.vendor_sdk {
                "--vendor-sdk"
            } else {
                "the checkout this foveal was built from is not on this machine"
            }
        ),
    }
    if let Some(id) = component_id {
        println!("prompt component id: {id} (no installed skill declares it)");
    }
    println!("\nnext:");
    println!("  cd {shown}");
    println!("  cargo build --release && cargo test");
    let library = format!("target/release/{}", library_file(name));
    println!("  foveal skill check {library}");
    println!("  foveal skill install {library}");
    println!("docs/writing-a-skill.md walks through the rest.");
    Ok(Exit::Ok)
}

/// The rule for a new skill's name: the loader's ([`foveal_registry::loader::check_skill_name`]),
/// and never a path.
pub fn check_new_name(name: &str) -> Result<(), &'static str> {
    if name.contains('/') || name.contains('\\') || name.contains("..") {
        return Err("it is a path; give the folder with --path and a plain name");
    }
    foveal_registry::loader::check_skill_name(name)
}

/// The crate's package name: `NAME-skill` (its library
/// `libNAME_skill.so`), apart from the first-party `foveal-skill-*`.
pub fn package_name(name: &str) -> String {
    format!("{name}-skill")
}

/// The file `cargo build` writes for skill `name`.
pub fn library_file(name: &str) -> String {
    format!(
        "{}{}.{}",
        std::env::consts::DLL_PREFIX,
        package_name(name).replace('-', "_"),
        std::env::consts::DLL_EXTENSION
    )
}

fn parse_hooks(given: Option<&str>) -> Result<Vec<&'static str>, String> {
    let Some(given) = given else {
        return Ok(DEFAULT_HOOKS.to_vec());
    };
    let mut hooks = Vec::new();
    for word in given.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let word = if word == "run_tool" || word == "call_tool" {
            "tools"
        } else {
            word
        };
        match HOOKS.iter().find(|h| **h == word) {
            Some(hook) if !hooks.contains(hook) => hooks.push(*hook),
            Some(_) => {}
            None => {
                return Err(format!(
                    "unknown hook {word:?} in --hooks; choose from {}",
                    HOOKS.join(", ")
                ));
            }
        }
    }
    if hooks.is_empty() {
        return Err(format!(
            "--hooks names no hook; choose one or more of {}",
            HOOKS.join(", ")
        ));
    }
    // The order of the generated file, whatever the order given.
    hooks.sort_by_key(|h| HOOKS.iter().position(|x| x == h));
    Ok(hooks)
}

/// The crate folder must be new or empty: `skill new` never overwrites.
fn check_target(dir: &Path) -> Result<(), String> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(format!(
                    "{} is not empty; `foveal skill new` writes only into a new or empty folder (choose another with --path)",
                    dir.display()
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if dir.exists() && !dir.is_dir() => Err(format!(
            "{} exists and is not a folder ({e})",
            dir.display()
        )),
        Err(e) => Err(format!("cannot read {}: {e}", dir.display())),
    }
}

/// The SDK of this binary's checkout when it is still there, else a copy.
pub fn sdk_source() -> SdkSource {
    let root = Path::new(CHECKOUT);
    let is_sdk = |dir: &str, package: &str| {
        std::fs::read_to_string(root.join(dir).join("Cargo.toml"))
            .is_ok_and(|text| text.contains(&format!("name = \"{package}\"")))
    };
    if is_sdk("sdk", "foveal-sdk") && is_sdk("sdk-build", "foveal-sdk-build") {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        SdkSource::Checkout(root)
    } else {
        SdkSource::Copy
    }
}

/// The lowest id in [`COMPONENT_IDS`] that no skill the configuration
/// loads declares (the host refuses a second skill declaring an id).
fn free_component_id(config: &Config) -> u32 {
    let taken: Vec<u32> = match crate::skills::open_registry(config) {
        Ok(registry) => registry
            .snapshot()
            .skills()
            .flat_map(|slot| slot.skill().info().component_ids.clone())
            .collect(),
        Err(_) => Vec::new(),
    };
    COMPONENT_IDS
        .clone()
        .find(|id| !taken.contains(id))
        .unwrap_or(*COMPONENT_IDS.start())
}

fn write_files(dir: &Path, files: &[(&str, String)]) -> anyhow::Result<()> {
    for (path, text) in files {
        write_file(&dir.join(path), text)?;
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The files of a new skill crate.
#[derive(Debug)]
pub struct Template<'a> {
    /// The skill's name.
    pub name: &'a str,
    /// Its hooks (of [`HOOKS`]).
    pub hooks: &'a [&'static str],
    /// The component id its `components` hook fills.
    pub component_id: Option<u32>,
    /// Where its SDK comes from.
    pub sdk: &'a SdkSource,
}

const LIB_RS: &str = include_str!("skill_template/lib.rs");
const TESTS_RS: &str = include_str!("skill_template/tests.rs");
const README_MD: &str = include_str!("skill_template/README.md");
const CARGO_TOML: &str = include_str!("skill_template/Cargo.toml.in");

impl Template<'_> {
    /// Each file, as (path in the crate, text).
    pub fn files(&self) -> Vec<(&'static str, String)> {
        vec![
            ("Cargo.toml", self.render(CARGO_TOML)),
            (
                "build.rs",
                "// Embeds README.md and src/ in the library: `foveal skill-source` prints them.\nfn main() {\n    foveal_sdk_build::embed_source();\n}\n"
                    .to_owned(),
            ),
            ("src/lib.rs", self.render(LIB_RS)),
            ("src/tests.rs", self.render(TESTS_RS)),
            ("README.md", self.render(README_MD)),
            (".gitignore", "/target\n".to_owned()),
        ]
    }

    /// `text` with its `@if HOOK` … `@end` blocks kept or dropped and its
    /// `{{key}}` placeholders filled.
    pub fn render(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut keep = vec![true];
        for line in text.lines() {
            let marker = line
                .trim_start()
                .trim_start_matches(['/', '#', '<', '!', '-', ' ']);
            if let Some(condition) = marker.strip_prefix("@if ") {
                let condition = condition.trim().trim_end_matches(['-', '>', ' ']);
                let holds = self.holds(condition);
                let outer = *keep.last().unwrap_or(&true);
                keep.push(outer && holds);
                continue;
            }
            if marker.trim_end().trim_end_matches(['-', '>', ' ']) == "@end" {
                if keep.len() > 1 {
                    keep.pop();
                }
                continue;
            }
            if *keep.last().unwrap_or(&true) {
                out.push_str(&self.fill(line));
                out.push('\n');
            }
        }
        out
    }

    /// Whether a block's condition holds: a hook name, `not HOOK`, the
    /// SDK source (`sdk-checkout`, `sdk-copy`), or `A or B`.
    fn holds(&self, condition: &str) -> bool {
        if condition.contains(" or ") {
            return condition.split(" or ").any(|c| self.holds(c.trim()));
        }
        if let Some(hook) = condition.strip_prefix("not ") {
            return !self.holds(hook.trim());
        }
        match condition {
            "sdk-checkout" => matches!(self.sdk, SdkSource::Checkout(_)),
            "sdk-copy" => matches!(self.sdk, SdkSource::Copy),
            hook => self.hooks.contains(&hook),
        }
    }

    fn fill(&self, line: &str) -> String {
        if !line.contains("{{") {
            return line.to_owned();
        }
        let (sdk_dep, sdk_build_dep) = match self.sdk {
            SdkSource::Checkout(root) => (
                format!(
                    "path = {}",
                    toml_string(&root.join("sdk").display().to_string())
                ),
                format!(
                    "path = {}",
                    toml_string(&root.join("sdk-build").display().to_string())
                ),
            ),
            SdkSource::Copy => (
                "path = \"foveal-sdk/sdk\"".to_owned(),
                "path = \"foveal-sdk/sdk-build\"".to_owned(),
            ),
        };
        let sdk_dir = match self.sdk {
            SdkSource::Checkout(root) => root.join("sdk").display().to_string(),
            SdkSource::Copy => "foveal-sdk/sdk".to_owned(),
        };
        let mut title = String::new();
        for (i, word) in self.name.split(['-', '_']).enumerate() {
            if i > 0 {
                title.push(' ');
            }
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                let _ = write!(title, "{}{}", first.to_ascii_uppercase(), chars.as_str());
            }
        }
        let component_id = self
            .component_id
            .map(|id| id.to_string())
            .unwrap_or_default();
        let replacements = [
            ("{{name}}", self.name.to_owned()),
            ("{{title}}", title),
            ("{{package}}", package_name(self.name)),
            ("{{library}}", library_file(self.name)),
            ("{{ident}}", self.name.replace('-', "_")),
            ("{{component_id}}", component_id),
            ("{{sdk_version}}", foveal_sdk::SDK_VERSION.to_owned()),
            ("{{sdk_dep}}", sdk_dep),
            ("{{sdk_build_dep}}", sdk_build_dep),
            ("{{sdk_dir}}", sdk_dir),
            ("{{hooks}}", self.hooks.join(", ")),
        ];
        let mut line = line.to_owned();
        for (key, value) in replacements {
            line = line.replace(key, &value);
        }
        line
    }
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(hooks: &[&'static str], sdk: &SdkSource) -> String {
        let t = Template {
            name: "reading-list",
            hooks,
            component_id: Some(4100),
            sdk,
        };
        t.files()
            .into_iter()
            .map(|(p, text)| format!("==> {p}\n{text}"))
            .collect()
    }

    #[test]
    fn names_follow_the_loaders_rule_and_are_never_paths() {
        assert!(check_new_name("reading-list").is_ok());
        assert!(check_new_name("a1_b").is_ok());
        assert!(check_new_name("Hello").is_err());
        assert!(check_new_name("1st").is_err());
        assert!(check_new_name("").is_err());
        assert!(check_new_name("../x").is_err());
        assert!(check_new_name("a/b").is_err());
        assert!(check_new_name("with space").is_err());
    }

    #[test]
    fn hooks_are_checked_deduplicated_and_ordered() {
        assert_eq!(parse_hooks(None).unwrap(), DEFAULT_HOOKS);
        assert_eq!(
            parse_hooks(Some("redact, components,redact")).unwrap(),
            ["components", "redact"]
        );
        assert_eq!(parse_hooks(Some("run_tool")).unwrap(), ["tools"]);
        assert!(
            parse_hooks(Some("budget"))
                .unwrap_err()
                .contains("unknown hook")
        );
        assert!(parse_hooks(Some(",")).is_err());
    }

    #[test]
    fn only_the_chosen_hooks_are_written_and_every_placeholder_is_filled() {
        let sdk = SdkSource::Checkout(PathBuf::from("/src/foveal"));
        let all = template(&["components", "tools", "redact"], &sdk);
        assert!(!all.contains("{{"), "{all}");
        assert!(!all.contains("@if") && !all.contains("@end"), "{all}");
        assert!(all.contains("path = \"/src/foveal/sdk\""), "{all}");
        assert!(all.contains("fn components("));
        assert!(all.contains("fn run_tool("));
        assert!(all.contains("fn redact("));
        assert!(all.contains("4100"));

        let redact_only = template(&["redact"], &SdkSource::Copy);
        assert!(!redact_only.contains("{{"), "{redact_only}");
        assert!(redact_only.contains("fn redact("));
        assert!(!redact_only.contains("fn components("));
        assert!(!redact_only.contains("fn run_tool("));
        assert!(redact_only.contains("path = \"foveal-sdk/sdk\""));
    }

    #[test]
    fn a_non_empty_folder_is_refused_and_a_new_or_empty_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_target(dir.path()).is_ok());
        assert!(check_target(&dir.path().join("new")).is_ok());
        std::fs::write(dir.path().join("x"), "").unwrap();
        let error = check_target(dir.path()).unwrap_err();
        assert!(error.contains("is not empty"), "{error}");
        assert!(check_target(&dir.path().join("x")).is_err());
    }

    #[test]
    fn this_checkout_is_found() {
        assert!(matches!(sdk_source(), SdkSource::Checkout(_)));
    }
}
