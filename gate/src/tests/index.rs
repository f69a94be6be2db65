//! The private-text index: read only for the memex it was built from.

use super::*;

const DIARY: &str = "* Work :project:
Public body line.
** Diary :@personal:
Met Ann at the harbour about the loan.
*** Deeper secret plans
Buy the ring in June.
";

/// A gate keeping its matcher at `index`, writing every full build.
fn indexed(index: &std::path::Path) -> Gate {
    let gate = gate().with_index(Some(index.to_path_buf()));
    gate.index_matcher_from(0);
    gate
}

const BODY: &str = "Met Ann at the harbour about the loan. Public body line. Deeper secret plans";
const CLEAN: &str = "[REDACTED private]. Public body line. [REDACTED private]";

fn open(dir: &std::path::Path) -> foveal_memex::Memex {
    foveal_memex::Memex::open(&[dir.to_path_buf()]).unwrap()
}

#[test]
fn a_later_gate_reads_the_matcher_a_full_build_wrote_and_cleans_the_same() {
    let (dir, memex) = memex(DIARY);
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("index").join("private.keys");
    let first = indexed(&path);
    assert_eq!(cleaned(&first, &memex, BODY), CLEAN);
    assert!(!first.matcher_from_index());
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    // No staging file is left beside it, nor one of a writer killed
    // mid-write (a process that is gone), when it is written again.
    let count = || std::fs::read_dir(path.parent().unwrap()).unwrap().count();
    assert_eq!(count(), 1);
    let orphan = path
        .parent()
        .unwrap()
        .join(format!(".private.keys.{}.0", u32::MAX - 1));
    std::fs::write(&orphan, b"half").unwrap();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&orphan)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    // A writer's staging file written to a moment ago stays.
    let live = path.parent().unwrap().join(".private.keys.1.0");
    std::fs::write(&live, b"writing").unwrap();
    std::fs::remove_file(&path).unwrap();
    cleaned(&indexed(&path), &open(dir.path()), BODY);
    assert!(!orphan.exists());
    assert!(live.exists());
    std::fs::remove_file(&live).unwrap();
    assert_eq!(count(), 1);

    // Another process, the same files: read, not built.
    let memex = open(dir.path());
    let second = indexed(&path);
    assert_eq!(cleaned(&second, &memex, BODY), CLEAN);
    assert!(second.matcher_from_index());
    assert_eq!(second.matcher_size().0, first.matcher_size().0);

    // An edit after a read is a full build (no file's work to derive
    // from), and the new text is private.
    std::fs::write(
        dir.path().join("a.org"),
        DIARY.replace(
            "Buy the ring in June.",
            "Sell the boat before winter comes.",
        ),
    )
    .unwrap();
    memex.reload_file(&dir.path().join("a.org"));
    assert_eq!(
        cleaned(
            &second,
            &memex,
            "Sell the boat before winter comes. Buy the ring in June."
        ),
        "[REDACTED private]. Buy the ring in June."
    );
    assert!(!second.matcher_from_index());
}

/// Writes the index of `dir`'s memex with a fresh gate.
fn write_index(dir: &std::path::Path, path: &std::path::Path) {
    let memex = open(dir);
    let gate = indexed(path);
    cleaned(&gate, &memex, BODY);
    assert!(path.exists());
}

#[test]
fn a_byte_changed_with_the_same_size_and_time_is_not_read_from_the_index() {
    let (dir, _memex) = memex(DIARY);
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("private.keys");
    write_index(dir.path(), &path);
    let file = dir.path().join("a.org");
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    let edited = DIARY.replace("Buy the ring", "Buy the rink");
    assert_eq!(edited.len(), DIARY.len());
    std::fs::write(&file, &edited).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    built_not_read(dir.path(), &path, "Buy the rink in June.");
}

