//! A real cell, started from the real `foveal-cell` executable, running
//! the `rogue` fixture: every act it tries is refused or contained.
//!
//! Needs `cargo build --workspace` first (the executable and the fixture
//! library); both are found in the target folder of this test binary.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi_stable::prefix_type::WithMetadata;
use abi_stable::staticref;
use abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};
use foveal_cell::{CallError, Cell, CellOptions, Grants, StartError, lend};
use foveal_memex::{Memex, privacy::PrivacyTags, view::ComponentsCall, view::SnapshotView};
use foveal_sdk::{HostApi, HostApiRef, LogLevel, SignalKind, SkillError};

static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

extern "C" fn log(_: LogLevel, skill: RStr<'_>, message: RStr<'_>) {
    LOG.lock().unwrap().push(format!("{skill}: {message}"));
}
extern "C" fn count_tokens(text: RStr<'_>) -> u32 {
    text.len() as u32 / 4
}
extern "C" fn memex_write(_: u64, _: RStr<'_>) -> RResult<RString, SkillError> {
    RErr(SkillError::new(SkillError::UNAVAILABLE, "no writes here"))
}

struct Statics;
impl Statics {
    staticref! {
        const API: WithMetadata<HostApi> = WithMetadata::new(HostApi {
            sdk_version: RStr::from_str(foveal_sdk::SDK_VERSION),
            log,
            count_tokens,
            memex_write,
            call_session: foveal_sdk::call::serve_session,
            call_now: foveal_sdk::call::serve_now,
        })
    }
}

fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

struct Setup {
    _dir: tempfile::TempDir,
    memex_dir: PathBuf,
    options: CellOptions,
}

fn setup(grants: Grants) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let library = dir.path().join("rogue-copy.so");
    std::fs::copy(target_dir().join("libfoveal_fixture_rogue.so"), &library).unwrap();
    let memex_dir = dir.path().join("memex");
    std::fs::create_dir(&memex_dir).unwrap();
    std::fs::write(
        memex_dir.join("notes.org"),
        "* Work :project:\nPublic text.\n* Diary :@personal:\nMy secret canary.\n",
    )
    .unwrap();
    let options = CellOptions {
        exe: target_dir().join("foveal-cell"),
        library,
        origin: PathBuf::from("plugins/librogue.so"),
        memory_mib: 256,
        grants,
        simulate_no_landlock: false,
    };
    Setup {
        _dir: dir,
        memex_dir,
        options,
    }
}

fn host() -> HostApiRef {
    HostApiRef(Statics::API.as_prefix())
}

/// Runs the rogue's `components` hook with `config`: its one line, or the
/// failure.
fn act(
    cell: &Arc<Cell>,
    memex: &Memex,
    config: &str,
) -> Result<String, (SkillError, Option<CallError>)> {
    let view = SnapshotView::new(&memex.snapshot(), &PrivacyTags::new(["@personal"]));
    let lent = lend::lend(&view).unwrap();
    let call = ComponentsCall {
        view,
        signal: SignalKind::USER,
        focus: None,
        budget: None,
        config: config.to_owned(),
        explain: false,
        facts: Default::default(),
    };
    let (answer, failure) = lend::with_cell(cell, Duration::from_secs(3), Some(lent), || {
        call.call(lend::components)
    });
    match answer {
        ROk(components) => Ok(components[0].content.to_string()),
        RErr(e) => Err((e, failure)),
    }
}

fn started(setup: &Setup) -> Arc<Cell> {
    let cell = Cell::start(setup.options.clone(), host()).unwrap();
    assert_eq!(cell.manifest().name, "rogue");
    assert!(matches!(cell.init(Duration::from_secs(3)), Ok(ROk(()))));
    Arc::new(cell)
}

