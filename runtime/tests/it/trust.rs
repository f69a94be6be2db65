//! Only what nobody but the user (or root) can change runs or configures the
//! host: plugin folders, libraries and the config file, and — when
//! `plugins.require_trusted` is on — only libraries on the allow-list.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use foveal::loader::{LoadError, Loader};
use foveal::registry::{Idle, Registry, RegistryOptions};
use foveal::trust::{AllowList, Sha256};

use crate::support::{Sandbox, file_name, foveal_command, run_foveal};

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn is_root() -> bool {
    foveal::trust::effective_uid() == 0
}

/// The status `skill-list` would show for the library at `path`.
fn status(registry: &Registry, path: &Path) -> String {
    registry
        .snapshot()
        .rows()
        .into_iter()
        .find(|row| row.path == path)
        .map(|row| row.status)
        .unwrap_or_else(|| panic!("no row for {}", path.display()))
}

/// A gid that is nobody's private group, for a group-writable file that
/// must be refused; `None` when this user cannot give a file such a group
/// (not root, and the own primary group is private).
fn a_shared_group(file: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    if is_root() {
        let gid = 4242;
        std::os::unix::fs::chown(file, None, Some(gid)).unwrap();
        return Some(gid);
    }
    let meta = std::fs::metadata(file).unwrap();
    (!foveal::trust::is_private_group(meta.uid(), meta.gid())).then_some(meta.gid())
}

#[test]
fn a_plugin_folder_others_can_write_loads_nothing_until_it_is_fixed() {
    let sandbox = Sandbox::new();
    let lib = sandbox.install("counter-v1", "counter");
    chmod(&sandbox.plugins(), 0o777);
    let registry = sandbox.registry();
    registry.scan();
    assert!(registry.snapshot().get("counter").is_none());
    let folder = sandbox.plugins().display().to_string();
    assert_eq!(
        status(&registry, &lib),
        format!("refused: {folder} is writable by others (mode 0777); run chmod go-w {folder}")
    );
    match &registry.snapshot().idle()[&lib] {
        Idle::Refused { error, .. } => {
            assert!(matches!(**error, LoadError::Unsafe { .. }), "{error}");
            assert_eq!(error.path(), lib, "the row is the library's");
        }
        other => panic!("{other:?}"),
    }
    // Scanning again refuses the same way without publishing anything new.
    let generation = registry.snapshot().generation();
    registry.scan();
    assert_eq!(registry.snapshot().generation(), generation);

    // The sticky bit (a /tmp-like folder) does not make it safe.
    chmod(&sandbox.plugins(), 0o1777);
    registry.scan();
    assert!(registry.snapshot().get("counter").is_none());

    // Fixed as the message says: the same, unchanged library now loads.
    chmod(&sandbox.plugins(), 0o755);
    registry.scan();
    assert!(registry.snapshot().get("counter").is_some());
    assert_eq!(status(&registry, &lib), "loaded");
}

