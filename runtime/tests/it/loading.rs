//! Every kind of bad library is refused with its own error; the host lives
//! on and the good skills keep answering.

use foveal::loader::{LoadError, Loader};
use foveal::registry::Idle;

use crate::support::{Sandbox, file_name, install, invoke, library};

fn refusal(sandbox: &Sandbox, fixture: &str) -> LoadError {
    let loader = Loader::new(sandbox.shadow(), 100).unwrap();
    let path = install(&library(fixture), &sandbox.plugins(), &file_name(fixture));
    loader.load(&path).expect_err("the fixture must be refused")
}

#[test]
fn a_library_that_is_not_a_skill_is_refused_as_such() {
    let sandbox = Sandbox::new();
    let error = refusal(&sandbox, "not-a-skill");
    assert!(matches!(error, LoadError::NotASkill { .. }), "{error}");
    assert!(
        error.to_string().contains("not-a-skill"),
        "the error names the file: {error}"
    );
}

#[test]
fn a_truncated_library_is_refused_with_its_size() {
    let sandbox = Sandbox::new();
    let bytes = std::fs::read(library("counter-v1")).unwrap();
    let path = sandbox.plugins().join(file_name("cut"));
    std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
    let loader = Loader::new(sandbox.shadow(), 100).unwrap();
    let error = loader.load(&path).unwrap_err();
    assert!(matches!(error, LoadError::Truncated { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains(&format!("{} bytes", bytes.len() / 3)),
        "{error}"
    );
}

#[test]
fn a_file_that_is_not_a_library_at_all_is_refused() {
    let sandbox = Sandbox::new();
    let path = sandbox.plugins().join(file_name("text"));
    std::fs::write(&path, "this is not a shared library\n").unwrap();
    let loader = Loader::new(sandbox.shadow(), 100).unwrap();
    let error = loader.load(&path).unwrap_err();
    assert!(matches!(error, LoadError::Open { .. }), "{error}");
    assert!(
        error.to_string().contains(&*path.to_string_lossy()),
        "names the original, not the shadow: {error}"
    );
}

#[test]
fn a_fifo_or_a_device_named_like_a_library_is_refused_at_once() {
    let sandbox = Sandbox::new();
    let fifo = sandbox.plugins().join(file_name("fifo"));
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path and a mode; no memory of ours is
    // touched.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let device = sandbox.plugins().join(file_name("zero"));
    std::os::unix::fs::symlink("/dev/zero", &device).unwrap();
    let loader = Loader::new(sandbox.shadow(), 100).unwrap();
    for path in [&fifo, &device] {
        let started = std::time::Instant::now();
        let error = loader.load(path).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(matches!(error, LoadError::NotAFile { .. }), "{error}");
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }
    // A scan of the folder finishes too.
    let registry = sandbox.registry();
    registry.scan();
}

#[test]
fn the_bytes_mapped_are_capped_as_well_as_the_loads() {
    let sandbox = Sandbox::new();
    let path = sandbox.plugins().join(file_name("counter"));
    install(
        &library("counter-v1"),
        &sandbox.plugins(),
        &file_name("counter"),
    );
    let loader = Loader::new(sandbox.shadow(), 100).unwrap();
    let first = loader.open(&path).unwrap();
    let (loaded, _) = loader.loaded_bytes();
    assert!(loaded > 0);
    drop(first);
    // Room for less than one more copy.
    loader.set_max_bytes(loaded + loaded / 2);
    let error = loader.open(&path).unwrap_err();
    assert!(matches!(error, LoadError::ByteLimit { .. }), "{error}");
    assert!(
        error.to_string().contains("plugins.max_load_mib"),
        "{error}"
    );
    assert_eq!(
        loader.loaded_bytes().0,
        loaded,
        "a refused load is not counted"
    );
}

#[test]
fn a_library_built_against_an_older_sdk_is_refused_naming_both_versions() {
    let sandbox = Sandbox::new();
    let error = refusal(&sandbox, "old-sdk");
    match &error {
        LoadError::IncompatibleSdk {
            expected, found, ..
        } => {
            assert_eq!(expected, foveal_sdk::SDK_VERSION);
            assert_eq!(found, "0.0.9");
        }
        other => panic!("expected IncompatibleSdk, got {other}"),
    }
}

#[test]
fn a_library_built_with_sdk_0_2_0_loads_without_the_hooks_added_since() {
    let sandbox = Sandbox::new();
    let loader = Loader::new(sandbox.shadow(), 100).unwrap();
    let path = install(
        &library("tools-previous-sdk"),
        &sandbox.plugins(),
        &file_name("tools-previous-sdk"),
    );
    let loaded = loader
        .load(&path)
        .expect("a 0.2.0 library loads in a 0.2.1 host");
    assert_eq!(loaded.info.sdk_version, "0.2.0");
    assert_ne!(foveal_sdk::SDK_VERSION, "0.2.0");
    // `run_tool` is after the prefix: absent, not an error.
    assert_eq!(loaded.info.hooks, ["tools", "call_tool"]);
}

#[test]
fn a_library_with_another_root_module_layout_is_refused_naming_the_difference() {
    let sandbox = Sandbox::new();
    let error = refusal(&sandbox, "other-layout");
    assert!(matches!(error, LoadError::Layout { .. }), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("expected foveal-sdk, found foveal-fixture-other-layout"),
        "{text}"
    );
}

#[test]
fn a_skill_whose_init_fails_is_refused_with_its_message() {
    let sandbox = Sandbox::new();
    let error = refusal(&sandbox, "init-error");
    assert!(matches!(error, LoadError::InitFailed { .. }), "{error}");
    assert!(
        error.to_string().contains("the fixture refuses to start"),
        "{error}"
    );
}

#[test]
fn a_skill_that_panics_in_init_is_refused_and_the_host_survives() {
    let sandbox = Sandbox::new();
    let error = refusal(&sandbox, "init-panic");
    assert!(matches!(error, LoadError::InitPanicked { .. }), "{error}");
    assert!(
        error.to_string().contains("the fixture panics in init"),
        "{error}"
    );
}

#[test]
fn a_folder_of_bad_libraries_leaves_the_good_skills_answering() {
    let sandbox = Sandbox::new();
    for fixture in [
        "not-a-skill",
        "old-sdk",
        "other-layout",
        "init-error",
        "init-panic",
        "panicky",
        "counter-v1",
    ] {
        install(&library(fixture), &sandbox.plugins(), &file_name(fixture));
    }
    let registry = sandbox.registry();
    registry.scan();
    let snapshot = registry.snapshot();
    assert_eq!(snapshot.names(), ["counter", "panicky"]);
    let refused = snapshot
        .idle()
        .values()
        .filter(|idle| matches!(idle, Idle::Refused { .. }))
        .count();
    assert_eq!(refused, 5);
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "1.0.0");
    // The panicking hook is contained; the other hook of that skill and the
    // other skill keep answering.
    let panicked = snapshot.call("panicky", foveal::registry::hooks::COMPONENTS, |f| {
        f(&request())
    });
    assert!(matches!(
        panicked.unwrap_err().reason(),
        foveal::registry::Reason::Failed { .. }
    ));
    let redacted = snapshot
        .call("panicky", foveal::registry::hooks::REDACT, |f| {
            f("quiet".into())
        })
        .unwrap();
    assert_eq!(redacted.as_str(), "QUIET");
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "1.0.0");
}

