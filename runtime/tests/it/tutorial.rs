//! docs/writing-a-skill.md, run as written: every block fenced as
//! `sh tutorial` runs in order in one bash session (so `cd` carries over),
//! with the real `foveal` binary first on `PATH`; the block fenced as
//! `sh tutorial-host` (the running host) runs in the background, on the
//! scripted OpenAI-compatible server. The page cannot rot: the generated
//! skill must build, pass its tests, check, install into the running host,
//! serve its tool and component, and hot-reload.
//!
//! One thing is added to what the page says: the generated crate's
//! `target/` is a link to a folder shared by every run
//! (`target/tutorial-skill` in this workspace), so that its dependencies
//! (abi_stable and the SDK) are built once, not on every run.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::server::Server;
use crate::support::{clean_env, profile_dir, wait_for};

/// One fenced block of the page.
#[derive(Debug)]
struct Block {
    host: bool,
    text: String,
}

fn blocks(page: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    for line in page.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh tutorial") => {
                current = Some(Block {
                    host: false,
                    text: String::new(),
                })
            }
            (None, "```sh tutorial-host") => {
                current = Some(Block {
                    host: true,
                    text: String::new(),
                })
            }
            (Some(_), "```") => out.extend(current.take()),
            (Some(block), line) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

/// The page as one bash script: each block, then a marker line; the host
/// block in the background with its pid saved, and a wait for its socket.
fn script(blocks: &[Block]) -> String {
    let mut script = String::from("set -euo pipefail\n");
    for (i, block) in blocks.iter().enumerate() {
        if block.host {
            script.push_str(&format!(
                "( {} ) > \"$TUTORIAL_DIR/host.log\" 2>&1 &\necho $! > \"$TUTORIAL_DIR/host.pid\"\n\
                 for _ in $(seq 300); do [ -S \"$FOVEAL_SOCKET\" ] && break; sleep 0.1; done\n\
                 [ -S \"$FOVEAL_SOCKET\" ] || {{ cat \"$TUTORIAL_DIR/host.log\"; exit 1; }}\n",
                block.text.trim()
            ));
        } else {
            script.push_str(&block.text);
        }
        // The shared build folder, as soon as the crate exists.
        script.push_str(
            "if [ -f Cargo.toml ] && [ ! -e target ]; then ln -s \"$TUTORIAL_TARGET\" target; fi\n",
        );
        script.push_str(&format!("echo '::block {i} done'\n"));
    }
    script
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn the_page_has_the_steps_ci_runs() {
    let page = std::fs::read_to_string(workspace_root().join("docs/writing-a-skill.md")).unwrap();
    let blocks = blocks(&page);
    assert_eq!(blocks.iter().filter(|b| b.host).count(), 1, "{blocks:?}");
    let all: String = blocks.iter().map(|b| b.text.as_str()).collect();
    for step in [
        "foveal skill new",
        "cargo build --release",
        "cargo test",
        "foveal skill check",
        "foveal skill install",
        "foveal tool call",
        "install --replace",
        "foveal stop",
    ] {
        assert!(all.contains(step), "the page no longer runs `{step}`");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writing_a_skill_page_runs_from_skill_new_to_a_hot_reload() {
    let page = std::fs::read_to_string(workspace_root().join("docs/writing-a-skill.md")).unwrap();
    let script = script(&blocks(&page));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("memex")).unwrap();
    std::fs::write(
        dir.path().join("memex/reading.org"),
        "* Reading :project:\n:PROPERTIES:\n:ID: reading\n:END:\n** TODO Finish the book :book:\n* Diary :@personal:\n** TODO A private errand :project:\n",
    )
    .unwrap();
    let shared_target = profile_dir()
        .parent()
        .expect("target folder")
        .join("tutorial-skill");
    std::fs::create_dir_all(&shared_target).unwrap();
    let server = Server::start(vec![]).await;

    let mut bash = std::process::Command::new("bash");
    bash.arg("-c").arg(&script);
    clean_env(&mut bash, dir.path());
    // What cargo set for this test is not for the cargo the page runs.
    for (name, _) in std::env::vars() {
        if name.starts_with("CARGO_") && name != "CARGO_HOME" {
            bash.env_remove(name);
        }
    }
    let path = format!(
        "{}:{}",
        profile_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    bash.env("PATH", path)
        .env("TUTORIAL_DIR", dir.path())
        .env("TUTORIAL_TARGET", &shared_target)
        .env("FOVEAL_MEMEX", dir.path().join("memex"))
        .env("FOVEAL_SOCKET", dir.path().join("run/control.sock"))
        .env("FOVEAL_PROVIDER", "openai")
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_MODEL", "scripted")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || bash.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let host_log = std::fs::read_to_string(dir.path().join("host.log")).unwrap_or_default();
    // The page stops the host; if a step failed before that, this test
    // stops the one it started.
    let host_pid: Option<i32> = std::fs::read_to_string(dir.path().join("host.pid"))
        .ok()
        .and_then(|p| p.trim().parse().ok());
    if let Some(pid) = host_pid {
        let stopped = wait_for(Duration::from_secs(10), || {
            !Path::new(&format!("/proc/{pid}")).exists()
        });
        if !stopped {
            // SAFETY: `kill` on a pid this test started; no memory is touched.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
    assert!(
        output.status.success(),
        "a step of docs/writing-a-skill.md failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- host\n{host_log}"
    );
    let context = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- host\n{host_log}");
    // skill new, then the crate's own tests passed.
    assert!(stdout.contains("created skill `reading-list`"), "{context}");
    assert!(stdout.contains("test result: ok. 3 passed"), "{context}");
    // skill check.
    assert!(
        stdout.contains("ok: the host would load it and call its hooks"),
        "{context}"
    );
    // The running host loaded the install, served the tool and the
    // component, and took the new build without a restart.
    assert!(
        stdout.contains("the running host now serves skill `reading-list` 0.1.0"),
        "{context}"
    );
    assert!(
        stdout.contains("reading | Reading"),
        "the tool's result: {context}"
    );
    assert!(
        !stdout.contains("private errand"),
        "a private object reached the output: {context}"
    );
    assert!(
        stdout.contains("The memex has 1 open tasks in 1 files."),
        "the component in the prompt: {context}"
    );
    assert!(
        stdout.contains("the running host now serves skill `reading-list` 0.2.0"),
        "{context}"
    );
    assert!(stdout.contains("reading-list 0.2.0 — loaded"), "{context}");
}