#[test]
fn skill_list_shows_a_refused_folder_by_name_with_the_fix() {
    let sandbox = Sandbox::new();
    sandbox.install("counter-v1", "counter");
    chmod(&sandbox.plugins(), 0o777);
    let output = run_foveal(sandbox.root.path(), &["skill-list", "--no-builtin"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let row = text
        .lines()
        .find(|l| l.contains(&file_name("counter")))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.ends_with("refused: plugins is writable by others (mode 0777); run chmod go-w plugins"),
        "{text}"
    );
}

#[test]
fn a_library_others_can_write_is_refused_naming_the_file() {
    let sandbox = Sandbox::new();
    let lib = sandbox.install("counter-v1", "counter");
    chmod(&lib, 0o646);
    let loader = Loader::new(sandbox.shadow(), 10).unwrap();
    let error = loader.load(&lib).unwrap_err();
    assert!(matches!(error, LoadError::Unsafe { .. }), "{error}");
    let file = lib.display().to_string();
    assert_eq!(
        error.to_string(),
        format!("{file} is writable by others (mode 0646); run chmod go-w {file}")
    );
    assert_eq!(loader.loads(), 0, "refused before it was mapped");

    // In the registry, and loaded once fixed: a chmod leaves the file's
    // identity as it was, so the refusal must not stick to it.
    let registry = sandbox.registry();
    registry.scan();
    assert_eq!(
        status(&registry, &lib),
        format!("refused: {file} is writable by others (mode 0646); run chmod go-w {file}")
    );
    chmod(&lib, 0o644);
    registry.load_path(&lib);
    assert_eq!(status(&registry, &lib), "loaded");
}

#[test]
fn a_library_writable_by_a_shared_group_is_refused_and_by_a_private_one_loads() {
    let sandbox = Sandbox::new();
    let lib = sandbox.install("counter-v1", "counter");
    chmod(&lib, 0o664);
    let loader = Loader::new(sandbox.shadow(), 10).unwrap();
    // The file's own group: the user's primary group. Root's is private
    // (`root:x:0:`), and so is a user's on a umask-002 system.
    {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::metadata(&lib).unwrap();
        if foveal::trust::is_private_group(meta.uid(), meta.gid()) {
            loader
                .load(&lib)
                .expect("a private group may write: umask 002 works");
        }
    }
    let Some(gid) = a_shared_group(&lib) else {
        eprintln!("skipped: this user can give a file no group but a private one");
        return;
    };
    let error = loader.load(&lib).unwrap_err();
    let file = lib.display().to_string();
    assert_eq!(
        error.to_string(),
        format!(
            "{file} is writable by its group (mode 0664), and group {gid} is not your private group; run chmod g-w {file}"
        )
    );
}

#[test]
fn a_library_of_another_user_is_refused_naming_the_owner() {
    if !is_root() {
        // Giving a file away takes root; the rule itself is unit-tested in
        // `foveal::trust` (`a_file_of_another_user_is_refused_whatever_its_mode`).
        eprintln!("skipped: not root");
        return;
    }
    let sandbox = Sandbox::new();
    let lib = sandbox.install("counter-v1", "counter");
    std::os::unix::fs::chown(&lib, Some(4242), None).unwrap();
    let loader = Loader::new(sandbox.shadow(), 10).unwrap();
    let file = lib.display().to_string();
    assert_eq!(
        loader.load(&lib).unwrap_err().to_string(),
        format!(
            "{file} is owned by uid 4242, not you (uid 0) or root; run sudo chown 0 {file} if you trust it, or remove it"
        )
    );
    // A symlink is judged by the file it leads to.
    let link = sandbox.plugins().join(file_name("link"));
    std::os::unix::fs::symlink(&lib, &link).unwrap();
    assert!(matches!(
        loader.load(&link).unwrap_err(),
        LoadError::Unsafe { .. }
    ));
}

#[test]
fn require_trusted_runs_a_listed_library_and_refuses_an_unlisted_one() {
    let sandbox = Sandbox::new();
    let listed = sandbox.install("counter-v1", "counter");
    let unlisted = sandbox.install("dependent", "dependent");
    let digest = Sha256::of_file(&listed).unwrap();
    let registry = Registry::new(RegistryOptions {
        allow: AllowList::Only([digest].into()),
        isolation: foveal::isolation::IsolationPolicy::in_process(),
        ..sandbox.options()
    })
    .unwrap();
    registry.scan();
    assert!(registry.snapshot().get("counter").is_some());
    assert!(registry.snapshot().get("dependent").is_none());
    let unlisted_digest = Sha256::of_file(&unlisted).unwrap();
    assert_eq!(
        status(&registry, &unlisted),
        format!(
            "untrusted: {unlisted_digest} not in plugins.trusted; run foveal skill trust {}",
            unlisted.display()
        )
    );
    assert_eq!(
        registry.loader().loads(),
        1,
        "the unlisted library was never mapped"
    );

    // The digest is `sha256sum`'s: of the whole file, not of what is mapped.
    if let Ok(output) = std::process::Command::new("sha256sum")
        .arg(&listed)
        .output()
    {
        let text = String::from_utf8(output.stdout).unwrap();
        let hex = text.split_whitespace().next().unwrap();
        assert_eq!(digest.to_string(), format!("sha256:{hex}"));
    }
}

fn write_config(dir: &Path, text: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("config")).unwrap();
    let path = dir.join("config/foveal.toml");
    std::fs::write(&path, text).unwrap();
    chmod(&path, 0o644);
    path
}

