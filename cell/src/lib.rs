//! Skill cells: a skill library confined in a process of its own.
//!
//! A library dropped into the plugins folder is native code. In the host's
//! process it could read any file, the API key in the environment and the
//! network, and its crash would end the host. In a *cell* it runs in a
//! child process that confines itself before it loads the library — no
//! file but what it was granted, no socket, no program, an empty
//! environment, a memory limit — and serves the library's hooks to the
//! host over a socket the host made. The library is the same file, built
//! against the same ABI: its author rebuilds nothing.
//!
//! - [`host`]: the host's side — start a cell, call a hook under a
//!   deadline, start it again when it dies.
//! - [`lend`]: the trampolines through which the host calls a cell with
//!   its usual ABI requests, and the sealed memex files lent with them.
//! - [`serve`]: the cell's side (`foveal-cell`).
//! - [`confine`]: the walls (Landlock, seccomp, limits, namespaces).
//! - [`view`]: one lent file version as a sealed memory file.
//! - [`wire`], [`proto`]: the channel and what its frames say;
//!   [`answer`]: the shared area large answers cross by.
//!
//! Architecture invariant: this crate knows the SDK and the memex's view,
//! nothing of the host's registry, prompt or agent; the host decides
//! which skills run in cells and what they are granted.

#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

pub mod answer;
pub mod confine;
pub mod host;
pub mod lend;
pub mod proto;
pub mod serve;
pub mod view;
pub mod wire;

pub use confine::{Confinement, Grants};
pub use host::{CallError, Cell, CellOptions, CellStatus, Manifest, StartError};
