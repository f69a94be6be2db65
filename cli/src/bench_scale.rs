//! `foveal bench scale`: the big-memex figures in one run.
//!
//! Generates a memex of `--nodes` headlines with the shared generator
//! (`gen_memex.py`, seed 42), split at top-level headlines into
//! `--files` files (each with the generator's `#+TITLE`/`#+TODO` lines),
//! once per size under `target/bench-data/scale-N-K` (or `--data`), then
//! measures, on a build of this binary:
//!
//! - `memex stats` as a whole process: wall time and peak RSS (the load),
//!   first with nothing in the data dir, then with the vectors the first
//!   run stored;
//! - `ask` as a whole process against a scripted model server run here
//!   (one short streamed reply, so what is measured is the host): wall
//!   time and peak RSS, `--runs` times, median — cold (no private-text
//!   index and no stored vectors in the data dir) and warm (what the
//!   cold runs wrote);
//! - in this process, the private-text matcher's first build on the
//!   memex, and its rebuild after a small file of the memex is edited
//!   (the gate's own path: `Gate::clean` after `Memex::reload_file`), and
//!   after one headline of the largest file is edited (then put back).
//!
//! Child processes run with a clean environment: no config file, data
//! under a temporary folder, the scripted server's address.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::exit::Exit;

/// What `foveal bench scale --json` prints.
#[derive(Debug, serde::Serialize)]
pub struct ScaleBench {
    /// Headlines generated.
    pub nodes: usize,
    /// Files the memex is split into.
    pub files: usize,
    /// Bytes of Org.
    pub org_bytes: u64,
    /// `memex stats`, whole process, with the vectors a first run stored.
    pub stats: Run,
    /// `memex stats`, whole process, on an empty data dir (it stores the
    /// vectors).
    pub stats_cold: Run,
    /// `ask`, whole process, median of `runs`.
    pub ask: Run,
    /// Every `ask` run.
    pub ask_runs: Vec<Run>,
    /// `ask` with the private-text index the cold runs wrote, median.
    pub ask_warm: Run,
    /// Every warm `ask` run.
    pub ask_warm_runs: Vec<Run>,
    /// The index's bytes.
    pub index_bytes: u64,
    /// `ask` while a host serves the memex.
    pub host: HostAsks,
    /// The matcher's first build, in this process.
    pub matcher_build_ms: f64,
    /// Its rebuild after a small file is edited, median of 5.
    pub matcher_rebuild_ms: f64,
    /// Its rebuild after one headline of the largest file is edited.
    pub matcher_big_edit_ms: f64,
    /// The full build beside the matcher derived after those edits
    /// (`Gate::heal`, reusing every unchanged file's work); `None` when the
    /// edits were built in full.
    pub matcher_heal_ms: Option<f64>,
    /// Private keys the matcher holds.
    pub matcher_keys: usize,
    /// Logical cores.
    pub cores: usize,
}

/// One child process: its wall time and peak resident memory.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Run {
    /// Wall time, start to exit.
    pub wall_ms: f64,
    /// Peak resident set size.
    pub peak_rss_mib: f64,
}

/// `foveal bench scale`.
pub fn scale(
    nodes: usize,
    files: usize,
    runs: usize,
    generator: Option<PathBuf>,
    data: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<Exit> {
    if nodes == 0 || files == 0 || runs == 0 {
        bail!("--nodes, --files and --runs must be at least 1");
    }
    let dir =
        data.unwrap_or_else(|| PathBuf::from(format!("target/bench-data/scale-{nodes}-{files}")));
    // Absolute: the children run in a folder of their own.
    let memex = prepare(nodes, files, generator.as_deref(), &dir)?.canonicalize()?;
    let org_bytes: u64 = std::fs::read_dir(&memex)?
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let work = Scratch::new()?;
    let server = Scripted::start()?;
    let memex_arg = memex.to_string_lossy().into_owned();
    eprintln!("memex stats, cold and warm …");
    let stats_args = ["memex", "stats", "--memex", &memex_arg];
    let stats_cold = child(work.path(), &server, &stats_args)?;
    let stats = child(work.path(), &server, &stats_args)?;
    let ask_args = [
        "ask",
        "Say hello",
        "--provider",
        "openai",
        "--memex",
        &memex_arg,
    ];
    let index = work.path().join("data/index");
    let mut ask_runs = Vec::with_capacity(runs);
    for run in 1..=runs {
        eprintln!("ask {run}/{runs}, cold (no index) …");
        match std::fs::remove_dir_all(&index) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        ask_runs.push(child(work.path(), &server, &ask_args)?);
    }
    let index_bytes = std::fs::metadata(index.join("private.keys")).map_or(0, |m| m.len());
    let mut ask_warm_runs = Vec::with_capacity(runs);
    for run in 1..=runs {
        eprintln!("ask {run}/{runs}, warm (the index the cold runs wrote) …");
        ask_warm_runs.push(child(work.path(), &server, &ask_args)?);
    }
    let ask = median_run(&ask_runs);
    let ask_warm = median_run(&ask_warm_runs);
    eprintln!("ask while a host serves the memex …");
    let host = host_asks(work.path(), &server, &memex_arg, runs)?;
    eprintln!("matcher …");
    let times = matcher(&memex, work.path())?;
    let bench = ScaleBench {
        nodes,
        files,
        org_bytes,
        stats,
        stats_cold,
        ask,
        ask_runs,
        ask_warm,
        ask_warm_runs,
        index_bytes,
        host,
        matcher_build_ms: times.build,
        matcher_rebuild_ms: times.small_edit,
        matcher_big_edit_ms: times.big_edit,
        matcher_heal_ms: times.heal,
        matcher_keys: times.keys,
        cores: std::thread::available_parallelism().map_or(1, usize::from),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&bench)?);
    } else {
        print(&bench);
    }
    Ok(Exit::Ok)
}

