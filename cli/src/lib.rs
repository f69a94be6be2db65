//! The `foveal` command line: argument parsing and the subcommands.
//!
//! Each subcommand lives in its own file and returns an [`Exit`]: what to
//! print has been printed, and the code says how it went.

pub mod agenda;
pub mod agent;
pub mod bench;
mod bench_cells;
mod bench_scale;
pub mod context;
pub mod embed;
pub mod exit;
mod focus;
pub mod memex;
pub mod prompt;
pub mod sdk_copy;
pub mod skill_check;
pub mod skill_new;
pub mod skills;
pub mod tool_call;
pub mod trust;
pub mod tui;
pub mod usage;
pub mod window;

pub use exit::Exit;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use foveal_agent::config::{Config, Overrides};

/// foveal — an agent host with hot-loadable skills.
///
/// foveal drives sense–think–act cycles for an LLM agent over a knowledge
/// base of Org-mode files. Everything that shapes the prompt is a skill: a
/// dynamic library dropped into the plugins folder and swapped while the
/// host runs.
#[derive(Debug, Parser)]
#[command(name = "foveal", version, about, long_about, max_term_width = 100)]
pub struct Cli {
    /// Configuration file (default: ./config/foveal.toml if present, else
    /// $XDG_CONFIG_HOME/foveal/foveal.toml, else built-in defaults).
    #[arg(long, global = true, value_name = "PATH", env = "FOVEAL_CONFIG")]
    pub config: Option<PathBuf>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Whether the command runs cycles (`run`, `ask`): its stderr then
    /// tells, at the default log level, of every skill refused, panicking
    /// or quarantined — one line each, naming the skill and the file.
    pub fn runs_cycles(&self) -> bool {
        matches!(self.command, Command::Run { .. } | Command::Ask { .. })
    }

    /// Whether the command calls skills' hooks without running cycles
    /// (`prompt`, `context`, `tool`, `skill`): it says on stderr when a
    /// skill's cell refuses an act or dies.
    pub fn calls_hooks(&self) -> bool {
        matches!(
            self.command,
            Command::Prompt { .. }
                | Command::Context { .. }
                | Command::Tool { .. }
                | Command::Skill { .. }
        )
    }

    /// Whether the command draws on the terminal (`tui`): a line on stderr
    /// would break its screen, so it says nothing there without
    /// `FOVEAL_LOG`.
    pub fn draws_on_the_terminal(&self) -> bool {
        matches!(self.command, Command::Tui { .. })
    }
}

/// Options shared by the commands that load skills.
#[derive(Debug, Clone, clap::Args)]
pub struct PluginArgs {
    /// The drop-in folder for skill libraries (default: ./plugins; config
    /// `plugins.dir`; env FOVEAL_PLUGINS).
    #[arg(long, value_name = "DIR")]
    pub plugins: Option<PathBuf>,

