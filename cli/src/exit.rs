//! How a command ended, and the process's exit code for it.

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok,
    /// The command ran but the answer is "no" (an unknown skill, say).
    NotFound,
    /// The command line or the configuration is wrong.
    Usage,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::NotFound => 1,
            Self::Usage => 2,
        }
    }
}