/// The run of median wall time.
fn median_run(runs: &[Run]) -> Run {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.wall_ms.total_cmp(&b.wall_ms));
    sorted[sorted.len() / 2]
}

fn print(b: &ScaleBench) {
    let mib = b.org_bytes as f64 / f64::from(1 << 20);
    println!(
        "memex: {} headlines in {} files, {mib:.0} MiB of Org ({} cores)",
        b.nodes, b.files, b.cores
    );
    println!(
        "memex stats (load), whole process   {:>9.0} ms  {:>7.0} MiB peak (empty data dir: {:.0} ms)",
        b.stats.wall_ms, b.stats.peak_rss_mib, b.stats_cold.wall_ms
    );
    println!(
        "ask, whole process, cold (median of {}) {:>6.0} ms  {:>7.0} MiB peak ({:.2}× the Org bytes)",
        b.ask_runs.len(),
        b.ask.wall_ms,
        b.ask.peak_rss_mib,
        b.ask.peak_rss_mib / mib
    );
    println!(
        "ask, warm index ({:.0} MiB)          {:>9.0} ms  {:>7.0} MiB peak ({:.2}× the Org bytes)",
        b.index_bytes as f64 / f64::from(1 << 20),
        b.ask_warm.wall_ms,
        b.ask_warm.peak_rss_mib,
        b.ask_warm.peak_rss_mib / mib
    );
    println!(
        "host: socket open after {:>9.0} ms  {:>7.0} MiB peak of `run`",
        b.host.ready_ms, b.host.host_peak_rss_mib
    );
    println!(
        "  ask answered by it: first {:>7.0} ms, then median {:>5.0} ms",
        b.host.first.wall_ms, b.host.median.wall_ms
    );
    println!(
        "  context answered by it: {:>7.0} ms, prompt {:>7.0} ms (medians)",
        b.host.context.wall_ms, b.host.prompt.wall_ms
    );
    println!(
        "private-text matcher: first build  {:>9.1} ms  ({} keys)",
        b.matcher_build_ms, b.matcher_keys
    );
    println!(
        "  rebuild after a small file edit   {:>9.1} ms",
        b.matcher_rebuild_ms
    );
    println!(
        "  after a headline of the largest   {:>9.1} ms",
        b.matcher_big_edit_ms
    );
    if let Some(ms) = b.matcher_heal_ms {
        println!("  then built in full beside it     {ms:>9.1} ms");
    }
}

