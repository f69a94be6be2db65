//! Disk faults end to end: a host killed during write-back, and files that
//! are not regular files in the memex and plugins folders of a running host.
//!
//! The real `foveal` binary against a scripted OpenAI-compatible server on
//! 127.0.0.1 (the provider tests' server, which records every request), as
//! in `live.rs`.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::live::{command, stderr, stdout, text_reply, tool_reply};
use crate::server::Server;
use crate::support::{file_name, install, library, wait_for};

/// A multi-threaded runtime for the scripted servers, so that the test's
/// own thread may block (poll, sleep, wait for processes).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A host this test started: killed, if still running, when dropped — a
/// failed assertion leaves no host behind.
struct Host(Child);

impl std::ops::Deref for Host {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Host {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `foveal run ARGS` started, once its control socket answers. A socket
/// left by a killed host is still on disk, so its existence proves
/// nothing: a connection must succeed.
fn start_host(dir: &Path, server: &Server, extra: &[&str], env: &[(&str, &str)]) -> Host {
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    let mut command = command(dir, server, &args);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut host = Host(command.spawn().unwrap());
    let socket = dir.join("run/control.sock");
    let up = wait_for(Duration::from_secs(30), || {
        UnixStream::connect(&socket).is_ok() || matches!(host.try_wait(), Ok(Some(_)))
    });
    if !(up && UnixStream::connect(&socket).is_ok()) {
        let _ = host.kill();
        let status = host.wait().unwrap();
        let mut err = String::new();
        if let Some(mut stream) = host.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut stream, &mut err);
        }
        panic!("the host did not open its socket: {status:?}\n{err}");
    }
    host
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let mut status = None;
    wait_for(Duration::from_secs(20), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status.expect("the host did not exit")
}

/// The write-back temporaries (`.NAME.<pid>-<n>.foveal-tmp`) in `dir`.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".foveal-tmp"))
        })
        .collect();
    out.sort();
    out
}

// ---------------------------------------------------------------------
// 1. A host killed with SIGKILL at varied points of a write-back.
// ---------------------------------------------------------------------

/// About 4 MiB of Org: 4,000 headlines with ids and a body of about 1 KiB
/// each, and last an `Inbox` whose children the test adds — each at the
/// end of the file.
fn big_memex() -> String {
    let mut text = String::from("#+TODO: TODO | DONE\n");
    let body: String = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(18);
    for i in 0..4000 {
        text.push_str(&format!(
            "* Note {i} :archive:\n:PROPERTIES:\n:ID: note-{i}\n:END:\n{body}\n"
        ));
    }
    text.push_str("* Inbox\n:PROPERTIES:\n:ID: inbox\n:END:\n");
    text
}

/// Whether `id` is a UUID as the write-back makes them (lower-case hex,
/// 8-4-4-4-12).
fn is_uuid(id: &str) -> bool {
    id.len() == 36
        && id.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
        })
}

/// When to kill the host, from the model's first request on.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kill {
    /// After this long.
    After(Duration),
    /// As soon as the write-back's temporary copy is seen.
    CopySeen,
    /// As soon as the new text is in place.
    NewSeen,
}

/// What a file is after a kill: the old bytes, or the old bytes with the
/// new child headline appended (its id a fresh UUID) and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Old,
    New,
}

fn judge(old: &[u8], now: &[u8], title: &str) -> Outcome {
    if now == old {
        return Outcome::Old;
    }
    assert!(
        now.starts_with(old),
        "the file is neither the old version nor the old one plus the new headline: \
         {} bytes, old {} bytes, first difference at byte {}",
        now.len(),
        old.len(),
        now.iter()
            .zip(old)
            .position(|(a, b)| a != b)
            .unwrap_or(old.len().min(now.len()))
    );
    let tail = std::str::from_utf8(&now[old.len()..]).expect("the added text is UTF-8");
    let expected_head = format!("** {title}\n:PROPERTIES:\n:ID: ");
    let id = tail
        .strip_prefix(&expected_head)
        .and_then(|rest| rest.strip_suffix("\n:END:\n"))
        .unwrap_or_else(|| panic!("the added text is not the new headline: {tail:?}"));
    assert!(is_uuid(id), "the new headline's id is not a UUID: {tail:?}");
    Outcome::New
}