    /// Do not load the first-party skills from the folder of the foveal
    /// executable; only the drop-in folder (config `plugins.builtin`).
    #[arg(long)]
    pub no_builtin: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the skills: name, version, priority, dependencies, hooks, status
    /// and file, highest priority first. Libraries that were refused are
    /// listed with the reason.
    ///
    /// Only folders and libraries owned by you or root, and writable by
    /// nobody else, are loaded (group-writable only when the group is your
    /// private group); others show as `refused: PATH is writable by others
    /// …` with the command that fixes it. With config
    /// `plugins.require_trusted`, a library whose SHA-256 is not in
    /// `plugins.trusted` shows as `untrusted: …` (see `foveal skill trust`).
    ///
    /// Works without a running host: it loads the plugin folders itself.
    SkillList {
        #[command(flatten)]
        plugins: PluginArgs,
        /// Print a JSON array of objects with the keys name, version,
        /// priority, dependencies, hooks, status and path.
        #[arg(long)]
        json: bool,
        /// Keep running: watch the plugin folders and print the list again
        /// (with its generation number) each time a skill is added,
        /// replaced or removed. With --json, one array per line. Stop with
        /// Ctrl-C.
        #[arg(long)]
        watch: bool,
        /// Also list the tools the model is offered: the host's, then
        /// those the skills declare (their `tools` hook), and each
        /// declaration the host leaves out, with why. With --json, one
        /// object: {"skills": [...], "tools": [...]}. Not with --watch.
        #[arg(long, conflicts_with = "watch")]
        tools: bool,
    },
    /// Start the host: load the skills and the memex, then answer messages
    /// typed on stdin (a REPL; /help lists its commands) and sent with
    /// `foveal send`, heartbeats (config `agent.heartbeat_secs`) and
    /// changes, until Ctrl-D (once what was typed is answered), or Ctrl-C,
    /// SIGTERM or `foveal stop`, which cancel the turn in flight at once
    /// (keeping what the model sent), save the session and exit within a
    /// second; a second Ctrl-C or SIGTERM exits at once.
    ///
    /// The model is the embedded SmolLM2 (fetch it with
    /// `scripts/fetch-model`) unless --provider, FOVEAL_PROVIDER, config
    /// `provider.kind` or OPENAI_BASE_URL choose an OpenAI-compatible
    /// server. The control socket (mode 0600) is config `agent.socket`,
    /// FOVEAL_SOCKET, else $XDG_RUNTIME_DIR/foveal/control.sock.
    Run {
        #[command(flatten)]
        agent: AgentArgs,
        /// Do not read stdin: run until `foveal stop`, Ctrl-C or SIGTERM
        /// (for a service).
        #[arg(long)]
        no_repl: bool,
    },
    /// Ask once: one turn (the model's reply and its tool loop), the reply
    /// on stdout, exit 0 — for scripts. Exits 1 when the turn failed (the
    /// error on stderr). Recorded in the session like any turn.
    Ask {
        /// The message.
        text: String,
        #[command(flatten)]
        agent: AgentArgs,
        /// Print the turn as JSON: reply, cycles (each with its signal,
        /// context type, generations, tokens, tools, phase times and
        /// execution pattern), stop and error.
        #[arg(long)]
        json: bool,
    },
    /// A terminal UI for the running host: the conversation (replies
    /// streamed, tool calls folded), an input line with history, a sidebar
    /// with the context gauge, the focus, the skills and the generations,
    /// and a status bar (host version, provider, model, session, last
    /// cycle). It is a client: Ctrl-C closes the UI and the host keeps
    /// running. With no host running it starts `foveal run --no-repl` in
    /// the background with these flags (and says so). Keys: Enter sends,
    /// Esc cancels the cycle in flight, Up/Down history; commands /focus
    /// ID, /skills, /context, /window, /help. With --session, a host
    /// serving another session is named on screen (there is one control
    /// socket: config `agent.socket`, FOVEAL_SOCKET).
    Tui {
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// Send a message to the running host; its reply streams to stdout.
    Send {
        /// The message.
        text: String,
        /// Put this object in foveal focus first, by its id or its handle
        /// in the outline (`^k3`).
        #[arg(long, value_name = "ID|^HANDLE")]
        focus: Option<String>,
        /// Send it as the result of a delegated sub-task rather than as the
        /// user's message.
        #[arg(long)]
        delegation: bool,
    },
    /// Show the running host's status: registry and memex generations,
    /// skills, usage, the last cycle.
    Status {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Stop the running host: it cancels the turn in flight (keeping what
    /// the model sent so far), saves the session and exits 0 within a
    /// second.
    Stop,
    /// Check the configuration, the memex, the plugins and the provider
    /// without starting: every problem is listed; exits 1 if there is one.
    Check {
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// What is due: the agenda of the memex by Org's rules, as
    /// `org-agenda-list` shows it with Org's default settings — scheduled
    /// items, deadlines (within their warning period, 14 days unless the
    /// deadline says `-Nd`), overdue deadlines and past scheduled items
    /// still open (on today), date ranges, active timestamps, repeaters
    /// expanded inside the span. One heading per day, one line per entry:
    /// category (the file's name), time, kind (`Scheduled:`, `Sched. 2x:`,
    /// `Deadline:`, `In   3 d.:`, `5 d. ago:`, `(1/3):`), TODO keyword,
    /// title and id.
    ///
    /// Private objects are never on it. Settings: `[skills.agenda]`
    /// `skip_done` (leave out done items) and `deadline_warning_days`.
    Agenda {
        #[command(flatten)]
        memex: MemexArgs,
        #[command(flatten)]
        privacy: PrivacyArgs,
        /// The day taken as today, YYYY-MM-DD (default: the clock's local
        /// date). The agenda starts on it.
        #[arg(long, value_name = "YYYY-MM-DD")]
        today: Option<String>,
        /// How many days, from today (1 to 366).
        #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=366))]
        days: u32,
        /// Print a JSON array: date, kind, days, leader, id, title, todo,
        /// time, file and line per entry.
        #[arg(long)]
        json: bool,
    },
    /// Inspect the memex: the Org files the agent remembers with.
    Memex {
        #[command(subcommand)]
        command: MemexCommand,
    },
    /// Print the context section the think step starts from: the
    /// awareness skill's foveal–peripheral outline of the memex (or,
    /// without the skill, the line "[Awareness skill not loaded]").
    ///
    /// Private objects (privacy tags, at any depth) never appear. With a
    /// budget, detail is dropped by priority and a closing line says how
    /// many headlines were left out. The prompt's own token budget trims
    /// it further; `foveal prompt` shows what is sent.
    Context {
        #[command(flatten)]
        host: HostArgs,
        /// The object in foveal focus, by its id or its handle in the
        /// outline (`^k3`): it and its subtree are shown in full, and
        /// objects similar to it are promoted.
        #[arg(long, value_name = "ID|^HANDLE")]
        focus: Option<String>,
        /// Cosine similarity from which an object is promoted, -1 to 1
        /// (default: config `context.semantic_threshold`, env
        /// CONTEXT_SEMANTIC_THRESHOLD, else 0.75).
        #[arg(long, value_name = "X", allow_negative_numbers = true)]
        threshold: Option<f64>,
        /// Tokens the section may use (counted with the model's encoding).
        #[arg(long, value_name = "TOKENS")]
        budget: Option<u32>,
        /// Print one JSON object: text, tokens, budget, included (a list of
        /// {id, reason}, the reason being outline, foveal, semantic <score>
        /// or ancestor), omitted (counts by reason), source (awareness or
        /// the fallback) and redacted (what the last-door check removed:
        /// counts, never the text).
        #[arg(long, conflicts_with = "explain")]
        json: bool,
        /// Print why each object is shown and what was left out, then the
        /// section.
        #[arg(long)]
        explain: bool,
        /// Print the computed context of the task in focus instead (seed
        /// 001, the `computed-context` skill): patterns, warnings,
        /// decisions, prior work, code references and blocking questions.
        /// Needs --focus. With --json: text, tokens, complexity, signals
        /// and one list per category, each entry with its memex id. With
        /// --explain: the seed's "Context Debug" report, then the section.
        #[arg(long, requires = "focus")]
        computed: bool,
    },
    /// Print the exact prompt the think step would send, without calling a
    /// model: its components in id order, each with its tokens, within the
    /// budget (trimmed as the token-economics skill decides), through the
    /// privacy gate.
    ///
    /// A fresh process has empty caches: `cache` says miss. Exits 1 when
    /// the prompt cannot fit its budget even after every trimming level.
    Prompt {
        #[command(flatten)]
        host: HostArgs,
        /// The object in foveal focus, by its id or its handle in the
        /// outline (`^k3`).
        #[arg(long, value_name = "ID|^HANDLE")]
        focus: Option<String>,
        /// The user's message (the pending event), or with
        /// `--signal delegation` the sub-task's result.
        #[arg(long, value_name = "TEXT")]
        message: Option<String>,
        /// The signal the cycle answers. With the token-economics skill,
        /// heartbeats and delegations skip the context section (seed 003,
        /// contract 2).
        #[arg(long, value_enum, default_value = "user-input")]
        signal: prompt::SignalArg,
        /// The context type: tick_event, tick_autonomous, reflection,
        /// reflection_cont, sleep_consolidate, goal_decompose or
        /// pre_compaction (default: tick_event, tick_autonomous on a
        /// heartbeat).
        #[arg(long = "context-type", value_name = "TYPE")]
        context_type: Option<String>,
        /// Tokens the prompt may use, in place of config
        /// `context.max_tokens` / CONTEXT_MAX_TOKENS (the context type's
        /// budget and the model's context limit still cap it).
        #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u32).range(1..))]
        budget: Option<u32>,
        /// Print one JSON object: sections (a list of {id, key, role,
        /// tokens, text}), total_tokens, tokens_exact, budget,
        /// budget_from, usage_percent, trim_levels, cache {prefix,
        /// context}, economics, tools, egress, execution_pattern (mode,
        /// max_iterations, allowed_categories, terminal_ends_loop,
        /// dangerous_requires_confirm, multi_tool_enabled,
        /// sub_agents_enabled, source_layers) and execution_signals
        /// (token_pressure, recent_errors, event_class).
        #[arg(long)]
        json: bool,
        /// Count tokens with the model's encoding even when the prompt's
        /// bytes already show it fits (loads the tokenizer, ~0.3 s).
        #[arg(long)]
        exact: bool,
        /// The session whose context window (component 3000, `foveal
        /// window`) the prompt shows, as saved (default: config
        /// `agent.session`, else `default`).
        #[arg(long, value_name = "NAME")]
        session: Option<String>,
    },
    /// Show the tokens and cost recorded per model (cumulative) and the
    /// last cycles, from <data dir>/usage.json. Prices come from config
    /// `[prices.<model>]`.
    Usage {
        /// Print one JSON object: file, models (per model: cycles,
        /// input_tokens, cached_input_tokens, output_tokens, cost,
        /// unpriced_cycles), total_cost, cycles and last_cycles.
        #[arg(long)]
        json: bool,
    },
    /// Measure foveal in-process on your own data.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// Write, check, install and trust skill libraries: `foveal skill new`,
    /// `check`, `install`, `trust` (docs/writing-a-skill.md).
    Skill {
        #[command(subcommand)]
        command: SkillCommand,
    },
    /// The context window: what you attach for the agent to see — code
    /// regions, files, errors, REPL output, notes (seed 002, the
    /// `context-window` skill).
    ///
    /// The window is shown to the model at prompt component 3000 as
    /// Markdown (`## Context`, a `### Type (from file:start-end)` heading
    /// and a fenced block per item), passes the privacy gate like every
    /// section, and is kept per session in <data dir>/windows/NAME.json.
    /// It holds at most `window.max_items` items (default 50) and
    /// `window.max_tokens` tokens (default 4096): adding more evicts the
    /// oldest. With a host running these commands change its session's
    /// window through the control socket (the next prompt sees it); with
    /// none, they change the saved window.
    Window {
        #[command(subcommand)]
        command: WindowCommand,
    },
    /// Run one skill tool as the agent would when the model calls it, and
    /// print its result: `foveal tool call word_count '{"text": "a b"}'`.
    Tool {
        #[command(subcommand)]
        command: ToolCommand,
    },
    /// Print the literate source a skill embeds (its README and src/).
    ///
    /// Exits 1 when no loaded skill has that name (the known ones are
    /// listed), 2 when the name is not a valid skill name.
    SkillSource {
        /// The skill's name, as `foveal skill-list` shows it.
        name: String,
        #[command(flatten)]
        plugins: PluginArgs,
    },
}

/// Options shared by the memex commands.
#[derive(Debug, Clone, clap::Args)]
pub struct MemexArgs {
    /// An Org file, or a folder searched recursively for *.org; repeat for
    /// several (default: config `memex.paths`, env FOVEAL_MEMEX).
    #[arg(long = "memex", value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// The flags of every command that reads the memex through skills: where
/// the memex and the skill libraries are, and which tags make an object
/// private. Flattened, so each command shows them in this order.
#[derive(Debug, Clone, clap::Args)]
pub struct HostArgs {
    #[command(flatten)]
    pub memex: MemexArgs,
    #[command(flatten)]
    pub plugins: PluginArgs,
    #[command(flatten)]
    pub privacy: PrivacyArgs,
}

impl HostArgs {
    /// The overrides these flags make, with `--config` if given.
    fn overrides(&self, config: Option<&PathBuf>) -> Overrides {
        Overrides {
            memex: self.memex.paths.clone(),
            privacy_tags: self.privacy.tags.clone(),
            ..self.plugins.overrides(config)
        }
    }
}

/// Options of the commands that run the agent.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub host: HostArgs,
    /// The session to record into and resume (default: config
    /// `agent.session`, else `default`); kept in <data dir>/sessions/NAME.jsonl.
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// The object in foveal focus at the start, by its id or its handle
    /// in the outline (`^k3`).
    #[arg(long, value_name = "ID|^HANDLE")]
    pub focus: Option<String>,
    /// The model provider: `local` (the embedded SmolLM2) or `openai` (an
    /// OpenAI-compatible server: config `provider.base_url`,
    /// OPENAI_BASE_URL). Env FOVEAL_PROVIDER; config `provider.kind`.
    #[arg(long, value_name = "KIND", value_parser = parse_provider)]
    pub provider: Option<foveal_provider::ProviderKind>,
}

fn parse_provider(value: &str) -> Result<foveal_provider::ProviderKind, String> {
    value.parse()
}

impl AgentArgs {
    fn overrides(&self, config: Option<&PathBuf>) -> Overrides {
        Overrides {
            provider: self.provider,
            ..self.host.overrides(config)
        }
    }

    fn options(&self) -> agent::AgentOptions {
        agent::AgentOptions {
            session: self.session.clone(),
            focus: self.focus.clone(),
        }
    }
}

/// Privacy options.
#[derive(Debug, Clone, clap::Args)]
pub struct PrivacyArgs {
    /// Another tag that makes an object and its subtree private, in
    /// addition to config `privacy.tags` (default @personal); repeatable.
    /// Matched with or without colons, case-insensitively.
    #[arg(long = "privacy-tag", value_name = "TAG")]
    pub tags: Vec<String>,
}

/// `foveal bench …`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Time the context section on a memex: uncached (a new focus, the full
    /// semantic scan), cached (same focus and generation) and after a
    /// one-headline edit (made in memory; nothing is written). Each case is
    /// reported as median, min and max.
    Awareness {
        #[command(flatten)]
        host: HostArgs,
        /// The object in foveal focus, by its id or its handle in the
        /// outline (`^k3`).
        #[arg(long, value_name = "ID|^HANDLE")]
        focus: String,
        /// Runs per case (the cached case runs at least 1000 times).
        #[arg(long, default_value_t = 10)]
        runs: usize,
        /// Runs of the after-edit case, if not --runs. Each edits the
        /// focus's file in memory and parses it again before the timed
        /// render (about 0.6 s a run for an 84 MB file), so a large
        /// --runs for the other cases can go with a few of these.
        #[arg(long, value_name = "N")]
        edit_runs: Option<usize>,
        /// Also time the uncached case with the first-party skills in
        /// cells (`plugins.builtin_isolation = "cell"`), each run in turn
        /// with an in-process one, and print the ratio of the medians.
        #[arg(long)]
        in_cell: bool,
        /// Print JSON: uncached, cached, after_edit and index_rebuild, each
        /// {median_ms, min_ms, max_ms}, plus nodes and output_bytes (and
        /// uncached_in_cell with --in-cell).
        #[arg(long)]
        json: bool,
    },
    /// Time whole turns of the live agent ("Say hello") with an instant
    /// in-process model, so what is measured is the host: snapshots,
    /// pattern, prompt assembly, privacy gate, request body, usage record
    /// and session. Reports p50, p99 and max of the host overhead per turn
    /// (the turn less the model call) and of each phase, steady (after
    /// warm-up, every cache warm) and on the first turn after a
    /// one-headline edit of the memex. The session and usage.json go to a
    /// fresh folder under the data dir, removed afterwards; the edits are
    /// written to the memex files (add a property BENCH_REVISION to the
    /// first headline of the first file) — point --memex at a copy.
    Agent {
        #[command(flatten)]
        host: HostArgs,
        /// Turns timed in the steady case (after up to 20 warm-up turns).
        #[arg(long, default_value_t = 2000)]
        turns: usize,
        /// One-headline edits, each followed by one timed turn (0: none;
        /// each edit rewrites its file).
        #[arg(long, default_value_t = 0)]
        edits: usize,
        /// Print JSON: steady and after_edit, each with overhead,
        /// overhead_without_sync, sense, assemble, model, act and sync as
        /// {p50_ms, p99_ms, max_ms}; memex_objects, skills, body_bytes,
        /// body_tokens and prompt_tokens.
        #[arg(long)]
        json: bool,
    },
    /// Time the embedded model in a new session of the live agent: three
    /// short messages ("What is in my memex?", "What is on the reading
    /// list?", "Thanks."), each turn's time, prompt tokens reused from
    /// the KV cache and read, prefill and decode speed, and the peak
    /// memory. When llama.cpp's llama-server is found (--llama-server, or
    /// target/test-server/bin/llama-server as `scripts/test-server
    /// install` builds it) it reads the same prompts with as many threads,
    /// for comparison. The session goes to a fresh folder under the data
    /// dir, removed afterwards; the provider settings (model_path,
    /// model_threads) are the configuration's.
    Model {
        #[command(flatten)]
        host: HostArgs,
        /// The llama-server binary to compare with.
        #[arg(long, value_name = "PATH")]
        llama_server: Option<PathBuf>,
        /// Print JSON: model, threads, load_ms, turns (message, turn_ms,
        /// prompt_tokens, reused_tokens, new_tokens, prefill_ms,
        /// prefill_tokens_per_second, generated_tokens,
        /// decode_tokens_per_second), first_reply_ms, follow_up_ms,
        /// prefill_tokens_per_second, decode_tokens_per_second,
        /// peak_rss_mib, llama_server and load_average.
        #[arg(long)]
        json: bool,
    },
    /// Time a skill cell on the real path (the loader's checks and copy,
    /// `foveal-cell` confining itself, the registry's trampoline): a
    /// `components` call's round trip against a raw socketpair's, a new
    /// cell's start to serving, the idle cell's memory, and the host's
    /// memory and mapped regions around --swaps cells started and ended.
    /// FILE must answer `components` with config `{}` (the `rogue` test
    /// fixture, target/debug/libfoveal_fixture_rogue.so, does: 100 bytes).
    Cells {
        #[command(flatten)]
        host: HostArgs,
        /// The skill library to run in the cells.
        #[arg(long, value_name = "FILE")]
        library: PathBuf,
        /// Calls timed.
        #[arg(long, default_value_t = 20000)]
        calls: usize,
        /// Cells started and ended for the host's memory figures.
        #[arg(long, default_value_t = 300)]
        swaps: usize,
        /// Print JSON: raw_round_trip, components_round_trip and start as
        /// {p50_us, p99_us, max_us}; ratio_to_raw, idle_rss_mib,
        /// library_rss_mib, swaps, host_rss_mib and host_maps (before,
        /// after), calls.
        #[arg(long)]
        json: bool,
    },
    /// Time the big-memex figures in one run: generate a memex of --nodes
    /// headlines with the shared generator (gen_memex.py, seed 42), split
    /// at top-level headlines into --files files (once per size, kept
    /// under target/bench-data/scale-N-K), then measure `memex stats` and
    /// `ask` as whole processes (wall time and peak RSS; `ask` against a
    /// scripted model server run here, so the model costs nothing) and, in
    /// this process, the private-text matcher's first build, its
    /// rebuild after a small file is edited, and after one headline of the
    /// largest file is edited (the file is put back).
    Scale {
        /// Headlines to generate.
        #[arg(long, default_value_t = 1_000_000)]
        nodes: usize,
        /// Files to split them into.
        #[arg(long, default_value_t = 10)]
        files: usize,
        /// `ask` runs (the median is reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// The generator [default: ../shared/bench/gen_memex.py].
        #[arg(long, value_name = "FILE")]
        generator: Option<PathBuf>,
        /// Where the generated memex is kept [default:
        /// target/bench-data/scale-N-K].
        #[arg(long, value_name = "DIR")]
        data: Option<PathBuf>,
        /// Print JSON: nodes, files, org_bytes, stats and ask as {wall_ms,
        /// peak_rss_mib}, ask_runs, matcher_build_ms, matcher_rebuild_ms,
        /// matcher_big_edit_ms, matcher_keys, cores.
        #[arg(long)]
        json: bool,
    },
}

/// `foveal skill …`.
#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Trust skill libraries: print the SHA-256 of each FILE, as
    /// `sha256:<hex>  FILE`, and add it to `plugins.trusted` of the config
    /// file in use (--config, FOVEAL_CONFIG, ./config/foveal.toml or
    /// $XDG_CONFIG_HOME/foveal/foveal.toml), keeping the file's comments and
    /// layout.
    ///
    /// The list is enforced only when the config sets `plugins.require_trusted
    /// = true`: then a library whose digest is not on it is refused as
    /// `untrusted` — the first-party skills beside the executable too, so
    /// trust those as well. The digest is of the whole file, as `sha256sum
    /// FILE` prints it; a rebuilt library has a new one.
    ///
    /// With no config file in use, prints which file to create and what to
    /// put in it, saves nothing and exits 1.
    Trust {
        /// The skill libraries (.so files) to trust.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Write a new skill crate in NAME/ (or --path DIR), ready to build:
    /// Cargo.toml (a cdylib with a workspace of its own), build.rs,
    /// src/lib.rs with working examples of the chosen hooks, src/tests.rs
    /// on `foveal_sdk::testing`, README.md (the literate source `foveal
    /// skill-source` shows) and .gitignore. `cargo build --release` in it
    /// builds with no edit.
    ///
    /// The SDK dependency is a path to the sdk/ of the foveal checkout
    /// this binary was built from when that is still there, else a copy
    /// of the SDK written into the crate (foveal-sdk/); the README says
    /// which. The `components` example gets a prompt component id no
    /// installed skill declares. Refuses a folder that is not empty and a
    /// name that is not lowercase letters, digits, '-' and '_' starting
    /// with a letter (exit 2). docs/writing-a-skill.md goes on from here.
    New {
        /// The skill's name (e.g. `reading-list`).
        name: String,
        /// The crate's folder (default: ./NAME); must be new or empty.
        #[arg(long, value_name = "DIR")]
        path: Option<PathBuf>,
        /// The hooks to write examples of, comma-separated: components
        /// (a prompt section), tools (a tool for the model, lent the
        /// memex), redact (the last-door filter) [default: components,tools].
        #[arg(long, value_name = "HOOKS")]
        hooks: Option<String>,
        /// Write a copy of the SDK into the crate (foveal-sdk/) even when
        /// this binary's checkout is there: a crate that builds on any
        /// machine, without the checkout.
        #[arg(long)]
        vendor_sdk: bool,
        #[command(flatten)]
        plugins: PluginArgs,
    },
    /// Check a skill library without installing it: load it in a scratch
    /// registry as the host would once it is installed, and report each
    /// check the loader makes (file and folder trust, SDK version, ABI
    /// layout, manifest, component ids against the installed skills,
    /// dependencies, init, hooks); then call each hook once on the example
    /// memex (or --memex), under the panic guard and the hook deadline,
    /// with its time and the bytes it returned. Read and terminal tools
    /// are called with arguments made from their schema; write and
    /// dangerous ones are not called.
    ///
    /// Exits 0 only when the host would load the library and its hooks
    /// answer; 1 otherwise, with the loader's own reason.
    Check {
        /// The library (`target/release/lib<name>.so`).
        file: PathBuf,
        /// Call the hooks on this memex (an Org file or a folder;
        /// repeatable) instead of the example one.
        #[arg(long = "memex", value_name = "PATH")]
        memex: Vec<PathBuf>,
        /// Print one JSON object: file, skill, checks and calls (each
        /// {name, status (ok, warn, fail or skip), detail, ms, bytes}),
        /// replaces and ok.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        plugins: PluginArgs,
    },
    /// Check a skill library (as `foveal skill check`), then install it in
    /// the drop-in folder (--plugins, config `plugins.dir`): copied under
    /// a hidden name and renamed into place, so a running host sees a
    /// whole file and loads it at once. Refuses a library that fails the
    /// check, and one whose skill is installed already unless --replace.
    Install {
        /// The library to install.
        file: PathBuf,
        /// Replace an installed build of the same skill (or a file of the
        /// same name).
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        plugins: PluginArgs,
    },
}

/// `foveal tool …`.
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Run the tool NAME that a loaded skill offers, with ARGS (a JSON
    /// object), the way the agent runs it when the model calls it: the
    /// skill's declarations checked as the agent checks them, the call
    /// lent the memex (`--memex`, config `memex.paths`) through the
    /// registry's panic guard and deadline, and the result through the
    /// privacy gate, on stdout. A `dangerous` tool asks for confirmation on
    /// a terminal and is refused without one, as in `foveal ask`. ARGS
    /// holding private text or a secret are refused, whatever the tool's
    /// category; when the memex does not open, ARGS holding any text are
    /// refused (they cannot be checked).
    ///
    /// Exits 1 when no skill offers NAME (the tools offered are listed),
    /// the call is refused or the tool fails (the reason on stderr), 2 when
    /// ARGS is not a JSON object.
    Call {
        /// The tool's name, as the skill declares it.
        name: String,
        /// Its arguments, a JSON object (quote it for the shell).
        #[arg(default_value = "{}")]
        args: String,
        /// The object in foveal focus during the call, by its id or its
        /// handle in the outline (`^k3`).
        #[arg(long, value_name = "ID|^HANDLE")]
        focus: Option<String>,
        #[command(flatten)]
        host: HostArgs,
    },
}

/// Which window `foveal window …` works on.
#[derive(Debug, Clone, clap::Args)]
pub struct WindowTarget {
    /// The session whose window to use (default: the running host's, else
    /// config `agent.session`, else `default`).
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    #[command(flatten)]
    pub plugins: PluginArgs,
}

/// `foveal window …`.
#[derive(Debug, Subcommand)]
pub enum WindowCommand {
    /// Attach an item: TEXT, a file (`--file PATH`), a region of one
    /// (`--file PATH --lines A-B`), or what is piped in
    /// (`cargo test 2>&1 | foveal window add --type error`). Prints its id
    /// (`ctx-N`) and the items evicted to make room.
    ///
    /// Exits 1 with the reason, adding nothing, for an unknown type, no
    /// content, a file that cannot be read or is not UTF-8 text, a
    /// `--lines` range outside the file, or an item larger than
    /// `window.max_tokens` on its own.
    Add {
        /// The item's type: code, text, file, repl-history, error or custom
        /// (default: file for a whole --file, else code).
        #[arg(long = "type", value_name = "TYPE")]
        kind: Option<String>,
        /// Attach this file's text (its name is shown in the heading and
        /// its extension picks the code block's language).
        #[arg(long, value_name = "PATH", conflicts_with = "text")]
        file: Option<PathBuf>,
        /// Only these lines of the file, 1-based and inclusive: `10-20`, or
        /// one line `7`.
        #[arg(long, value_name = "A-B", requires = "file")]
        lines: Option<String>,
        /// The code block's language, in place of the one the file's
        /// extension or the type gives (e.g. `python`).
        #[arg(long, value_name = "NAME")]
        language: Option<String>,
        /// The text to attach (omit it with --file, or to read stdin).
        text: Option<String>,
        #[command(flatten)]
        target: WindowTarget,
        /// Print the answer as JSON: added (the item, in seed 002's
        /// schema: id, type, content, metadata, timestamp), evicted and
        /// session.
        #[arg(long)]
        json: bool,
    },
    /// List the items, oldest first: id, type, tokens, and where each came
    /// from (or its first line); then the bounds.
    List {
        /// Only items of this type (repeatable).
        #[arg(long = "type", value_name = "TYPE")]
        types: Vec<String>,
        /// Only the most recent N (still oldest first).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        #[command(flatten)]
        target: WindowTarget,
        /// Print seed 002's context-manager object: items (each with id,
        /// type, content, metadata, timestamp) and max_items, with
        /// max_tokens, tokens (all items together) and session.
        #[arg(long)]
        json: bool,
    },
    /// Remove one item by its id (`ctx-N`, as `foveal window list` shows
    /// it). Exits 1 when there is no such item.
    Rm {
        /// The item's id.
        id: String,
        #[command(flatten)]
        target: WindowTarget,
    },
    /// Remove every item. Ids go on from where they were.
    Clear {
        #[command(flatten)]
        target: WindowTarget,
    },
}

/// `foveal memex …`.
#[derive(Debug, Subcommand)]
pub enum MemexCommand {
    /// Counts: objects, files, active projects, private objects, the
    /// generation and the load time; and every file that failed to load
    /// or has warnings — a private one counted, not named, unless
    /// --include-private.
    Stats {
        #[command(flatten)]
        memex: MemexArgs,
        /// Name private files too: those that failed to load, and the
        /// warnings about private objects and files (hidden by default,
        /// and counted).
        #[arg(long)]
        include_private: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List the objects matching a tag, a TODO state and a type (all that
    /// are given must match; with none, every object). Private objects
    /// are left out unless --include-private; stderr says how many.
    Query {
        #[command(flatten)]
        memex: MemexArgs,
        /// List private objects too (hidden by default, and counted): their
        /// titles, tags, ids and files, and the names of private files
        /// that failed to load.
        #[arg(long)]
        include_private: bool,
        /// An own tag, matched exactly and case-insensitively.
        #[arg(long)]
        tag: Option<String>,
        /// A TODO state, exactly as written (e.g. DONE).
        #[arg(long)]
        todo: Option<String>,
        /// The object type (headline).
        #[arg(long = "type", value_name = "TYPE")]
        kind: Option<String>,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Compute a vector for every object that has none (no `:EMBEDDING:`
    /// property, not in the cache yet), so that objects similar to the
    /// focus are promoted. Shows a progress bar (count, rate, ETA); an
    /// interrupted run loses at most one batch of 32 and the next one
    /// resumes. Prints, at the end, the objects embedded, reused from the
    /// cache and skipped (private objects are never embedded; with a
    /// remote embedder neither is a text the privacy gate would change).
    ///
    /// The embedder is config `[embedding]` (env FOVEAL_EMBEDDING): by
    /// default all-MiniLM-L6-v2 in this process (fetch it with
    /// `scripts/fetch-model`). The vectors are kept in
    /// <data dir>/embeddings/; `foveal run` embeds in the background too.
    Embed {
        #[command(flatten)]
        memex: MemexArgs,
        /// Print one JSON object: objects, embedded, reused, skipped,
        /// from_file, model, seconds.
        #[arg(long)]
        json: bool,
    },
    /// Make the private-text index current: the privacy gate's matcher of
    /// this memex, kept in <data dir>/index/private.keys so that the next
    /// command or host start reads it instead of building it (at a million
    /// headlines, about a second instead of twenty). Reads the memex; when
    /// the index was built from these very files (every file's bytes, its
    /// file tags and TODO keywords, the privacy tags), says so, otherwise
    /// builds the matcher and writes it. Any command writes it after
    /// building the matcher of a large memex; this one does for any size.
    ///
    /// The file holds keys (hashes) of runs of private words, never the
    /// text; docs/security.md says what a reader of it could learn. Turn
    /// it off with `memex.index = false`.
    Index {
        #[command(flatten)]
        memex: MemexArgs,
        /// Print one JSON object: path, state (current or written), keys,
        /// bytes, files, seconds.
        #[arg(long)]
        json: bool,
    },
}

impl PluginArgs {
    fn overrides(&self, config: Option<&PathBuf>) -> Overrides {
        Overrides {
            config: config.cloned(),
            plugins: self.plugins.clone(),
            builtin: self.no_builtin.then_some(false),
            ..Overrides::default()
        }
    }
}

impl MemexArgs {
    fn overrides(&self, config: Option<&PathBuf>) -> Overrides {
        Overrides {
            config: config.cloned(),
            memex: self.paths.clone(),
            ..Overrides::default()
        }
    }
}

/// Runs `command` on the configuration `overrides` resolve: file, then
/// environment, then the command's flags. A bad configuration is reported
/// and ends the command with [`Exit::Usage`].
fn with_config(
    overrides: &Overrides,
    command: impl FnOnce(&Config) -> anyhow::Result<Exit>,
) -> anyhow::Result<Exit> {
    match Config::load(overrides, &foveal_agent::config::process_env) {
        Ok(config) => command(&config),
        Err(error) => {
            eprintln!("error: {error}");
            Ok(Exit::Usage)
        }
    }
}

/// The overrides of a command that takes no flag but `--config`.
fn file_only(config: Option<&PathBuf>) -> Overrides {
    Overrides {
        config: config.cloned(),
        ..Overrides::default()
    }
}

/// Runs the parsed command line. Every command that loads the
/// configuration does so through `with_config`, from the overrides its
/// flags make.
pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    let config_file = cli.config.as_ref();
    match cli.command {
        Command::SkillList {
            plugins,
            json,
            watch,
            tools,
        } => with_config(&plugins.overrides(config_file), |config| {
            skills::list(config, json, watch, tools)
        }),
        Command::Run {
            agent: args,
            no_repl,
        } => with_config(&args.overrides(config_file), |config| {
            agent::run(config, &args.options(), no_repl)
        }),
        Command::Ask {
            text,
            agent: args,
            json,
        } => with_config(&args.overrides(config_file), |config| {
            agent::ask(config, &args.options(), &text, json)
        }),
        Command::Tui { agent: args } => with_config(&args.overrides(config_file), |config| {
            crate::tui::run(config, args.session.clone())
        }),
        // The clients need only the socket's path: the configuration file.
        Command::Send {
            text,
            focus,
            delegation,
        } => with_config(&file_only(config_file), |config| {
            agent::send(config, &text, focus, delegation)
        }),
        Command::Status { json } => with_config(&file_only(config_file), |config| {
            agent::status(config, json)
        }),
        Command::Stop => with_config(&file_only(config_file), agent::stop),
        // A bad configuration is one of the problems `check` lists.
        Command::Check { agent: args } => {
            match Config::load(
                &args.overrides(config_file),
                &foveal_agent::config::process_env,
            ) {
                Ok(config) => agent::check(&config),
                Err(error) => {
                    println!("PROBLEM  config: {error}");
                    println!(
                        "1 problem(s) found (the rest is checked once the configuration loads)"
                    );
                    Ok(Exit::NotFound)
                }
            }
        }
        Command::Skill { command } => run_skill(config_file, command),
        Command::Tool {
            command:
                ToolCommand::Call {
                    name,
                    args,
                    focus,
                    host,
                },
        } => with_config(&host.overrides(config_file), |config| {
            tool_call::run(config, &name, &args, focus)
        }),
        Command::SkillSource { name, plugins } => {
            with_config(&plugins.overrides(config_file), |config| {
                skills::source(config, &name)
            })
        }
        Command::Context {
            host,
            focus,
            threshold,
            budget,
            json,
            explain,
            computed,
        } => with_config(&host.overrides(config_file), |config| {
            context::run(
                config,
                &context::ContextOptions {
                    focus,
                    threshold,
                    budget,
                    json,
                    explain,
                    computed,
                },
            )
        }),
        Command::Bench { command } => run_bench(config_file, command),
        Command::Prompt {
            host,
            focus,
            message,
            signal,
            context_type,
            budget,
            json,
            exact,
            session,
        } => with_config(&host.overrides(config_file), |config| {
            prompt::run(
                config,
                &foveal_agent::commands::prompt::PromptOptions {
                    focus,
                    message,
                    signal: signal.into(),
                    context_type,
                    budget,
                    json,
                    exact,
                    session,
                },
            )
        }),
        Command::Usage { json } => {
            with_config(&file_only(config_file), |config| usage::run(config, json))
        }
        Command::Window { command } => run_window(config_file, command),
        Command::Memex { command } => run_memex(config_file, command),
        Command::Agenda {
            memex,
            privacy,
            today,
            days,
            json,
        } => with_config(
            &Overrides {
                privacy_tags: privacy.tags,
                ..memex.overrides(config_file)
            },
            |config| agenda::run(config, today.as_deref(), days, json),
        ),
    }
}

/// `foveal skill …`.
fn run_skill(config_file: Option<&PathBuf>, command: SkillCommand) -> anyhow::Result<Exit> {
    match command {
        SkillCommand::Trust { files } => {
            with_config(&file_only(config_file), |config| trust::run(config, &files))
        }
        SkillCommand::New {
            name,
            path,
            hooks,
            vendor_sdk,
            plugins,
        } => with_config(&plugins.overrides(config_file), |config| {
            skill_new::run(
                config,
                &skill_new::NewOptions {
                    name,
                    path,
                    hooks,
                    vendor_sdk,
                },
            )
        }),
        SkillCommand::Check {
            file,
            memex,
            json,
            plugins,
        } => with_config(&plugins.overrides(config_file), |config| {
            skill_check::check(config, &file, &memex, json)
        }),
        SkillCommand::Install {
            file,
            replace,
            plugins,
        } => with_config(&plugins.overrides(config_file), |config| {
            skill_check::install(config, &file, replace)
        }),
    }
}

/// `foveal bench …`.
fn run_bench(config_file: Option<&PathBuf>, command: BenchCommand) -> anyhow::Result<Exit> {
    match command {
        BenchCommand::Awareness {
            host,
            focus,
            runs,
            edit_runs,
            in_cell,
            json,
        } => with_config(&host.overrides(config_file), |config| {
            let runs = bench::Runs {
                runs,
                edits: edit_runs.unwrap_or(runs),
            };
            bench::awareness(config, &focus, runs, in_cell, json)
        }),
        BenchCommand::Agent {
            host,
            turns,
            edits,
            json,
        } => with_config(&host.overrides(config_file), |config| {
            bench::agent(config, turns, edits, json)
        }),
        BenchCommand::Model {
            host,
            llama_server,
            json,
        } => with_config(&host.overrides(config_file), |config| {
            bench::model(config, llama_server, json)
        }),
        BenchCommand::Cells {
            host,
            library,
            calls,
            swaps,
            json,
        } => with_config(&host.overrides(config_file), |config| {
            bench_cells::cells(config, &library, calls, swaps, json)
        }),
        BenchCommand::Scale {
            nodes,
            files,
            runs,
            generator,
            data,
            json,
        } => bench_scale::scale(nodes, files, runs, generator, data, json),
    }
}

/// `foveal window …`: the operation is made from the flags before the
/// configuration is loaded, so a bad item is refused without it.
fn run_window(config_file: Option<&PathBuf>, command: WindowCommand) -> anyhow::Result<Exit> {
    let (target, op, json) = match command {
        WindowCommand::Add {
            kind,
            file,
            lines,
            language,
            text,
            target,
            json,
        } => {
            let args = window::AddArgs {
                kind,
                file,
                lines,
                language,
                text,
            };
            match window::add_op(&args, &mut window::piped_stdin) {
                Ok(op) => (target, op, json),
                Err(exit) => return Ok(exit),
            }
        }
        WindowCommand::List {
            types,
            limit,
            target,
            json,
        } => (
            target,
            foveal_prompt::window::WindowOp::List { types, limit },
            json,
        ),
        WindowCommand::Rm { id, target } => (
            target,
            foveal_prompt::window::WindowOp::Remove { id },
            false,
        ),
        WindowCommand::Clear { target } => (target, foveal_prompt::window::WindowOp::Clear, false),
    };
    with_config(&target.plugins.overrides(config_file), |config| {
        window::run(config, target.session.as_deref(), &op, json)
    })
}

/// `foveal memex …`.
fn run_memex(config_file: Option<&PathBuf>, command: MemexCommand) -> anyhow::Result<Exit> {
    match command {
        MemexCommand::Stats {
            memex: args,
            include_private,
            json,
        } => with_config(&args.overrides(config_file), |config| {
            memex::stats(config, include_private, json)
        }),
        MemexCommand::Query {
            memex: args,
            include_private,
            tag,
            todo,
            kind,
            json,
        } => with_config(&args.overrides(config_file), |config| {
            let query = memex::QueryArgs {
                tag,
                todo,
                kind,
                include_private,
            };
            memex::query(config, query, json)
        }),
        MemexCommand::Index { memex: args, json } => {
            with_config(&args.overrides(config_file), |config| {
                memex::index(config, json)
            })
        }
        MemexCommand::Embed { memex: args, json } => {
            with_config(&args.overrides(config_file), |config| {
                embed::run(config, json)
            })
        }
    }
}
