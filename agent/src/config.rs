//! Configuration: one TOML file, then environment variables, then flags.
//!
//! The file is found at `--config PATH`, else `$FOVEAL_CONFIG`, else
//! `config/foveal.toml` under the working directory, else
//! `$XDG_CONFIG_HOME/foveal/foveal.toml`; with none of them the built-in
//! defaults apply (`config/foveal.toml` in the repository documents each).
//!
//! The file found, whichever way, is used only when nobody but the user (or
//! root) can change it ([`foveal_registry::trust`]; the same rule as for plugin
//! folders): it chooses the plugins folder, the provider, the variable the
//! API key is read from and the privacy tags, so whoever can write it rules
//! the host. That holds for a file named by `--config` or `FOVEAL_CONFIG`
//! too: such a name is written once into a shell profile or a service unit
//! and read at every start, long after anyone looked at the file.
//!
//! Unknown keys are rejected with the closest known key suggested, and a bad
//! value is an error naming the file, the line and the key: the host never
//! starts half-configured. Relative paths in the file are relative to the
//! file's folder; relative paths in flags and environment variables are
//! relative to the working directory. Path values get `~` and `$VAR`
//! expansion and lose surrounding quotes (seed 000 `context-path-resolve`).
//!
//! # Example
//!
//! ```
//! use foveal_agent::config::{Config, Overrides};
//!
//! let env = |name: &str| (name == "CONTEXT_MAX_TOKENS").then(|| "8000".to_owned());
//! let config = Config::from_toml("[context]\nmax_tokens = 9000\n", None, &Overrides::default(), &env).unwrap();
//! assert_eq!(config.context.max_tokens, 8000); // the environment wins over the file
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use foveal_settings::{
    ConfigError, EnvLookup, closest, line_column, process_env, resolve_path,
};
use toml::Spanned;

pub use foveal_prompt::context::AwarenessSettings;
pub use foveal_prompt::window::WindowSettings;

/// Settings of the plugin registry and loader.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginSettings {
    /// The drop-in folder (`plugins.dir`, `FOVEAL_PLUGINS`, `--plugins`).
    pub dir: PathBuf,
    /// Also load first-party skills from the folder of the `foveal`
    /// executable, where `cargo build` puts them (`plugins.builtin`).
    pub builtin: bool,
    /// Watch the folders and reload on change (`plugins.watch`).
    pub watch: bool,
    /// Consecutive panics before a skill is quarantined
    /// (`plugins.quarantine_after`, `FOVEAL_QUARANTINE_AFTER`).
    pub quarantine_after: u32,
    /// Libraries one process may load; loaded code is never unloaded
    /// (`plugins.max_loads`).
    pub max_loads: u32,
    /// Mebibytes of library copies one process may map
    /// (`plugins.max_load_mib`); a warning at 80 %.
    pub max_load_mib: u32,
    /// How long a skill's hook may run before the call is abandoned and
    /// the skill quarantined (`plugins.hook_timeout_ms`).
    pub hook_timeout_ms: u64,
    /// Quiet time after an in-place write before a library is loaded
    /// (`plugins.debounce_ms`). Renames load at once.
    pub debounce_ms: u64,
    /// The SHA-256 digests of the library builds one trusts
    /// (`plugins.trusted`, filled by `foveal skill trust FILE`).
    pub trusted: Vec<foveal_registry::trust::Sha256>,
    /// Run only libraries whose digest is in `trusted`
    /// (`plugins.require_trusted`, default false: nothing is hashed).
    pub require_trusted: bool,
    /// Where the first-party skills beside the executable run
    /// (`plugins.builtin_isolation`, `FOVEAL_BUILTIN_ISOLATION`: `"cell"`
    /// or `"in-process"`, the default). Drop-in skills run in cells.
    pub builtin_isolation: foveal_registry::isolation::Where,
}

impl PluginSettings {
    /// The allow-list the loader applies.
    pub fn allow_list(&self) -> foveal_registry::trust::AllowList {
        if self.require_trusted {
            foveal_registry::trust::AllowList::Only(self.trusted.iter().copied().collect())
        } else {
            foveal_registry::trust::AllowList::Any
        }
    }
}

/// Settings of context assembly (seeds 000 and 003).
#[derive(Debug, Clone, PartialEq)]
pub struct ContextSettings {
    /// `context.max_tokens`, `CONTEXT_MAX_TOKENS`: the prompt budget.
    pub max_tokens: u32,
    /// `context.semantic_threshold`, `CONTEXT_SEMANTIC_THRESHOLD`: cosine
    /// similarity from which an object is promoted to full detail.
    pub semantic_threshold: f64,
    /// `context.log_limit`, `CONTEXT_LOG_LIMIT`: log lines in the context.
    pub log_limit: usize,
}

/// The resolved configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
    /// The plugin registry.
    pub plugins: PluginSettings,
    /// Context assembly.
    pub context: ContextSettings,
    /// `[window]`: the bounds of the context window (seed 002).
    pub window: WindowSettings,
    /// The awareness outline.
    pub awareness: AwarenessSettings,
    /// Computed context (`[computed_context]`, `DEBUG_CONTEXT`).
    pub computed: foveal_prompt::computed::ComputedSettings,
    /// Where state lives (`data.dir`, `FOVEAL_DATA_DIR`, else the XDG data
    /// folder `…/foveal`).
    pub data_dir: PathBuf,
    /// The memex's files and folders (`memex.paths`, `FOVEAL_MEMEX` as a
    /// `:`-separated list, `--memex`; default `<data dir>/memex`).
    pub memex_paths: Vec<PathBuf>,
    /// How the memex reads its files: `memex.todo_keywords`, the TODO
    /// keywords of a file that declares none (Emacs' `org-todo-keywords`).
    pub memex: foveal_memex::MemexOptions,
    /// Whether the private-text matcher of a large memex is kept on disk
    /// between processes (`memex.index`, default true): see
    /// [`Self::private_index_path`].
    pub memex_index: bool,
    /// Tags that make an object and its subtree private (`privacy.tags`,
    /// default `@personal`; seed 000 `bouncer-privacy-tags`).
    pub privacy_tags: Vec<String>,
    /// Secret patterns of one's own (`[[privacy.patterns]]`, each a `name`
    /// and a `regex`), checked at load; added to the defaults.
    pub privacy_patterns: Vec<foveal_redact::Pattern>,
    /// Whether the built-in secret patterns apply too
    /// (`privacy.default_patterns`, default true).
    pub privacy_default_patterns: bool,
    /// The model provider: `[provider]`, `FOVEAL_PROVIDER`, `OPENAI_*`,
    /// `--provider` ([`foveal_provider::settings`]).
    pub provider: foveal_provider::ProviderSettings,
    /// `[embedding]`: who computes the memex's vectors
    /// ([`foveal_embed::settings`]).
    pub embedding: foveal_embed::EmbedSettings,
    /// `[agent]`: how the live host runs.
    pub agent: crate::settings::AgentSettings,
    /// Prompt assembly: `[identity]`, `[model]`, `[prices.<model>]` and
    /// `[context_types.<name>]` ([`foveal_prompt::prompt::settings`]).
    pub prompt: foveal_prompt::prompt::settings::PromptConfig,
    /// `[execution]`: the hard limits of every execution pattern (layer 1,
    /// [`foveal_prompt::execution`]).
    pub execution: foveal_prompt::execution::ExecutionConfig,
    /// `[skills.<name>]`: each skill's own configuration table, as the
    /// JSON text its hooks receive in `config_json` (a skill without a
    /// table gets `{}`).
    pub skills: std::collections::BTreeMap<String, String>,
    /// The host's keys of each `[skills.<name>]` table: where the skill
    /// runs and what its cell is granted ([`foveal_registry::isolation`]). They are
    /// not in the skill's JSON.
    pub skill_isolation:
        std::collections::BTreeMap<String, foveal_registry::isolation::SkillIsolation>,
}

