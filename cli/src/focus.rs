//! `--focus ID|^HANDLE`: an object's id, or its handle in the outline,
//! resolved over what a command may see. The same answer for an id that
//! does not exist and one that is private: no command reveals private
//! objects.

use crate::exit::Exit;

/// Resolves a `--focus` argument over the visible objects of `view`: an
/// object's id, or its handle as the compact outline shows it (`^k3`;
/// `k3` when no object has that id). A handle is replaced by the id it
/// names, and stderr says which object that is; a stale, ambiguous or
/// unknown reference is an error that says so.
pub(crate) fn resolve_focus(
    view: &foveal_sdk::memex::MemexView<'_>,
    focus: &mut String,
) -> Result<(), Exit> {
    use foveal_sdk::handle::Resolution;
    if view.find(focus).is_some() {
        return Ok(());
    }
    let reference = focus.trim();
    let caret = reference.starts_with(foveal_sdk::handle::SIGIL);
    match foveal_sdk::handle::resolve(view, reference) {
        Resolution::Found { file, index } => {
            let file = &view.files[file];
            let id = file.id(index).to_owned();
            eprintln!("focus: {reference} is {id} ({})", file.title(index));
            *focus = id;
            Ok(())
        }
        Resolution::Ambiguous(all) => {
            let candidates: Vec<String> = all
                .iter()
                .map(|&(f, i)| format!("{} ({})", view.files[f].id(i), view.files[f].title(i)))
                .collect();
            eprintln!(
                "error: the handle {reference:?} names {} objects: {}; give the id",
                candidates.len(),
                candidates.join(", ")
            );
            Err(Exit::Usage)
        }
        Resolution::NotFound if caret => {
            eprintln!(
                "error: the handle {reference:?} names no visible object: it is stale (its object changed or is gone) or mistyped; read the outline again (`foveal context`) or give an id (`foveal memex query`)"
            );
            Err(Exit::NotFound)
        }
        Resolution::NotAHandle if caret => {
            eprintln!(
                "error: {reference:?} is not a handle: a handle is ^ and 2 to 13 letters and digits, as the outline shows it"
            );
            Err(Exit::Usage)
        }
        Resolution::NotFound | Resolution::NotAHandle => {
            eprintln!(
                "error: no visible object has the id or handle {reference:?} (list ids with `foveal memex query`)"
            );
            Err(Exit::NotFound)
        }
    }
}
