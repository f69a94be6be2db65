//! Embeddings through the real binary: a plain Org folder without
//! `:EMBEDDING:` properties gets semantic promotion after `foveal memex
//! embed` (the local model) or in the background of `foveal run`; a remote
//! embedder never receives private text; an interrupted `memex embed`
//! resumes; a damaged cache is rebuilt; the vectors a pass publishes, like
//! the host's own writes, never reach the agent as outside edits.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::live::{run_to_end, stderr, text_reply, tool_reply};
use crate::support::{foveal_command, wait_for};

/// Work, a look-alike of one of its tasks under another name, an
/// unrelated task, and a private diary entry that resembles the first.
const MEMEX: &str = "\
* Kitchen renovation :project:
** TODO Choose the kitchen cabinets
:PROPERTIES:
:ID: cabinets
:END:
Compare oak and walnut cabinet doors for the kitchen.
** TODO Pick kitchen cupboard wood
*** Oak or walnut cupboard doors for the kitchen
:PROPERTIES:
:ID: cupboards
:END:
** TODO Renew the car insurance
:PROPERTIES:
:ID: insurance
:END:
*** Call the insurer about the premium
** Diary :@personal:
*** Kitchen cabinet doors, oak or walnut, for the kitchen
CANARY-harbour-4711 met Ann at the kitchen shop.
";

fn folder(memex: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("memex")).unwrap();
    std::fs::write(dir.path().join("memex/work.org"), memex).unwrap();
    dir
}

fn json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&output.stdout));
    })
}

/// The reason `context --json` gives for `id`.
fn reason(context: &Value, id: &str) -> Option<String> {
    context["included"]
        .as_array()?
        .iter()
        .find(|o| o["id"] == id)
        .and_then(|o| o["reason"].as_str().map(str::to_owned))
}

/// Whether the local model is there (else the test says `not run`, or
/// fails with FOVEAL_REQUIRE_MODEL set).
fn local_model() -> bool {
    match foveal::embed::local::model_dir(None) {
        Ok(_) => true,
        Err(e) if std::env::var_os("FOVEAL_REQUIRE_MODEL").is_some() => {
            panic!("FOVEAL_REQUIRE_MODEL is set: {e}")
        }
        Err(e) => {
            eprintln!("not run: {e}");
            false
        }
    }
}