impl Config {
    /// What tells one resolved configuration from another, as a host
    /// shows it (`status`'s `config_id`): a hash of every setting and of
    /// the working folder (relative paths mean what they mean there). A
    /// command finding a host with its own id may leave its turn to that
    /// host: same memex, privacy tags, skills, provider, session defaults.
    /// The same binary computes the same id; another build may not.
    pub fn id(&self) -> String {
        Self::hash_id(&format!("{self:?}"))
    }

    /// [`Self::id`] but the provider's settings, which neither the context
    /// section nor the prompt depends on (`status`'s `prompt_id`): `foveal
    /// context` and `foveal prompt`, which take no `--provider`, leave
    /// their work to a host with their own. Should the provider's settings
    /// not be found in the text hashed, they stay in it: the command then
    /// runs in its own process, never on another memex.
    pub fn prompt_id(&self) -> String {
        let all = format!("{self:?}");
        let provider = format!("provider: {:?}, ", self.provider);
        Self::hash_id(&all.replacen(&provider, "", 1))
    }

    fn hash_id(settings: &str) -> String {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        settings.hash(&mut hasher);
        std::env::current_dir().ok().hash(&mut hasher);
        format!("{:016x}", hasher.finish())
    }

    /// The configuration of skill `name` as its hooks receive it
    /// (`config_json`): its `[skills.<name>]` table as JSON, `{}` when it
    /// has none.
    pub fn skill_config(&self, name: &str) -> &str {
        self.skills.get(name).map_or("{}", String::as_str)
    }

    /// The isolation rules of the registry: drop-in skills in cells, the
    /// first-party ones as `plugins.builtin_isolation` says, and each
    /// skill's `[skills.<name>]` keys.
    pub fn isolation(&self) -> foveal_registry::isolation::IsolationPolicy {
        foveal_registry::isolation::IsolationPolicy {
            builtin: self.plugins.builtin_isolation,
            skills: self.skill_isolation.clone(),
            pinned: self.plugins.trusted.iter().copied().collect(),
            ..foveal_registry::isolation::IsolationPolicy::default()
        }
    }

    /// Where the private-text matcher is kept between processes:
    /// `<data dir>/index/private.keys` (the folder 0700, the file 0600).
    /// One file for the data dir: a process on another memex or other
    /// privacy tags finds it of another digest and writes its own.
    pub fn private_index_path(&self) -> PathBuf {
        self.data_dir.join("index").join("private.keys")
    }

    /// Where shadow copies of skill libraries go.
    pub fn shadow_dir(&self) -> PathBuf {
        self.data_dir.join("shadow")
    }
}

