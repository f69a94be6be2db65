//! One cycle of a turn, as three steps: [`sense`](Agent::sense) →
//! [`think`](Agent::think) → [`act`](Agent::act).
//!
//! - **sense** takes the registry and memex snapshots (the whole cycle
//!   runs on them), chooses the context type from the signal (seed 004),
//!   composes the execution pattern and reads the conversation so far; it
//!   produces a [`Sensed`], and decides nothing else.
//! - **think** assembles the prompt within its budget, passes the whole
//!   request through the last door ([`Gate::check_request`]) and asks the
//!   provider, streaming the reply's text to the [`Output`] until it ends
//!   or the turn is cancelled; it produces a [`Thought`], or says why the
//!   cycle stops there ([`Stop`]).
//! - **act** records the reply, runs the tool calls the pattern allows and
//!   records their results, and sums the cycle up.
//!
//! Everything a step needs from the one before is in the struct it is
//! handed, so each step can be run (and tested) on its own.
//!
//! [`Gate::check_request`]: foveal_registry::egress::Gate::check_request

use std::sync::Arc;
use std::time::Instant;

use foveal_sdk::SignalKind;

use super::session::{Entry, EntryRole, RecordedCall};
use super::tools::{self, Tool, ToolContext, ToolError, ToolSource};
use super::{
    Agent, CycleSummary, Output, Phases, PromptCacheUse, SignalSource, SkillToolCall, ToolCategory,
    WITHHELD, activity, call_skill_tool, max_reply_bytes,
};
use foveal_memex::MemexSnapshot;
use foveal_prompt::execution::{AssessmentSignals, EventClass, ExecutionPattern};
use foveal_prompt::prompt::components::ToolSpec;
use foveal_prompt::prompt::{ContextType, Message, Prompt, PromptError, PromptInput};
use foveal_provider::{ChatRequest, Event, Reply, RequestBody, ToolCall, ToolChoice};

/// What a cycle sensed: everything [`Agent::think`] and [`Agent::act`]
/// read, taken once at the cycle's start.
pub(super) struct Sensed {
    /// The signal the cycle answers.
    signal: SignalKind,
    /// The skills it runs on.
    skills: Arc<foveal_registry::registry::Snapshot>,
    /// The memex it runs on.
    memex: Arc<MemexSnapshot>,
    /// The context type the signal chose.
    context_type: ContextType,
    /// How the cycle may act.
    pattern: ExecutionPattern,
    /// Every tool there is (the pattern's are [`Sensed::allowed`]).
    tools: Arc<[Tool]>,
    /// The specs of the tools the pattern allows, for the prompt.
    specs: Vec<ToolSpec>,
    /// The session's messages before this turn's pending one.
    history: Vec<Message>,
    /// The previous cycle's tool results.
    tool_results: Vec<Message>,
    /// The host's recent log lines, oldest first.
    logs: Vec<String>,
    /// The cycle as reported so far.
    summary: CycleSummary,
    /// When sensing ended.
    since: Instant,
}

impl Sensed {
    /// The tools the pattern allows (the context type's filter is the
    /// assembler's).
    fn allowed(&self) -> impl Iterator<Item = &Tool> {
        self.tools
            .iter()
            .filter(|t| self.pattern.allows(t.category))
    }
}

/// What the model replied, and what it was asked.
#[derive(Debug)]
struct Thought {
    /// The reply's text as it was shown (with the note of a cut reply).
    text: String,
    /// The reply.
    reply: Reply,
    /// The request as it passed the gate: its tools are the ones offered.
    request: ChatRequest,
    /// When the reply ended.
    replied: Instant,
}

/// Why a cycle ends before it acts.
#[derive(Debug)]
enum Stop {
    /// The prompt, the gate or the provider failed.
    Failed { since: Instant, error: String },
    /// The turn was cancelled while the reply streamed: the text so far.
    Cancelled { since: Instant, text: String },
}

/// What one cycle did.
pub(super) struct CycleOutcome {
    pub text: String,
    pub summary: CycleSummary,
    pub terminal: bool,
    /// The session entries before this cycle's tool results.
    pub history_end: usize,
}

impl Agent {
    /// One cycle: sense, think, act.
    pub(super) async fn cycle(
        &mut self,
        source: SignalSource,
        message: Option<Arc<str>>,
        history_end: usize,
        results: Option<(usize, usize)>,
        out: &mut dyn Output,
    ) -> CycleOutcome {
        let mut sensed = self.sense(source, history_end, results);
        match self.think(&mut sensed, message, out).await {
            Ok(thought) => self.act(sensed, thought, out).await,
            Err(Stop::Failed { since, error }) => self.failed(sensed, since, out, &error),
            Err(Stop::Cancelled { since, text }) => self.cancelled(sensed, since, &text),
        }
    }

