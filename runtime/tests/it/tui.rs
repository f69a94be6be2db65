//! `foveal tui` as a user runs it: the real binary in a real terminal
//! (tmux), typed at with `send-keys` and read with `capture-pane`, against
//! a host (`foveal run`) on the scripted OpenAI-compatible server.
//!
//! Without tmux these tests print `not run` and pass — unless `CI` is
//! set, where they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::live::{
    command, run_to_end, session_lines, slow_reply, start_host, stderr, stop_host, text_reply,
    wait_exit, workspace,
};
use crate::server::Server;
use crate::support::{file_name, install, library, wait_for};

/// A tmux server of its own (`tmux -L NAME`), killed on drop, with one
/// pane running `sh` in the test's folder.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// None (after saying so) when tmux is not installed, outside CI.
    fn start(name: &str, dir: &Path) -> Option<Self> {
        let found = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            assert!(
                std::env::var_os("CI").is_none(),
                "tmux is needed for the tui tests in CI"
            );
            eprintln!("not run: tmux is not installed");
            return None;
        }
        let tmux = Self {
            socket: format!("foveal-{name}-{}", std::process::id()),
        };
        let status = tmux
            .command()
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "120",
                "-y",
                "40",
                "-c",
            ])
            .arg(dir)
            .args(["env", "PS1=shell$ ", "sh"])
            .status()
            .unwrap();
        assert!(status.success(), "tmux did not start");
        Some(tmux)
    }

    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command.args(["-L", &self.socket]);
        command
    }

    /// Types `keys` (tmux key names, e.g. `Enter`, `Escape`, `C-c`).
    fn keys(&self, keys: &[&str]) {
        let status = self
            .command()
            .args(["send-keys", "-t", "0"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Types `text` literally.
    fn type_text(&self, text: &str) {
        let status = self
            .command()
            .args(["send-keys", "-t", "0", "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The screen now.
    fn screen(&self) -> String {
        let output = self
            .command()
            .args(["capture-pane", "-p", "-t", "0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Waits until the screen satisfies `check`; panics with the screen
    /// when it does not within 20 s.
    fn wait(&self, what: &str, mut check: impl FnMut(&str) -> bool) -> String {
        let mut screen = String::new();
        let seen = wait_for(Duration::from_secs(20), || {
            screen = self.screen();
            check(&screen)
        });
        assert!(seen, "{what}: not on the screen:\n{screen}");
        screen
    }

    fn wait_text(&self, text: &str) -> String {
        self.wait(text, |s| s.contains(text))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
    }
}

/// A script in `dir` that runs `foveal tui ARGS` with the environment the
/// other tests' `foveal` commands get (the scripted server, the sandbox's
/// data folder and socket).
fn tui_script(dir: &Path, server: &Server, args: &[&str]) -> PathBuf {
    let mut all = vec!["tui"];
    all.extend_from_slice(args);
    let command = command(dir, server, &all);
    let mut script = String::from("#!/bin/sh\n");
    for (name, value) in command.get_envs() {
        let name = name.to_string_lossy();
        match value {
            Some(value) => script.push_str(&format!(
                "export {name}='{}'\n",
                value.to_string_lossy().replace('\'', "'\\''")
            )),
            None => script.push_str(&format!("unset {name}\n")),
        }
    }
    script.push_str(&format!(
        "exec '{}'",
        command.get_program().to_string_lossy()
    ));
    for arg in command.get_args() {
        script.push_str(&format!(" '{}'", arg.to_string_lossy()));
    }
    script.push('\n');
    let path = dir.join("tui.sh");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Stops the host the UI started in the background when the test ends,
/// passed or not (`foveal stop`; nothing when none runs).
struct StopOnDrop(Command);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = self.0.output();
    }
}

/// `Context N%` with N a number: the gauge's value.
fn gauge(screen: &str) -> Option<u32> {
    let at = screen.find("Context ")?;
    let rest = &screen[at + "Context ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    rest[digits.len()..]
        .starts_with('%')
        .then(|| digits.parse().ok())?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tui_streams_a_reply_shows_the_gauge_follows_a_hot_swap_and_explains_the_context() {
    let dir = workspace();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(&library("counter-v1"), &plugins, &file_name("counter"));
    let server = Server::start(vec![text_reply("Hello from the scripted model.")]).await;
    let plugins_arg = plugins.to_string_lossy().into_owned();
    let mut host = start_host(
        dir.path(),
        &server,
        &["--no-repl", "--session", "work", "--plugins", &plugins_arg],
    );
    let Some(tmux) = Tmux::start("stream", dir.path()) else {
        stop_host(dir.path(), &server, &mut host).await;
        return;
    };
    tui_script(dir.path(), &server, &[]);
    tmux.wait_text("shell$");
    tmux.type_text("./tui.sh");
    tmux.keys(&["Enter"]);

    // The handshake: the host's version and state.
    let screen = tmux.wait_text(&format!("foveal {} │", env!("CARGO_PKG_VERSION")));
    assert!(screen.contains("session work"), "{screen}");
    assert!(screen.contains("model scripted"), "{screen}");
    tmux.wait_text("counter 1.0.0 loaded");

    // A message: the reply streams in, the gauge shows the prompt's share.
    tmux.type_text("hello host");
    tmux.keys(&["Enter"]);
    tmux.wait_text("Hello from the scripted model.");
    let screen = tmux.wait("the gauge", |s| gauge(s).is_some());
    let value = gauge(&screen).unwrap();
    assert!(value <= 100, "{screen}");
    let status = run_to_end(command(dir.path(), &server, &["status", "--json"])).await;
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["usage_percent"], value, "the gauge is the host's");

    // /focus: the sidebar shows the object's title and id.
    tmux.type_text("/focus launch");
    tmux.keys(&["Enter"]);
    tmux.wait_text("focus: launch");
    let screen = tmux.wait("the focus in the sidebar", |s| s.contains("│Launch "));
    assert!(screen.contains("│launch "), "{screen}");

    // A hot swap is pushed to the sidebar.
    install(&library("counter-v2"), &plugins, &file_name("counter"));
    let screen = tmux.wait_text("counter 2.0.0 loaded");
    assert!(!screen.contains("counter 1.0.0"), "{screen}");

    // /context: the explained section, in a dialog that filters.
    tmux.type_text("/context");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_text("## Context Debug");
    assert!(screen.contains("- Rendered by: awareness"), "{screen}");
    tmux.type_text("launch");
    let screen = tmux.wait_text("filter: launch");
    assert!(!screen.contains("## Context Debug"), "{screen}");
    assert!(screen.contains("launch"), "{screen}");
    tmux.keys(&["Escape"]);
    tmux.wait("the dialog closed", |s| !s.contains("filter: launch"));

    // Ctrl-C: the UI closes, the terminal is as it was, the host runs on.
    tmux.keys(&["C-c"]);
    tmux.wait_text("shell$");
    tmux.type_text("stty -a");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait("stty's answer", |s| s.contains("icanon"));
    assert!(!screen.contains("-icanon"), "raw mode left on:\n{screen}");
    assert!(!screen.contains("-echo "), "echo left off:\n{screen}");
    let status = run_to_end(command(dir.path(), &server, &["status"])).await;
    assert!(status.status.success(), "{}", stderr(&status));
    stop_host(dir.path(), &server, &mut host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_cancels_the_cycle_in_flight_and_the_session_stays_usable() {
    let dir = workspace();
    let server = Server::start(vec![slow_reply(), text_reply("After the cancel.")]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl", "--session", "work"]);
    let Some(tmux) = Tmux::start("cancel", dir.path()) else {
        stop_host(dir.path(), &server, &mut host).await;
        return;
    };
    tui_script(dir.path(), &server, &[]);
    tmux.wait_text("shell$");
    tmux.type_text("./tui.sh");
    tmux.keys(&["Enter"]);
    tmux.wait_text("session work");
    tmux.type_text("a long one");
    tmux.keys(&["Enter"]);
    tmux.wait_text("w1 ");
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_text("cancelled");
    assert!(!screen.contains("w399"), "the reply was not cut:\n{screen}");
    // The turn's end (`done`) follows its `[cancelled]` text: a message
    // typed before it comes is refused ("a turn is running").
    tmux.wait_text("Message (Enter sends");
    tmux.type_text("again");
    tmux.keys(&["Enter"]);
    tmux.wait_text("After the cancel.");
    tmux.keys(&["C-c"]);
    tmux.wait_text("shell$");
    let status = run_to_end(command(dir.path(), &server, &["status", "--json"])).await;
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["cycles"], 2, "{status}");
    stop_host(dir.path(), &server, &mut host).await;
    // The session is a conversation still: the cut reply is the
    // assistant's answer to the first message.
    let lines = session_lines(dir.path(), "work");
    let roles: Vec<&str> = lines.iter().map(|l| l["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user", "assistant"],
        "{lines:#?}"
    );
    let cut = lines[1]["content"].as_str().unwrap_or_default();
    assert!(cut.starts_with("w0 w1 ") && !cut.contains("w399"), "{cut}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_host_the_tui_starts_one_and_reconnects_when_it_comes_back() {
    let dir = workspace();
    let server = Server::start(vec![]).await;
    let Some(tmux) = Tmux::start("start", dir.path()) else {
        return;
    };
    let _stop = StopOnDrop(command(dir.path(), &server, &["stop"]));
    // A name of this test's own, to find its UI's process.
    let session = format!("bg{}", std::process::id());
    // The flags a host needs (provider, memex) are those `run` takes.
    tui_script(
        dir.path(),
        &server,
        &[
            "--provider",
            "openai",
            "--memex",
            "memex",
            "--session",
            &session,
        ],
    );
    tmux.wait_text("shell$");
    tmux.type_text("./tui.sh");
    tmux.keys(&["Enter"]);
    tmux.wait_text("no host was running: started `foveal run --no-repl` in the background");
    tmux.wait_text(&format!("session {session}"));
    let status = run_to_end(command(dir.path(), &server, &["status", "--json"])).await;
    assert!(status.status.success(), "{}", stderr(&status));

    // The host stops: the UI says so; a new host: it is back.
    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stop.status.success());
    tmux.wait_text("DISCONNECTED");
    // The stopped host removes its socket as it exits: start the next one
    // after that, as a user would.
    let socket = dir.path().join("run/control.sock");
    assert!(
        wait_for(Duration::from_secs(20), || !socket.exists()),
        "the stopped host did not exit"
    );
    let mut host = start_host(dir.path(), &server, &["--no-repl", "--session", &session]);
    tmux.wait("reconnected", |s| {
        !s.contains("DISCONNECTED") && s.contains(&format!("session {session}"))
    });

    // A resize is redrawn to the new size.
    let resized = tmux
        .command()
        .args(["resize-window", "-t", "0", "-x", "100", "-y", "30"])
        .status()
        .unwrap();
    assert!(resized.success());
    tmux.wait("the frame redrawn at 100×30", |s| {
        let lines: Vec<&str> = s.lines().collect();
        lines.len() == 30
            && lines[29].starts_with("foveal ")
            && lines[0].chars().count() == 100
            && lines[0].ends_with('┐')
    });

    // SIGTERM: the UI ends and the terminal is restored.
    let found = Command::new("pgrep")
        .args(["-f", &format!("foveal tui .*--session {session}$")])
        .output()
        .unwrap();
    let pids = String::from_utf8_lossy(&found.stdout).into_owned();
    let pids: Vec<&str> = pids.split_whitespace().collect();
    assert_eq!(pids.len(), 1, "{pids:?}");
    assert!(
        Command::new("kill")
            .args(["-TERM", pids[0]])
            .status()
            .unwrap()
            .success()
    );
    tmux.wait_text("shell$");
    tmux.type_text("stty -a");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait("stty's answer", |s| s.contains("icanon"));
    assert!(!screen.contains("-icanon"), "raw mode left on:\n{screen}");
    run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(wait_exit(&mut host).success());
}

/// One JSON line from the host, within 20 s.
fn next_event(reader: &mut impl std::io::BufRead) -> serde_json::Value {
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .expect("an event within the timeout");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_is_pushed_memex_edits_and_skill_swaps_as_they_happen() {
    use std::io::{BufReader, Write as _};
    let dir = workspace();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let server = Server::start(vec![]).await;
    let plugins_arg = plugins.to_string_lossy().into_owned();
    let mut host = start_host(
        dir.path(),
        &server,
        &["--no-repl", "--plugins", &plugins_arg],
    );
    let stream =
        std::os::unix::net::UnixStream::connect(dir.path().join("run/control.sock")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    writer
        .write_all(
            b"{\"cmd\":\"hello\",\"protocol\":1,\"client\":\"test\"}\n{\"cmd\":\"subscribe\"}\n",
        )
        .unwrap();
    let hello = next_event(&mut reader);
    assert_eq!(hello["event"], "hello", "{hello}");
    assert_eq!(hello["protocol"], 1);
    assert_eq!(hello["host"], env!("CARGO_PKG_VERSION"));
    let memex_before = hello["status"]["memex_generation"].as_u64().unwrap();
    assert_eq!(next_event(&mut reader)["event"], "subscribed");

    // An edit made outside the host: pushed as the memex publishes it.
    let file = dir.path().join("memex/work.org");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text}* Another headline\n")).unwrap();
    let event = next_event(&mut reader);
    assert_eq!(event["event"], "memex", "{event}");
    assert!(
        event["generation"].as_u64().unwrap() > memex_before,
        "{event}"
    );

    // A skill dropped in: pushed with the new list.
    install(&library("counter-v1"), &plugins, &file_name("counter"));
    let event = loop {
        let event = next_event(&mut reader);
        if event["event"] == "skills" {
            break event;
        }
    };
    let counter = event["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "counter")
        .cloned()
        .unwrap_or_else(|| panic!("{event}"));
    assert_eq!(counter["version"], "1.0.0");

    // Old clients are unchanged: one request, one answer.
    let status = run_to_end(command(dir.path(), &server, &["status", "--json"])).await;
    assert!(status.status.success(), "{}", stderr(&status));
    // A subscriber does not hold the host up when it stops.
    let started = std::time::Instant::now();
    stop_host(dir.path(), &server, &mut host).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

/// The next `skills` push, skipping other events.
fn next_skills(reader: &mut impl std::io::BufRead) -> serde_json::Value {
    loop {
        let event = next_event(reader);
        if event["event"] == "skills" {
            return event;
        }
    }
}

/// The version of `name` in a `skills` push, if listed.
fn version_in(event: &serde_json::Value, name: &str) -> Option<String> {
    event["skills"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .map(|s| s["version"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_replaced_in_a_relative_plugins_folder_is_swapped_not_refused() {
    use std::io::{BufReader, Write as _};
    let dir = workspace();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(&library("counter-v1"), &plugins, &file_name("counter"));
    let server = Server::start(vec![]).await;
    // Relative, as the default `plugins` folder is: the registry names its
    // libraries `plugins/…` while the watcher reports absolute paths.
    let mut host = start_host(dir.path(), &server, &["--no-repl", "--plugins", "plugins"]);
    let stream =
        std::os::unix::net::UnixStream::connect(dir.path().join("run/control.sock")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    writer
        .write_all(b"{\"cmd\":\"hello\",\"protocol\":1}\n{\"cmd\":\"subscribe\"}\n")
        .unwrap();
    let hello = next_event(&mut reader);
    let counter = hello["status"]["skills"]
        .as_array()
        .and_then(|skills| skills.iter().find(|s| s["name"] == "counter").cloned());
    assert!(counter.is_some(), "counter is not loaded: {hello}");

    install(&library("counter-v2"), &plugins, &file_name("counter"));
    // Until the new build serves, or a refusal is pushed.
    let event = loop {
        let event = next_skills(&mut reader);
        let refused = event["skills"]
            .as_array()
            .is_some_and(|skills| skills.iter().any(|s| s["status"] != "loaded"));
        if refused || version_in(&event, "counter").as_deref() == Some("2.0.0") {
            break event;
        }
    };
    assert_eq!(
        version_in(&event, "counter").as_deref(),
        Some("2.0.0"),
        "{event}"
    );
    assert!(
        event["skills"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] == "loaded"),
        "the new build was refused: {event}"
    );
    stop_host(dir.path(), &server, &mut host).await;
}
