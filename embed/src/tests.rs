//! The planner, the memex's vector source and the worker's batching, with
//! a counting embedder (the real model's own tests are in `local.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use foveal_memex::Memex;

/// Vectors from the text's bytes: equal texts, equal vectors; counts
/// every text it is given.
#[derive(Debug, Default)]
struct Counting {
    texts: AtomicUsize,
    calls: AtomicUsize,
    seen: Mutex<Vec<String>>,
    remote: bool,
}

impl Embedder for Counting {
    fn model_id(&self) -> &str {
        "counting"
    }
    fn is_remote(&self) -> bool {
        self.remote
    }
    fn dim(&self) -> Option<usize> {
        Some(4)
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.texts.fetch_add(texts.len(), Ordering::Relaxed);
        self.seen
            .lock()
            .unwrap()
            .extend(texts.iter().map(|t| (*t).to_owned()));
        Ok(texts
            .iter()
            .map(|t| {
                let k = cache::key("v", t);
                vec![1.0, f32::from(k[0]) / 255.0, f32::from(k[1]) / 255.0, 0.5]
            })
            .collect())
    }
    fn describe(&self) -> String {
        "counting".into()
    }
}

const MEMEX: &str = "* Work :project:\n** Plan the launch\nDates and owners.\n** Diary :@personal:\nMet Ann at the harbour today.\n*** Deep secret\nThe code is 4711.\n** Given\n:PROPERTIES:\n:EMBEDDING: 1 0 0 0\n:END:\n";

fn memex(text: &str) -> (tempfile::TempDir, Memex) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.org"), text).unwrap();
    let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
    (dir, memex)
}

fn privacy() -> PrivacyTags {
    PrivacyTags::new(["@personal"])
}

/// Plans and embeds everything, as `foveal memex embed` does.
fn embed_all(memex: &Memex, embedder: &Counting, cache: &VectorCache, gate: Option<&Gate>) -> Plan {
    let privacy = privacy();
    let remote = embedder.is_remote();
    let mut plan = plan(&memex.snapshot(), &privacy, cache, remote, gate);
    let mut recheck = Recheck::new(memex, &privacy, cache, remote, gate, &mut plan);
    service::embed_jobs(embedder, cache, &plan.jobs, 32, &mut recheck, |_| true).unwrap();
    plan
}

#[test]
fn title_and_body_are_embedded_and_an_embedding_property_wins() {
    let (_dir, memex) = memex(MEMEX);
    let cache = Arc::new(VectorCache::in_memory("counting"));
    let embedder = Counting::default();
    let plan = embed_all(&memex, &embedder, &cache, None);
    assert_eq!(plan.objects, 5);
    assert_eq!(plan.from_file, 1);
    assert_eq!(plan.skipped, 2);
    assert_eq!(plan.jobs.len(), 2);
    assert!(
        embedder
            .seen
            .lock()
            .unwrap()
            .contains(&"Plan the launch\nDates and owners.".to_owned())
    );
    memex.attach_vectors(Arc::new(Vectors::new(cache, privacy())));
    let s = memex.snapshot();
    let given = s.objects().find(|o| o.title() == "Given").unwrap();
    assert_eq!(given.vector(), Some(&[1.0, 0.0, 0.0, 0.0][..]));
    let with: Vec<&str> = s
        .objects()
        .filter(|o| o.vector().is_some())
        .map(|o| o.title())
        .collect();
    assert_eq!(with, ["Work", "Plan the launch", "Given"]);
}

#[test]
fn private_objects_are_never_embedded_locally_or_sent_to_a_remote_embedder() {
    let (_dir, memex) = memex(MEMEX);
    let cache = VectorCache::in_memory("counting");
    let embedder = Counting::default();
    let local = embed_all(&memex, &embedder, &cache, None);
    assert_eq!(local.skipped, 2);
    let gate = Gate::new(privacy(), &[], true).unwrap();
    let remote_cache = VectorCache::in_memory("counting-remote");
    let remote = Counting {
        remote: true,
        ..Counting::default()
    };
    let plan = embed_all(&memex, &remote, &remote_cache, Some(&gate));
    assert_eq!((plan.skipped, plan.jobs.len()), (2, 2));
    for seen in [&embedder.seen, &remote.seen] {
        let seen = seen.lock().unwrap().join("\n");
        assert!(!seen.contains("harbour") && !seen.contains("4711") && !seen.contains("Diary"));
    }
    // Without a gate a remote embedder sends nothing (fail closed).
    let none = plan_for(&memex, &VectorCache::in_memory("x"), true, None);
    assert!(none.jobs.is_empty());
}

