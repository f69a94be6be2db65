//! What phase 1 finds in a task, and where an object is: the types the
//! phases and the context map share (kept apart from the phases, which
//! use the map, so that the map needs nothing of them).

/// `(file, index)` of an object in the view.
pub type At = (u32, u32);

/// Phase 1's output.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Signals {
    /// Lowercase keywords, stopwords removed, in order of first use.
    pub keywords: Vec<String>,
    /// Domains whose triggers the keywords hit, in the mapping's order.
    pub domains: Vec<String>,
    /// Paths mentioned in the objective and criteria.
    pub files: Vec<String>,
    /// `[task.type]`: the `:TYPE:` property (none when unset).
    pub task_type: Vec<String>,
}
