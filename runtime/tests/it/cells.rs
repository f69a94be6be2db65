//! Skill cells through the real host: the `rogue` fixture dropped into the
//! plugins folder runs confined, is refused what it tries, says so on
//! stderr at the default log level, and its crash ends only its cell —
//! the prompt is still made, with every other skill's section in it.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::support::{file_name, install, library};

struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    /// A folder with a plugins folder holding the rogue, a memex with a
    /// private diary, and a config whose `[skills.rogue]` table is `rogue`.
    fn new(rogue: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).unwrap();
        install(&library("rogue"), &plugins, &file_name("rogue"));
        let memex = dir.path().join("memex");
        std::fs::create_dir(&memex).unwrap();
        std::fs::write(
            memex.join("notes.org"),
            "* Work :project:\nPublic plans.\n* Diary :@personal:\nThe cell canary sleeps under the stairs.\n",
        )
        .unwrap();
        let config = dir.path().join("foveal.toml");
        std::fs::write(&config, format!("[skills.rogue]\n{rogue}\n")).unwrap();
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_foveal"));
        command.current_dir(self.dir.path());
        for (name, _) in std::env::vars() {
            if name.starts_with("FOVEAL_") || name.starts_with("CONTEXT_") {
                command.env_remove(name);
            }
        }
        command
            .args(["--config", "foveal.toml"])
            .args(args)
            .env("FOVEAL_DATA_DIR", self.path("data"))
            .env("XDG_CONFIG_HOME", self.path("xdg"))
            .env("OPENAI_API_KEY", "sk-cell-test-key-0123456789");
        command
    }

    /// Pins the rogue's build in `plugins.trusted` (`foveal skill trust`).
    fn pin(&self) {
        let config = std::fs::read_to_string(self.path("foveal.toml")).unwrap();
        std::fs::write(
            self.path("foveal.toml"),
            format!(
                "[plugins]\ntrusted = [\"{}\"]\n\n{config}",
                crate::support::sha256_of(&library("rogue"))
            ),
        )
        .unwrap();
    }

    /// `foveal skill-list` with `env` set: its table.
    fn skill_list(&self, env: &[(&str, &str)]) -> String {
        let mut command = self.command(&["skill-list", "--plugins", "plugins"]);
        command.envs(env.iter().copied());
        text(&command.output().expect("run foveal").stdout)
    }

    fn prompt(&self) -> Output {
        self.command(&[
            "prompt",
            "--plugins",
            "plugins",
            "--memex",
            "memex",
            "--message",
            "hi",
        ])
        .output()
        .expect("run foveal")
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The rogue's line in a prompt.
fn rogue_line(out: &str) -> &str {
    let at = out.find("=== 4600 rogue").expect("the rogue's section");
    out[at..].lines().nth(1).unwrap_or("")
}

fn private_file(host: &Host) -> String {
    host.path("memex").join("notes.org").display().to_string()
}

#[test]
fn a_dropped_in_skill_runs_in_a_cell_that_refuses_the_private_file_and_says_so() {
    let host = Host::new("act = \"read_file\"\npath = \"memex/notes.org\"");
    let config = std::fs::read_to_string(host.path("foveal.toml")).unwrap();
    std::fs::write(
        host.path("foveal.toml"),
        config.replace("memex/notes.org", &private_file(&host)),
    )
    .unwrap();
    let listed = host.skill_list(&[]);
    let row = listed.lines().find(|l| l.starts_with("rogue")).unwrap();
    assert!(
        row.contains("cell: no files, no network, 256 MiB"),
        "{listed}"
    );
    // What it declares it needs and was not granted is shown, not given.
    assert!(
        row.contains("needs network (not granted); needs read /srv/rogue-data (not granted)"),
        "{listed}"
    );
    assert!(
        listed
            .lines()
            .find(|l| l.starts_with("awareness"))
            .unwrap()
            .contains("in-process"),
        "{listed}"
    );

    let output = host.prompt();
    let (out, err) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{err}");
    assert!(rogue_line(&out).starts_with("read_file: refused"), "{out}");
    assert!(!out.contains("canary"), "{out}");
    // Said on stderr without FOVEAL_LOG, once per act.
    assert!(
        err.contains(&format!(
            "skill rogue tried to open {}: refused",
            private_file(&host)
        )),
        "{err}"
    );
    assert_eq!(err.matches("tried to open a socket").count(), 1, "{err}");
    // The constructor ran inside the cell.
    let host = Host::new("act = \"constructor\"");
    let output = host.prompt();
    let out = text(&output.stdout);
    let line = rogue_line(&out);
    // (`passwd=…` and `api_key=…` look like secrets to the gate: their
    // values are redacted, so the check is that nothing says `ok`.)
    assert!(!line.contains("=ok"), "{line}");
    for refused in ["udp=refused", "exec=refused", "write_tmp=refused"] {
        assert!(line.contains(refused), "{line}");
    }
}

#[test]
fn a_crashing_cell_takes_its_fallback_and_the_prompt_is_made_without_it() {
    for (act, signal) in [("abort", "SIGABRT"), ("segv", "SIGSEGV")] {
        let host = Host::new(&format!("act = \"{act}\""));
        let output = host.prompt();
        let (out, err) = (text(&output.stdout), text(&output.stderr));
        assert!(output.status.success(), "{act}: {err}");
        assert!(!out.contains("=== 4600 rogue"), "{out}");
        assert!(out.contains("=== 2000 semantic_memories"), "{out}");
        assert!(out.contains("* Work"), "{out}");
        assert!(
            err.contains("skill cell died in its components hook") && err.contains(signal),
            "{act}: {err}"
        );
    }
}

#[test]
fn a_skill_the_user_trusts_in_process_behaves_as_before() {
    let host = Host::new("isolation = \"in-process\"\nact = \"env\"\nvar = \"OPENAI_API_KEY\"");
    // Not pinned: a table names a skill, and a library chooses its name.
    let listed = host.skill_list(&[]);
    let row = listed.lines().find(|l| l.contains("rogue")).unwrap();
    assert!(
        row.contains("refused") && row.contains("not pinned"),
        "{listed}"
    );
    // Pinned: the user's own choice, with all their rights.
    host.pin();
    let listed = host.skill_list(&[]);
    let row = listed.lines().find(|l| l.starts_with("rogue")).unwrap();
    assert!(row.contains("in-process"), "{listed}");
    let output = host.prompt();
    let out = text(&output.stdout);
    // In the host's process it sees the host's environment: what the
    // cell takes away.
    assert!(rogue_line(&out).starts_with("env: ok present"), "{out}");
}

#[test]
fn without_landlock_a_dropped_in_skill_is_refused_with_the_reason_and_the_opt_out() {
    let host = Host::new("act = \"ok\"");
    let listed = host.skill_list(&[("FOVEAL_CELL_SIMULATE", "no-landlock")]);
    let row = listed.lines().find(|l| l.contains("rogue")).unwrap();
    assert!(row.contains("refused"), "{listed}");
    assert!(row.contains("Landlock"), "{listed}");
    assert!(row.contains("isolation = \"in-process\""), "{listed}");
    // The first-party skills, in-process, still serve.
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("awareness") && l.contains("loaded")),
        "{listed}"
    );
    // The opt-out the message names works there: the user's own choice,
    // for the build they pinned.
    let host = Host::new("isolation = \"in-process\"\nact = \"ok\"");
    host.pin();
    let listed = host.skill_list(&[("FOVEAL_CELL_SIMULATE", "no-landlock")]);
    let row = listed.lines().find(|l| l.starts_with("rogue")).unwrap();
    assert!(
        row.contains("in-process") && row.contains("loaded"),
        "{listed}"
    );
}