#[test]
fn a_file_replaced_by_rename_or_made_private_while_no_process_ran_is_not_read_from_the_index() {
    let (dir, _memex) = memex(DIARY);
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("private.keys");
    // A file replaced by rename.
    write_index(dir.path(), &path);
    let other = dir.path().join("a.org.new");
    std::fs::write(
        &other,
        DIARY.replace("Met Ann at the harbour", "Met Bob at the station"),
    )
    .unwrap();
    std::fs::rename(&other, dir.path().join("a.org")).unwrap();
    built_not_read(dir.path(), &path, "Met Bob at the station about the loan.");

    // A file that became private: by a headline's tag, by its file tags.
    let notes = "* Notes\nThe locker code is behind the painting.\n";
    for private in [
        "* Notes :@personal:\nThe locker code is behind the painting.\n",
        "#+FILETAGS: :@personal:\n* Notes\nThe locker code is behind the painting.\n",
    ] {
        std::fs::write(dir.path().join("b.org"), notes).unwrap();
        write_index(dir.path(), &path);
        std::fs::write(dir.path().join("b.org"), private).unwrap();
        built_not_read(dir.path(), &path, "The locker code is behind the painting.");
    }
}

/// A new process on `dir`'s memex, its index at `path`: `text` (a line
/// ending in a full stop) is redacted, and the matcher was built, not read.
fn built_not_read(dir: &std::path::Path, path: &std::path::Path, text: &str) {
    let gate = indexed(path);
    assert_eq!(cleaned(&gate, &open(dir), text), "[REDACTED private].");
    assert!(!gate.matcher_from_index());
}

#[test]
fn other_privacy_tags_do_not_read_the_index() {
    let org = "* Log :@work:\nThe merger with Initech closes on Monday morning.\n";
    let (dir, memex) = memex(org);
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("private.keys");
    let first = indexed(&path);
    let body = "The merger with Initech closes on Monday morning.";
    assert_eq!(cleaned(&first, &memex, body), body);
    let work = Gate::new(PrivacyTags::new(["@personal", "@work"]), &[], true)
        .unwrap()
        .with_index(Some(path.clone()));
    let memex = open(dir.path());
    assert_eq!(cleaned(&work, &memex, body), "[REDACTED private].");
    assert!(!work.matcher_from_index());
}

#[test]
fn a_damaged_or_foreign_index_is_said_and_built_over() {
    let (dir, _memex) = memex(DIARY);
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("private.keys");
    write_index(dir.path(), &path);
    let good = std::fs::read(&path).unwrap();
    let mut damaged = good.clone();
    let middle = damaged.len() - 12;
    damaged[middle] ^= 0x40;
    let short = good[..good.len() - 9].to_vec();
    for (name, bytes, said) in [
        ("damaged", damaged, "damaged"),
        ("cut short", short, "damaged"),
        (
            "foreign",
            b"not an index at all, but long enough to have a header of eighty-four bytes and more"
                .to_vec(),
            "not a private-text index",
        ),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        let ring = LogRing::new(100);
        let subscriber = tracing_subscriber::registry().with(ring.layer());
        let _anchor = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
        let memex = open(dir.path());
        let gate = indexed(&path);
        let out = tracing::subscriber::with_default(subscriber, || {
            tracing::callsite::rebuild_interest_cache();
            cleaned(&gate, &memex, BODY)
        });
        assert_eq!(out, CLEAN, "{name}");
        assert!(!gate.matcher_from_index(), "{name}");
        let lines = ring.recent(100);
        assert!(
            lines.iter().any(
                |l| l.starts_with("WARN foveal::index: the private-text index") && l.contains(said)
            ),
            "{name}: {lines:?}"
        );
        // Written again, and read by the next process.
        assert_eq!(std::fs::read(&path).unwrap(), good, "{name}");
        let again = indexed(&path);
        assert_eq!(cleaned(&again, &open(dir.path()), BODY), CLEAN);
        assert!(again.matcher_from_index(), "{name}");
    }
}

