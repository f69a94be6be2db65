//! The cost tracker: tokens and cost per cycle and cumulative, per model,
//! persisted as JSON in the data dir (`<data dir>/usage.json`), shown by
//! `foveal usage`.
//!
//! A cycle's cost is priced when it is recorded, with the
//! `[prices.<model>]` of that moment (per million tokens):
//! `(input − cached) × input + cached × cached_input + output × output`.
//! A model without prices is counted in tokens and marked unpriced. The
//! file keeps the cumulative totals forever and the last
//! [`KEPT_CYCLES`] cycles; it is replaced atomically (written beside, then
//! renamed), so a crash leaves the old or the new file, never half of one.
//! A file that cannot be read is an error and is never overwritten.
//!
//! # Example
//!
//! ```
//! use std::collections::BTreeMap;
//! use foveal_prompt::prompt::cost::{CostTracker, CycleUsage};
//! use foveal_prompt::prompt::settings::Prices;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let prices = BTreeMap::from([("m".to_owned(), Prices { input: 2.0, cached_input: 1.0, output: 8.0 })]);
//! let tracker = CostTracker::open(dir.path(), prices).unwrap();
//! let cycle = tracker
//!     .record(CycleUsage { model: "m".into(), input_tokens: 1_000_000, cached_input_tokens: 500_000, output_tokens: 0 })
//!     .unwrap();
//! assert_eq!(cycle.cost, Some(1.5));
//! assert_eq!(tracker.ledger().models["m"].cycles, 1);
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::settings::Prices;

/// The file's name in the data dir.
pub const FILE_NAME: &str = "usage.json";

/// Cycles kept in the file (the totals cover all of them).
pub const KEPT_CYCLES: usize = 1000;

/// The tokens of one cycle, as the provider reported them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleUsage {
    /// The model called.
    pub model: String,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Prompt tokens served from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// Reply tokens.
    pub output_tokens: u64,
}

/// One recorded cycle.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CycleRecord {
    /// When, in seconds since the Unix epoch.
    pub at: u64,
    /// The model.
    pub model: String,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Cached prompt tokens.
    pub cached_input_tokens: u64,
    /// Reply tokens.
    pub output_tokens: u64,
    /// The cost, when the model has prices.
    pub cost: Option<f64>,
}

/// Totals of one model.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Totals {
    /// Cycles recorded.
    pub cycles: u64,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Cached prompt tokens.
    pub cached_input_tokens: u64,
    /// Reply tokens.
    pub output_tokens: u64,
    /// The cost of the priced cycles.
    pub cost: f64,
    /// Cycles recorded without a price.
    pub unpriced_cycles: u64,
}

/// What the file holds.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Ledger {
    /// The format's version.
    pub version: u32,
    /// Totals by model.
    pub models: BTreeMap<String, Totals>,
    /// The last cycles, oldest first.
    pub cycles: VecDeque<CycleRecord>,
}

impl Ledger {
    /// The ledger in `data_dir`, empty when there is no file yet.
    pub fn load(data_dir: &Path) -> Result<Self, CostError> {
        let path = data_dir.join(FILE_NAME);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self {
                    version: 1,
                    ..Self::default()
                });
            }
            Err(source) => return Err(CostError::Read { path, source }),
        };
        serde_json::from_str(&text).map_err(|source| CostError::Parse { path, source })
    }

    /// The cost of every priced cycle.
    pub fn total_cost(&self) -> f64 {
        self.models.values().map(|t| t.cost).sum()
    }

    /// Adds one cycle to the totals and to the kept cycles.
    fn add(&mut self, record: CycleRecord) {
        self.version = 1;
        let totals = self.models.entry(record.model.clone()).or_default();
        totals.cycles += 1;
        totals.input_tokens += record.input_tokens;
        totals.cached_input_tokens += record.cached_input_tokens;
        totals.output_tokens += record.output_tokens;
        match record.cost {
            Some(c) => totals.cost += c,
            None => totals.unpriced_cycles += 1,
        }
        self.cycles.push_back(record);
        while self.cycles.len() > KEPT_CYCLES {
            self.cycles.pop_front();
        }
    }
}

/// Why usage could not be read or saved.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// The file exists but cannot be read.
    #[error("cannot read the usage record {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not a usage record; it is left as it is.
    #[error("the usage record {} is not valid ({source}); move it away to start a new one", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: serde_json::Error,
    },
    /// The file could not be written.
    #[error("cannot write the usage record {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// Records cycles and keeps the file up to date.
#[derive(Debug)]
pub struct CostTracker {
    dir: PathBuf,
    prices: BTreeMap<String, Prices>,
    ledger: Mutex<Ledger>,
    /// Cycles were added since the last save.
    unsaved: std::sync::atomic::AtomicBool,
    /// Held while saving.
    saving: Mutex<()>,
}

impl CostTracker {
    /// A tracker over the record in `data_dir` (read now; created at the
    /// first cycle).
    pub fn open(data_dir: &Path, prices: BTreeMap<String, Prices>) -> Result<Self, CostError> {
        Ok(Self {
            dir: data_dir.to_owned(),
            prices,
            ledger: Mutex::new(Ledger::load(data_dir)?),
            unsaved: std::sync::atomic::AtomicBool::new(false),
            saving: Mutex::new(()),
        })
    }

    /// The file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// A copy of the record.
    pub fn ledger(&self) -> Ledger {
        self.lock().clone()
    }