/// The memex folder for `nodes` headlines in `files` files under `dir`,
/// generated and split unless a complete one is there.
fn prepare(
    nodes: usize,
    files: usize,
    generator: Option<&Path>,
    dir: &Path,
) -> anyhow::Result<PathBuf> {
    let memex = dir.join("memex");
    let done = dir.join(".complete");
    if done.is_file() {
        return Ok(memex);
    }
    let generator = match generator {
        Some(path) => path.to_owned(),
        None => default_generator()
            .context("the shared generator was not found: give --generator PATH/gen_memex.py")?,
    };
    let raw = dir.join("raw");
    std::fs::create_dir_all(&raw)?;
    eprintln!(
        "generating {nodes} headlines with {} (once; kept in {}) …",
        generator.display(),
        dir.display()
    );
    let status = Command::new("python3")
        .arg(&generator)
        .arg(nodes.to_string())
        .arg("42")
        .arg(&raw)
        // Its summary would mix with --json's output.
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .status()
        .context("could not run python3")?;
    if !status.success() {
        bail!("{} failed: {status}", generator.display());
    }
    let text = std::fs::read(raw.join("memex.org"))?;
    if memex.exists() {
        std::fs::remove_dir_all(&memex)?;
    }
    std::fs::create_dir_all(&memex)?;
    for (i, part) in split(&text, files).iter().enumerate() {
        std::fs::write(memex.join(format!("part{i:02}.org")), part)?;
    }
    // The raw file (and its S-expression twin) would double the disk used.
    for name in ["memex.org", "memex.sexp"] {
        let _ = std::fs::remove_file(raw.join(name));
    }
    std::fs::write(&done, "")?;
    Ok(memex)
}

/// `../shared/bench/gen_memex.py` from the working folder or from the
/// folders above this binary.
fn default_generator() -> Option<PathBuf> {
    let relative = Path::new("../shared/bench/gen_memex.py");
    if relative.is_file() {
        return Some(relative.to_owned());
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .map(|dir| dir.join("../shared/bench/gen_memex.py"))
        .find(|p| p.is_file())
}

/// `text` cut at top-level headlines into about `files` equal parts; each
/// part after the first starts with the preamble's `#+` lines, so every
/// file declares the same TODO keywords.
fn split(text: &[u8], files: usize) -> Vec<Vec<u8>> {
    let preamble_end = find(text, b"\n* ", 0).map_or(text.len(), |i| i + 1);
    let preamble: Vec<u8> = text[..preamble_end]
        .split_inclusive(|&b| b == b'\n')
        .filter(|line| line.starts_with(b"#+"))
        .flatten()
        .copied()
        .collect();
    let target = text.len() / files;
    let mut parts = Vec::with_capacity(files);
    let mut start = 0;
    while start < text.len() {
        let cut = if parts.len() + 1 == files {
            text.len()
        } else {
            // Past this part's first headline, so no part is empty.
            let first = find(text, b"\n* ", start.max(1) - 1).map_or(text.len(), |i| i + 2);
            find(text, b"\n* ", (start + target).max(first)).map_or(text.len(), |i| i + 1)
        };
        let mut part = if start == 0 {
            Vec::new()
        } else {
            preamble.clone()
        };
        part.extend_from_slice(&text[start..cut]);
        parts.push(part);
        start = cut;
    }
    parts
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// Runs this binary with `args` in `work` on the scripted server, and
/// measures it (a non-zero exit is an error, with its stderr).
fn child(work: &Path, server: &Scripted, args: &[&str]) -> anyhow::Result<Run> {
    let mut command = foveal(work, server, args)?;
    command.stderr(std::process::Stdio::piped());
    run_child(command, args)
}

/// [`child`], which the running host must answer.
fn by_host(work: &Path, server: &Scripted, args: &[&str]) -> anyhow::Result<Run> {
    let mut command = foveal(work, server, args)?;
    command
        .env("FOVEAL_LOG", "foveal::agent=info")
        .stderr(std::process::Stdio::piped());
    run_child(command, args)
}

/// Runs `command` (`foveal ARGS`, stderr piped) to its end; with
/// `FOVEAL_LOG` set, the running host must have answered.
fn run_child(mut command: Command, args: &[&str]) -> anyhow::Result<Run> {
    let asked_host = command.get_envs().any(|(name, _)| name == "FOVEAL_LOG");
    let started = Instant::now();
    let process = command.spawn()?;
    let (status, usage, stderr) = reap(process)?;
    let wall = started.elapsed();
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        bail!("foveal {} failed ({status}):\n{stderr}", args.join(" "));
    }
    if asked_host && !stderr.contains("the running host answers") {
        bail!(
            "foveal {} was not answered by the running host:\n{stderr}",
            args.join(" ")
        );
    }
    Ok(Run {
        wall_ms: wall.as_secs_f64() * 1e3,
        peak_rss_mib: peak_mib(&usage),
    })
}

/// Peak resident memory of a reaped child, in MiB.
fn peak_mib(usage: &libc::rusage) -> f64 {
    // ru_maxrss is in KiB on Linux.
    usage.ru_maxrss as f64 / 1024.0
}

/// Waits for `process` to exit: its wait status, resource usage and
/// stderr (when piped).
fn reap(mut process: std::process::Child) -> anyhow::Result<(i32, libc::rusage, String)> {
    let mut stderr = String::new();
    if let Some(mut pipe) = process.stderr.take() {
        pipe.read_to_string(&mut stderr)?;
    }
    let pid = libc::pid_t::try_from(process.id())?;
    let mut status = 0;
    // SAFETY: `rusage` is plain data and zero a valid value; wait4 writes
    // into what we pass and reaps our own child, which `process` then
    // never waits for again.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::wait4(pid, &mut status, 0, &mut usage) < 0 {
            bail!("wait4: {}", std::io::Error::last_os_error());
        }
        usage
    };
    std::mem::forget(process);
    Ok((status, usage, stderr))
}

