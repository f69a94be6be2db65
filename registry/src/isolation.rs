//! Where each skill runs: in a cell of its own (`foveal_cell`) or in the
//! host's process, and what a cell is granted.
//!
//! The rule (docs/security.md):
//!
//! - a library from the drop-in folder runs in a cell, unless the user
//!   says `isolation = "in-process"` in its `[skills.<name>]` table — being
//!   on `plugins.trusted` says where a file came from, not what it may do;
//! - the first-party skills beside the executable run in the host's
//!   process (`plugins.builtin_isolation = "in-process"`, the default) or
//!   in cells (`"cell"`, or `FOVEAL_BUILTIN_ISOLATION=cell`);
//! - where cells cannot confine (no Landlock, no seccomp, not Linux, no
//!   `foveal-cell` executable) a library that should run in one is
//!   refused with the reason and the opt-out, never run unconfined.
//!
//! A cell gets what the user grants in `[skills.<name>]`: `allow_read`
//! (folders and files it may read), `allow_network`, `memory_mib`.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where a skill's code runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Where {
    /// In a confined process of its own.
    Cell,
    /// In the host's process, with the user's rights.
    InProcess,
}

impl Where {
    /// `"cell"` or `"in-process"`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "cell" => Some(Self::Cell),
            "in-process" => Some(Self::InProcess),
            _ => None,
        }
    }
}

/// The default of `[skills.<name>] memory_mib`.
pub const DEFAULT_MEMORY_MIB: u32 = 256;

/// The keys of a `[skills.<name>]` table the host reads itself; they are
/// not passed to the skill.
pub const HOST_KEYS: [&str; 4] = ["isolation", "memory_mib", "allow_network", "allow_read"];

/// What the user says of one skill in its `[skills.<name>]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillIsolation {
    /// `isolation`: where it runs (none: the folder's default).
    pub isolation: Option<Where>,
    /// `memory_mib`: what its cell may allocate.
    pub memory_mib: u32,
    /// `allow_network`: whether its cell may use the network.
    pub allow_network: bool,
    /// `allow_read`: folders and files its cell may read.
    pub allow_read: Vec<PathBuf>,
}

impl Default for SkillIsolation {
    fn default() -> Self {
        Self {
            isolation: None,
            memory_mib: DEFAULT_MEMORY_MIB,
            allow_network: false,
            allow_read: Vec::new(),
        }
    }
}

impl SkillIsolation {
    /// Takes the host's keys out of `table` (a skill's table), checked:
    /// the error names the key and what to write.
    pub fn take_from(
        table: &mut toml::Table,
        resolve: impl Fn(&str) -> PathBuf,
    ) -> Result<Self, (String, String)> {
        let mut out = Self::default();
        if let Some(value) = table.remove("isolation") {
            out.isolation = Some(value.as_str().and_then(Where::parse).ok_or_else(|| {
                (
                    "isolation".to_owned(),
                    format!("{value:?} is not a place to run; write \"cell\" or \"in-process\""),
                )
            })?);
        }
        if let Some(value) = table.remove("memory_mib") {
            out.memory_mib = value
                .as_integer()
                .filter(|n| (16..=1 << 20).contains(n))
                .ok_or_else(|| {
                    (
                        "memory_mib".to_owned(),
                        format!("{value:?} is not a size in MiB from 16 to 1048576"),
                    )
                })? as u32;
        }
        if let Some(value) = table.remove("allow_network") {
            out.allow_network = value.as_bool().ok_or_else(|| {
                (
                    "allow_network".to_owned(),
                    format!("{value:?} is not true or false"),
                )
            })?;
        }
        if let Some(value) = table.remove("allow_read") {
            let bad = || {
                (
                    "allow_read".to_owned(),
                    "must be a list of paths, e.g. allow_read = [\"~/papers\"]".to_owned(),
                )
            };
            let list = value.as_array().ok_or_else(bad)?;
            for item in list {
                let path = item.as_str().ok_or_else(bad)?;
                out.allow_read.push(resolve(path));
            }
        }
        Ok(out)
    }
}

/// The isolation rules a registry applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationPolicy {
    /// The `foveal-cell` executable (none: cells cannot start).
    pub exe: Option<PathBuf>,
    /// Where first-party skills (beside the executable) run.
    pub builtin: Where,
    /// Where drop-in skills run unless their table says otherwise.
    pub drop_in: Where,
    /// Per skill, by name.
    pub skills: BTreeMap<String, SkillIsolation>,
    /// Start cells as on a kernel without Landlock (tests:
    /// `FOVEAL_CELL_SIMULATE=no-landlock`).
    pub simulate_no_landlock: bool,
    /// The builds the user pinned (`plugins.trusted`): a drop-in skill
    /// runs in-process only as one of them — its table names a skill, and
    /// a library chooses the name it gives.
    pub pinned: std::collections::BTreeSet<crate::trust::Sha256>,
}

impl Default for IsolationPolicy {
    fn default() -> Self {
        Self {
            exe: foveal_cell::host::find_executable(),
            builtin: Where::InProcess,
            drop_in: Where::Cell,
            skills: BTreeMap::new(),
            simulate_no_landlock: std::env::var("FOVEAL_CELL_SIMULATE").as_deref()
                == Ok("no-landlock"),
            pinned: std::collections::BTreeSet::new(),
        }
    }
}

