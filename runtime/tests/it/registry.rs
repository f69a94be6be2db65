//! The registry's one call path, its fallbacks, quarantine, dependencies,
//! precedence and snapshots.

use std::sync::Arc;
use std::time::Duration;

use foveal::registry::{
    Change, ComponentPolicy, PluginDir, Reason, Registry, RegistryOptions, hooks,
};

use crate::loading::request;
use crate::support::{Sandbox, file_name, install, invoke, library};

#[test]
fn an_absent_skill_or_hook_answers_not_loaded_so_the_caller_takes_its_fallback() {
    let sandbox = Sandbox::new();
    sandbox.install("counter-v1", "counter");
    let registry = sandbox.registry();
    registry.scan();
    let snapshot = registry.snapshot();

    let missing = snapshot.call("awareness", hooks::COMPONENTS, |f| f(&request()));
    assert_eq!(
        missing.clone().unwrap_err().into_reason(),
        Reason::NotLoaded {
            skill: "awareness".into()
        }
    );
    assert!(missing.unwrap_err().is_not_loaded());

    let no_hook = snapshot.call("counter", hooks::REDACT, |f| f("x".into()));
    assert_eq!(
        no_hook.unwrap_err().into_reason(),
        Reason::NoHook {
            skill: "counter".into(),
            hook: "redact"
        }
    );

    // The fallback pattern every caller writes.
    let section = match snapshot.call("awareness", hooks::COMPONENTS, |f| f(&request())) {
        Ok(components) => components.len().to_string(),
        Err(why) if why.is_not_loaded() => "[Awareness skill not loaded]".to_owned(),
        Err(why) => panic!("unexpected: {why}"),
    };
    assert_eq!(section, "[Awareness skill not loaded]");
}

#[test]
fn a_skill_that_panics_n_times_in_a_row_is_quarantined_and_reported() {
    let sandbox = Sandbox::new();
    sandbox.install("counter-v1", "counter");
    let registry = sandbox.registry(); // quarantine_after = 3
    registry.scan();

    // Two panics, then a success: the run is broken.
    for _ in 0..2 {
        let err = invoke(&registry, "counter", "panic").unwrap_err();
        match err.into_reason() {
            Reason::Failed { error, .. } => {
                assert_eq!(error.code, foveal_sdk::SkillError::PANIC);
                assert!(error.message.contains("counter was asked to panic"));
            }
            other => panic!("{other}"),
        }
    }
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "1.0.0");
    // An error returned on purpose is not a panic and does not count.
    for _ in 0..2 {
        invoke(&registry, "counter", "panic").unwrap_err();
        invoke(&registry, "counter", "fail").unwrap_err();
    }
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "1.0.0");

    for _ in 0..3 {
        invoke(&registry, "counter", "panic").unwrap_err();
    }
    assert!(matches!(
        invoke(&registry, "counter", "version")
            .unwrap_err()
            .reason(),
        Reason::Quarantined { panics: 3, .. }
    ));
    let rows = registry.snapshot().rows();
    assert_eq!(rows[0].status, "quarantined after 3 consecutive panics");

    // A new build lifts the quarantine.
    sandbox.install("counter-v2", "counter");
    registry.load_path(&sandbox.plugins().join(file_name("counter")));
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "2.0.0");
}

#[test]
fn a_skill_whose_dependency_is_missing_is_listed_with_the_reason_until_it_arrives() {
    let sandbox = Sandbox::new();
    sandbox.install("dependent", "dependent");
    let registry = sandbox.registry();
    registry.scan();
    let rows = registry.snapshot().rows();
    assert_eq!(rows[0].name, "dependent");
    assert_eq!(rows[0].status, "missing dependency: counter");
    assert_eq!(
        invoke(&registry, "dependent", "x")
            .unwrap_err()
            .into_reason(),
        Reason::MissingDependency {
            skill: "dependent".into(),
            missing: vec!["counter".into()]
        }
    );

    let counter = sandbox.install("counter-v1", "counter");
    registry.load_path(&counter);
    assert_eq!(
        invoke(&registry, "dependent", "x").unwrap(),
        "dependent answered"
    );

    std::fs::remove_file(&counter).unwrap();
    registry.remove_path(&counter);
    assert!(matches!(
        invoke(&registry, "dependent", "x").unwrap_err().reason(),
        Reason::MissingDependency { .. }
    ));
}