/// `ask` while a host (`foveal run --no-repl`) serves the memex: the
/// first (the host's first turn), then `runs` more, and the host's peak
/// memory once it has stopped.
fn host_asks(work: &Path, server: &Scripted, memex: &str, runs: usize) -> anyhow::Result<HostAsks> {
    let mut host = foveal(
        work,
        server,
        &["run", "--no-repl", "--provider", "openai", "--memex", memex],
    )?;
    let started = Instant::now();
    let process = host.stdin(std::process::Stdio::null()).spawn()?;
    let socket = work.join("control.sock");
    while !socket.exists() {
        if started.elapsed() > Duration::from_secs(600) {
            bail!("the host did not open its socket in 10 minutes");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ready_ms = started.elapsed().as_secs_f64() * 1e3;
    let ask = ["ask", "Say hello", "--provider", "openai", "--memex", memex];
    let first = by_host(work, server, &ask)?;
    let median = |args: &[&str]| -> anyhow::Result<Run> {
        let mut runs: Vec<Run> = (0..runs)
            .map(|_| by_host(work, server, args))
            .collect::<anyhow::Result<_>>()?;
        runs.sort_by(|a, b| a.wall_ms.total_cmp(&b.wall_ms));
        Ok(runs[runs.len() / 2])
    };
    let asks = median(&ask)?;
    let context = median(&["context", "--memex", memex])?;
    let prompt = median(&["prompt", "--message", "Say hello", "--memex", memex])?;
    child(work, server, &["stop"])?;
    let (_, usage, _) = reap(process)?;
    Ok(HostAsks {
        ready_ms,
        first,
        median: asks,
        context,
        prompt,
        host_peak_rss_mib: peak_mib(&usage),
    })
}

/// What [`host_asks`] measured.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct HostAsks {
    /// From the host's start to its socket.
    pub ready_ms: f64,
    /// The first `ask` it answers.
    pub first: Run,
    /// The median of the others.
    pub median: Run,
    /// `foveal context` answered by it, median.
    pub context: Run,
    /// `foveal prompt --message …` answered by it, median.
    pub prompt: Run,
    /// The host's peak resident memory.
    pub host_peak_rss_mib: f64,
}

/// `foveal ARGS` as the bench runs it: in `work`, with a clean environment
/// (no config file, data under `work`, the scripted server).
fn foveal(work: &Path, server: &Scripted, args: &[&str]) -> anyhow::Result<Command> {
    let exe = std::env::current_exe()?;
    let mut command = Command::new(exe);
    command.args(args).current_dir(work);
    for (name, _) in std::env::vars() {
        if name.starts_with("FOVEAL_")
            || name.starts_with("CONTEXT_")
            || name.starts_with("OPENAI_")
        {
            command.env_remove(name);
        }
    }
    command
        .env("FOVEAL_DATA_DIR", work.join("data"))
        .env("XDG_CONFIG_HOME", work.join("xdg"))
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_MODEL", "scripted")
        .env("FOVEAL_SOCKET", work.join("control.sock"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    Ok(command)
}

/// What [`matcher`] measured, in milliseconds.
struct MatcherTimes {
    build: f64,
    small_edit: f64,
    big_edit: f64,
    heal: Option<f64>,
    keys: usize,
}

/// The matcher's first build, its rebuild after a small file changes, and
/// after one headline of the memex's largest file changes (the file is
/// put back as it was).
fn matcher(memex: &Path, work: &Path) -> anyhow::Result<MatcherTimes> {
    use foveal_memex::privacy::PrivacyTags;
    let small_dir = work.join("small");
    std::fs::create_dir_all(&small_dir)?;
    let small = small_dir.join("small.org");
    std::fs::write(&small, "* Inbox :project:\n** TODO one :@personal:\n")?;
    let opened = foveal_memex::Memex::open(&[memex.to_owned(), small.clone()])?;
    let small = small.canonicalize()?;
    let skills = foveal_registry::registry::Snapshot::default();
    let gate = foveal_registry::egress::Gate::new(PrivacyTags::new(["@personal"]), &[], true)?;
    let started = Instant::now();
    gate.clean("x", &opened.snapshot(), &skills)?;
    let build = started.elapsed();
    let (keys, _) = gate.matcher_size();
    let mut rebuilds = Vec::new();
    for n in 0..5 {
        std::fs::write(
            &small,
            format!("* Inbox :project:\n** TODO item {n} is private now :@personal:\n"),
        )?;
        opened.reload_file(&small);
        let snapshot = opened.snapshot();
        let started = Instant::now();
        gate.clean("x", &snapshot, &skills)?;
        rebuilds.push(started.elapsed());
    }
    rebuilds.sort();
    let largest = std::fs::read_dir(memex)?
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.metadata().ok()?.len(), e.path())))
        .max()
        .map(|(_, path)| path)
        .context("the memex folder is empty")?;
    let original = std::fs::read(&largest)?;
    let mut edited = original.clone();
    // A word more in the title of the last headline.
    let at = find_last(&edited, b"\n* ").map_or(0, |i| i + 3);
    edited.splice(at..at, b"Edited ".iter().copied());
    std::fs::write(&largest, &edited)?;
    opened.reload_file(&largest);
    let snapshot = opened.snapshot();
    let started = Instant::now();
    let cleaned = gate.clean("x", &snapshot, &skills);
    let big_edit = started.elapsed();
    // The full build a host makes beside the derived matcher once the
    // memex is quiet, reusing every unchanged file's work.
    let started = Instant::now();
    let healed = gate.heal(&snapshot);
    let heal = started.elapsed();
    std::fs::write(&largest, &original)?;
    cleaned?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(MatcherTimes {
        build: ms(build),
        small_edit: ms(rebuilds[rebuilds.len() / 2]),
        big_edit: ms(big_edit),
        heal: healed.then(|| ms(heal)),
        keys,
    })
}