impl IsolationPolicy {
    /// Every skill in the host's process, as before cells: for tests and
    /// benchmarks of the in-process path.
    pub fn in_process() -> Self {
        Self {
            builtin: Where::InProcess,
            drop_in: Where::InProcess,
            ..Self::default()
        }
    }

    /// Every skill in a cell.
    pub fn all_cells() -> Self {
        Self {
            builtin: Where::Cell,
            drop_in: Where::Cell,
            ..Self::default()
        }
    }

    /// Where a library from a first-party folder (or not) runs before its
    /// name is known.
    pub fn default_for(&self, first_party: bool) -> Where {
        if first_party {
            self.builtin
        } else {
            self.drop_in
        }
    }

    /// Where skill `name` runs once its name is known.
    pub fn for_skill(&self, name: &str, first_party: bool) -> Where {
        self.skills
            .get(name)
            .and_then(|s| s.isolation)
            .unwrap_or_else(|| self.default_for(first_party))
    }

    /// The user's settings for skill `name` (defaults when none).
    pub fn settings(&self, name: &str) -> SkillIsolation {
        self.skills.get(name).cloned().unwrap_or_default()
    }
}

/// How `skill-list` says what a skill runs as: `cell: no files, no
/// network` or `in-process`.
pub fn describe(place: Where, grants: &SkillIsolation) -> String {
    match place {
        Where::InProcess => "in-process".to_owned(),
        Where::Cell => {
            let files = if grants.allow_read.is_empty() {
                "no files".to_owned()
            } else {
                let list: Vec<String> = grants
                    .allow_read
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                format!("reads {}", list.join(", "))
            };
            let network = if grants.allow_network {
                "network"
            } else {
                "no network"
            };
            format!("cell: {files}, {network}, {} MiB", grants.memory_mib)
        }
    }
}

/// The needs a skill declares (`needs` of `export_skill!`: `network`,
/// `read:PATH`) that its grants do not cover, each as `skill-list` says
/// it: `needs network (not granted)`. A need is shown, never granted by
/// itself.
pub fn ungranted(needs: &[String], grants: &SkillIsolation) -> Vec<String> {
    let home = dirs::home_dir();
    needs
        .iter()
        .filter_map(|need| {
            if need == "network" {
                return (!grants.allow_network).then(|| "needs network (not granted)".to_owned());
            }
            if let Some(path) = need.strip_prefix("read:") {
                let wanted = match (path.strip_prefix("~/"), &home) {
                    (Some(rest), Some(home)) => home.join(rest),
                    _ => PathBuf::from(path),
                };
                let covered = grants.allow_read.iter().any(|g| wanted.starts_with(g));
                return (!covered).then(|| format!("needs read {path} (not granted)"));
            }
            Some(format!("needs `{need}` (unknown to this host)"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_keys_leave_the_skills_table_checked() {
        let mut table: toml::Table = toml::from_str(
            "isolation = \"in-process\"\nmemory_mib = 64\nallow_network = true\nallow_read = [\"/srv/papers\"]\ngreeting = \"hi\"\n",
        )
        .unwrap();
        let s = SkillIsolation::take_from(&mut table, |p| PathBuf::from(p)).unwrap();
        assert_eq!(s.isolation, Some(Where::InProcess));
        assert_eq!(s.memory_mib, 64);
        assert!(s.allow_network);
        assert_eq!(s.allow_read, [PathBuf::from("/srv/papers")]);
        assert_eq!(table.keys().collect::<Vec<_>>(), ["greeting"]);
        for bad in [
            "isolation = \"sandbox\"",
            "memory_mib = 1",
            "allow_network = \"yes\"",
            "allow_read = \"/x\"",
        ] {
            let mut table: toml::Table = toml::from_str(bad).unwrap();
            let (key, message) =
                SkillIsolation::take_from(&mut table, |p| PathBuf::from(p)).unwrap_err();
            assert!(bad.starts_with(&key), "{bad}: {key}: {message}");
        }
    }

    #[test]
    fn drop_in_skills_run_in_cells_unless_their_table_says_otherwise() {
        let mut policy = IsolationPolicy::default();
        assert_eq!(policy.for_skill("x", false), Where::Cell);
        assert_eq!(policy.for_skill("x", true), Where::InProcess);
        policy.skills.insert(
            "x".to_owned(),
            SkillIsolation {
                isolation: Some(Where::InProcess),
                ..SkillIsolation::default()
            },
        );
        assert_eq!(policy.for_skill("x", false), Where::InProcess);
        assert_eq!(
            describe(Where::Cell, &SkillIsolation::default()),
            "cell: no files, no network, 256 MiB"
        );
        let needs = [
            "network".to_owned(),
            "read:/srv/papers".to_owned(),
            "gpu".to_owned(),
        ];
        assert_eq!(
            ungranted(&needs, &SkillIsolation::default()),
            [
                "needs network (not granted)",
                "needs read /srv/papers (not granted)",
                "needs `gpu` (unknown to this host)"
            ]
        );
        let granted = SkillIsolation {
            allow_network: true,
            allow_read: vec![PathBuf::from("/srv")],
            ..SkillIsolation::default()
        };
        assert_eq!(ungranted(&needs[..2], &granted), Vec::<String>::new());
    }
}