#[test]
fn a_bad_build_installed_over_a_good_one_leaves_the_good_one_serving() {
    let sandbox = Sandbox::new();
    let path = sandbox.install("counter-v1", "counter");
    let registry = sandbox.registry();
    registry.scan();
    let generation = registry.snapshot().generation();

    for bad in ["init-panic", "not-a-skill", "old-sdk"] {
        install(&library(bad), &sandbox.plugins(), &file_name("counter"));
        assert!(matches!(registry.load_path(&path), Change::Published(_)));
        assert_eq!(
            invoke(&registry, "counter", "version").unwrap(),
            "1.0.0",
            "after {bad}"
        );
    }
    let snapshot = registry.snapshot();
    assert!(snapshot.generation() > generation);
    let rows = snapshot.rows();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].status, "loaded");
    assert!(
        rows[1]
            .status
            .starts_with("refused: built against an incompatible foveal-sdk"),
        "{rows:?}"
    );

    // Then a good build replaces it.
    sandbox.install("counter-v2", "counter");
    registry.load_path(&path);
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "2.0.0");
    assert_eq!(registry.snapshot().rows().len(), 1);
}

#[test]
fn the_same_build_notified_twice_is_loaded_once() {
    let sandbox = Sandbox::new();
    let path = sandbox.install("counter-v1", "counter");
    let registry = sandbox.registry();
    assert!(matches!(registry.load_path(&path), Change::Published(1)));
    assert_eq!(registry.load_path(&path), Change::Unchanged);
    assert_eq!(registry.loader().loads(), 1);
}

#[test]
fn removing_a_library_removes_its_skill() {
    let sandbox = Sandbox::new();
    let path = sandbox.install("counter-v1", "counter");
    let registry = sandbox.registry();
    registry.scan();
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(registry.remove_path(&path), Change::Published(_)));
    assert!(matches!(
        invoke(&registry, "counter", "version")
            .unwrap_err()
            .reason(),
        Reason::NotLoaded { .. }
    ));
    assert!(registry.snapshot().rows().is_empty());
}

#[test]
fn an_in_flight_cycle_finishes_on_the_version_it_started_with() {
    let sandbox = Sandbox::new();
    let path = sandbox.install("counter-v1", "counter");
    let registry = sandbox.registry();
    registry.scan();
    let cycle = registry.snapshot();

    sandbox.install("counter-v2", "counter");
    registry.load_path(&path);
    let call = |snapshot: &foveal::registry::Snapshot| {
        snapshot
            .call("counter", hooks::INVOKE, |f| f("version".into(), "".into()))
            .unwrap()
            .into_string()
    };
    assert_eq!(call(&cycle), "1.0.0");
    assert_eq!(call(&registry.snapshot()), "2.0.0");
    // Even with the old build's file gone.
    std::fs::remove_file(&path).unwrap();
    registry.remove_path(&path);
    assert_eq!(call(&cycle), "1.0.0");
}

#[test]
fn a_library_in_the_drop_in_folder_shadows_a_built_in_one_and_gives_way_when_removed() {
    let sandbox = Sandbox::new();
    let builtin = sandbox.root.path().join("builtin");
    std::fs::create_dir(&builtin).unwrap();
    let builtin_lib = install(
        &library("counter-v1"),
        &builtin,
        &file_name("foveal_skill_counter"),
    );
    // Not first-party by name: ignored in the built-in folder.
    install(&library("panicky"), &builtin, &file_name("panicky"));
    let options = RegistryOptions {
        dirs: vec![
            PluginDir {
                path: sandbox.plugins(),
                first_party_only: false,
            },
            PluginDir {
                path: builtin.clone(),
                first_party_only: true,
            },
        ],
        isolation: foveal::isolation::IsolationPolicy::in_process(),
        ..sandbox.options()
    };
    let registry = Arc::new(Registry::new(options).unwrap());
    registry.scan();
    assert_eq!(registry.snapshot().names(), ["counter"]);
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "1.0.0");

    let dropped = sandbox.install("counter-v2", "counter");
    registry.load_path(&dropped);
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "2.0.0");
    let rows = registry.snapshot().rows();
    let shadowed = rows.iter().find(|r| r.path == builtin_lib).unwrap();
    assert!(shadowed.status.starts_with("shadowed by "), "{rows:?}");

    std::fs::remove_file(&dropped).unwrap();
    registry.remove_path(&dropped);
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "1.0.0");
}

#[test]
fn two_libraries_of_one_skill_in_one_folder_refuse_the_second() {
    let sandbox = Sandbox::new();
    sandbox.install("counter-v1", "a_counter");
    sandbox.install("counter-v2", "b_counter");
    let registry = sandbox.registry();
    registry.scan();
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "1.0.0");
    let rows = registry.snapshot().rows();
    assert!(
        rows[1]
            .status
            .starts_with("refused: duplicate skill `counter`"),
        "{rows:?}"
    );
}