#[test]
fn a_host_reading_the_index_builds_the_base_of_later_edits_beside_it() {
    let (dir, _memex) = memex(DIARY);
    std::fs::write(dir.path().join("b.org"), "* Other\nVisible words here.\n").unwrap();
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("private.keys");
    write_index(dir.path(), &path);
    let memex = open(dir.path());
    let gate = indexed(&path);
    gate.derive_matcher_from(0);
    gate.prepare(&memex.snapshot());
    assert!(gate.matcher_from_index());
    assert_eq!(cleaned(&gate, &memex, BODY), CLEAN);
    // An edit of another file is derived from the full build `prepare`
    // made, and both sides of it are right.
    std::fs::write(
        dir.path().join("b.org"),
        "* Other :@personal:\nThe spare key is under the blue pot.\n* Seen\nBuy the ring in June.\n",
    )
    .unwrap();
    memex.reload_file(&dir.path().join("b.org"));
    assert_eq!(
        cleaned(
            &gate,
            &memex,
            "The spare key is under the blue pot. Buy the ring in June."
        ),
        "[REDACTED private]. Buy the ring in June."
    );
}

#[test]
fn a_table_whose_keys_a_lookup_would_miss_is_not_read_back() {
    let keys: Vec<u64> = (1..200u64).map(|k| crate::words::mix(k, 9)).collect();
    let set = crate::private::KeySet::new(keys.iter().copied());
    let (bloom, slots, zero, len) = set.parts();
    assert!(crate::private::KeySet::from_parts(bloom.into(), slots.into(), zero, len).is_some());
    // A key moved one slot on past a free slot: a lookup stops before it.
    let mut moved = slots.to_vec();
    let n = moved.len();
    let at = (0..n)
        .find(|&i| moved[i] != 0 && moved[(i + 1) % n] == 0 && moved[(i + 2) % n] == 0)
        .unwrap();
    moved[(at + 2) % n] = moved[at];
    moved[at] = 0;
    assert!(crate::private::KeySet::from_parts(bloom.into(), moved.into(), zero, len).is_none());
    // A run of taken slots too long for a lookup to stay short: keys
    // whose home is one slot (the table's hash is a multiplication by an
    // odd constant; its inverse makes keys with the same high bits).
    let odd: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut inverse = odd;
    for _ in 0..6 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(inverse)));
    }
    assert_eq!(odd.wrapping_mul(inverse), 1);
    let crowded = crate::private::KeySet::new((1..5_000u64).map(|i| i.wrapping_mul(inverse)));
    let (bloom, slots, zero, len) = crowded.parts();
    assert!(crate::private::KeySet::from_parts(bloom.into(), slots.into(), zero, len).is_none());
    let fine = crate::private::KeySet::new((1..4_000u64).map(|i| i.wrapping_mul(inverse)));
    let (bloom, slots, zero, len) = fine.parts();
    assert!(crate::private::KeySet::from_parts(bloom.into(), slots.into(), zero, len).is_some());
}

#[test]
fn a_host_whose_build_disagrees_with_the_index_says_so_and_writes_it_again() {
    // An index of another memex's sets under this memex's digest (as a
    // build of foveal with other rules would leave it).
    let (other, _memex) = memex("* Other :@personal:\nThe spare key is under the blue pot.\n");
    let (dir, _memex) = memex(DIARY);
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("private.keys");
    let privacy = PrivacyTags::new(["@personal"]);
    let (cache, _) = crate::private::update(None, &open(other.path()).snapshot(), &privacy, 0);
    let digest = crate::private::stored::digest(&open(dir.path()).snapshot(), &privacy);
    crate::private::stored::save(&path, &digest, &cache.sets()).unwrap();

    let ring = LogRing::new(100);
    let subscriber = tracing_subscriber::registry().with(ring.layer());
    let _anchor = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let memex = open(dir.path());
    let gate = indexed(&path);
    tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        gate.prepare(&memex.snapshot());
    });
    let lines = ring.recent(100);
    assert!(
        lines.iter().any(
            |l| l.starts_with("WARN foveal::index: the private-text index")
                && l.contains("did not hold what a build of the same memex makes")
        ),
        "{lines:?}"
    );
    // The build's matcher is in use, and the index now holds it.
    assert_eq!(cleaned(&gate, &memex, BODY), CLEAN);
    let again = indexed(&path);
    assert_eq!(cleaned(&again, &open(dir.path()), BODY), CLEAN);
    assert!(again.matcher_from_index());
    // One that agrees is not said.
    let ring = LogRing::new(100);
    let subscriber = tracing_subscriber::registry().with(ring.layer());
    let gate = indexed(&path);
    tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        gate.prepare(&open(dir.path()).snapshot());
    });
    assert!(gate.matcher_from_index());
    assert!(
        !ring.recent(100).iter().any(|l| l.contains("did not hold")),
        "{:?}",
        ring.recent(100)
    );
}