#[test]
fn skill_trust_adds_the_digest_to_the_config_in_use_keeping_its_comments() {
    let sandbox = Sandbox::new();
    let lib = sandbox.install("counter-v1", "counter");
    let original = "# My foveal.\n\n[plugins]\n# Only what I trusted.\nrequire_trusted = true\nbuiltin = false # just mine\n\n# Small prompts.\n[context]\nmax_tokens = 9000\n";
    let config = write_config(sandbox.root.path(), original);
    let root = sandbox.root.path();
    let relative = format!("plugins/{}", file_name("counter"));

    let before = run_foveal(root, &["skill-list", "--json"]);
    assert!(before.status.success(), "{}", stderr(&before));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&before)).unwrap();
    let status = rows[0]["status"].as_str().unwrap();
    assert!(
        status.starts_with("untrusted: sha256:")
            && status.ends_with(&format!(
                " not in plugins.trusted; run foveal skill trust {relative}"
            )),
        "{rows}"
    );

    let output = run_foveal(root, &["skill", "trust", &relative]);
    assert!(output.status.success(), "{}", stderr(&output));
    let digest = Sha256::of_file(&lib).unwrap();
    assert_eq!(stdout(&output), format!("{digest}  {relative}\n"));
    assert!(
        stderr(&output).contains("added 1 digest to plugins.trusted of config/foveal.toml"),
        "{}",
        stderr(&output)
    );
    let edited = std::fs::read_to_string(&config).unwrap();
    assert_eq!(
        edited,
        original.replace(
            "builtin = false # just mine\n",
            &format!("builtin = false # just mine\ntrusted = [\n    \"{digest}\",\n]\n")
        )
    );
    assert_eq!(
        std::fs::metadata(&config).unwrap().permissions().mode() & 0o777,
        0o644
    );

    let after = run_foveal(root, &["skill-list", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&stdout(&after)).unwrap();
    assert_eq!(rows[0]["name"], "counter");
    assert_eq!(rows[0]["status"], "loaded");

    // Trusting it again changes nothing.
    let again = run_foveal(root, &["skill", "trust", &relative]);
    assert!(again.status.success());
    assert!(stderr(&again).contains("already in plugins.trusted"));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), edited);
}

