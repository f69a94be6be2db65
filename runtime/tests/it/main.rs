//! Integration tests of the foveal runtime against real skill libraries.
//!
//! The fixture libraries are workspace crates under `tests/fixtures/`; they
//! are built by `cargo build --workspace` (the README's test command runs it
//! first), because `cargo test` does not build `cdylib` crates.

mod support;

/// The scripted OpenAI-compatible server the live tests answer with.
#[path = "../../../provider/src/tests/server.rs"]
#[allow(dead_code)]
mod server;

mod agenda;
mod architecture;
mod awareness;
mod awareness_projects;
mod cells;
mod cli;
mod computed;
mod context_cli;
mod control_focus;
mod e2e;
mod emacs;
mod embed;
mod execution;
mod faults_disk;
mod faults_input;
mod host_facts;
mod hot_reload;
mod live;
mod loading;
mod memex_cli;
mod memex_view;
mod outside_edits;
mod privacy;
mod privacy_doors;
mod privacy_layers;
mod prompt;
mod registry;
mod sections;
mod skill_errors;
mod skill_kit;
mod trust;
mod tui;
mod tutorial;
mod window;