/// Values given as command-line flags; they win over everything else.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--config PATH`.
    pub config: Option<PathBuf>,
    /// `--plugins DIR`.
    pub plugins: Option<PathBuf>,
    /// `--no-builtin` gives `Some(false)`.
    pub builtin: Option<bool>,
    /// `--memex PATH`, repeatable.
    pub memex: Vec<PathBuf>,
    /// `--privacy-tag TAG`, repeatable: added to `privacy.tags` (a flag can
    /// make more private, never less).
    pub privacy_tags: Vec<String>,
    /// `--provider local|openai`.
    pub provider: Option<foveal_provider::ProviderKind>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    plugins: FilePlugins,
    #[serde(default)]
    context: FileContext,
    #[serde(default)]
    awareness: FileAwareness,
    #[serde(default)]
    computed_context: FileComputed,
    #[serde(default)]
    data: FileData,
    #[serde(default)]
    memex: FileMemex,
    #[serde(default)]
    privacy: FilePrivacy,
    #[serde(default)]
    provider: foveal_provider::settings::FileProvider,
    #[serde(default)]
    embedding: foveal_embed::settings::FileEmbedding,
    #[serde(default)]
    agent: crate::settings::FileAgent,
    #[serde(default)]
    identity: foveal_prompt::prompt::settings::FileIdentity,
    #[serde(default)]
    model: foveal_prompt::prompt::settings::FileModel,
    #[serde(default)]
    prices: std::collections::BTreeMap<String, foveal_prompt::prompt::settings::FilePrices>,
    #[serde(default)]
    context_types: std::collections::BTreeMap<
        Spanned<String>,
        foveal_prompt::prompt::settings::FileContextType,
    >,
    #[serde(default)]
    execution: FileExecution,
    #[serde(default)]
    window: FileWindow,
    /// `[skills.<name>]`: free-form, each skill reads its own.
    #[serde(default)]
    skills: std::collections::BTreeMap<String, toml::Table>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileWindow {
    // Signed, so that a negative value gets the range message too.
    max_items: Option<Spanned<i64>>,
    max_tokens: Option<Spanned<u32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileExecution {
    multi_action_enabled: Option<bool>,
    // Signed, so that a negative value gets the range message too.
    max_iterations_per_tick: Option<Spanned<i64>>,
    task_assessment_enabled: Option<bool>,
    sub_agents_enabled: Option<bool>,
    sub_agent_budget: Option<Spanned<u32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMemex {
    paths: Option<Vec<String>>,
    todo_keywords: Option<Vec<Spanned<String>>>,
    max_file_mib: Option<Spanned<u32>>,
    index: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePrivacy {
    tags: Option<Vec<String>>,
    patterns: Option<Vec<FilePattern>>,
    default_patterns: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePattern {
    name: Spanned<String>,
    regex: Spanned<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePlugins {
    dir: Option<String>,
    builtin: Option<bool>,
    watch: Option<bool>,
    quarantine_after: Option<Spanned<u32>>,
    max_loads: Option<Spanned<u32>>,
    max_load_mib: Option<Spanned<u32>>,
    hook_timeout_ms: Option<Spanned<u64>>,
    debounce_ms: Option<Spanned<u64>>,
    trusted: Option<Vec<Spanned<String>>>,
    require_trusted: Option<bool>,
    builtin_isolation: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileContext {
    max_tokens: Option<Spanned<u32>>,
    semantic_threshold: Option<Spanned<f64>>,
    log_limit: Option<Spanned<usize>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAwareness {
    projects: Option<Vec<Spanned<String>>>,
    map: Option<bool>,
    format: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileComputed {
    debug: Option<bool>,
    default_complexity: Option<Spanned<String>>,
    context_map: Option<String>,
    knowledge: Option<String>,
    domains: Option<Vec<FileDomain>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDomain {
    name: String,
    triggers: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileData {
    dir: Option<String>,
}

impl Config {
    /// Finds, reads and resolves the configuration.
    pub fn load(overrides: &Overrides, env: EnvLookup<'_>) -> Result<Self, ConfigError> {
        let (path, text) = match find_file(overrides, env)? {
            Some(path) => {
                let text = read_trusted(&path)?;
                (Some(path), text)
            }
            None => (None, String::new()),
        };
        Self::from_toml(&text, path.as_deref(), overrides, env)
    }

    /// Resolves the configuration from the text of a file (`path` names it
    /// in errors and anchors its relative paths).
    pub fn from_toml(
        text: &str,
        path: Option<&Path>,
        overrides: &Overrides,
        env: EnvLookup<'_>,
    ) -> Result<Self, ConfigError> {
        let shown = path
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("<config>"));
        let file: FileConfig =
            toml::from_str(text).map_err(|e| invalid_from_toml(&shown, text, &e))?;
        let base = path
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let check = Checker { text, path: &shown };

        let mut plugins = PluginSettings {
            dir: PathBuf::from("plugins"),
            builtin: file.plugins.builtin.unwrap_or(true),
            watch: file.plugins.watch.unwrap_or(true),
            quarantine_after: check
                .range(
                    &file.plugins.quarantine_after,
                    "plugins.quarantine_after",
                    1,
                    u32::MAX,
                    "",
                )?
                .unwrap_or(3),
            max_loads: check
                .range(
                    &file.plugins.max_loads,
                    "plugins.max_loads",
                    1,
                    u32::MAX,
                    "",
                )?
                .unwrap_or(500),
            max_load_mib: check
                .range(
                    &file.plugins.max_load_mib,
                    "plugins.max_load_mib",
                    1,
                    u32::MAX,
                    "",
                )?
                .unwrap_or(1024),
            hook_timeout_ms: check
                .range(
                    &file.plugins.hook_timeout_ms,
                    "plugins.hook_timeout_ms",
                    1,
                    86_400_000,
                    "",
                )?
                .unwrap_or(foveal_registry::registry::DEFAULT_HOOK_TIMEOUT_MS),
            debounce_ms: check
                .range(
                    &file.plugins.debounce_ms,
                    "plugins.debounce_ms",
                    0,
                    10_000,
                    " (10 s)",
                )?
                .unwrap_or(100),
            trusted: check.digests(file.plugins.trusted.as_deref().unwrap_or_default())?,
            require_trusted: file.plugins.require_trusted.unwrap_or(false),
            builtin_isolation: match &file.plugins.builtin_isolation {
                None => foveal_registry::isolation::Where::InProcess,
                Some(value) => foveal_registry::isolation::Where::parse(value.get_ref()).ok_or_else(|| {
                    let (line, column) = line_column(text, value.span().start);
                    ConfigError::Invalid {
                        path: check.path.to_owned(),
                        line,
                        column,
                        key: Some("plugins.builtin_isolation".to_owned()),
                        message: format!(
                            "`plugins.builtin_isolation`: {:?} is not a place to run; write \"cell\" or \"in-process\"",
                            value.get_ref()
                        ),
                    }
                })?,
            },
        };
        if let Some(dir) = &file.plugins.dir {
            plugins.dir = base.join(resolve_path(dir, env));
        }

        let mut context = ContextSettings {
            max_tokens: check
                .range(
                    &file.context.max_tokens,
                    "context.max_tokens",
                    1,
                    u32::MAX,
                    "",
                )?
                .unwrap_or(16_384),
            semantic_threshold: check
                .range(
                    &file.context.semantic_threshold,
                    "context.semantic_threshold",
                    -1.0,
                    1.0,
                    ": a cosine similarity (default 0.75)",
                )?
                .unwrap_or(0.75),
            log_limit: file.context.log_limit.as_ref().map_or(20, |v| *v.get_ref()),
        };

        let defaults = WindowSettings::default();
        let mut window = WindowSettings {
            max_items: check
                .range(
                    &file.window.max_items,
                    "window.max_items",
                    1,
                    1000,
                    " (seed 002; default 50)",
                )?
                // In range, so it fits.
                .map_or(defaults.max_items, |v| v as usize),
            max_tokens: check
                .range(
                    &file.window.max_tokens,
                    "window.max_tokens",
                    0,
                    u32::MAX,
                    "",
                )?
                .unwrap_or(defaults.max_tokens),
        };
        let awareness = check.awareness(&file.awareness)?;
        let mut computed = check.computed(&file.computed_context)?;

        let mut data_dir = file
            .data
            .dir
            .as_deref()
            .map(|d| base.join(resolve_path(d, env)));

        // The environment wins over the file.
        if let Some(value) = env("FOVEAL_PLUGINS").filter(|v| !v.is_empty()) {
            plugins.dir = resolve_path(&value, env);
        }
        if let Some(value) = env("FOVEAL_DATA_DIR").filter(|v| !v.is_empty()) {
            data_dir = Some(resolve_path(&value, env));
        }
        if let Some(n) = env_number::<u32>(env, "FOVEAL_QUARANTINE_AFTER", 1, u32::MAX)? {
            plugins.quarantine_after = n;
        }
        if let Some(n) = env_number::<u32>(env, "CONTEXT_MAX_TOKENS", 1, u32::MAX)? {
            context.max_tokens = n;
        }
        if let Some(n) = env_number::<usize>(env, "CONTEXT_LOG_LIMIT", 0, usize::MAX)? {
            context.log_limit = n;
        }
        if let Some(t) = env_number::<f64>(env, "CONTEXT_SEMANTIC_THRESHOLD", -1.0, 1.0)? {
            context.semantic_threshold = t;
        }
        if let Some(n) = env_number::<usize>(env, "CONTEXT_WINDOW_MAX_ITEMS", 1, 1000)? {
            window.max_items = n;
        }
        if let Some(n) = env_number::<u32>(env, "CONTEXT_WINDOW_MAX_TOKENS", 0, u32::MAX)? {
            window.max_tokens = n;
        }

        // Seed 001's switch for the "Context Debug" report.
        if let Some(value) = env("DEBUG_CONTEXT").filter(|v| !v.trim().is_empty()) {
            computed.debug = match value.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => {
                    return Err(ConfigError::Env {
                        name: "DEBUG_CONTEXT",
                        value,
                        message: "expected true or false".to_owned(),
                    });
                }
            };
        }
        if let Some(value) = env("FOVEAL_BUILTIN").filter(|v| !v.trim().is_empty()) {
            plugins.builtin = match value.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => {
                    return Err(ConfigError::Env {
                        name: "FOVEAL_BUILTIN",
                        value,
                        message: "expected true or false".to_owned(),
                    });
                }
            };
        }

        if let Some(value) = env("FOVEAL_BUILTIN_ISOLATION").filter(|v| !v.trim().is_empty()) {
            plugins.builtin_isolation = foveal_registry::isolation::Where::parse(value.trim())
                .ok_or_else(|| ConfigError::Env {
                    name: "FOVEAL_BUILTIN_ISOLATION",
                    value: value.clone(),
                    message: "expected cell or in-process".to_owned(),
                })?;
        }

        // Flags win over both.
        if let Some(dir) = &overrides.plugins {
            plugins.dir = dir.clone();
        }
        if let Some(builtin) = overrides.builtin {
            plugins.builtin = builtin;
        }

        let mut skills = std::collections::BTreeMap::new();
        let mut skill_isolation = std::collections::BTreeMap::new();
        for (name, table) in &file.skills {
            let mut table = table.clone();
            let isolation =
                foveal_registry::isolation::SkillIsolation::take_from(&mut table, |p| {
                    base.join(resolve_path(p, env))
                })
                .map_err(|(key, message)| {
                    let header = format!("[skills.{name}]");
                    let offset = text.find(&header).unwrap_or(0);
                    let (line, column) = line_column(text, offset);
                    ConfigError::Invalid {
                        path: check.path.to_owned(),
                        line,
                        column,
                        key: Some(format!("skills.{name}.{key}")),
                        message: format!("`skills.{name}.{key}`: {message}"),
                    }
                })?;
            let json = serde_json::to_string(&table).unwrap_or_else(|_| "{}".to_owned());
            skills.insert(name.clone(), json);
            if isolation != foveal_registry::isolation::SkillIsolation::default() {
                skill_isolation.insert(name.clone(), isolation);
            }
        }

        let data_dir = data_dir.unwrap_or_else(default_data_dir);
        let mut memex_paths: Vec<PathBuf> = match &file.memex.paths {
            Some(paths) => paths
                .iter()
                .map(|p| base.join(resolve_path(p, env)))
                .collect(),
            None => vec![data_dir.join("memex")],
        };
        if let Some(value) = env("FOVEAL_MEMEX").filter(|v| !v.trim().is_empty()) {
            memex_paths = std::env::split_paths(&value)
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| resolve_path(&p.to_string_lossy(), env))
                .collect();
        }
        if !overrides.memex.is_empty() {
            memex_paths = overrides.memex.clone();
        }
        let mut memex = check.memex(&file.memex)?;
        let memex_index = file.memex.index.unwrap_or(true);
        memex.vector_store = memex_index.then(|| data_dir.join("index").join("vectors"));
        let mut privacy_tags = file
            .privacy
            .tags
            .clone()
            .unwrap_or_else(|| vec!["@personal".to_owned()]);
        privacy_tags.extend(overrides.privacy_tags.iter().cloned());
        let privacy_default_patterns = file.privacy.default_patterns.unwrap_or(true);
        let privacy_patterns = check.patterns(
            file.privacy.patterns.as_deref().unwrap_or_default(),
            privacy_default_patterns,
        )?;
        let provider = foveal_provider::settings::resolve(
            &file.provider,
            text,
            &shown,
            &base,
            overrides.provider,
            env,
        )?;
        let embedding =
            foveal_embed::settings::resolve(&file.embedding, text, &shown, &base, &provider, env)?;
        let prompt = foveal_prompt::prompt::settings::resolve(
            foveal_prompt::prompt::settings::FileParts {
                identity: &file.identity,
                model: &file.model,
                prices: &file.prices,
                context_types: &file.context_types,
            },
            text,
            &shown,
            &base,
            env,
        )?;
        let execution = check.execution(&file.execution)?;
        let agent = crate::settings::resolve(&file.agent, text, &shown, &base, env)?;
        Ok(Self {
            file: path.map(Path::to_path_buf),
            agent,
            plugins,
            context,
            window,
            awareness,
            computed,
            data_dir,
            memex_paths,
            memex,
            memex_index,
            privacy_tags,
            privacy_patterns,
            privacy_default_patterns,
            provider,
            embedding,
            prompt,
            execution,
            skills,
            skill_isolation,
        })
    }
}

/// Checks values read from the file against their ranges, reporting the
/// file, line and key of a bad one.
struct Checker<'a> {
    text: &'a str,
    path: &'a Path,
}

impl Checker<'_> {
    /// The value, if set, when `min <= value <= max`; `max` equal to the
    /// type's maximum means "no upper bound".
    fn range<T>(
        &self,
        value: &Option<Spanned<T>>,
        key: &str,
        min: T,
        max: T,
        hint: &str,
    ) -> Result<Option<T>, ConfigError>
    where
        T: Copy + PartialOrd + std::fmt::Display + Bounded,
    {
        let Some(spanned) = value else {
            return Ok(None);
        };
        let v = *spanned.get_ref();
        if v >= min && v <= max {
            return Ok(Some(v));
        }
        let (line, column) = line_column(self.text, spanned.span().start);
        let wanted = if max == T::MAX {
            format!("must be at least {min}")
        } else {
            format!("must be from {min} to {max}")
        };
        Err(ConfigError::Invalid {
            path: self.path.to_owned(),
            line,
            column,
            key: Some(key.to_owned()),
            message: format!("`{key}`: {v} is out of range; {wanted}{hint}"),
        })
    }
}

impl Checker<'_> {
    /// `[computed_context]`: the complexity a known one.
    fn computed(
        &self,
        file: &FileComputed,
    ) -> Result<foveal_prompt::computed::ComputedSettings, ConfigError> {
        let mut settings = foveal_prompt::computed::ComputedSettings::default();
        if let Some(debug) = file.debug {
            settings.debug = debug;
        }
        if let Some(value) = &file.default_complexity {
            let name = value.get_ref().trim().to_ascii_lowercase();
            if !["easy", "normal", "complex"].contains(&name.as_str()) {
                let (line, column) = line_column(self.text, value.span().start);
                return Err(ConfigError::Invalid {
                    path: self.path.to_owned(),
                    line,
                    column,
                    key: Some("computed_context.default_complexity".to_owned()),
                    message: format!(
                        "`computed_context.default_complexity`: {name:?} is not a complexity; use \"easy\", \"normal\" or \"complex\" (seed 001's limits table)"
                    ),
                });
            }
            settings.default_complexity = name;
        }
        if let Some(map) = &file.context_map {
            settings.context_map.clone_from(map);
        }
        if let Some(knowledge) = &file.knowledge {
            settings.knowledge.clone_from(knowledge);
        }
        if let Some(domains) = &file.domains {
            settings.domains = Some(
                domains
                    .iter()
                    .map(|d| (d.name.clone(), d.triggers.clone()))
                    .collect(),
            );
        }
        Ok(settings)
    }

    /// `[memex]`: `todo_keywords`, each a sequence as Emacs'
    /// `org-todo-keywords` writes one (an error points at the bad one), and
    /// `max_file_mib`, the largest file read.
    fn memex(&self, file: &FileMemex) -> Result<foveal_memex::MemexOptions, ConfigError> {
        let mut options = foveal_memex::MemexOptions {
            max_file_mib: self.range(&file.max_file_mib, "memex.max_file_mib", 1, 65_536, "")?,
            ..foveal_memex::MemexOptions::default()
        };
        if let Some(sequences) = &file.todo_keywords {
            for value in sequences {
                foveal_memex::parse::TodoKeywords::from_sequences(&[value.get_ref()]).map_err(
                    |message| {
                        let (line, column) = line_column(self.text, value.span().start);
                        ConfigError::Invalid {
                            path: self.path.to_owned(),
                            line,
                            column,
                            key: Some("memex.todo_keywords".to_owned()),
                            message: format!(
                                "`memex.todo_keywords`: {message}; write a sequence as \"TODO NEXT | DONE CNCL\""
                            ),
                        }
                    },
                )?;
            }
            let all: Vec<&str> = sequences.iter().map(|v| v.get_ref().as_str()).collect();
            if !all.is_empty() {
                options.todo_keywords =
                    foveal_memex::parse::TodoKeywords::from_sequences(&all).ok();
            }
        }
        Ok(options)
    }

    /// `[awareness]`: each project rule a known one; an error points at
    /// the bad one and suggests the closest.
    fn awareness(&self, file: &FileAwareness) -> Result<AwarenessSettings, ConfigError> {
        use foveal_prompt::context::ProjectRule;
        let mut settings = AwarenessSettings::default();
        if let Some(values) = &file.projects {
            settings.projects = Vec::with_capacity(values.len());
            for value in values {
                let name = value.get_ref().trim();
                let Some(rule) = ProjectRule::parse(name) else {
                    let (line, column) = line_column(self.text, value.span().start);
                    let known: Vec<String> = ProjectRule::ALL
                        .iter()
                        .map(|r| r.name().to_owned())
                        .collect();
                    let mut message = format!("`awareness.projects`: unknown rule {name:?}");
                    if let Some(best) = closest(name, &known) {
                        message.push_str(&format!("; did you mean {best:?}?"));
                    }
                    message.push_str(&format!(" The rules: {}.", known.join(", ")));
                    return Err(ConfigError::Invalid {
                        path: self.path.to_owned(),
                        line,
                        column,
                        key: Some("awareness.projects".to_owned()),
                        message,
                    });
                };
                if !settings.projects.contains(&rule) {
                    settings.projects.push(rule);
                }
            }
        }
        if let Some(map) = file.map {
            settings.map = map;
        }
        if let Some(value) = &file.format {
            use foveal_prompt::context::OutlineFormat;
            let name = value.get_ref().trim();
            settings.format = OutlineFormat::parse(name).ok_or_else(|| {
                let (line, column) = line_column(self.text, value.span().start);
                ConfigError::Invalid {
                    path: self.path.to_owned(),
                    line,
                    column,
                    key: Some("awareness.format".to_owned()),
                    message: format!(
                        "`awareness.format`: unknown format {name:?}; the formats: compact (one line per headline, with a handle), seed (seed 000's property drawers)."
                    ),
                }
            })?;
        }
        Ok(settings)
    }

    /// `plugins.trusted`: each entry a digest as `foveal skill trust`
    /// prints it; an error points at the bad one.
    fn digests(
        &self,
        values: &[Spanned<String>],
    ) -> Result<Vec<foveal_registry::trust::Sha256>, ConfigError> {
        values
            .iter()
            .map(|value| {
                value.get_ref().trim().parse().map_err(|wanted| {
                    let (line, column) = line_column(self.text, value.span().start);
                    ConfigError::Invalid {
                        path: self.path.to_owned(),
                        line,
                        column,
                        key: Some("plugins.trusted".to_owned()),
                        message: format!("`plugins.trusted`: {:?}: {wanted}", value.get_ref()),
                    }
                })
            })
            .collect()
    }

    /// `[execution]`, the seed's `db.execution_config`: its defaults for
    /// what is not set.
    fn execution(
        &self,
        file: &FileExecution,
    ) -> Result<foveal_prompt::execution::ExecutionConfig, ConfigError> {
        use foveal_prompt::execution::{ExecutionConfig, MAX_ITERATIONS, MIN_ITERATIONS};
        let defaults = ExecutionConfig::default();
        Ok(ExecutionConfig {
            multi_action_enabled: file
                .multi_action_enabled
                .unwrap_or(defaults.multi_action_enabled),
            max_iterations_per_tick: self
                .range(
                    &file.max_iterations_per_tick,
                    "execution.max_iterations_per_tick",
                    i64::from(MIN_ITERATIONS),
                    i64::from(MAX_ITERATIONS),
                    ": tool calls per cycle, at most",
                )?
                // In range, so it fits.
                .map_or(defaults.max_iterations_per_tick, |v| v as u32),
            task_assessment_enabled: file
                .task_assessment_enabled
                .unwrap_or(defaults.task_assessment_enabled),
            sub_agents_enabled: file
                .sub_agents_enabled
                .unwrap_or(defaults.sub_agents_enabled),
            sub_agent_budget: self
                .range(
                    &file.sub_agent_budget,
                    "execution.sub_agent_budget",
                    1,
                    u32::MAX,
                    ": sub-agents running at once, at most",
                )?
                .unwrap_or(defaults.sub_agent_budget),
        })
    }

    /// The secret patterns, each checked (name, regex, no clash with another
    /// or, when `defaults`, with a default); an error points at the bad value.
    fn patterns(
        &self,
        patterns: &[FilePattern],
        defaults: bool,
    ) -> Result<Vec<foveal_redact::Pattern>, ConfigError> {
        let mut out: Vec<foveal_redact::Pattern> = Vec::with_capacity(patterns.len());
        for p in patterns {
            let pattern = foveal_redact::Pattern::new(p.name.get_ref(), p.regex.get_ref());
            let clash = out.iter().any(|o| o.name == pattern.name)
                || (defaults
                    && foveal_redact::DEFAULT_PATTERNS
                        .iter()
                        .any(|(name, _)| *name == pattern.name));
            let result = if clash {
                Err(foveal_redact::PatternError::Duplicate {
                    name: pattern.name.clone(),
                })
            } else {
                pattern.check()
            };
            if let Err(error) = result {
                let (key, at) = match error {
                    foveal_redact::PatternError::InvalidRegex { .. } => ("regex", &p.regex),
                    _ => ("name", &p.name),
                };
                let (line, column) = line_column(self.text, at.span().start);
                let key = format!("privacy.patterns.{key}");
                return Err(ConfigError::Invalid {
                    path: self.path.to_owned(),
                    line,
                    column,
                    message: format!("`{key}`: {error}"),
                    key: Some(key),
                });
            }
            out.push(pattern);
        }
        Ok(out)
    }
}

/// Numbers with a largest value.
trait Bounded {
    const MAX: Self;
}

impl Bounded for u32 {
    const MAX: Self = u32::MAX;
}

impl Bounded for u64 {
    const MAX: Self = u64::MAX;
}

impl Bounded for i64 {
    const MAX: Self = i64::MAX;
}

impl Bounded for f64 {
    const MAX: Self = f64::MAX;
}

/// The text of the config file at `path`, if nobody but the user or root can
/// change it. Judged on the open descriptor, so the file judged is the file
/// read.
fn read_trusted(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read as _;
    let read = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read)?;
    let meta = file.metadata().map_err(read)?;
    foveal_registry::trust::check(path, &meta).map_err(|e| ConfigError::Unsafe(Box::new(e)))?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(read)?;
    Ok(text)
}

/// The config file the rules of the module docs find, if any.
pub fn find_file(
    overrides: &Overrides,
    env: EnvLookup<'_>,
) -> Result<Option<PathBuf>, ConfigError> {
    if let Some(path) = &overrides.config {
        return if path.is_file() {
            Ok(Some(path.clone()))
        } else {
            Err(ConfigError::Missing {
                path: path.clone(),
                origin: "--config",
            })
        };
    }
    if let Some(value) = env("FOVEAL_CONFIG").filter(|v| !v.is_empty()) {
        let path = resolve_path(&value, env);
        return if path.is_file() {
            Ok(Some(path))
        } else {
            Err(ConfigError::Missing {
                path,
                origin: "FOVEAL_CONFIG",
            })
        };
    }
    let local = PathBuf::from("config/foveal.toml");
    if local.is_file() {
        return Ok(Some(local));
    }
    Ok(user_file(env).filter(|p| p.is_file()))
}

/// The user's own config file, `$XDG_CONFIG_HOME/foveal/foveal.toml`,
/// whether or not it exists.
pub fn user_file(env: EnvLookup<'_>) -> Option<PathBuf> {
    env("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(dirs::config_dir)
        .map(|d| d.join("foveal/foveal.toml"))
}

fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .map(|d| d.join("foveal"))
        .unwrap_or_else(|| PathBuf::from(".foveal"))
}

fn env_number<T>(
    env: EnvLookup<'_>,
    name: &'static str,
    min: T,
    max: T,
) -> Result<Option<T>, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let Some(value) = env(name) else {
        return Ok(None);
    };
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    match trimmed.parse::<T>() {
        Ok(n) if n >= min && n <= max => Ok(Some(n)),
        Ok(_) => Err(ConfigError::Env {
            name,
            value,
            message: format!("must be from {min} to {max}"),
        }),
        Err(_) => Err(ConfigError::Env {
            name,
            value,
            message: "not a number".to_owned(),
        }),
    }
}

/// The `table.key` an error at `offset` is about: the key on that line,
/// under the nearest `[table]` header above it.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    let key = line.split('=').next()?.trim().trim_matches('"');
    if key.is_empty() || key.starts_with('[') || key.starts_with('#') {
        return None;
    }
    let table = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('[') && !l.starts_with("[["))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_owned());
    Some(match table {
        Some(t) if !t.is_empty() => format!("{t}.{key}"),
        _ => key.to_owned(),
    })
}