#[test]
fn temporary_and_foreign_files_are_not_candidates() {
    let sandbox = Sandbox::new();
    let registry = sandbox.registry();
    let plugins = sandbox.plugins();
    assert!(registry.is_candidate(&plugins.join(file_name("x"))));
    assert!(!registry.is_candidate(&plugins.join(".x.so.tmp")));
    assert!(!registry.is_candidate(&plugins.join(format!(".{}", file_name("x")))));
    assert!(!registry.is_candidate(&plugins.join("README.md")));
    assert!(!registry.is_candidate(&sandbox.root.path().join(file_name("elsewhere"))));
}

#[test]
fn a_hook_that_never_returns_is_abandoned_at_its_deadline_and_the_skill_quarantined() {
    let sandbox = Sandbox::new();
    sandbox.install("sleepy", "sleepy");
    let with_timeout = |ms| {
        let registry = Registry::new(RegistryOptions {
            hook_timeout: Duration::from_millis(ms),
            isolation: foveal::isolation::IsolationPolicy::in_process(),
            ..sandbox.options()
        })
        .unwrap();
        registry.scan();
        registry
    };
    let registry = with_timeout(300);
    let call = |registry: &Registry| {
        let started = std::time::Instant::now();
        let answer = registry.snapshot().call("sleepy", hooks::COMPONENTS, |f| {
            foveal::memex::view::ComponentsCall {
                view: foveal::memex::view::SnapshotView::new(
                    &foveal::memex::snapshot::MemexSnapshot::default(),
                    &foveal::memex::privacy::PrivacyTags::default(),
                ),
                signal: foveal_sdk::SignalKind::USER,
                focus: None,
                budget: None,
                config: "{}".to_owned(),
                explain: false,
                facts: Default::default(),
            }
            .call(f)
        });
        (answer, started.elapsed())
    };
    let (answer, took) = call(&registry);
    let error = answer.unwrap_err();
    assert!(took < Duration::from_secs(3), "waited {took:?}");
    assert!(
        error.to_string().contains("did not return within 300 ms"),
        "{error}"
    );
    assert!(foveal::registry::abandoned_calls("sleepy") >= 1);
    // Quarantined: the next call does not even reach the skill.
    let (again, took) = call(&registry);
    assert!(took < Duration::from_millis(100), "{took:?}");
    assert!(matches!(
        again.unwrap_err().reason(),
        foveal::registry::Reason::Quarantined { .. }
    ),);
    // Each abandoned call leaves a thread stuck in the skill: after
    // MAX_ABANDONED of them this process loads the skill no more.
    while foveal::registry::abandoned_calls("sleepy") < foveal::registry::MAX_ABANDONED {
        let fresh = with_timeout(20);
        assert!(call(&fresh).0.is_err());
    }
    let refused = with_timeout(20);
    let rows = refused.snapshot().rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(
        rows[0].status.starts_with("refused:") && rows[0].status.contains("is not loaded again"),
        "{rows:?}"
    );
    assert!(matches!(
        call(&refused).0.unwrap_err().reason(),
        foveal::registry::Reason::NotLoaded { .. }
    ));
}

#[test]
fn a_registry_holds_manifests_to_the_component_policy_it_is_given() {
    let sandbox = Sandbox::new();
    sandbox.install("components-a", "a_components");
    let refuse_4501 = ComponentPolicy {
        check_declared: |ids| {
            if ids.contains(&4501) {
                Err("4501 is kept for this test".to_owned())
            } else {
                Ok(())
            }
        },
        reserved_for: |_| None,
    };
    let registry = Registry::with_policy(sandbox.options(), refuse_4501).unwrap();
    registry.scan();
    let snapshot = registry.snapshot();
    assert!(snapshot.get("components-a").is_none());
    let rows = snapshot.rows();
    let refused = rows
        .iter()
        .find(|r| r.status.starts_with("refused"))
        .unwrap();
    assert_eq!(
        refused.status,
        "refused: invalid skill manifest: 4501 is kept for this test"
    );

    // The same library under the default policy (the prompt's rules) loads.
    let registry = sandbox.registry();
    registry.scan();
    assert!(registry.snapshot().get("components-a").is_some());
}

#[test]
fn a_registry_refuses_an_id_its_component_policy_reserves_for_another_skill() {
    let sandbox = Sandbox::new();
    sandbox.install("components-a", "a_components");
    let policy = ComponentPolicy {
        reserved_for: |id| (id == 4501).then_some("elsewhere"),
        ..ComponentPolicy::default()
    };
    let registry = Registry::with_policy(sandbox.options(), policy).unwrap();
    registry.scan();
    let snapshot = registry.snapshot();
    assert!(snapshot.get("components-a").is_none());
    let rows = snapshot.rows();
    let refused = rows
        .iter()
        .find(|r| r.status.starts_with("refused"))
        .unwrap();
    assert_eq!(
        refused.status,
        "refused: skill `components-a` declares prompt component 4501, which the host reserves for the `elsewhere` skill; two components cannot share an id: give one of them a free id"
    );
}