fn plan_for(memex: &Memex, cache: &VectorCache, remote: bool, gate: Option<&Gate>) -> Plan {
    plan(&memex.snapshot(), &privacy(), cache, remote, gate)
}

#[test]
fn a_public_text_holding_a_secret_is_not_sent_to_a_remote_embedder() {
    let (_dir, memex) = memex("* Keys\nMy key is AKIAIOSFODNN7EXAMPLE.\n* Plain\n");
    let cache = VectorCache::in_memory("counting");
    let gate = Gate::new(privacy(), &[], true).unwrap();
    let p = plan(&memex.snapshot(), &privacy(), &cache, true, Some(&gate));
    assert_eq!(p.skipped, 1);
    assert_eq!(p.jobs.len(), 1);
    assert_eq!(p.jobs[0].text, "Plain");
}

#[test]
fn a_cache_hit_avoids_recomputation_and_one_edit_re_embeds_one_headline() {
    let (dir, memex) = memex(MEMEX);
    let cache = Arc::new(VectorCache::in_memory("counting"));
    let embedder = Counting::default();
    embed_all(&memex, &embedder, &cache, None);
    assert_eq!(embedder.texts.load(Ordering::Relaxed), 2);
    memex.attach_vectors(Arc::new(Vectors::new(Arc::clone(&cache), privacy())));
    // Nothing changed: nothing to do.
    let again = embed_all(&memex, &embedder, &cache, None);
    assert_eq!((again.jobs.len(), again.reused), (0, 2));
    assert_eq!(embedder.texts.load(Ordering::Relaxed), 2);
    // One body changes: only that headline is embedded again, and the
    // new file version keeps every other vector as it is published.
    let path = dir.path().canonicalize().unwrap().join("a.org");
    std::fs::write(
        &path,
        MEMEX.replace("Dates and owners.", "Dates, owners, risks."),
    )
    .unwrap();
    memex.reload_file(&path);
    let s = memex.snapshot();
    let without: Vec<&str> = s
        .objects()
        .filter(|o| o.vector().is_none() && !privacy().is_private(*o))
        .map(|o| o.title())
        .collect();
    assert_eq!(without, ["Plan the launch"]);
    let g = s.generation();
    let edit = embed_all(&memex, &embedder, &cache, None);
    assert_eq!((edit.jobs.len(), edit.reused), (1, 1));
    assert_eq!(embedder.texts.load(Ordering::Relaxed), 3);
    // Published as a new generation with the new vector.
    assert_eq!(memex.refill(&[path]), g + 1);
    let s = memex.snapshot();
    assert!(
        s.objects()
            .all(|o| o.vector().is_some() != privacy().is_private(o))
    );
}

#[test]
fn batches_are_of_32() {
    let text: String = (0..70)
        .map(|i| format!("* Headline number {i}\n"))
        .collect();
    let (_dir, memex) = memex(&text);
    let cache = VectorCache::in_memory("counting");
    let embedder = Counting::default();
    embed_all(&memex, &embedder, &cache, None);
    assert_eq!(embedder.calls.load(Ordering::Relaxed), 3);
    assert_eq!(embedder.texts.load(Ordering::Relaxed), 70);
}

#[test]
fn a_file_with_vectors_of_another_length_keeps_them_and_gets_no_computed_ones() {
    let (_dir, memex) = memex("* A\n:PROPERTIES:\n:EMBEDDING: 1 0\n:END:\n* B\n");
    let cache = Arc::new(VectorCache::in_memory("counting"));
    embed_all(&memex, &Counting::default(), &cache, None);
    memex.attach_vectors(Arc::new(Vectors::new(cache, privacy())));
    let s = memex.snapshot();
    let dims: Vec<Option<usize>> = s.objects().map(|o| o.vector().map(<[f32]>::len)).collect();
    assert_eq!(dims, [Some(2), None]);
}

#[test]
fn the_view_lends_computed_vectors_with_their_8_bit_copy_and_never_private_ones() {
    let (_dir, memex) = memex(MEMEX);
    let cache = Arc::new(VectorCache::in_memory("counting"));
    embed_all(&memex, &Counting::default(), &cache, None);
    memex.attach_vectors(Arc::new(Vectors::new(cache, privacy())));
    let view = foveal_memex::view::SnapshotView::new(&memex.snapshot(), &privacy());
    let owned = view.view();
    let file = &owned.files[0];
    // Work, Plan the launch, Given: the file's `:EMBEDDING:` sets the
    // length (4) and the computed vectors join it.
    assert_eq!(file.index.dim, 4);
    assert_eq!(file.index.vector_objects.len(), 3);
    assert_eq!(file.index.quantized.len(), 3 * 4);
}