#[test]
fn stale_shadow_copies_of_dead_processes_are_cleaned_at_start() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.shadow()).unwrap();
    // No process has this pid (Linux pids stay below 2^22).
    let stale = sandbox.shadow().join(format!(
        "libx-{}-3.{}",
        u32::MAX - 1,
        std::env::consts::DLL_EXTENSION
    ));
    std::fs::write(&stale, b"old").unwrap();
    let loader = Loader::new(sandbox.shadow(), 10).unwrap();
    assert!(!stale.exists());
    // A load leaves no shadow file behind either.
    loader.load(&library("counter-v1")).unwrap();
    assert_eq!(std::fs::read_dir(sandbox.shadow()).unwrap().count(), 0);
}

#[test]
fn the_load_cap_refuses_further_loads_with_a_clear_error() {
    let sandbox = Sandbox::new();
    let loader = Loader::new(sandbox.shadow(), 1).unwrap();
    loader.load(&library("counter-v1")).unwrap();
    let error = loader.load(&library("counter-v2")).unwrap_err();
    assert!(
        matches!(error, LoadError::LoadLimit { max: 1, .. }),
        "{error}"
    );
}

pub fn request() -> foveal_sdk::ComponentsRequest<'static> {
    foveal_sdk::ComponentsRequest {
        signal: foveal_sdk::SignalKind::USER,
        focus: abi_stable::std_types::ROption::RNone,
        budget_tokens: abi_stable::std_types::ROption::RNone,
        config_json: "{}".into(),
        memex: &foveal_sdk::memex::MemexView::EMPTY,
        explain: false,
    }
}