#[test]
fn a_full_build_beside_a_derived_matcher_shows_what_the_derivation_redacted_too_much_and_is_indexed()
 {
    let visible = "* Plans\nThe quarterly report ships on Friday morning.\n";
    let (dir, memex) = memex(visible);
    std::fs::write(
        dir.path().join("b.org"),
        "* Diary :@personal:\nMet Ann at the harbour about the loan.\n",
    )
    .unwrap();
    memex.reload_file(&dir.path().join("b.org"));
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("private.keys");
    let gate = indexed(&path);
    gate.derive_matcher_from(0);
    let quote = "The quarterly report ships on Friday morning.";
    assert_eq!(cleaned(&gate, &memex, quote), quote);
    assert!(!gate.matcher_is_derived());
    assert!(!gate.heal(&memex.snapshot()), "nothing to heal");

    // New private text that only the unchanged a.org's visible text also
    // holds: the derivation, which does not scan a.org again, redacts it.
    std::fs::write(
        dir.path().join("b.org"),
        "* Diary :@personal:\nMet Ann at the harbour about the loan.\nThe quarterly report ships on Friday morning.\n",
    )
    .unwrap();
    memex.reload_file(&dir.path().join("b.org"));
    assert_eq!(cleaned(&gate, &memex, quote), "[REDACTED private].");
    assert!(gate.matcher_is_derived());

    // The full build beside it: visible again, the private text still
    // private, and the index holds this build.
    assert!(gate.heal(&memex.snapshot()));
    assert!(!gate.matcher_is_derived());
    assert_eq!(cleaned(&gate, &memex, quote), quote);
    assert_eq!(
        cleaned(&gate, &memex, "Met Ann at the harbour about the loan."),
        "[REDACTED private]."
    );
    let next = indexed(&path);
    assert_eq!(cleaned(&next, &open(dir.path()), quote), quote);
    assert!(next.matcher_from_index());
    // Later edits derive from it.
    std::fs::write(
        dir.path().join("b.org"),
        "* Diary :@personal:\nThe spare key is under the blue pot.\n",
    )
    .unwrap();
    memex.reload_file(&dir.path().join("b.org"));
    assert_eq!(
        cleaned(&gate, &memex, "The spare key is under the blue pot."),
        "[REDACTED private]."
    );
    assert!(gate.matcher_is_derived());
}

#[test]
fn the_index_is_said_to_be_of_a_memex_only_while_its_files_are_those_it_was_built_from() {
    let (dir, memex) = memex(DIARY);
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("index").join("private.keys");
    assert!(!indexed(&path).index_is_of(&memex.snapshot()));
    assert!(!gate().index_is_of(&memex.snapshot()));
    cleaned(&indexed(&path), &memex, BODY);
    assert!(indexed(&path).index_is_of(&open(dir.path()).snapshot()));
    // Another text: another digest.
    std::fs::write(
        dir.path().join("a.org"),
        DIARY.replace("harbour", "station"),
    )
    .unwrap();
    assert!(!indexed(&path).index_is_of(&open(dir.path()).snapshot()));
    std::fs::write(dir.path().join("a.org"), DIARY).unwrap();
    assert!(indexed(&path).index_is_of(&open(dir.path()).snapshot()));
    // Another header.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(!indexed(&path).index_is_of(&open(dir.path()).snapshot()));
}
