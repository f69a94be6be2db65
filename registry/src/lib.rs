//! # foveal-registry: the skill host
//!
//! Everything between a skill library on disk and a hook call: the loader
//! (a shadow copy, the ABI check, `init`, or a cell started on the copy),
//! isolation (which skills run in cells and what each is granted), trust
//! (who may put code and settings in the host), the registry
//! (generation-numbered snapshots, the one path every hook call takes,
//! quarantine), hook failures said once per skill, hook and cause, the
//! plugin watcher, and the host API a skill is given at `init` (logging,
//! token counts, write tickets, the facts of a call).
//!
//! It never reads the memex for itself: it lends the view the host gives
//! it to the hooks it calls. It knows nothing of prompts, models or the
//! agent; what a component id means is handed to it as a
//! [`loader::ComponentPolicy`].

/// The memex's types, under the name the host uses for them.
pub(crate) use foveal_memex as memex;
pub(crate) use foveal_memex::debounce;

mod companion;
pub mod egress;
pub mod host_api;
pub mod isolation;
pub mod loader;
pub mod registry;
pub mod skill_errors;
pub mod tokens;
pub mod trust;
pub mod watcher;