#[test]
fn the_vector_of_an_object_that_becomes_private_leaves_memory_and_disk_when_it_is_published() {
    let (dir, memex) = memex(MEMEX);
    let data = tempfile::tempdir().unwrap();
    let cache = Arc::new(VectorCache::open(data.path(), "counting").unwrap());
    embed_all(&memex, &Counting::default(), &cache, None);
    memex.attach_vectors(Arc::new(Vectors::new(Arc::clone(&cache), privacy())));
    let plan_key = cache::key("counting", "Plan the launch\nDates and owners.");
    let work_key = cache::key("counting", "Work");
    let file = VectorCache::file_path(data.path(), "counting");
    let on_disk = |key: &Key| std::fs::read(&file).unwrap().windows(32).any(|w| w == key);
    // Embedded while public: in memory, on disk, in the snapshot.
    assert!(cache.contains(&plan_key) && on_disk(&plan_key));
    let titled = |title: &str| {
        let s = memex.snapshot();
        s.objects()
            .find(|o| o.title() == title)
            .map(|o| o.vector().is_some())
    };
    assert_eq!(titled("Plan the launch"), Some(true));

    // The headline is tagged private: the version that says so is
    // published, and its vector is gone at once, with no embedding pass.
    let path = dir.path().canonicalize().unwrap().join("a.org");
    std::fs::write(
        &path,
        MEMEX.replace("** Plan the launch\n", "** Plan the launch :@personal:\n"),
    )
    .unwrap();
    memex.reload_file(&path);
    assert_eq!(titled("Plan the launch"), Some(false));
    assert!(!cache.contains(&plan_key));
    assert!(!on_disk(&plan_key));
    let reopened = VectorCache::open(data.path(), "counting").unwrap();
    assert!(!reopened.contains(&plan_key));
    // The public object keeps its vector, in memory, on disk and in the
    // snapshot.
    assert!(cache.contains(&work_key) && on_disk(&work_key) && reopened.contains(&work_key));
    assert_eq!(titled("Work"), Some(true));

    // A vector that comes back late (a pass that began while the object
    // was public) is found by the next plan, which removes it first.
    cache
        .insert(vec![(plan_key, vec![1.0, 0.0, 0.0, 0.0])])
        .unwrap();
    let again = plan(&memex.snapshot(), &privacy(), &cache, false, None);
    assert_eq!(again.withdraw, [plan_key]);
    assert!(again.jobs.is_empty(), "{:?}", again.jobs);
}

#[test]
fn a_file_whose_setup_file_is_missing_is_neither_embedded_nor_sent() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("p.setup"), "#+FILETAGS: :@personal:\n").unwrap();
    let diary = root.join("diary.org");
    std::fs::write(
        &diary,
        "#+SETUPFILE: p.setup\n* Monday\nMet Ann at the harbour today.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("work.org"),
        "* Launch\nThe public launch notes.\n",
    )
    .unwrap();
    let memex = Memex::open(std::slice::from_ref(&root)).unwrap();
    // Removed (an editor's save by rename), or caught half-written: the
    // diary is read again each time, and a remote pass follows.
    let gate = Gate::new(privacy(), &[], true).unwrap();
    for half_written in [None, Some(""), Some("#+FILETAGS: :@pers")] {
        match half_written {
            None => std::fs::remove_file(root.join("p.setup")).unwrap(),
            Some(text) => std::fs::write(root.join("p.setup"), text).unwrap(),
        }
        memex.reload_file(&diary);
        let remote = Counting {
            remote: true,
            ..Counting::default()
        };
        let cache = VectorCache::in_memory("counting-remote");
        let plan = embed_all(&memex, &remote, &cache, Some(&gate));
        let sent = remote.seen.lock().unwrap().join("\n");
        // The pass ran: the public file was sent.
        assert!(sent.contains("The public launch notes."), "{sent}");
        assert!(
            !sent.contains("harbour") && !sent.contains("Monday"),
            "{sent}"
        );
        assert_eq!(plan.skipped, 1, "{half_written:?}");
    }
}