/// Where `needle` last starts in `hay`.
fn find_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// A folder of this run's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Self> {
        let dir = std::env::temp_dir().join(format!("foveal-bench-scale-{}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A model server that answers every request with one short streamed
/// reply, on a thread of its own for as long as it lives.
struct Scripted {
    addr: std::net::SocketAddr,
}

impl Scripted {
    fn start() -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        std::thread::Builder::new()
            .name("foveal-bench-server".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    std::thread::spawn(move || {
                        let _ = answer(stream);
                    });
                }
            })?;
        Ok(Self { addr })
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

/// Reads one HTTP request (headers, then `Content-Length` bytes) at a
/// time and answers each with a streamed "Hello." and its usage.
fn answer(stream: std::net::TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        let mut first = true;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() && !first {
                break;
            }
            first = false;
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let events = [
            r#"{"choices":[{"index":0,"delta":{"content":"Hello."}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":2}}"#,
        ];
        let mut sse = String::new();
        for event in events {
            sse.push_str(&format!("data: {event}\n\n"));
        }
        sse.push_str("data: [DONE]\n\n");
        write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{sse}",
            sse.len()
        )?;
        out.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memex_is_split_at_top_level_headlines_with_its_preamble() {
        let text = b"#+TITLE: T\n#+TODO: TODO NEXT | DONE\n* A\nbody\n** a1\n* B\n* C\nc\n* D\n";
        let parts = split(text, 2);
        assert_eq!(parts.len(), 2);
        let joined: Vec<String> = parts
            .iter()
            .map(|p| String::from_utf8(p.clone()).unwrap())
            .collect();
        assert!(joined[0].starts_with("#+TITLE: T\n#+TODO: TODO NEXT | DONE\n* A\n"));
        // Each later part starts with the preamble, then a top-level headline.
        assert!(
            joined[1].starts_with("#+TITLE: T\n#+TODO: TODO NEXT | DONE\n* "),
            "{}",
            joined[1]
        );
        // Nothing lost, nothing doubled but the preamble.
        let preamble = "#+TITLE: T\n#+TODO: TODO NEXT | DONE\n";
        let rebuilt = format!("{}{}", joined[0], &joined[1][preamble.len()..]);
        assert_eq!(rebuilt.as_bytes(), text);
        assert_eq!(split(text, 1).len(), 1);
    }
}
