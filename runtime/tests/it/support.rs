//! Shared helpers: where the built libraries are, temporary plugin folders,
//! installing by write-then-rename; [`test_server`] for a real model
//! server behind a recording proxy.

// An API for end-to-end tests: not every part is used by every module.
#[allow(dead_code)]
pub mod test_server;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use foveal::registry::{PluginDir, Registry, RegistryOptions};

/// The cargo profile folder the tests were built into (`target/debug`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/debug/deps/it-<hash> → target/debug
    exe.parent()
        .and_then(Path::parent)
        .expect("profile dir")
        .to_path_buf()
}

/// The built library of a fixture crate (`counter-v1` → `libfoveal_fixture_counter_v1.so`)
/// or of a first-party skill (`skill:awareness`).
pub fn library(name: &str) -> PathBuf {
    let stem = match name.strip_prefix("skill:") {
        Some(skill) => format!("foveal_skill_{}", skill.replace('-', "_")),
        None => format!("foveal_fixture_{}", name.replace('-', "_")),
    };
    let file = format!(
        "{}{stem}.{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_EXTENSION
    );
    let path = profile_dir().join(file);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace` before `cargo test` (cargo test does not build cdylib crates)",
        path.display()
    );
    path
}

/// The file name a library gets in a plugins folder.
pub fn file_name(stem: &str) -> String {
    format!(
        "{}{stem}.{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_EXTENSION
    )
}

/// Installs `library` into `dir` as `name` the documented way: write a
/// hidden temporary file in the same folder, then rename it into place.
pub fn install(library: &Path, dir: &Path, name: &str) -> PathBuf {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::copy(library, &tmp).expect("copy to temporary file");
    let target = dir.join(name);
    std::fs::rename(&tmp, &target).expect("rename into place");
    target
}

/// A plugins folder and a shadow folder that disappear with the value.
pub struct Sandbox {
    pub root: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(root.path().join("plugins")).unwrap();
        Self { root }
    }

    pub fn plugins(&self) -> PathBuf {
        self.root.path().join("plugins")
    }

    pub fn shadow(&self) -> PathBuf {
        self.root.path().join("shadow")
    }

    pub fn options(&self) -> RegistryOptions {
        RegistryOptions {
            dirs: vec![PluginDir {
                path: self.plugins(),
                first_party_only: false,
            }],
            shadow_dir: self.shadow(),
            quarantine_after: 3,
            max_loads: 1000,
            allow: foveal::trust::AllowList::Any,
            hook_timeout: std::time::Duration::from_millis(
                foveal::registry::DEFAULT_HOOK_TIMEOUT_MS,
            ),
            isolation: foveal::isolation::IsolationPolicy::in_process(),
        }
    }

    /// Installs the built `fixture` (see [`library`]) into the plugins
    /// folder as `name` (see [`file_name`]), by write-then-rename.
    pub fn install(&self, fixture: &str, name: &str) -> PathBuf {
        install(&library(fixture), &self.plugins(), &file_name(name))
    }

    pub fn registry(&self) -> Registry {
        Registry::new(self.options()).expect("registry")
    }
}

/// Polls `condition` until it holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    condition()
}

/// Calls the `invoke` hook of `skill` with `method` on the current snapshot.
pub fn invoke(
    registry: &Registry,
    skill: &str,
    method: &str,
) -> Result<String, foveal::registry::Unavailable> {
    registry
        .snapshot()
        .call(skill, foveal::registry::hooks::INVOKE, {
            let method = method.to_owned();
            move |f| f(method.as_str().into(), "{}".into())
        })
        .map(|s| s.into_string())
}

/// What one skill's `components` hook renders for a memex of one Org file
/// (`@personal` private): the skill is installed from `library` into a fresh
/// sandbox and called through the registry with a real memex view.
/// Returns the first component's content and the memex generation.
pub fn components_for(
    library: &Path,
    skill: &str,
    org: &str,
    focus: Option<&str>,
    config: &str,
) -> (foveal_sdk::Component, u64) {
    let (mut components, generation) =
        components_for_files(library, skill, &[("main.org", org)], focus, config);
    (components.remove(0), generation)
}

/// [`components_for`] over a memex of several files (name, Org text):
/// every component the hook returned.
pub fn components_for_files(
    library: &Path,
    skill: &str,
    files: &[(&str, &str)],
    focus: Option<&str>,
    config: &str,
) -> (Vec<foveal_sdk::Component>, u64) {
    use foveal::memex::{Memex, privacy::PrivacyTags, view::SnapshotView};

    let sandbox = Sandbox::new();
    install(library, &sandbox.plugins(), &file_name(skill));
    let registry = sandbox.registry();
    registry.scan();
    let dir = sandbox.root.path().join("memex");
    std::fs::create_dir(&dir).unwrap();
    for (name, org) in files {
        std::fs::write(dir.join(name), org).unwrap();
    }
    let memex = Memex::open(&[dir]).unwrap();
    let snapshot = memex.snapshot();
    // The host's own path: the call goes to a thread of its own, owning
    // what it lends.
    let call = foveal::memex::view::ComponentsCall {
        view: SnapshotView::new(&snapshot, &PrivacyTags::new(["@personal"])),
        signal: foveal_sdk::SignalKind::USER,
        focus: focus.map(str::to_owned),
        budget: None,
        config: config.to_owned(),
        explain: false,
        facts: Default::default(),
    };
    let components = registry
        .snapshot()
        .call(skill, foveal::registry::hooks::COMPONENTS, move |f| {
            call.call(f)
        })
        .unwrap();
    (components.into_iter().collect(), snapshot.generation())
}

/// The real binary, to run in `cwd` with a clean environment: no
/// `FOVEAL_*`/`CONTEXT_*` variables, no config file, state under `cwd`.
pub fn foveal_command(cwd: &Path, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_foveal"));
    command.args(args);
    clean_env(&mut command, cwd);
    command
}

/// Runs `command` in `cwd` with the environment [`foveal_command`] gives
/// the binary: no `FOVEAL_*`/`CONTEXT_*` variables, no config file, state
/// under `cwd`.
pub fn clean_env(command: &mut std::process::Command, cwd: &Path) {
    command.current_dir(cwd);
    for (name, _) in std::env::vars() {
        if name.starts_with("FOVEAL_") || name.starts_with("CONTEXT_") {
            command.env_remove(name);
        }
    }
    command
        .env("FOVEAL_DATA_DIR", cwd.join("data"))
        .env("XDG_CONFIG_HOME", cwd.join("xdg"));
    // `FOVEAL_TEST_BUILTIN_ISOLATION=cell cargo test -p foveal --test it`
    // runs every real-binary test with the first-party skills in cells.
    if let Ok(place) = std::env::var("FOVEAL_TEST_BUILTIN_ISOLATION") {
        command.env("FOVEAL_BUILTIN_ISOLATION", place);
    }
}

/// Runs [`foveal_command`] to completion.
pub fn run_foveal(cwd: &Path, args: &[&str]) -> std::process::Output {
    foveal_command(cwd, args).output().expect("run foveal")
}

/// `sha256:<hex>` of `file`, as `plugins.trusted` holds it (`sha256sum`).
pub fn sha256_of(file: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(file)
        .output()
        .expect("sha256sum");
    let text = String::from_utf8(out.stdout).unwrap();
    format!("sha256:{}", text.split_whitespace().next().unwrap())
}