/// When, after the model's first request, the write-back's temporary copy
/// appeared and when the new text was in place, in a run that is not
/// killed: the span the kills are spread over.
fn calibrate(dir: &Path, rt: &tokio::runtime::Runtime, memex_file: &Path) -> (Duration, Duration) {
    let server = rt.block_on(Server::start(vec![
        tool_reply(
            "add_headline",
            r#"{"parent_id": "inbox", "title": "Calibration"}"#,
        ),
        text_reply("Added."),
    ]));
    let old = std::fs::read(memex_file).unwrap();
    let mut host = start_host(dir, &server, &["--no-repl"], &[]);
    let send = command(dir, &server, &["send", "add a headline"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for(Duration::from_secs(20), || server
        .requests()
        .len()
        == 1));
    let asked = Instant::now();
    let len = old.len() as u64;
    let memex_dir = memex_file.parent().unwrap();
    let mut copying = None;
    assert!(wait_for(Duration::from_secs(20), || {
        if copying.is_none() && !temporaries(memex_dir).is_empty() {
            copying = Some(asked.elapsed());
        }
        std::fs::metadata(memex_file).is_ok_and(|m| m.len() != len)
    }));
    let written = asked.elapsed();
    let send = send.wait_with_output().unwrap();
    assert!(send.status.success(), "{}", stderr(&send));
    assert_eq!(stdout(&send), "Added.\n", "{}", stderr(&send));
    assert_eq!(
        judge(&old, &std::fs::read(memex_file).unwrap(), "Calibration"),
        Outcome::New
    );
    let stop = command(dir, &server, &["stop"]).output().unwrap();
    assert!(stop.status.success(), "{}", stderr(&stop));
    assert!(wait_exit(&mut host).success());
    // The copy may come and go between two polls.
    (copying.unwrap_or(written), written)
}

#[test]
fn a_host_killed_during_write_back_leaves_the_old_or_the_new_file_and_no_temporary() {
    let started = Instant::now();
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let memex_dir = dir.path().join("memex");
    std::fs::create_dir_all(&memex_dir).unwrap();
    let memex_file = memex_dir.join("work.org");
    std::fs::write(&memex_file, big_memex()).unwrap();
    assert!(std::fs::metadata(&memex_file).unwrap().len() > 4_000_000);

    let (copying, written) = calibrate(dir.path(), &rt, &memex_file);
    eprintln!(
        "after the model's first request: temporary copy seen at {copying:?}, new text in place at {written:?}"
    );
    // Half the timed kills spread from the first request to a little past
    // the write; the other half over the write itself (the copy written,
    // flushed and renamed), where a kill leaves a temporary copy behind.
    const TIMED: u32 = 16;
    let half = TIMED / 2;
    let mut schedule: Vec<Kill> = (0..half)
        .map(|i| Kill::After(written.mul_f64(1.25 * f64::from(i) / f64::from(half - 1))))
        .chain((0..half).map(|i| {
            let from = copying.saturating_sub(Duration::from_millis(3));
            let to = written + Duration::from_millis(3);
            Kill::After(from + (to - from).mul_f64(f64::from(i) / f64::from(half - 1)))
        }))
        .collect();
    // Timing alone may miss the rename on a loaded machine: one kill
    // waits for the new text, and the last ones for the temporary copy
    // (until one is left behind, for the last cleanup below).
    schedule.push(Kill::NewSeen);
    schedule.extend([Kill::CopySeen; 5]);

    let mut outcomes = Vec::new();
    let mut temporaries_left = 0;
    let mut copy_left = false;
    for (i, when) in schedule.into_iter().enumerate() {
        if copy_left {
            break;
        }
        let title = format!("Killed write {i}");
        let server = rt.block_on(Server::start(vec![
            tool_reply(
                "add_headline",
                &json!({"parent_id": "inbox", "title": title}).to_string(),
            ),
            text_reply("Added."),
        ]));
        let old = std::fs::read(&memex_file).unwrap();
        let mut host = start_host(dir.path(), &server, &["--no-repl"], &[]);
        // The host's start removed what the previous kill left.
        assert_eq!(
            temporaries(&memex_dir),
            Vec::<PathBuf>::new(),
            "a temporary copy survived the start of a new host"
        );
        let mut send = command(dir.path(), &server, &["send", "add a headline"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(wait_for(Duration::from_secs(20), || server
            .requests()
            .len()
            == 1));
        let asked = Instant::now();
        match when {
            Kill::After(delay) => std::thread::sleep(delay),
            Kill::CopySeen => assert!(
                wait_for(Duration::from_secs(20), || !temporaries(&memex_dir)
                    .is_empty()
                    || std::fs::metadata(&memex_file)
                        .is_ok_and(|m| m.len() != old.len() as u64)),
                "the host wrote nothing"
            ),
            Kill::NewSeen => assert!(
                wait_for(Duration::from_secs(20), || std::fs::metadata(&memex_file)
                    .is_ok_and(|m| m.len() != old.len() as u64)),
                "the host wrote nothing"
            ),
        }
        let at = asked.elapsed();
        host.kill().unwrap();
        host.wait().unwrap();
        send.wait().unwrap();

        let now = std::fs::read(&memex_file).unwrap();
        let outcome = judge(&old, &now, &title);
        let left = temporaries(&memex_dir);
        temporaries_left += left.len();
        copy_left = when == Kill::CopySeen && !left.is_empty();
        eprintln!(
            "kill {i:2} {when:?}, at {at:>7.1?}: {outcome:?}{}",
            if left.is_empty() {
                String::new()
            } else {
                format!(", temporary left: {left:?}")
            }
        );
        outcomes.push(outcome);
    }
    // The last kill's leftovers go at the next load of the memex, here a
    // one-shot command's.
    let server = rt.block_on(Server::start(vec![]));
    let stats = command(
        dir.path(),
        &server,
        &["memex", "stats", "--memex", "memex", "--json"],
    )
    .output()
    .unwrap();
    assert!(stats.status.success(), "{}", stderr(&stats));
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(temporaries(&memex_dir), Vec::<PathBuf>::new());
    let old = outcomes.iter().filter(|o| **o == Outcome::Old).count();
    let new = outcomes.len() - old;
    // Every headline is there, once: the 4,000 notes, the inbox, the
    // calibration's child and one child per kill that landed after the
    // rename.
    assert_eq!(stats["failed"], json!([]), "{stats}");
    assert_eq!(stats["objects"], 4000 + 2 + new, "{stats}");
    eprintln!(
        "{} kills: {old} left the old file, {new} the new one, {temporaries_left} a temporary copy; {:?} in all",
        outcomes.len(),
        started.elapsed()
    );
    assert!(old > 0, "no kill landed before the rename");
    assert!(new > 0, "no kill landed after the rename");
    assert!(
        temporaries_left > 0,
        "no kill landed between the copy and the rename: the cleanup was not put to the test"
    );
}

// ---------------------------------------------------------------------
// 2. Files that are not regular files, in the folders a host watches.
// ---------------------------------------------------------------------

const MEMEX: &str = "#+TODO: TODO | DONE
* Launch :project:
:PROPERTIES:
:ID: launch
:END:
Ship it.
** TODO Write docs
";

/// The host's stderr, gathered line by line as it comes.
fn gather(stream: impl std::io::Read + Send + 'static) -> Arc<Mutex<String>> {
    use std::io::BufRead as _;
    let text = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&text);
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// The host's resident memory and its peak, in KiB (`/proc/PID/status`).
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A FIFO, a link to `/dev/zero` and a 4 GiB sparse file in `memex/`, and a
/// FIFO named like a library in `plugins/`. Returns the FIFO library's name.
fn plant_non_regular_files(dir: &Path) -> String {
    let memex = dir.join("memex");
    mkfifo(&memex.join("x.org"));
    std::os::unix::fs::symlink("/dev/zero", memex.join("zero.org")).unwrap();
    std::fs::File::create(memex.join("big.org"))
        .unwrap()
        .set_len(4 << 30)
        .unwrap();
    let library = file_name("fifo");
    mkfifo(&dir.join("plugins").join(&library));
    library
}

/// The lines of `text` that name each planted file, or what is missing.
fn named_lines(text: &str, library: &str) -> Result<[String; 4], String> {
    let find = |needle: &str, reason: &str| {
        text.lines()
            .find(|l| l.contains(needle) && l.contains(reason))
            .map(str::to_owned)
            .ok_or_else(|| format!("no line names {needle} with {reason:?}"))
    };
    Ok([
        find("x.org", "not a regular file (a FIFO)")?,
        find("zero.org", "not a regular file (a device)")?,
        find("big.org", "4294967296 bytes, over the memex's limit")?,
        find(library, "not a regular file")?,
    ])
}

#[test]
fn fifos_devices_and_huge_files_in_a_running_hosts_folders_are_skipped_and_named() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("memex")).unwrap();
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    std::fs::write(dir.path().join("memex/work.org"), MEMEX).unwrap();
    let server = rt.block_on(Server::start(vec![
        text_reply("Still here."),
        text_reply("Seen it."),
    ]));
    // At the default log level: the registry's and the memex's warnings
    // reach stderr (see main.rs).
    // No background embedding: loading its model would grow the peak
    // this test reads to prove nothing was read from /dev/zero.
    let mut host = start_host(
        dir.path(),
        &server,
        &["--no-repl"],
        &[("FOVEAL_EMBEDDING", "off")],
    );
    let log = gather(host.stderr.take().unwrap());
    let (_, peak_before) = memory_kib(host.id());

    let planted = Instant::now();
    let fifo_library = plant_non_regular_files(dir.path());
    let mut named = Err(String::new());
    wait_for(Duration::from_secs(1), || {
        named = named_lines(&log.lock().unwrap(), &fifo_library);
        named.is_ok()
    });
    let named = named.unwrap_or_else(|missing| {
        panic!(
            "after {:?}: {missing}; the host's stderr:\n{}",
            planted.elapsed(),
            log.lock().unwrap()
        )
    });
    eprintln!("named within {:?}:", planted.elapsed());
    for line in &named {
        eprintln!("  {line}");
    }
    // The refused library is in the status too (refreshed every 250 ms).
    let status = || {
        let output = command(dir.path(), &server, &["status", "--json"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let refused_row = |status: &serde_json::Value| {
        status["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| {
                s["status"]
                    .as_str()
                    .is_some_and(|t| t.contains("not a regular file"))
            })
            .cloned()
    };
    let mut current = status();
    wait_for(Duration::from_secs(1), || {
        current = status();
        refused_row(&current).is_some()
    });
    let refused = refused_row(&current).unwrap_or_else(|| {
        panic!(
            "after {:?}, no refused library in {current}",
            planted.elapsed()
        )
    });
    assert!(
        refused["name"].as_str().unwrap().contains("fifo"),
        "{refused}"
    );

    // The host still answers...
    let sent = command(dir.path(), &server, &["send", "are you there?"])
        .output()
        .unwrap();
    assert!(sent.status.success(), "{}", stderr(&sent));
    assert_eq!(stdout(&sent), "Still here.\n");

    // ...its memex watcher still sees an ordinary edit...
    let generation = current["memex_generation"].as_u64().unwrap();
    let mut text = MEMEX.to_owned();
    text.push_str("* Fresh headline after the fault :project:\n");
    std::fs::write(dir.path().join("memex/work.org"), text).unwrap();
    let seen = wait_for(Duration::from_secs(5), || {
        status()["memex_generation"].as_u64() > Some(generation)
    });
    assert!(seen, "the edit did not reach the memex");
    // ...and its plugins watcher a real library installed after the FIFO.
    install(
        &library("tools"),
        &dir.path().join("plugins"),
        &file_name("foveal_fixture_tools"),
    );
    let loaded = wait_for(Duration::from_secs(5), || {
        status()["skills"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "tools" && s["status"] == "loaded")
    });
    assert!(loaded, "a library installed after the FIFO was not loaded");
    let sent = command(dir.path(), &server, &["send", "anything new?"])
        .output()
        .unwrap();
    assert!(sent.status.success(), "{}", stderr(&sent));
    assert_eq!(stdout(&sent), "Seen it.\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1].body.contains("Fresh headline after the fault"),
        "the edit is not in the next prompt: {}",
        requests[1].body
    );
    assert!(!requests[0].body.contains("Fresh headline after the fault"));
    assert!(
        requests[1].body.contains("word_count"),
        "{}",
        requests[1].body
    );

    // Nothing was read from /dev/zero or the 4 GiB file.
    let (resident, peak) = memory_kib(host.id());
    eprintln!(
        "host memory: {resident} KiB resident, peak {peak_before} KiB before, {peak} KiB after"
    );
    assert!(
        peak < peak_before + 64 * 1024,
        "the host's peak memory grew from {peak_before} KiB to {peak} KiB"
    );

    let stop = command(dir.path(), &server, &["stop"]).output().unwrap();
    assert!(stop.status.success(), "{}", stderr(&stop));
    assert!(wait_exit(&mut host).success());

    // At start, with the files already there: a one-shot load and a new
    // host finish quickly, naming each.
    let started = Instant::now();
    let stats = command(dir.path(), &server, &["memex", "stats", "--memex", "memex"])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(stats.status.success(), "{}", stderr(&stats));
    let text = stdout(&stats) + &stderr(&stats);
    eprintln!("memex stats took {took:?}:\n{text}");
    assert!(took < Duration::from_secs(5), "memex stats took {took:?}");
    for (name, reason) in [
        ("x.org", "not a regular file (a FIFO)"),
        ("zero.org", "not a regular file (a device)"),
        ("big.org", "4294967296 bytes, over the memex's limit"),
    ] {
        assert!(
            text.lines().any(|l| l.contains(name) && l.contains(reason)),
            "memex stats does not name {name}: {text}"
        );
    }
    let started = Instant::now();
    let check = command(dir.path(), &server, &["check"]).output().unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "check took {took:?}");
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
    let named = named_lines(&stdout(&check), &fifo_library)
        .unwrap_or_else(|missing| panic!("{missing}: {}", stdout(&check)));
    for line in &named {
        assert!(line.starts_with("PROBLEM"), "{line}");
    }

    let started = Instant::now();
    let mut host = start_host(dir.path(), &server, &["--no-repl"], &[]);
    eprintln!("a new host was up in {:?}", started.elapsed());
    let log = gather(host.stderr.take().unwrap());
    let refused = refused_row(&status()).expect("the new host does not list the FIFO library");
    assert!(
        refused["name"].as_str().unwrap().contains("fifo"),
        "{refused}"
    );
    let stop = command(dir.path(), &server, &["stop"]).output().unwrap();
    assert!(stop.status.success(), "{}", stderr(&stop));
    assert!(wait_exit(&mut host).success());
    // The new host said at start, at the default log level, which memex
    // files it could not load — as never loaded, not as a version kept.
    wait_for(Duration::from_secs(2), || {
        named_lines(&log.lock().unwrap(), &fifo_library).is_ok()
    });
    let log = log.lock().unwrap().clone();
    named_lines(&log, &fifo_library).unwrap_or_else(|missing| panic!("{missing}: {log}"));
    assert!(!log.contains("previous version kept"), "{log}");
}