fn invalid_from_toml(path: &Path, text: &str, error: &toml::de::Error) -> ConfigError {
    let offset = error.span().map_or(0, |s| s.start);
    let (line, column) = line_column(text, offset);
    let key = key_at(text, offset);
    let raw = error.message().trim().to_owned();
    let message = match unknown_field(&raw) {
        Some((unknown, known)) => {
            let shown = key.clone().unwrap_or_else(|| unknown.clone());
            let mut m = format!("unknown key `{shown}`");
            match closest(&unknown, &known) {
                Some(best) => m.push_str(&format!("; did you mean `{best}`?")),
                None => m.push('.'),
            }
            if !known.is_empty() {
                m.push_str(&format!(" Known keys here: {}.", known.join(", ")));
            }
            m
        }
        None => match &key {
            Some(k) => format!("`{k}`: {raw}"),
            None => raw,
        },
    };
    ConfigError::Invalid {
        path: path.to_owned(),
        line,
        column,
        key,
        message,
    }
}

/// Parses serde's "unknown field `x`, expected one of `a`, `b`" (or
/// "expected `a`").
fn unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (unknown, rest) = rest.split_once('`')?;
    let known = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    Some((unknown.to_owned(), known))
}

/// The prompt's settings are read from the whole configuration here, so
/// that the prompt module imports no aggregate.
impl From<&Config> for foveal_prompt::prompt::PromptSettings {
    /// The settings of `config`.
    fn from(config: &Config) -> Self {
        Self {
            prompt: config.prompt.clone(),
            max_tokens: config.context.max_tokens,
            semantic_threshold: config.context.semantic_threshold,
            awareness: config.awareness.clone(),
            log_limit: config.context.log_limit,
            privacy_tags: config.privacy_tags.clone(),
            computed: config.computed.clone(),
            skills: config.skills.clone(),
        }
    }
}