#[test]
fn skill_trust_without_a_config_file_says_what_to_create_and_saves_nothing() {
    let sandbox = Sandbox::new();
    let lib = sandbox.install("counter-v1", "counter");
    let root = sandbox.root.path();
    let output = run_foveal(root, &["skill", "trust", lib.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let digest = Sha256::of_file(&lib).unwrap();
    assert_eq!(stdout(&output), format!("{digest}  {}\n", lib.display()));
    let want = root.join("xdg/foveal/foveal.toml");
    assert_eq!(
        stderr(&output),
        format!(
            "no config file is in use, so nothing was saved; create {} (or pass --config FILE) with:\n\n[plugins]\nrequire_trusted = true\ntrusted = [\n    \"{digest}\",\n]\n\n",
            want.display()
        )
    );
    assert!(!want.exists());
}

#[test]
fn skill_trust_needs_a_file_and_its_help_explains() {
    let sandbox = Sandbox::new();
    let output = run_foveal(sandbox.root.path(), &["skill", "trust"]);
    assert_eq!(output.status.code(), Some(2));
    let output = run_foveal(sandbox.root.path(), &["skill", "trust", "--help"]);
    let text = stdout(&output);
    for needle in [
        "sha256:<hex>  FILE",
        "plugins.trusted",
        "plugins.require_trusted",
        "sha256sum",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    let output = run_foveal(sandbox.root.path(), &["--help"]);
    assert!(stdout(&output).contains("skill "), "{}", stdout(&output));
}

#[test]
fn a_group_writable_config_in_the_working_directory_stops_the_host() {
    let sandbox = Sandbox::new();
    let root = sandbox.root.path();
    let config = write_config(root, "[plugins]\nbuiltin = false\n");
    chmod(&config, 0o664);
    let message = match a_shared_group(&config) {
        Some(gid) => format!(
            "error: config file config/foveal.toml is writable by its group (mode 0664), and group {gid} is not your private group; run chmod g-w config/foveal.toml\n"
        ),
        None => {
            // Only a private group is at hand: writable by others instead.
            chmod(&config, 0o666);
            "error: config file config/foveal.toml is writable by others (mode 0666); run chmod go-w config/foveal.toml\n".to_owned()
        }
    };
    let output = run_foveal(root, &["skill-list"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stdout(&output).is_empty());
    assert_eq!(stderr(&output), message);

    // The host itself does not start.
    let mut child = foveal_command(root, &["run", "--no-repl"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the host started despite the config file");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(2));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(err, message);

    // `check` lists it as its problem.
    let output = run_foveal(root, &["check"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains(&format!("PROBLEM  config: {}", &message["error: ".len()..])),
        "{}",
        stdout(&output)
    );
}

#[test]
fn check_names_a_plugin_folder_others_can_write() {
    let sandbox = Sandbox::new();
    sandbox.install("counter-v1", "counter");
    chmod(&sandbox.plugins(), 0o777);
    let output = run_foveal(sandbox.root.path(), &["check", "--no-builtin"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(
        text.contains(
            "PROBLEM  plugins: plugins is writable by others (mode 0777); run chmod go-w plugins"
        ),
        "{text}"
    );
    assert!(
        text.contains("refused: plugins is writable by others"),
        "{text}"
    );
}

#[test]
fn a_running_host_loads_what_was_refused_once_chmod_fixes_it() {
    use foveal::watcher::PluginWatcher;
    use std::sync::Arc;

    let patience = Duration::from_secs(10);
    let sandbox = Sandbox::new();
    chmod(&sandbox.plugins(), 0o777);
    let registry = Arc::new(sandbox.registry());
    let _watcher = PluginWatcher::start(Arc::clone(&registry), Duration::from_millis(50)).unwrap();
    registry.scan();
    let lib = sandbox.install("counter-v1", "counter");
    assert!(crate::support::wait_for(patience, || {
        registry.snapshot().idle().contains_key(&lib)
    }));
    assert!(registry.snapshot().get("counter").is_none());

    // The folder's mode changes, nothing else: the watcher sees it.
    chmod(&sandbox.plugins(), 0o755);
    assert!(crate::support::wait_for(patience, || {
        registry.snapshot().get("counter").is_some()
    }));

    // A library whose own mode is fixed loads too. Installed already
    // writable by others: mode, then rename into place.
    let temp = sandbox.plugins().join(".dependent.tmp");
    std::fs::copy(crate::support::library("dependent"), &temp).unwrap();
    chmod(&temp, 0o666);
    let other = sandbox.plugins().join(file_name("dependent"));
    std::fs::rename(&temp, &other).unwrap();
    assert!(crate::support::wait_for(patience, || {
        registry.snapshot().idle().contains_key(&other)
    }));
    assert!(status(&registry, &other).starts_with("refused: "));
    chmod(&other, 0o644);
    assert!(crate::support::wait_for(patience, || {
        registry.snapshot().get("dependent").is_some()
    }));
}