    // -----------------------------------------------------------------
    // Sense
    // -----------------------------------------------------------------

    /// Sense: the snapshots, the context type of `source` (seed 004), the
    /// execution pattern, the tools it allows, the history before
    /// `history_end`, the tool results in `results` and the recent logs.
    fn sense(
        &mut self,
        source: SignalSource,
        history_end: usize,
        results: Option<(usize, usize)>,
    ) -> Sensed {
        let id = self.next_cycle;
        self.next_cycle += 1;
        let t0 = Instant::now();
        let skills = self.registry.snapshot();
        let memex = self.memex.snapshot();
        // The focus was visible when it was set; the object may have
        // become private (or gone) since: it is then no longer the focus.
        if let Some(focus) = &self.focus
            && tools::visible_object(&memex, &self.privacy, focus).is_err()
        {
            tracing::info!(target: "foveal::agent::cycle", "the focus is no longer a visible object; cleared");
            self.focus = None;
        }
        let signal = source.kind();
        let (context_type_name, context_type, pattern) = self.pattern_for(signal);
        let tools = self.tools();
        let specs = tools
            .iter()
            .filter(|t| pattern.allows(t.category))
            .map(Tool::spec)
            .collect();
        let history = self
            .session
            .history_before(history_end, self.config.agent.history_messages);
        let tool_results = match results {
            Some((start, end)) => self.session.messages(start, end),
            None => Vec::new(),
        };
        let mut logs = self.log_ring.recent(self.config.context.log_limit);
        logs.reverse();
        let mut summary = CycleSummary {
            id,
            signal: source.name(),
            context_type: context_type_name,
            registry_generation: skills.generation(),
            memex_generation: memex.generation(),
            prompt_tokens: 0,
            completion_tokens: None,
            prompt_cache: None,
            usage_percent: None,
            tool_calls: Vec::new(),
            phases: Phases::default(),
            error: None,
            pattern: pattern.clone(),
        };
        let since = Instant::now();
        summary.phases.sense_ms = ms(since - t0);
        Sensed {
            signal,
            skills,
            memex,
            context_type,
            pattern,
            tools,
            specs,
            history,
            tool_results,
            logs,
            summary,
            since,
        }
    }

    /// The context type `signal` chooses (seed 004: a user's message or a
    /// tool's output → `tick_event`, a heartbeat → `tick_autonomous`), and
    /// the execution pattern composed from the static limits, that type
    /// and the runtime signals (token pressure from the last prompt's
    /// usage, consecutive errors, the event's class).
    fn pattern_for(&self, signal: SignalKind) -> (&'static str, ContextType, ExecutionPattern) {
        let name = foveal_prompt::prompt::context_types::for_signal(signal);
        let context_type = self
            .assembler
            .settings()
            .prompt
            .context_types
            .get(name)
            .expect("the seven context types always exist")
            .clone();
        let signals = AssessmentSignals::new(
            self.usage_percent,
            self.recent_errors,
            EventClass::for_signal(signal),
        );
        let pattern =
            foveal_prompt::execution::select(&self.config.execution, &context_type, &signals);
        (name, context_type, pattern)
    }

    // -----------------------------------------------------------------
    // Think
    // -----------------------------------------------------------------

    /// Think: the prompt for what was `sensed` and the pending `message`,
    /// within its budget and through the gate; then the model's reply,
    /// streamed to `out`, and its usage counted.
    async fn think(
        &mut self,
        sensed: &mut Sensed,
        message: Option<Arc<str>>,
        out: &mut dyn Output,
    ) -> Result<Thought, Stop> {
        let since = sensed.since;
        let (prompt, request, body) = self
            .request(sensed, message)
            .map_err(|error| Stop::Failed { since, error })?;
        let asked = Instant::now();
        sensed.summary.phases.assemble_ms = ms(asked - sensed.since);
        let (text, reply) = self.ask(body, sensed, out, asked).await?;
        let replied = Instant::now();
        sensed.summary.phases.model_ms = ms(replied - asked);
        self.count_usage(&prompt, &request, &reply, &mut sensed.summary);
        Ok(Thought {
            text,
            reply,
            request,
            replied,
        })
    }