#[test]
fn a_plain_org_folder_gets_semantic_promotion_after_memex_embed() {
    if !local_model() {
        return;
    }
    let dir = folder(MEMEX);
    let context = |args: &[&str]| {
        let mut all = vec!["context", "--memex", "memex", "--focus", "cabinets"];
        all.extend_from_slice(args);
        foveal_command(dir.path(), &all).output().unwrap()
    };
    // Before: no vector anywhere, nothing promoted, and --explain says so.
    let before = json(&context(&["--json"]));
    assert_eq!(reason(&before, "cupboards"), None);
    assert_eq!(before["without_vector"], 6);
    let explain = String::from_utf8(context(&["--explain"]).stdout).unwrap();
    assert!(
        explain.contains("- Vectors: 0 visible objects have one, 6 have none yet (not promoted"),
        "{explain}"
    );
    assert!(
        explain.contains("- The focus has no vector yet"),
        "{explain}"
    );

    let first = json(
        &foveal_command(
            dir.path(),
            &["memex", "embed", "--memex", "memex", "--json"],
        )
        .output()
        .unwrap(),
    );
    assert_eq!(first["objects"], 8);
    assert_eq!(first["embedded"], 6);
    assert_eq!(first["skipped"], 2, "the diary and its entry");

    let after = json(&context(&["--json"]));
    let promoted = reason(&after, "cupboards").expect("cupboards is shown");
    let score: f64 = promoted
        .strip_prefix("semantic ")
        .unwrap_or_else(|| panic!("{promoted}"))
        .parse()
        .unwrap();
    assert!(score >= 0.75, "{score}");
    assert_eq!(reason(&after, "insurance").as_deref(), Some("outline"));
    assert_eq!(after["without_vector"], 0);
    assert!(!after["text"].as_str().unwrap().contains("CANARY"));

    // Again: everything from the cache.
    let again = json(
        &foveal_command(
            dir.path(),
            &["memex", "embed", "--memex", "memex", "--json"],
        )
        .output()
        .unwrap(),
    );
    assert_eq!(
        (again["embedded"].as_u64(), again["reused"].as_u64()),
        (Some(0), Some(6))
    );

    // The cache holds no text, and nothing of the private objects.
    let cache_dir = dir.path().join("data/embeddings");
    let file = std::fs::read_dir(&cache_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(&file).unwrap();
    for needle in ["CANARY", "kitchen", "Kitchen"] {
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "{needle}"
        );
    }

    // A damaged cache is detected, cut back and rebuilt, not trusted.
    let mut damaged = bytes.clone();
    let at = damaged.len() - 100;
    damaged[at] ^= 0x40;
    std::fs::write(&file, &damaged).unwrap();
    let output = foveal_command(
        dir.path(),
        &["memex", "embed", "--memex", "memex", "--json"],
    )
    .output()
    .unwrap();
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("the embedding cache was damaged"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rebuilt = json(&output);
    assert_eq!(
        (rebuilt["embedded"].as_u64(), rebuilt["reused"].as_u64()),
        (Some(1), Some(5))
    );
    assert_eq!(std::fs::read(&file).unwrap().len(), bytes.len());
}

/// A recording OpenAI-compatible `/v1/embeddings` server: it keeps every
/// request body and answers with vectors of keyword counts (kitchen,
/// cabinet or cupboard, oak, walnut, insurance, and a constant), after
/// `delay` per request.
struct Recorder {
    port: u16,
    bodies: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn start(delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&bodies);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = Arc::clone(&kept);
                std::thread::spawn(move || serve(stream, &kept, delay));
            }
        });
        Self { port, bodies }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn bodies(&self) -> Vec<String> {
        self.bodies.lock().unwrap().clone()
    }

    /// Texts received, in all.
    fn texts(&self) -> usize {
        self.bodies()
            .iter()
            .map(|b| {
                serde_json::from_str::<Value>(b).unwrap()["input"]
                    .as_array()
                    .unwrap()
                    .len()
            })
            .sum()
    }
}

fn serve(stream: TcpStream, bodies: &Mutex<Vec<String>>, delay: Duration) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
        let body = String::from_utf8(body).unwrap();
        bodies.lock().unwrap().push(body.clone());
        std::thread::sleep(delay);
        let request: Value = serde_json::from_str(&body).unwrap();
        let data: Vec<Value> = request["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let text = text.as_str().unwrap().to_lowercase();
                let count = |words: &[&str]| {
                    words.iter().map(|w| text.matches(w).count()).sum::<usize>() as f64
                };
                let vector = [
                    count(&["kitchen"]),
                    count(&["cabinet", "cupboard"]),
                    count(&["oak"]),
                    count(&["walnut"]),
                    count(&["insur"]),
                    0.1,
                ];
                serde_json::json!({"object": "embedding", "index": index, "embedding": vector})
            })
            .collect();
        let reply =
            serde_json::json!({"object": "list", "data": data, "model": "recorder"}).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            reply.len()
        );
        if stream.write_all(head.as_bytes()).is_err() || stream.write_all(reply.as_bytes()).is_err()
        {
            return;
        }
    }
}

/// `foveal ARGS` in `dir` with the embeddings of `recorder`.
fn remote(dir: &Path, recorder: &Recorder, args: &[&str]) -> std::process::Command {
    let mut command = foveal_command(dir, args);
    command
        .env("FOVEAL_EMBEDDING", "openai")
        .env("FOVEAL_EMBEDDING_BASE_URL", recorder.base_url())
        .env("FOVEAL_EMBEDDING_MODEL", "recorder")
        .env("FOVEAL_SOCKET", dir.join("run/control.sock"))
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env_remove("OPENAI_API_KEY");
    command
}

