//! How a command ended, and the process's exit code for it (one type with
//! the commands a running host answers, [`foveal_agent::commands`]).

pub use foveal_agent::commands::Exit;