    /// The prompt, the request made of it (checked whole by the gate, the
    /// last door) and its body; `Err` is the error the cycle ends with.
    fn request(
        &mut self,
        sensed: &mut Sensed,
        message: Option<Arc<str>>,
    ) -> Result<(Prompt, ChatRequest, RequestBody), String> {
        let definitions: Vec<_> = {
            let (_, kept) = foveal_prompt::prompt::components::tool_belt(
                &sensed.specs,
                sensed.context_type.tool_filter.as_deref(),
            );
            sensed
                .allowed()
                .filter(|t| kept.contains(&t.name))
                .map(Tool::definition)
                .collect()
        };
        // The definitions travel beside the messages and cannot be
        // trimmed: their bytes (an upper bound of their tokens) come out of
        // the budget, which the assembler says. The history's tool calls
        // and the results' call ids are counted in their sections, where
        // the budget can cut them (L1b) or drop them with their message
        // (L4).
        let tool_definitions = definition_bytes(&definitions);
        let focus = self.focus.clone();
        let window_revision = self.window.for_prompt(&sensed.skills);
        let input = PromptInput {
            signal: sensed.signal,
            context_type: Some(sensed.summary.context_type),
            focus: focus.as_deref(),
            message,
            history: &sensed.history,
            tool_results: &sensed.tool_results,
            tools: &sensed.specs,
            logs: &sensed.logs,
            budget: Some(self.config.context.max_tokens),
            budget_from: Some("context.max_tokens"),
            tool_definitions: u32::try_from(tool_definitions).unwrap_or(u32::MAX),
            exact_counts: false,
            window: window_revision.map(|revision| foveal_prompt::prompt::SessionWindow {
                session: self.window.session(),
                revision,
            }),
            session: Some(self.window.session()),
        };
        let prompt = self
            .assembler
            .assemble(&sensed.skills, &sensed.memex, &input)
            .map_err(|error| prompt_error(&error))?;
        sensed.summary.prompt_tokens = prompt.total_tokens;
        sensed.summary.usage_percent = prompt.usage_percent;
        self.usage_percent = prompt.usage_percent;
        let mut request = ChatRequest::new(prompt.chat_messages());
        request.model = self.config.provider.model.clone();
        request.max_tokens = Some(self.config.agent.max_reply_tokens);
        if definitions.is_empty() {
            request.tool_choice = ToolChoice::Auto;
        } else {
            request.tools = definitions;
        }
        // The last door: the whole request, as it will be sent.
        if let Err(error) = self.gate.check_request(
            &mut request,
            &sensed.memex,
            &sensed.skills,
            &mut self.request_memo,
        ) {
            return Err(prompt_error(&PromptError::from(error)));
        }
        let body = self.provider.body(&request).map_err(|e| e.to_string())?;
        Ok((prompt, request, body))
    }