#[test]
fn a_remote_embedder_never_receives_private_text_and_its_vectors_promote() {
    let recorder = Recorder::start(Duration::ZERO);
    let dir = folder(MEMEX);
    let report = json(
        &remote(
            dir.path(),
            &recorder,
            &["memex", "embed", "--memex", "memex", "--json"],
        )
        .output()
        .unwrap(),
    );
    assert_eq!(report["embedded"], 6);
    assert_eq!(report["skipped"], 2);
    let bodies = recorder.bodies().join("\n");
    assert!(bodies.contains("Choose the kitchen cabinets"), "{bodies}");
    for private in ["CANARY", "harbour", "Diary", "Ann at the kitchen shop"] {
        assert!(!bodies.contains(private), "{private} was sent: {bodies}");
    }
    // The endpoint's vectors promote like any other.
    let context = json(
        &remote(
            dir.path(),
            &recorder,
            &[
                "context", "--memex", "memex", "--focus", "cabinets", "--json",
            ],
        )
        .output()
        .unwrap(),
    );
    let promoted = reason(&context, "cupboards").unwrap();
    assert!(promoted.starts_with("semantic 0.9"), "{promoted}");
}

#[test]
fn an_interrupted_memex_embed_resumes_without_losing_finished_batches() {
    // 40 batches of 32, each answered after 50 ms.
    let recorder = Recorder::start(Duration::from_millis(50));
    let memex: String = (0..1280)
        .map(|i| format!("* Headline {i} about topic {}\n", i * 7919 % 1000))
        .collect();
    let dir = folder(&memex);
    let mut child: Child = remote(
        dir.path(),
        &recorder,
        &["memex", "embed", "--memex", "memex"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    assert!(wait_for(Duration::from_secs(60), || {
        std::thread::sleep(Duration::from_millis(5));
        recorder.bodies().len() >= 5
    }));
    // Killed without warning, as a crash or a power cut would.
    child.kill().unwrap();
    child.wait().unwrap();
    let sent = recorder.texts();
    assert!(sent < 1280, "it finished before it was killed");
    let resumed = json(
        &remote(
            dir.path(),
            &recorder,
            &["memex", "embed", "--memex", "memex", "--json"],
        )
        .output()
        .unwrap(),
    );
    let reused = resumed["reused"].as_u64().unwrap();
    let embedded = resumed["embedded"].as_u64().unwrap();
    assert_eq!(reused + embedded, 1280);
    // Every batch answered before the kill was kept (the one in flight
    // may be lost).
    assert!(
        reused as usize + 32 >= sent && reused >= 32 * 4,
        "{reused} of {sent}"
    );
    assert_eq!(recorder.texts(), sent + embedded as usize);
}

/// A host (`foveal run --no-repl`), killed when dropped.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn foveal_run_embeds_in_the_background_and_again_only_what_an_edit_changed() {
    let recorder = Recorder::start(Duration::ZERO);
    let dir = folder(MEMEX);
    let host = Host(
        remote(
            dir.path(),
            &recorder,
            &[
                "run",
                "--no-repl",
                "--memex",
                "memex",
                "--provider",
                "openai",
            ],
        )
        .env("FOVEAL_LOG", "foveal=info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("host.log")).unwrap())
        .spawn()
        .unwrap(),
    );
    let log = || std::fs::read_to_string(dir.path().join("host.log")).unwrap_or_default();
    let socket = dir.path().join("run/control.sock");
    assert!(wait_for(Duration::from_secs(30), || UnixStream::connect(
        &socket
    )
    .is_ok()));
    let status = || {
        let output = remote(dir.path(), &recorder, &["status", "--json"])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&output.stdout).unwrap_or_default()
    };
    let idle_with = |embedded: u64| {
        wait_for(Duration::from_secs(30), || {
            std::thread::sleep(Duration::from_millis(100));
            let s = status();
            s["embeddings"]["state"] == "idle" && s["embeddings"]["embedded"] == embedded
        })
    };
    assert!(idle_with(6), "{}\n{}", status(), log());
    assert_eq!(recorder.texts(), 6);
    let generation = status()["embeddings"]["generation"].as_u64().unwrap();

    // One headline's body changes: that headline alone is embedded again,
    // and the vectors are published as a new generation.
    let path = dir.path().join("memex/work.org");
    std::fs::write(
        &path,
        MEMEX.replace(
            "Call the insurer about the premium",
            "Call the insurer about the excess",
        ),
    )
    .unwrap();
    assert!(idle_with(7), "{}\n{}", status(), log());
    assert_eq!(recorder.texts(), 7);
    let last = recorder.bodies().pop().unwrap();
    assert!(last.contains("Call the insurer about the excess"), "{last}");
    // The reload, then the refill with the new vector.
    assert!(status()["embeddings"]["generation"].as_u64().unwrap() >= generation + 2);
    assert!(!recorder.bodies().join("\n").contains("CANARY"));
    drop(host);
}

/// `foveal status --json` of the host in `dir`.
async fn host_status(dir: &Path, recorder: &Recorder) -> Value {
    let output = run_to_end(remote(dir, recorder, &["status", "--json"])).await;
    serde_json::from_slice(&output.stdout).unwrap_or_default()
}

/// Waits until the host's embedder is idle with more than `after` objects
/// embedded and nothing has moved for a moment, then for the host's next
/// look at the memex (every 250 ms). Returns the objects embedded.
async fn settled(dir: &Path, recorder: &Recorder, after: u64) -> u64 {
    let mut last = None;
    for _ in 0..200 {
        let status = host_status(dir, recorder).await;
        let now = (
            status["embeddings"]["state"].clone(),
            status["embeddings"]["embedded"].as_u64().unwrap_or(0),
            status["memex_generation"].as_u64(),
        );
        if now.0 == "idle" && now.1 > after && last.as_ref() == Some(&now) {
            tokio::time::sleep(Duration::from_millis(600)).await;
            return now.1;
        }
        last = Some(now);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!(
        "the embedder did not settle: {}",
        host_status(dir, recorder).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedding_pass_and_the_hosts_own_writes_leave_the_activity_log_unchanged() {
    // Each batch is answered after 1.5 s: the first message is answered
    // before the first pass publishes its vectors.
    let recorder = Recorder::start(Duration::from_millis(1500));
    let dir = folder(MEMEX);
    let server = crate::server::Server::start(vec![
        text_reply("Before."),
        text_reply("After."),
        tool_reply(
            "add_journal_entry",
            r#"{"title": "Kitchen plan", "text": "Oak doors."}"#,
        ),
        text_reply("Noted."),
        text_reply("Nothing new."),
        text_reply("Seen."),
    ])
    .await;
    let _host = Host(
        remote(
            dir.path(),
            &recorder,
            &[
                "run",
                "--no-repl",
                "--memex",
                "memex",
                "--provider",
                "openai",
            ],
        )
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_MODEL", "scripted")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let socket = dir.path().join("run/control.sock");
    assert!(wait_for(Duration::from_secs(30), || socket.exists()));
    let send = |text: &str| run_to_end(remote(dir.path(), &recorder, &["send", text]));

    // 1. A message while the first pass runs, and one after it: the pass
    //    publishes the file again with its vectors, which is no edit.
    let before = send("hello").await;
    assert!(before.status.success(), "{}", stderr(&before));
    let embedded = settled(dir.path(), &recorder, 5).await;
    assert_eq!(embedded, 6);
    let after = send("hello again").await;
    assert!(after.status.success(), "{}", stderr(&after));
    // 2. The host writes a journal entry (a new file, then two headlines
    //    under it); their vectors follow.
    let wrote = send("note the kitchen plan").await;
    assert!(wrote.status.success(), "{}", stderr(&wrote));
    let embedded = settled(dir.path(), &recorder, embedded).await;
    let quiet = send("anything new?").await;
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    // 3. The positive control: an edit made outside is told, once.
    std::fs::write(
        dir.path().join("memex/work.org"),
        format!("{MEMEX}* Paint the hallway\n:PROPERTIES:\n:ID: hallway\n:END:\n"),
    )
    .unwrap();
    settled(dir.path(), &recorder, embedded).await;
    let told = send("and now?").await;
    assert!(told.status.success(), "{}", stderr(&told));

    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    // The activity lines each request carried about the memex, and about
    // tool calls.
    let lines = |i: usize, about: &str| -> Vec<String> {
        let body = requests[i].json();
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"].as_str())
            .flat_map(str::lines)
            .filter(|l| l.contains(about))
            .map(str::to_owned)
            .collect()
    };
    for i in [0, 1, 4] {
        assert_eq!(
            lines(i, "memex file "),
            Vec::<String>::new(),
            "request {i}: {}",
            requests[i].body
        );
    }
    assert_eq!(lines(4, "called add_journal_entry: ok").len(), 1);
    let outside = lines(5, "memex file ");
    assert_eq!(outside.len(), 1, "{}", requests[5].body);
    assert!(
        outside[0].ends_with("memex file work.org was edited outside: 1 headline added"),
        "{outside:?}"
    );
}