    /// The cost of `usage` at the configured prices, if its model has them.
    pub fn price(&self, usage: &CycleUsage) -> Option<f64> {
        let p = self.prices.get(&usage.model)?;
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let uncached = usage.input_tokens - cached;
        Some(
            (uncached as f64 * p.input
                + cached as f64 * p.cached_input
                + usage.output_tokens as f64 * p.output)
                / 1e6,
        )
    }

    /// Records one cycle in memory; [`save_if_changed`](Self::save_if_changed)
    /// writes the file. For the live host, which saves after each turn
    /// rather than in the middle of it.
    pub fn add(&self, usage: CycleUsage) -> CycleRecord {
        let record = self.make_record(&usage);
        let mut ledger = self.lock();
        ledger.add(record.clone());
        self.unsaved
            .store(true, std::sync::atomic::Ordering::Release);
        record
    }

    /// Writes the record if a cycle was added since the last save.
    /// Concurrent saves are serialised; each writes the latest record.
    pub fn save_if_changed(&self) -> Result<(), CostError> {
        let _saving = self.saving.lock().unwrap_or_else(|e| e.into_inner());
        if !self
            .unsaved
            .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            return Ok(());
        }
        let ledger = self.lock().clone();
        self.save(&ledger).inspect_err(|_| {
            self.unsaved
                .store(true, std::sync::atomic::Ordering::Release);
        })
    }

    fn make_record(&self, usage: &CycleUsage) -> CycleRecord {
        CycleRecord {
            at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            model: usage.model.clone(),
            input_tokens: usage.input_tokens,
            cached_input_tokens: usage.cached_input_tokens.min(usage.input_tokens),
            output_tokens: usage.output_tokens,
            cost: self.price(usage),
        }
    }

    /// Records one cycle and saves the record.
    pub fn record(&self, usage: CycleUsage) -> Result<CycleRecord, CostError> {
        let record = self.make_record(&usage);
        let mut ledger = self.lock();
        let mut next = ledger.clone();
        next.add(record.clone());
        self.save(&next)?;
        *ledger = next;
        Ok(record)
    }

    fn save(&self, ledger: &Ledger) -> Result<(), CostError> {
        let path = self.path();
        let write = |source| CostError::Write {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(write)?;
        let tmp = self
            .dir
            .join(format!(".{FILE_NAME}.{}.tmp", std::process::id()));
        let text = serde_json::to_string(ledger).expect("a ledger serializes");
        std::fs::write(&tmp, text).map_err(write)?;
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            write(e)
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        // The ledger is replaced whole; a poisoned lock holds a valid value.
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An estimate of a cycle's usage from its prompt: the prompt's tokens as
/// input, the system prompt as cached when the prefix cache hit (the same
/// prefix as the last request is what a provider's prompt cache serves),
/// and the reply's tokens as output. For when the provider reports none.
pub fn estimate(prompt: &super::Prompt, output_tokens: u64) -> CycleUsage {
    let cached = if prompt.cache.prefix == super::CacheState::Hit {
        u64::from(prompt.prefix_tokens())
    } else {
        0
    };
    CycleUsage {
        model: prompt.model.clone(),
        input_tokens: u64::from(prompt.total_tokens),
        cached_input_tokens: cached,
        output_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices() -> BTreeMap<String, Prices> {
        BTreeMap::from([(
            "m".to_owned(),
            Prices {
                input: 2.0,
                cached_input: 1.0,
                output: 8.0,
            },
        )])
    }

    #[test]
    fn cycles_add_up_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let tracker = CostTracker::open(dir.path(), prices()).unwrap();
        let usage = CycleUsage {
            model: "m".into(),
            input_tokens: 1000,
            cached_input_tokens: 400,
            output_tokens: 100,
        };
        let first = tracker.record(usage.clone()).unwrap();
        assert!((first.cost.unwrap() - (600.0 * 2.0 + 400.0 + 800.0) / 1e6).abs() < 1e-12);
        tracker.record(usage).unwrap();
        tracker
            .record(CycleUsage {
                model: "unpriced".into(),
                input_tokens: 5,
                cached_input_tokens: 0,
                output_tokens: 1,
            })
            .unwrap();
        let again = Ledger::load(dir.path()).unwrap();
        assert_eq!(again, tracker.ledger());
        assert_eq!(again.models["m"].cycles, 2);
        assert_eq!(again.models["m"].input_tokens, 2000);
        assert_eq!(again.models["unpriced"].unpriced_cycles, 1);
        assert_eq!(again.cycles.len(), 3);
        assert!((again.total_cost() - 2.0 * first.cost.unwrap()).abs() < 1e-12);
        // A new tracker continues the record.
        let tracker = CostTracker::open(dir.path(), prices()).unwrap();
        assert_eq!(tracker.ledger().models["m"].cycles, 2);
    }

    #[test]
    fn a_broken_record_is_an_error_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "{not json").unwrap();
        let err = CostTracker::open(dir.path(), prices())
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not valid"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(),
            "{not json"
        );
    }

    #[test]
    fn only_the_last_cycles_are_kept_but_totals_cover_all() {
        let mut ledger = Ledger::default();
        for at in 0..KEPT_CYCLES + 5 {
            ledger.add(CycleRecord {
                at: at as u64,
                model: "m".into(),
                input_tokens: 1,
                cached_input_tokens: 0,
                output_tokens: 0,
                cost: None,
            });
        }
        assert_eq!(ledger.cycles[0].at, 5);
        assert_eq!(ledger.cycles.len(), KEPT_CYCLES);
        assert_eq!(ledger.models["m"].cycles, (KEPT_CYCLES + 5) as u64);
        assert_eq!(ledger.models["m"].unpriced_cycles, (KEPT_CYCLES + 5) as u64);
    }
}