    /// Asks the model, streaming its text to `out`, at most what a reply
    /// of `max_reply_tokens` can hold; a cancel ends the wait. The text as
    /// shown, and the reply.
    async fn ask(
        &mut self,
        body: RequestBody,
        sensed: &Sensed,
        out: &mut dyn Output,
        asked: Instant,
    ) -> Result<(String, Reply), Stop> {
        let max_reply_tokens = self.config.agent.max_reply_tokens;
        let mut stream = self
            .provider
            .send(body)
            .limit(max_reply_bytes(max_reply_tokens));
        let mut text = String::new();
        let mut failure = None;
        let cancel = Arc::clone(&self.cancel);
        loop {
            let event = tokio::select! {
                event = stream.next() => event,
                () = cancel.asked() => return Err(Stop::Cancelled { since: asked, text }),
            };
            let Some(event) = event else { break };
            match event {
                Ok(Event::Text(piece)) => {
                    out.text(&piece);
                    text.push_str(&piece);
                }
                Ok(_) => {}
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        let failed = |error| Stop::Failed {
            since: asked,
            error: format!("the model failed: {error}"),
        };
        if let Some(error) = failure {
            if !text.is_empty() {
                let kept = self.kept_from_model(&text, &sensed.memex, &sensed.skills);
                self.record(Entry::new(EntryRole::Assistant, kept));
            }
            return Err(failed(error));
        }
        let mut reply = stream.collect().await.map_err(failed)?;
        if reply.truncated {
            let note = format!(
                "\n[reply cut at {} bytes: the server sent more than agent.max_reply_tokens ({max_reply_tokens}) allows]",
                max_reply_bytes(max_reply_tokens),
            );
            out.text(&note);
            text.push_str(&note);
            reply.text.push_str(&note);
        }
        Ok((text, reply))
    }

    /// Counts the reply's tokens in the summary and the cost tracker: as
    /// the provider reported them, else estimated from the prompt.
    fn count_usage(
        &self,
        prompt: &Prompt,
        request: &ChatRequest,
        reply: &Reply,
        summary: &mut CycleSummary,
    ) {
        // The model actually asked (the provider's), else the prompt's.
        let model = request
            .model
            .clone()
            .unwrap_or_else(|| prompt.model.clone());
        let usage = match reply.usage {
            Some(u) => foveal_prompt::prompt::cost::CycleUsage {
                model,
                input_tokens: u.prompt_tokens,
                cached_input_tokens: u.cached_tokens,
                output_tokens: u.completion_tokens,
            },
            None => foveal_prompt::prompt::cost::CycleUsage {
                model,
                ..foveal_prompt::prompt::cost::estimate(prompt, (reply.text.len() / 4) as u64)
            },
        };
        summary.completion_tokens = reply.usage.map(|u| u.completion_tokens);
        summary.prompt_cache = reply.usage.map(|u| PromptCacheUse {
            reused_tokens: u.cached_tokens,
            new_tokens: u.prompt_tokens.saturating_sub(u.cached_tokens),
        });
        self.costs.add(usage);
    }

    // -----------------------------------------------------------------
    // Act
    // -----------------------------------------------------------------

    /// Act: records the reply, runs its tool calls (the first only, unless
    /// the pattern allows several) and records their results; the
    /// cycle's outcome.
    async fn act(
        &mut self,
        mut sensed: Sensed,
        thought: Thought,
        out: &mut dyn Output,
    ) -> CycleOutcome {
        // What the model wrote is recorded (and so replayed) only if it
        // holds nothing private ([`Agent::kept_from_model`]).
        let kept = |text: &str| self.kept_from_model(text, &sensed.memex, &sensed.skills);
        let mut entry = Entry::new(EntryRole::Assistant, kept(&thought.reply.text));
        entry.cycle = Some(sensed.summary.id);
        entry.tool_calls = thought
            .reply
            .tool_calls
            .iter()
            .map(|c| RecordedCall {
                id: kept(&c.id),
                name: kept(&c.name),
                arguments: kept(&c.raw_arguments),
            })
            .collect();
        self.record(entry);
        let history_end = self.session.entries().len();
        let mut terminal = false;
        let mut failures = 0;
        for (n, call) in thought.reply.tool_calls.iter().enumerate() {
            let shown_name = self.kept_from_model(&call.name, &sensed.memex, &sensed.skills);
            sensed.summary.tool_calls.push(shown_name.clone());
            let several =
                sensed.pattern.multi_tool_enabled && sensed.pattern.mode.is_multi_action();
            let result = if n > 0 && !several {
                Err(
                    "not run: this cycle allows one action (call it again in the next step)"
                        .to_owned(),
                )
            } else {
                let (result, ends) = self.call(call, &sensed, &thought.request, out).await;
                terminal |= ends;
                result
            };
            if result.is_err() {
                failures += 1;
            }
            self.record_result(call, shown_name, result, &sensed, out);
        }
        self.recent_errors = if failures > 0 {
            self.recent_errors + 1
        } else {
            0
        };
        let mut summary = sensed.summary;
        summary.phases.act_ms = ms(thought.replied.elapsed());
        self.log_cycle(&summary);
        self.refresh_status(Some(&summary));
        CycleOutcome {
            text: thought.text,
            summary,
            terminal,
            history_end,
        }
    }

    /// Runs `call` if `request` offered its tool; whether the tool is a
    /// terminal one that ends the loop.
    async fn call(
        &mut self,
        call: &ToolCall,
        sensed: &Sensed,
        request: &ChatRequest,
        out: &mut dyn Output,
    ) -> (Result<String, String>, bool) {
        let offered = sensed
            .allowed()
            .find(|t| t.name == call.name && request.tools.iter().any(|d| d.name == call.name));
        match offered {
            None => (
                Err(ToolError::UnknownTool(call.name.clone()).to_string()),
                false,
            ),
            Some(tool) => {
                let ends =
                    tool.category == ToolCategory::Terminal && sensed.pattern.terminal_ends_loop;
                let result = self
                    .run_tool(tool, call, &sensed.pattern, &sensed.memex, out)
                    .await;
                (result, ends)
            }
        }
    }

    /// Shows, notes and records a tool's `result`. A tool's output is
    /// memex text or a skill's: it is shown, recorded, replayed and fed to
    /// the next cycle only as gated.
    fn record_result(
        &mut self,
        call: &ToolCall,
        shown_name: String,
        result: Result<String, String>,
        sensed: &Sensed,
        out: &mut dyn Output,
    ) {
        let (memex, skills) = (&sensed.memex, &sensed.skills);
        let result = match result {
            Ok(text) => Ok(self.gated_with(&text, memex, skills)),
            Err(error) => Err(self.gated_with(&error, memex, skills)),
        };
        out.tool(&shown_name, &result);
        activity::note(&match &result {
            Ok(_) => format!("called {shown_name}: ok"),
            Err(error) => format!(
                "called {shown_name}: failed: {}",
                activity::first_line(error, 160)
            ),
        });
        let content = match result {
            Ok(text) => text,
            Err(error) => format!("error: {error}"),
        };
        let mut entry = Entry::new(EntryRole::Tool, content);
        entry.tool_call_id = Some(self.kept_from_model(&call.id, memex, skills));
        entry.tool = Some(shown_name);
        entry.cycle = Some(sensed.summary.id);
        self.record(entry);
    }

    async fn run_tool(
        &mut self,
        tool: &Tool,
        call: &ToolCall,
        pattern: &ExecutionPattern,
        snapshot: &MemexSnapshot,
        out: &mut dyn Output,
    ) -> Result<String, String> {
        let args = match &call.arguments {
            Ok(args) => args.clone(),
            Err(error) => return Err(ToolError::InvalidArguments(error.to_string()).to_string()),
        };
        // A tool given private text or a secret could write it where a
        // visible object holds it: refused before it runs (and before
        // anyone is asked to confirm it), the host's write tools and every
        // skill tool, whatever category it declares.
        tools::check_arguments(tool, &args, &self.gate, &self.memex.snapshot())
            .map_err(|refused| refused.to_string())?;
        if tool.category == ToolCategory::Dangerous && pattern.dangerous_requires_confirm {
            if !out.interactive() {
                return Err(format!(
                    "refused: {} is dangerous and needs the user's confirmation, which this run cannot ask",
                    tool.name
                ));
            }
            if !out.confirm(&tool.name, &call.raw_arguments).await {
                return Err(format!("refused: the user did not confirm {}", tool.name));
            }
        }
        match &tool.source {
            ToolSource::Builtin(builtin) => self.run_builtin(*builtin, &args, snapshot),
            ToolSource::Skill(skill) => call_skill_tool(
                &self.registry.snapshot(),
                SkillToolCall {
                    skill,
                    name: &tool.name,
                    args: &args,
                    view: foveal_memex::view::SnapshotView::new(snapshot, &self.privacy),
                    focus: self.focus.clone(),
                    config: self.config.skill_config(skill).to_owned(),
                    session: Some(self.window.session().to_owned()),
                },
            ),
        }
    }

    /// Runs one of the host's tools; a memex write it makes is noted as
    /// this agent's own.
    fn run_builtin(
        &mut self,
        builtin: tools::Builtin,
        args: &serde_json::Value,
        snapshot: &MemexSnapshot,
    ) -> Result<String, String> {
        let mut focus = self.focus.clone();
        let mut cx = ToolContext {
            memex: &self.memex,
            snapshot,
            privacy: &self.privacy,
            focus: &mut focus,
            journal: &self.journal,
        };
        let result = tools::run_builtin(builtin, args, &mut cx);
        self.focus = focus;
        match result {
            Ok(output) => {
                if let Some(generation) = output.wrote {
                    self.own_writes.push(generation);
                    // Seed 001, post-execution: a task just marked
                    // done gives its handoff back to the memex.
                    // (The id the tool resolved: it may have been given a
                    // handle.)
                    if builtin == tools::Builtin::SetTodo
                        && let Some(id) = output.object.as_deref()
                        && self.memex.snapshot().get(id).is_some_and(|o| o.is_done())
                    {
                        let before = self.memex.snapshot().generation();
                        let done = foveal_prompt::computed::post_execution(
                            &self.registry.snapshot(),
                            &self.memex,
                            &self.privacy,
                            &self.gate,
                            &self.config.computed,
                            id,
                        );
                        if done.edits.iter().any(|e| e.error.is_none()) {
                            // Each edit published a generation.
                            let after = self.memex.snapshot().generation();
                            self.own_writes.extend((before + 1..=after).take(64));
                        }
                    }
                    while self.own_writes.len() > 64 {
                        self.own_writes.remove(0);
                    }
                }
                Ok(output.text)
            }
            Err(error) => Err(error.to_string()),
        }
    }

    // -----------------------------------------------------------------
    // A cycle that ends before it acts
    // -----------------------------------------------------------------

    /// The cycle's reply was cancelled while it streamed: what came of it
    /// is kept as the assistant's (so the history stays a conversation);
    /// no tool runs (a reply cancelled before its first word leaves
    /// nothing). Not an error (the execution pattern's error count
    /// stays).
    fn cancelled(&mut self, sensed: Sensed, since: Instant, text: &str) -> CycleOutcome {
        let mut summary = sensed.summary;
        summary.phases.model_ms += ms(since.elapsed());
        if !text.is_empty() {
            let kept = self.kept_from_model(text, &sensed.memex, &sensed.skills);
            let mut entry = Entry::new(EntryRole::Assistant, kept);
            entry.cycle = Some(summary.id);
            self.record(entry);
        }
        self.log_cycle(&summary);
        self.refresh_status(Some(&summary));
        CycleOutcome {
            text: String::new(),
            history_end: self.session.entries().len(),
            summary,
            terminal: false,
        }
    }

    fn failed(
        &mut self,
        sensed: Sensed,
        since: Instant,
        out: &mut dyn Output,
        error: &str,
    ) -> CycleOutcome {
        let mut summary = sensed.summary;
        summary.phases.model_ms += ms(since.elapsed());
        let error = self.gated(error);
        summary.error = Some(error.clone());
        self.recent_errors += 1;
        let shown = format!("[error: {error}]");
        out.error(&shown);
        let mut entry = Entry::new(EntryRole::Error, error);
        entry.cycle = Some(summary.id);
        self.record(entry);
        self.log_cycle(&summary);
        self.refresh_status(Some(&summary));
        CycleOutcome {
            text: shown,
            history_end: self.session.entries().len(),
            summary,
            terminal: false,
        }
    }

    // -----------------------------------------------------------------
    // Text from the model, and the log
    // -----------------------------------------------------------------

    /// What the model wrote, as it may be kept and replayed: as it is when
    /// the gate finds nothing in it, else withheld whole. Redacting in
    /// place would answer the model's guesses — a reply listing
    /// `0000 … 9999` would come back with the private PIN marked — so text
    /// from the model that holds anything private is not shown to it
    /// again at all.
    fn kept_from_model(
        &self,
        text: &str,
        memex: &MemexSnapshot,
        skills: &foveal_registry::registry::Snapshot,
    ) -> String {
        match self.gate.clean(text, memex, skills) {
            Ok(cleaned) if cleaned.report.total() == 0 => text.to_owned(),
            _ => WITHHELD.to_owned(),
        }
    }

    /// `text` through the privacy gate, on these snapshots; withheld whole
    /// if the gate cannot check it.
    pub(super) fn gated_with(
        &self,
        text: &str,
        memex: &MemexSnapshot,
        skills: &foveal_registry::registry::Snapshot,
    ) -> String {
        match self.gate.clean(text, memex, skills) {
            Ok(cleaned) => cleaned.text.into_owned(),
            Err(error) => {
                format!("[withheld: the privacy gate could not check this text: {error}]")
            }
        }
    }

    fn log_cycle(&self, s: &CycleSummary) {
        tracing::info!(
            target: "foveal::cycle",
            cycle = s.id,
            signal = s.signal,
            context_type = s.context_type,
            registry_generation = s.registry_generation,
            memex_generation = s.memex_generation,
            prompt_tokens = s.prompt_tokens,
            completion_tokens = s.completion_tokens.unwrap_or(0),
            tools = s.tool_calls.len(),
            sense_ms = s.phases.sense_ms,
            assemble_ms = s.phases.assemble_ms,
            model_ms = s.phases.model_ms,
            act_ms = s.phases.act_ms,
            error = s.error.is_some(),
            "cycle"
        );
    }
}

/// The bytes the tool definitions take beside a prompt's sections (an
/// upper bound of their tokens).
fn definition_bytes(definitions: &[foveal_provider::ToolDefinition]) -> usize {
    definitions
        .iter()
        .map(|d| d.name.len() + d.description.len() + d.parameters.to_string().len() + 64)
        .sum::<usize>()
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn prompt_error(error: &PromptError) -> String {
    format!("no prompt could be assembled: {error}")
}

#[cfg(test)]
#[path = "cycle_tests.rs"]
mod tests;
