//! `--focus ID|^HANDLE`: an object's id, or its handle in the outline,
//! resolved over what a command may see
//! ([`foveal_agent::commands::resolve_focus`]).

use crate::exit::Exit;

/// Resolves a `--focus` argument over the visible objects of `view`,
/// saying on stderr which object a handle names, or why it names none.
pub(crate) fn resolve_focus(
    view: &foveal_sdk::memex::MemexView<'_>,
    focus: &mut String,
) -> Result<(), Exit> {
    let mut printed = foveal_agent::commands::Printed::default();
    let resolved = foveal_agent::commands::resolve_focus(view, focus, &mut printed);
    eprint!("{}", printed.stderr);
    resolved
}