/// Review of privacy v3: a pass was planned once and every batch sent, so
/// a text whose object became private while the pass ran was still
/// embedded — and, with a remote embedder, posted.
#[test]
fn a_text_whose_object_becomes_private_during_a_pass_is_neither_embedded_nor_sent() {
    let (dir, memex) = memex(MEMEX);
    let path = dir.path().canonicalize().unwrap().join("a.org");
    let tagged = MEMEX.replace("** Plan the launch\n", "** Plan the launch :@personal:\n");
    let gate = Gate::new(privacy(), &[], true).unwrap();
    let privacy = privacy();
    let plan_key = cache::key("counting", "Plan the launch\nDates and owners.");
    for remote in [false, true] {
        std::fs::write(&path, MEMEX).unwrap();
        memex.reload_file(&path);
        let embedder = Counting {
            remote,
            ..Counting::default()
        };
        let cache = VectorCache::in_memory("counting");
        let door = remote.then_some(&gate);
        let mut plan = plan(&memex.snapshot(), &privacy, &cache, remote, door);
        // `Work`, then `Plan the launch`: one a batch.
        assert_eq!(plan.jobs.len(), 2, "remote {remote}");
        assert_eq!(plan.jobs[1].key, plan_key);
        let mut recheck = Recheck::new(&memex, &privacy, &cache, remote, door, &mut plan);
        let mut batches = 0;
        let handled = service::embed_jobs(&embedder, &cache, &plan.jobs, 1, &mut recheck, |_| {
            batches += 1;
            if batches == 1 {
                // Tagged private between the two batches.
                std::fs::write(&path, &tagged).unwrap();
                memex.reload_file(&path);
            }
            true
        })
        .unwrap();
        assert_eq!((handled, batches), (2, 2), "remote {remote}");
        // The pass ran: the public text was embedded; the other was not.
        assert_eq!(*embedder.seen.lock().unwrap(), ["Work"], "remote {remote}");
        assert!(cache.contains(&cache::key("counting", "Work")));
        assert!(!cache.contains(&plan_key), "remote {remote}");
    }
}

/// Review of privacy v3: a version with no private object left the file's
/// last look in place, so the same private version coming back — tagged,
/// untagged and embedded again, tagged again — was not looked at, and the
/// vector of its private object stayed.
#[test]
fn the_vector_of_an_object_private_again_is_removed_again() {
    let public = "* Work :project:\n** Plan the launch\nDates and owners.\n";
    let tagged = public.replace("** Plan the launch\n", "** Plan the launch :@personal:\n");
    let (dir, memex) = memex(public);
    let path = dir.path().canonicalize().unwrap().join("a.org");
    let cache = Arc::new(VectorCache::in_memory("counting"));
    let embedder = Counting::default();
    embed_all(&memex, &embedder, &cache, None);
    memex.attach_vectors(Arc::new(Vectors::new(Arc::clone(&cache), privacy())));
    let plan_key = cache::key("counting", "Plan the launch\nDates and owners.");
    let work_key = cache::key("counting", "Work");
    assert!(cache.contains(&plan_key));
    let save = |text: &str| {
        std::fs::write(&path, text).unwrap();
        memex.reload_file(&path);
    };
    // Tagged: removed (the positive control of the rule).
    save(tagged.as_str());
    assert!(!cache.contains(&plan_key));
    // Untagged: embedded again.
    save(public);
    embed_all(&memex, &embedder, &cache, None);
    assert!(cache.contains(&plan_key));
    // Tagged again, the same text as the first time: removed again.
    save(tagged.as_str());
    assert!(!cache.contains(&plan_key));
    assert!(cache.contains(&work_key));
}

/// Review of privacy v3: withdrawing the vectors of objects now private
/// compared every object with every vector noted, under the memex's
/// writer lock — 40,000 of each took seconds. By sets it is linear.
#[test]
fn withdrawing_many_noted_vectors_is_linear_in_the_objects() {
    let text: String = (0..40_000).map(|i| format!("* Note {i}\n")).collect();
    let (_dir, memex) = memex(&text);
    let cache = Arc::new(VectorCache::in_memory("counting"));
    let vectors = Vectors::new(Arc::clone(&cache), privacy());
    // One vector noted that a visible object still has the text of, and
    // one nobody needs; then many of titles no object has.
    let kept = cache::key("counting", "Note 7");
    let gone = cache::key("counting", "Gone");
    cache
        .insert(vec![
            (kept, vec![1.0, 0.0, 0.0, 0.0]),
            (gone, vec![0.0, 1.0, 0.0, 0.0]),
        ])
        .unwrap();
    {
        let mut noted = vectors.withdraw.lock().unwrap();
        noted.push((kept, foveal_memex::file::fnv1a(b"Note 7")));
        noted.push((gone, foveal_memex::file::fnv1a(b"Gone")));
        noted.extend((0..40_000).map(|i| {
            let title = format!("Absent {i}");
            (
                cache::key("counting", &title),
                foveal_memex::file::fnv1a(title.as_bytes()),
            )
        }));
    }
    let snapshot = memex.snapshot();
    let started = std::time::Instant::now();
    vectors.withdraw_private(&snapshot);
    let took = started.elapsed();
    assert!(cache.contains(&kept));
    assert!(!cache.contains(&gone));
    assert!(vectors.withdraw.lock().unwrap().is_empty());
    assert!(took < std::time::Duration::from_secs(1), "took {took:?}");
}