#[test]
fn every_first_party_skill_in_a_cell_makes_the_same_prompt() {
    let host = Host::new("act = \"ok\"");
    let in_process = host.prompt();
    let cells = host
        .command(&[
            "prompt",
            "--plugins",
            "plugins",
            "--memex",
            "memex",
            "--message",
            "hi",
        ])
        .env("FOVEAL_BUILTIN_ISOLATION", "cell")
        .output()
        .unwrap();
    assert!(cells.status.success(), "{}", text(&cells.stderr));
    assert_eq!(text(&cells.stdout), text(&in_process.stdout));
    let listed = host.skill_list(&[("FOVEAL_BUILTIN_ISOLATION", "cell")]);
    for skill in [
        "privacy",
        "token-economics",
        "awareness",
        "computed-context",
        "context-window",
    ] {
        let row = listed.lines().find(|l| l.starts_with(skill)).unwrap();
        assert!(row.contains("cell: no files"), "{listed}");
    }
}

#[test]
fn a_skill_whose_hook_returns_an_error_is_said_on_stderr_without_foveal_log() {
    // An error the skill returns (not a panic, not a crash) left its
    // section out silently at the default log level before.
    let host = Host::new("act = \"no-such-act\"");
    let output = host.prompt();
    let (out, err) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{err}");
    assert!(!out.contains("=== 4600 rogue"), "{out}");
    assert!(
        err.contains(
            "skill `rogue` hook `components` failed: invalid input (code 3): rogue: unknown act"
        ),
        "{err}"
    );
}