/// The gate reads its settings from the whole configuration here, so that
/// the egress module imports no aggregate.
impl foveal_gate::PrivacyConfig for Config {
    fn privacy_tags(&self) -> &[String] {
        &self.privacy_tags
    }

    fn privacy_patterns(&self) -> &[foveal_redact::Pattern] {
        &self.privacy_patterns
    }

    fn privacy_default_patterns(&self) -> bool {
        self.privacy_default_patterns
    }

    fn privacy_index(&self) -> Option<PathBuf> {
        self.memex_index.then(|| self.private_index_path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(
            text,
            Some(Path::new("conf/foveal.toml")),
            &Overrides::default(),
            &no_env,
        )
    }

    #[test]
    fn the_prompt_id_leaves_out_the_provider_and_nothing_else() {
        let plain = parse("").unwrap();
        let other_provider = parse("[provider]\nkind = \"openai\"\n").unwrap();
        assert_ne!(plain.provider, other_provider.provider);
        assert_ne!(plain.id(), other_provider.id());
        assert_eq!(plain.prompt_id(), other_provider.prompt_id());
        let other_tags = parse("[privacy]\ntags = [\"@work\"]\n").unwrap();
        assert_ne!(plain.prompt_id(), other_tags.prompt_id());
        let other_budget = parse("[context]\nmax_tokens = 1234\n").unwrap();
        assert_ne!(plain.prompt_id(), other_budget.prompt_id());
        assert_ne!(plain.prompt_id(), plain.id());
    }

    #[test]
    fn awareness_rules_are_named_and_checked() {
        use foveal_prompt::context::ProjectRule;
        let c = parse("").unwrap();
        assert_eq!(c.awareness, AwarenessSettings::default());
        assert_eq!(c.awareness.projects, ProjectRule::ALL);
        assert!(c.awareness.map);
        let c = parse("[awareness]\nprojects = [\"tag\"]\nmap = false\n").unwrap();
        assert_eq!(c.awareness.projects, [ProjectRule::Tag]);
        assert!(!c.awareness.map);
        assert_eq!(
            c.awareness.format,
            foveal_prompt::context::OutlineFormat::Compact
        );
        let c = parse(
            "[memex]\ntodo_keywords = [\"TODO(t) NEXT WAIT(w@/!) | DONE CNCL(c@)\", \"PROJ | DONE\"]\n",
        )
        .unwrap();
        let keywords = c.memex.todo_keywords.unwrap();
        assert_eq!(keywords.todo, ["TODO", "NEXT", "WAIT", "PROJ"]);
        assert_eq!(keywords.done, ["DONE", "CNCL"]);
        assert_eq!(parse("").unwrap().memex.todo_keywords, None);
        assert_eq!(parse("").unwrap().memex.max_file_mib, None);
        let c = parse("[memex]\nmax_file_mib = 1024\n").unwrap();
        assert_eq!(c.memex.max_file_bytes(), 1 << 30);
        use foveal_gate::PrivacyConfig as _;
        assert_eq!(
            c.privacy_index(),
            Some(c.data_dir.join("index").join("private.keys"))
        );
        assert_eq!(
            parse("[memex]\nindex = false\n").unwrap().privacy_index(),
            None
        );
        let err = parse("[memex]\nmax_file_mib = 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`memex.max_file_mib`: 0 is out of range; must be from 1 to 65536"),
            "{err}"
        );
        let err = parse("[memex]\ntodo_keywords = [\"A | B | C\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "conf/foveal.toml:2:18: `memex.todo_keywords`: \"A | B | C\" has two `|`"
            ),
            "{err}"
        );
        let c = parse("[awareness]\nformat = \"seed\"\n").unwrap();
        assert_eq!(
            c.awareness.format,
            foveal_prompt::context::OutlineFormat::Seed
        );
        let err = parse("[awareness]\nformat = \"terse\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("conf/foveal.toml:2:10: `awareness.format`: unknown format \"terse\""),
            "{err}"
        );
        let c = parse("[awareness]\nprojects = []\n").unwrap();
        assert!(c.awareness.projects.is_empty());
        let err = parse("[awareness]\nprojects = [\"tag\", \"gdt\"]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "conf/foveal.toml:2:20: `awareness.projects`: unknown rule \"gdt\"; did you mean \"gtd\"? The rules: tag, keyword, gtd, heading."
        );
    }

    #[test]
    fn defaults_match_the_seeds() {
        let c = parse("").unwrap();
        assert_eq!(c.context.max_tokens, 16_384);
        assert_eq!(c.context.semantic_threshold, 0.75);
        assert_eq!(c.context.log_limit, 20);
        assert_eq!(c.plugins.quarantine_after, 3);
        assert!(c.plugins.builtin && c.plugins.watch);
    }

    #[test]
    fn the_repository_default_file_parses_to_the_defaults_but_for_its_example_memex() {
        let text = include_str!("../../config/foveal.toml");
        let path = Path::new("config/foveal.toml");
        let mut from_file =
            Config::from_toml(text, Some(path), &Overrides::default(), &no_env).unwrap();
        let defaults = Config::from_toml("", None, &Overrides::default(), &no_env).unwrap();
        assert_eq!(from_file.memex_paths, [PathBuf::from("config/memex")]);
        from_file.memex_paths = defaults.memex_paths.clone();
        from_file.file = None;
        assert_eq!(from_file, defaults);
    }

    #[test]
    fn unknown_key_names_file_line_and_suggests_the_closest() {
        let err = parse("[plugins]\nwatch = true\nquarantine_afer = 2\n").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("conf/foveal.toml:3:1: unknown key `plugins.quarantine_afer`; did you mean `quarantine_after`?"), "{text}");
    }

    #[test]
    fn the_window_bounds_are_checked_and_the_environment_wins() {
        let c = parse("").unwrap();
        assert_eq!(c.window, WindowSettings::default());
        assert_eq!((c.window.max_items, c.window.max_tokens), (50, 4096));
        let err = parse("[window]\nmax_items = 0\n").unwrap_err().to_string();
        assert!(
            err.starts_with("conf/foveal.toml:2:13: `window.max_items`: 0 is out of range; must be from 1 to 1000"),
            "{err}"
        );
        assert!(parse("[window]\nmax_items = -3\n").is_err());
        assert!(parse("[window]\nmax_items = 1001\n").is_err());
        let c = parse("[window]\nmax_items = 1000\nmax_tokens = 0\n").unwrap();
        assert_eq!((c.window.max_items, c.window.max_tokens), (1000, 0));
        let env = |name: &str| match name {
            "CONTEXT_WINDOW_MAX_ITEMS" => Some("7".to_owned()),
            "CONTEXT_WINDOW_MAX_TOKENS" => Some("100".to_owned()),
            _ => None,
        };
        let c = Config::from_toml(
            "[window]\nmax_items = 9\n",
            None,
            &Overrides::default(),
            &env,
        )
        .unwrap();
        assert_eq!((c.window.max_items, c.window.max_tokens), (7, 100));
        let bad = |name: &str| (name == "CONTEXT_WINDOW_MAX_ITEMS").then(|| "0".to_owned());
        assert!(Config::from_toml("", None, &Overrides::default(), &bad).is_err());
    }

    #[test]
    fn unknown_table_is_rejected() {
        let err = parse("[plugin]\ndir = \"x\"\n").unwrap_err().to_string();
        assert!(err.contains("did you mean `plugins`?"), "{err}");
    }

    #[test]
    fn bad_value_names_the_key_and_line() {
        let err = parse("[context]\n\nsemantic_threshold = 3.5\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("conf/foveal.toml:3:22: `context.semantic_threshold`: 3.5 is out of range; must be from -1 to 1: a cosine similarity"), "{err}");
        let err = parse("[context]\nmax_tokens = \"lots\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("conf/foveal.toml:2:14: `context.max_tokens`:"),
            "{err}"
        );
        let err = parse("[plugins]\nquarantine_after = 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`plugins.quarantine_after`: 0 is out of range; must be at least 1"),
            "{err}"
        );
    }

    #[test]
    fn the_execution_section_is_read_with_the_seed_defaults() {
        let c = parse("").unwrap();
        assert_eq!(
            c.execution,
            foveal_prompt::execution::ExecutionConfig::default()
        );
        assert!(c.execution.multi_action_enabled);
        assert_eq!(c.execution.max_iterations_per_tick, 5);
        assert!(!c.execution.task_assessment_enabled && !c.execution.sub_agents_enabled);
        assert_eq!(c.execution.sub_agent_budget, 3);
        let text = "[execution]\nmulti_action_enabled = false\nmax_iterations_per_tick = 10\ntask_assessment_enabled = true\nsub_agents_enabled = true\nsub_agent_budget = 1\n";
        let c = parse(text).unwrap();
        assert_eq!(
            c.execution,
            foveal_prompt::execution::ExecutionConfig {
                multi_action_enabled: false,
                max_iterations_per_tick: 10,
                task_assessment_enabled: true,
                sub_agents_enabled: true,
                sub_agent_budget: 1,
            }
        );
    }

    #[test]
    fn a_bad_execution_value_names_the_key_and_the_range() {
        for (value, column) in [("0", 27), ("11", 27), ("-1", 27)] {
            let err = parse(&format!("[execution]\nmax_iterations_per_tick = {value}\n"))
                .unwrap_err()
                .to_string();
            assert_eq!(
                err,
                format!(
                    "conf/foveal.toml:2:{column}: `execution.max_iterations_per_tick`: {value} is out of range; must be from 1 to 10: tool calls per cycle, at most"
                )
            );
        }
        let err = parse("[execution]\nsub_agent_budget = 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`execution.sub_agent_budget`: 0 is out of range; must be at least 1"),
            "{err}"
        );
        let err = parse("[execution]\nmulti_action = true\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("conf/foveal.toml:2:1: unknown key `execution.multi_action`; did you mean `multi_action_enabled`?"),
            "{err}"
        );
        let err = parse("[execution]\nsub_agents_enabled = \"yes\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("conf/foveal.toml:2:22: `execution.sub_agents_enabled`:"),
            "{err}"
        );
    }

    #[test]
    fn env_overrides_file_and_flags_override_env() {
        let env = |n: &str| match n {
            "CONTEXT_MAX_TOKENS" => Some("1000".to_owned()),
            "FOVEAL_PLUGINS" => Some("/from/env".to_owned()),
            _ => None,
        };
        let text = "[context]\nmax_tokens = 5\n[plugins]\ndir = \"p\"\n";
        let c = Config::from_toml(text, None, &Overrides::default(), &env).unwrap();
        assert_eq!(c.context.max_tokens, 1000);
        assert_eq!(c.plugins.dir, PathBuf::from("/from/env"));
        let flags = Overrides {
            plugins: Some(PathBuf::from("/from/flag")),
            ..Overrides::default()
        };
        let c = Config::from_toml(text, None, &flags, &env).unwrap();
        assert_eq!(c.plugins.dir, PathBuf::from("/from/flag"));
    }

    #[test]
    fn bad_env_value_is_an_error_naming_the_variable() {
        let env = |n: &str| (n == "CONTEXT_SEMANTIC_THRESHOLD").then(|| "high".to_owned());
        let err = Config::from_toml("", None, &Overrides::default(), &env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable CONTEXT_SEMANTIC_THRESHOLD=\"high\": not a number"
        );
    }

    #[test]
    fn relative_paths_in_the_file_are_relative_to_the_file() {
        let c = parse("[plugins]\ndir = \"'my plugins'\"\n").unwrap();
        assert_eq!(c.plugins.dir, PathBuf::from("conf/my plugins"));
    }

    #[test]
    fn a_skills_table_reaches_that_skill_as_json_and_others_get_an_empty_object() {
        let c = parse("[skills.greeter]\ngreeting = \"Hi\"\nrepeat = 2\n\n[skills.greeter.style]\nloud = true\n").unwrap();
        let json: serde_json::Value = serde_json::from_str(c.skill_config("greeter")).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"greeting": "Hi", "repeat": 2, "style": {"loud": true}})
        );
        assert_eq!(c.skill_config("other"), "{}");
    }

    #[test]
    fn privacy_patterns_are_read_and_added_to_the_defaults_unless_turned_off() {
        let c = parse("").unwrap();
        assert!(c.privacy_patterns.is_empty() && c.privacy_default_patterns);
        let text = "[privacy]\ndefault_patterns = false\n\n[[privacy.patterns]]\nname = \"ticket\"\nregex = 'TKT-[0-9]{6}'\n";
        let c = parse(text).unwrap();
        assert!(!c.privacy_default_patterns);
        assert_eq!(
            c.privacy_patterns,
            [foveal_redact::Pattern::new("ticket", "TKT-[0-9]{6}")]
        );
    }

    #[test]
    fn a_bad_privacy_pattern_names_file_line_and_column() {
        let err =
            parse("[privacy]\n[[privacy.patterns]]\nname = \"ticket\"\nregex = \"TKT-[0-9\"\n")
                .unwrap_err()
                .to_string();
        assert_eq!(
            err,
            "conf/foveal.toml:4:9: `privacy.patterns.regex`: pattern \"ticket\": invalid regex: unclosed character class (at character 5 of the regex)"
        );
        let err = parse("[[privacy.patterns]]\nname = \"jwt\"\nregex = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "conf/foveal.toml:2:8: `privacy.patterns.name`: two patterns are named \"jwt\""
            ),
            "{err}"
        );
        let err = parse("[[privacy.patterns]]\nname = \"a b\"\nregex = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "conf/foveal.toml:2:8: `privacy.patterns.name`: pattern name \"a b\" is not allowed"
            ),
            "{err}"
        );
        let err = parse("[[privacy.patterns]]\nname = \"x\"\nregx = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("did you mean `regex`?"), "{err}");
    }

    #[test]
    fn trusted_digests_are_read_and_a_bad_one_names_its_line() {
        let c = parse("").unwrap();
        assert!(c.plugins.trusted.is_empty() && !c.plugins.require_trusted);
        assert_eq!(
            c.plugins.allow_list(),
            foveal_registry::trust::AllowList::Any
        );
        let hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let c = parse(&format!(
            "[plugins]\nrequire_trusted = true\ntrusted = [\n  \"sha256:{hex}\",\n]\n"
        ))
        .unwrap();
        assert_eq!(c.plugins.trusted.len(), 1);
        assert_eq!(c.plugins.trusted[0].to_string(), format!("sha256:{hex}"));
        assert!(c.plugins.allow_list().allows(&c.plugins.trusted[0]));
        let err = parse(&format!(
            "[plugins]\ntrusted = [\"sha256:{hex}\", \"{hex}\"]\n"
        ))
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            format!(
                "conf/foveal.toml:2:87: `plugins.trusted`: \"{hex}\": expected \"sha256:\" and 64 hex digits, as `foveal skill trust FILE` prints"
            )
        );
    }

    #[test]
    fn a_config_file_others_can_write_is_refused_naming_it_and_the_fix() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("foveal.toml");
        std::fs::write(&path, "[plugins]\nbuiltin = false\n").unwrap();
        let overrides = Overrides {
            config: Some(path.clone()),
            ..Overrides::default()
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(!Config::load(&overrides, &no_env).unwrap().plugins.builtin);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o646)).unwrap();
        let err = Config::load(&overrides, &no_env).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "config file {0} is writable by others (mode 0646); run chmod go-w {0}",
                path.display()
            )
        );
    }

    #[test]
    fn paths_expand_variables_and_strip_quotes() {
        let env = |n: &str| (n == "BASE").then(|| "/srv".to_owned());
        assert_eq!(
            resolve_path("\"$BASE/skills\"", &env),
            PathBuf::from("/srv/skills")
        );
        assert_eq!(resolve_path("${BASE}/x", &env), PathBuf::from("/srv/x"));
        assert_eq!(resolve_path("$UNSET/x", &env), PathBuf::from("$UNSET/x"));
    }
}

/// `[provider]` (resolved in `foveal-provider`) read through the whole
/// configuration.
#[cfg(test)]
#[path = "config/provider_tests.rs"]
mod provider_tests;

/// `[embedding]` (resolved in `foveal-provider`) read through the whole
/// configuration.
#[cfg(test)]
#[path = "config/embed_tests.rs"]
mod embed_tests;

/// The prompt's tables (resolved in `foveal-prompt`) read through the
/// whole configuration.
#[cfg(test)]
#[path = "config/prompt_tests.rs"]
mod prompt_tests;