#[test]
fn a_rogue_skill_in_a_cell_is_refused_everything_and_its_crashes_end_only_the_cell() {
    let setup = setup(Grants::default());
    let cell = started(&setup);
    let c = cell.manifest().confinement;
    assert!(c.landlock_abi >= 1 && c.seccomp, "{c:?}");
    // SAFETY: getuid has no arguments.
    let uid = unsafe { libc::getuid() };
    eprintln!("as uid {uid}: {c:?}");
    let memex = Memex::open(std::slice::from_ref(&setup.memex_dir)).unwrap();

    assert_eq!(
        act(&cell, &memex, "{}").unwrap(),
        format!("ok: {}", "x".repeat(96))
    );
    // The constructor ran inside the walls.
    let ctor = act(&cell, &memex, r#"{"act":"constructor"}"#).unwrap();
    for refused in [
        "read_etc_passwd=refused",
        "env_api_key=refused",
        "udp=refused",
        "exec=refused",
        "write_tmp=refused",
    ] {
        assert!(ctor.contains(refused), "{ctor}");
    }
    let private = setup.memex_dir.join("notes.org");
    let read = act(
        &cell,
        &memex,
        &format!(r#"{{"act":"read_file","path":"{}"}}"#, private.display()),
    )
    .unwrap();
    assert!(read.starts_with("read_file: refused"), "{read}");
    let listed = act(
        &cell,
        &memex,
        &format!(
            r#"{{"act":"list_dir","path":"{}"}}"#,
            setup.memex_dir.display()
        ),
    )
    .unwrap();
    assert!(listed.starts_with("list_dir: refused"), "{listed}");
    let write = act(
        &cell,
        &memex,
        r#"{"act":"write_file","path":"/tmp/foveal-rogue-was-here"}"#,
    )
    .unwrap();
    assert!(write.starts_with("write_file: refused"), "{write}");
    assert!(!std::path::Path::new("/tmp/foveal-rogue-was-here").exists());
    assert_eq!(
        act(&cell, &memex, r#"{"act":"env_count"}"#).unwrap(),
        "env_count: ok 0"
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let connect = act(
        &cell,
        &memex,
        &format!(r#"{{"act":"connect","addr":"{addr}"}}"#),
    )
    .unwrap();
    assert!(connect.starts_with("connect: refused"), "{connect}");
    let exec = act(&cell, &memex, r#"{"act":"exec"}"#).unwrap();
    assert!(exec.starts_with("exec: refused"), "{exec}");
    let kill = act(&cell, &memex, r#"{"act":"kill_parent"}"#).unwrap();
    assert!(kill.starts_with("kill_parent: refused"), "{kill}");
    let ptrace = act(&cell, &memex, r#"{"act":"ptrace_parent"}"#).unwrap();
    assert!(ptrace.starts_with("ptrace_parent: refused"), "{ptrace}");
    // Each refused act is said once, with what was tried.
    let status = cell.status();
    let said = status.refused.join("\n");
    assert!(
        said.contains(&format!("open {}", private.display())),
        "{said}"
    );
    assert!(said.contains("open a socket"), "{said}");
    assert!(said.contains("trace or read another process"), "{said}");
    // Starting a program fails at its fork, with EPERM and no trap (the C
    // library blocks every signal there): refused, not noted.
    // The skill's own log lines reach the host's log, attributed to it.
    let log = LOG.lock().unwrap().join("\n");
    assert!(log.contains("rogue: read_file: refused"), "{log}");

    // Crashes end the cell, never this process; the next call gets a new cell.
    for (config, signal) in [
        (r#"{"act":"abort"}"#, "SIGABRT"),
        (r#"{"act":"segv"}"#, "SIGSEGV"),
        (r#"{"act":"stack_overflow"}"#, "SIG"),
        (r#"{"act":"alloc","mib":4096}"#, ""),
    ] {
        let outcome = act(&cell, &memex, config);
        match outcome {
            Err((error, Some(CallError::Died { how, .. }))) => {
                assert!(how.contains(signal), "{config}: {how}");
                assert_eq!(error.code, SkillError::PANIC);
            }
            // A refused allocation is an answer too.
            Ok(text) if config.contains("alloc") => assert!(text.contains("refused"), "{text}"),
            other => panic!("{config}: {other:?}"),
        }
        // The backoff passes, and a new cell serves.
        let started = Instant::now();
        loop {
            match act(&cell, &memex, "{}") {
                Ok(text) => {
                    assert!(text.starts_with("ok: "));
                    break;
                }
                Err((_, Some(CallError::Restarting(wait)))) => std::thread::sleep(wait),
                Err(other) => panic!("after {config}: {other:?}"),
            }
            assert!(started.elapsed() < Duration::from_secs(10));
        }
    }
    assert!(cell.status().restarts >= 3);

    // A spinning hook is killed at its deadline: the CPU comes back.
    let before = Instant::now();
    let spun = act(&cell, &memex, r#"{"act":"spin"}"#);
    assert!(
        matches!(spun, Err((_, Some(CallError::Timeout(_))))),
        "{spun:?}"
    );
    assert!(before.elapsed() < Duration::from_secs(5));
    assert!(cell.status().pid.is_none(), "the spinning cell is gone");
    assert!(act(&cell, &memex, "{}").is_ok());
}

#[test]
fn a_granted_folder_and_the_network_are_what_a_cell_gets_and_nothing_more() {
    let papers = tempfile::tempdir().unwrap();
    std::fs::write(papers.path().join("a.txt"), "paper").unwrap();
    let setup = setup(Grants {
        read: vec![papers.path().to_path_buf()],
        network: true,
    });
    let cell = started(&setup);
    let memex = Memex::open(std::slice::from_ref(&setup.memex_dir)).unwrap();
    let read = act(
        &cell,
        &memex,
        &format!(
            r#"{{"act":"read_file","path":"{}"}}"#,
            papers.path().join("a.txt").display()
        ),
    )
    .unwrap();
    assert_eq!(read, "read_file: ok 5 bytes");
    let private = setup.memex_dir.join("notes.org");
    let read = act(
        &cell,
        &memex,
        &format!(r#"{{"act":"read_file","path":"{}"}}"#, private.display()),
    )
    .unwrap();
    assert!(read.starts_with("read_file: refused"), "{read}");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let connect = act(
        &cell,
        &memex,
        &format!(r#"{{"act":"connect","addr":"{addr}"}}"#),
    )
    .unwrap();
    assert!(connect.starts_with("connect: ok"), "{connect}");
    let exec = act(&cell, &memex, r#"{"act":"exec"}"#).unwrap();
    assert!(exec.starts_with("exec: refused"), "{exec}");
}

#[test]
fn without_landlock_a_cell_loads_nothing_and_says_why() {
    let mut setup = setup(Grants::default());
    setup.options.simulate_no_landlock = true;
    match Cell::start(setup.options.clone(), host()) {
        Err(StartError::Unconfined(message)) => assert!(message.contains("Landlock"), "{message}"),
        other => panic!("{other:?}"),
    }
}
