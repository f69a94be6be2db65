//! The privacy promise, attacked: each test is an attempt to get private
//! text past the view, the gate, the session or the log — a file saved
//! with a byte-order mark, invisible characters in a quote, HTML, a URL, a
//! file that does not parse, a log line naming a private file — and checks
//! that it finds nothing. (An adversarial review wrote them against the
//! first version of privacy v2; each failed then.)
//!
//! Run: `cargo test -p foveal --lib adversary`.

use std::sync::Arc;

use crate::egress::{Gate, PRIVATE_MARKER};
use crate::memex::Memex;
use crate::memex::privacy::PrivacyTags;
use crate::memex::view::SnapshotView;
use crate::registry::Snapshot;

/// A memex of `files` (name, text) in a fresh folder.
fn memex(files: &[(&str, &str)]) -> (tempfile::TempDir, Memex) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
    (dir, memex)
}

fn gate() -> Gate {
    Gate::new(PrivacyTags::new(["@personal"]), &[], true).unwrap()
}

fn clean(gate: &Gate, memex: &Memex, body: &str) -> String {
    gate.clean(body, &memex.snapshot(), &Snapshot::default())
        .unwrap()
        .text
        .into_owned()
}

/// Everything a skill is lent, as `{:#?}` would print it.
fn lent(memex: &Memex) -> String {
    let snapshot = memex.snapshot();
    let view = SnapshotView::new(&snapshot, &PrivacyTags::new(["@personal"]));
    let owned = view.view();
    let mut out = String::new();
    for file in &owned.files {
        out.push_str(&format!("{file:#?}\n{}\n", file.text.as_str()));
        for i in 0..file.len() as u32 {
            out.push_str(file.title(i));
            out.push_str(file.body(i));
        }
    }
    out
}

/// A private paragraph of one line, 12 words.
const DIARY: &str = "* Work\nPublic notes here.\n* Diary :@personal:\nI told Ann that I will leave the firm before the merger closes.\n";
const WORDS: [&str; 12] = [
    "I", "told", "Ann", "that", "I", "will", "leave", "the", "firm", "before", "the", "merger",
];

/// The private sentence with `sep` inserted in the middle of every word
/// of two letters or more.
fn with_inside(sep: &str) -> String {
    WORDS
        .iter()
        .map(|w| {
            if w.len() >= 2 {
                let mid = w.len() / 2;
                format!("{}{sep}{}", &w[..mid], &w[mid..])
            } else {
                (*w).to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------
// 1. What a skill is lent
// ---------------------------------------------------------------------

/// a file saved with a UTF-8 byte-order mark (Windows Notepad and
/// many Windows editors write one). Emacs decodes such a file as
/// `utf-8-with-signature` and drops the BOM (`auto-coding-regexp-alist`),
/// so Org sees `#+FILETAGS: :@personal:` on line 1 and the whole file is
/// private. foveal's scanner sees `\u{feff}#+FILETAGS:`, which does not
/// start with `#+`: the file is public, lent whole to every skill, and its
/// text is not private for the gate either.
#[test]
fn a_bom_does_not_hide_the_file_tags_of_a_diary() {
    let diary = "\u{feff}#+FILETAGS: :@personal:\nDear diary, I told Ann that I will leave the firm.\n* Monday\nThe biopsy results came back positive today.\n";
    let (_dir, memex) = memex(&[("diary.org", diary), ("work.org", "* Work\n")]);
    let lent = lent(&memex);
    let gate = gate();
    let quoted = clean(
        &gate,
        &memex,
        "The biopsy results came back positive today.",
    );
    assert!(
        !lent.contains("biopsy") && !lent.contains("diary.org"),
        "a #+FILETAGS-private file with a BOM was lent to skills:\n{lent}"
    );
    assert!(quoted.contains(PRIVATE_MARKER), "not gated: {quoted}");
}

/// the same with a private first headline: Emacs drops the BOM and
/// reads `* Diary :@personal:` as a headline; the scanner reads the line
/// as preamble text, which is visible.
#[test]
fn a_bom_before_a_private_first_headline_keeps_it_private() {
    let text = "\u{feff}* Diary :@personal:\nThe biopsy results came back positive today.\n* Work\nPublic.\n";
    let (_dir, memex) = memex(&[("a.org", text)]);
    let lent = lent(&memex);
    assert!(
        !lent.contains("biopsy"),
        "a private headline after a BOM was lent:\n{lent}"
    );
    let gate = gate();
    let quoted = clean(
        &gate,
        &memex,
        "The biopsy results came back positive today.",
    );
    assert!(quoted.contains(PRIVATE_MARKER), "not gated: {quoted}");
}

/// a file with classic Mac line ends (bare `\r`). Emacs detects the
/// `mac` end-of-line type and shows three lines, the second a private
/// headline; the scanner sees one line (one public headline whose title
/// runs to the end of the file).
#[test]
fn a_file_with_bare_cr_line_ends_is_not_lent_and_stays_private() {
    let text = "* Work\r* Diary :@personal:\rThe biopsy results came back positive today.\r";
    let (_dir, memex) = memex(&[("a.org", text)]);
    let lent = lent(&memex);
    assert!(
        !lent.contains("biopsy"),
        "a private headline of a CR-only file was lent:\n{lent}"
    );
}

/// CRLF files, no trailing newline, a private last headline,
/// nested privacy, embeddings before ids: every field points at the right
/// visible bytes and nothing private is lent.
#[test]
fn view_offsets_hold_for_crlf_no_newline_and_a_private_last_headline() {
    let text = "pre\r\n* A :t:\r\n:PROPERTIES:\r\n:EMBEDDING: 1 2\r\n:ID: a-id\r\n:END:\r\nbody a\r\n** P :@personal:\r\nsecret one\r\n*** Q\r\nsecret two\r\n** B\r\n:PROPERTIES:\r\n:EMBEDDING: 3 4\r\n:END:\r\nbody b\r\n* Z :@personal:\r\nsecret three";
    let (_dir, memex) = memex(&[("a.org", text)]);
    let snapshot = memex.snapshot();
    let view = SnapshotView::new(&snapshot, &PrivacyTags::new(["@personal"]));
    let owned = view.view();
    let f = &owned.files[0];
    assert_eq!(f.len(), 2);
    assert_eq!(
        (f.title(0), f.id(0), f.body(0)),
        ("A", "a-id", "body a\r\n")
    );
    assert_eq!((f.title(1), f.body(1)), ("B", "body b\r\n"));
    assert_eq!(f.tags(0).collect::<Vec<_>>(), ["t"]);
    assert_eq!(f.children(0), [1]);
    assert_eq!(f.vector(1), Some(&[3.0, 4.0][..]));
    assert!(!f.text.as_str().contains("secret"));
    assert_eq!(f.find("a-id"), Some(0));
}

// ---------------------------------------------------------------------
// 2. Quotes the gate misses
// ---------------------------------------------------------------------

/// invisible format characters inside words. U+00AD (soft hyphen,
/// common in text pasted from word processors and web pages), U+200B
/// (zero-width space), U+200D (zero-width joiner), U+2060 (word joiner)
/// and U+FEFF are not letters, so the splitter cuts the word in two; NFKC
/// keeps them. The quote renders exactly like the private line and a
/// model reads it as such.
#[test]
fn invisible_characters_inside_words_do_not_hide_a_quote() {
    let (_dir, memex) = memex(&[("a.org", DIARY)]);
    let gate = gate();
    let mut missed = Vec::new();
    for sep in ["\u{ad}", "\u{200b}", "\u{200d}", "\u{2060}", "\u{feff}"] {
        let quote = with_inside(sep);
        if !clean(&gate, &memex, &quote).contains(PRIVATE_MARKER) {
            missed.push(format!("U+{:04X}", sep.chars().next().unwrap() as u32));
        }
    }
    assert!(
        missed.is_empty(),
        "quotes missed with {missed:?} inside words"
    );
}

/// the other way round: private text that holds soft hyphens (pasted
/// from a web page into the diary) is not recognised when quoted plainly.
#[test]
fn soft_hyphens_in_private_text_do_not_hide_a_plain_quote() {
    let diary = "* Diary :@personal:\nMeet the di\u{ad}vorce law\u{ad}yer on Fri\u{ad}day at noon in Ge\u{ad}neva.\n";
    let (_dir, memex) = memex(&[("a.org", diary)]);
    let gate = gate();
    let quote = "Meet the divorce lawyer on Friday at noon in Geneva.";
    assert!(
        clean(&gate, &memex, quote).contains(PRIVATE_MARKER),
        "a plain quote of soft-hyphenated private text went out"
    );
}

/// a quote re-wrapped with hyphenation at the line ends (what `par`,
/// LaTeX, a PDF copy or a model asked to re-flow produces).
#[test]
fn a_quote_hyphenated_at_line_breaks_is_found() {
    let (_dir, memex) = memex(&[("a.org", DIARY)]);
    let gate = gate();
    let quote = "I told Ann th-\nat I will le-\nave the firm be-\nfore the mer-\nger closes.";
    // Every run of 5 words crosses a hyphenated break.
    assert!(
        clean(&gate, &memex, quote).contains(PRIVATE_MARKER),
        "a hyphen-wrapped quote went out"
    );
}

/// HTML entities (a tool that returns HTML, a model writing HTML):
/// `&#39;` and `&amp;` add words (`39`, `amp`) that are not in the
/// private line.
#[test]
fn html_forms_of_private_text_are_found() {
    let diary = "* Ann's pregnancy test :@personal:\n* Tom & Ann divorce :@personal:\n";
    let (_dir, memex) = memex(&[("a.org", diary), ("b.org", DIARY)]);
    let gate = gate();
    // The titles as they are are found…
    assert!(clean(&gate, &memex, "Ann's pregnancy test").contains(PRIVATE_MARKER));
    assert!(clean(&gate, &memex, "Tom & Ann divorce").contains(PRIVATE_MARKER));
    // …their HTML forms are not.
    for html in [
        "<li>Ann&#39;s pregnancy test</li>",
        "<b>Tom &amp; Ann divorce</b>",
        "I told <em>Ann</em> that I <em>will</em> leave the <em>firm</em> before the merger",
    ] {
        assert!(
            clean(&gate, &memex, html).contains(PRIVATE_MARKER),
            "HTML form went out: {html}"
        );
    }
}

/// percent-encoding (a search URL in a tool call's arguments):
/// `%20Ann` is one word `20ann`.
#[test]
fn a_percent_encoded_quote_in_a_url_is_found() {
    let (_dir, memex) = memex(&[("a.org", DIARY)]);
    let gate = gate();
    let url = r#"{"url": "https://www.google.com/search?q=I%20told%20Ann%20that%20I%20will%20leave%20the%20firm%20before%20the%20merger"}"#;
    assert!(
        clean(&gate, &memex, url).contains(PRIVATE_MARKER),
        "a URL-encoded quote went out"
    );
}

/// the target of a described Org link in private text is never
/// read as words (`link_target_len`), so no key is made of it: a quote of
/// the URL — here nine words of the private body, naming the person and
/// the matter — goes out.
#[test]
fn the_target_of_a_link_in_private_text_is_private() {
    let diary = "* Diary :@personal:\nStatement: [[https://bank.example/accounts/ann-smith/divorce-settlement-draft-v2][the draft]]\n";
    let (_dir, memex) = memex(&[("a.org", diary)]);
    let gate = gate();
    let quote = "see https://bank.example/accounts/ann-smith/divorce-settlement-draft-v2";
    assert!(
        clean(&gate, &memex, quote).contains(PRIVATE_MARKER),
        "a private link target went out"
    );
}

/// conversely, anything written as the target of an Org link is
/// invisible to the gate: `[[…][` needs no closing `]]` and the target may
/// be 4 kB; the model reads it like any text.
#[test]
fn a_quote_inside_an_org_link_target_is_found() {
    let (_dir, memex) = memex(&[("a.org", DIARY)]);
    let gate = gate();
    let quote = "[[I told Ann that I will leave the firm before the merger closes][note]]";
    assert!(
        clean(&gate, &memex, quote).contains(PRIVATE_MARKER),
        "a quote inside a link target went out"
    );
}

/// a Markdown bullet list with `* ` bullets (what models write)
/// looks like Org headlines to the splitter; no run continues into a
/// headline line, so a private paragraph quoted four words a bullet is
/// missed.
#[test]
fn a_quote_as_markdown_star_bullets_is_found() {
    let (_dir, memex) = memex(&[("a.org", DIARY)]);
    let gate = gate();
    let quote = "Summary:\n* I told Ann that\n* I will leave the\n* firm before the merger\n";
    assert!(
        clean(&gate, &memex, quote).contains(PRIVATE_MARKER),
        "a quote as `* ` bullets went out"
    );
}

/// Turkish dotted capital İ folds to `i` + U+0307, so a private line
/// written in Turkish capitals is not found in its lower-case form (and
/// vice versa).
#[test]
fn turkish_dotted_capital_i_folds_like_its_lower_case() {
    let diary = "* Günlük :@personal:\nİSTANBUL İLE İZMİR ARASINDA İKİ GİZLİ HESAP VAR\n";
    let (_dir, memex) = memex(&[("a.org", diary)]);
    let gate = gate();
    let quote = "istanbul ile izmir arasında iki gizli hesap var";
    assert!(
        clean(&gate, &memex, quote).contains(PRIVATE_MARKER),
        "the lower-case form of a Turkish private line went out"
    );
}

/// (a design choice the promise does not survive): accents are part
/// of the word (`cafe` ≠ `café`), so a private line quoted without its
/// diacritics — typed on a keyboard without them, or ASCII-folded by a
/// tool — goes out, though any reader recognises it.
#[test]
fn a_quote_without_diacritics_is_found() {
    let diary = "* Diario :@personal:\nJosé me dijo que María está embarazada de gemelos.\n";
    let (_dir, memex) = memex(&[("a.org", diary)]);
    let gate = gate();
    assert!(
        clean(&gate, &memex, "José me dijo que María está embarazada").contains(PRIVATE_MARKER)
    );
    let quote = "Jose me dijo que Maria esta embarazada de gemelos.";
    assert!(
        clean(&gate, &memex, quote).contains(PRIVATE_MARKER),
        "the quote without accents went out"
    );
}

/// the forms the gate claims, and some it does not claim but holds.
#[test]
fn spacing_case_unicode_and_escape_forms_are_found() {
    let (_dir, memex) = memex(&[("a.org", DIARY)]);
    let gate = gate();
    let sentence = WORDS.join(" ");
    let nfd_fullwidth: String = sentence
        .chars()
        .map(|c| match c {
            'a'..='z' => char::from_u32(c as u32 - 'a' as u32 + 0xFF41).unwrap(),
            c => c,
        })
        .collect();
    let math_bold: String = sentence
        .chars()
        .map(|c| match c {
            'a'..='z' => char::from_u32(c as u32 - 'a' as u32 + 0x1D41A).unwrap(),
            c => c,
        })
        .collect();
    let once = serde_json::to_string(&sentence).unwrap();
    let thrice = serde_json::to_string(&serde_json::to_string(&once).unwrap()).unwrap();
    for form in [
        sentence.replace(' ', "\u{a0}"),
        sentence.replace(' ', "\u{2003}"),
        sentence.replace(' ', "\r\n"),
        sentence.to_uppercase(),
        nfd_fullwidth,
        math_bold,
        thrice,
        sentence.replace(' ', "\\u0020"),
        format!("> {}", sentence.replace(' ', "\n> ")),
        sentence.replace(' ', "\\n"),
    ] {
        let cleaned = clean(&gate, &memex, &form);
        assert!(cleaned.contains(PRIVATE_MARKER), "{form:?} → {cleaned:?}");
    }
}

/// the gate's units of private text are the title, the property
/// values and the body; a private object's own text has more: a planning
/// line is consumed whole (`is_planning` looks at its start only, so text
/// after the timestamp goes with it), and a line of the property drawer
/// that is not a `:KEY: value` property (`:KEY:value`, or a note typed in
/// the drawer) is dropped. Neither is ever redacted, though both are
/// private bytes in the file.
#[test]
fn text_in_a_private_planning_line_or_drawer_is_private() {
    let diary = "* Diary :@personal:\nDEADLINE: <2025-03-14 Fri> tell Ann I am leaving the firm before the merger\n:PROPERTIES:\n:CUSTODY:Ann keeps the kids on weekends until June\nthe lawyer says we settle for half the house\n:END:\nBody.\n";
    let (_dir, memex) = memex(&[("a.org", diary)]);
    let gate = gate();
    let mut missed = Vec::new();
    for quote in [
        "tell Ann I am leaving the firm before the merger",
        "Ann keeps the kids on weekends until June",
        "the lawyer says we settle for half the house",
    ] {
        if !clean(&gate, &memex, quote).contains(PRIVATE_MARKER) {
            missed.push(quote);
        }
    }
    assert!(
        missed.is_empty(),
        "private lines never redacted: {missed:#?}"
    );
}

/// numbers a person writes with or without grouping (IBANs, card
/// and phone numbers) are different words: a private IBAN quoted as one
/// token, or a phone number regrouped, goes out.
#[test]
fn a_private_number_regrouped_is_found() {
    let diary = "* Bank :@personal:\n:IBAN: DE89 3704 0044 0532 0130 00\n:PHONE: +1 555 0100 777\n";
    let (_dir, memex) = memex(&[("a.org", diary)]);
    let gate = gate();
    // As written: found.
    assert!(clean(&gate, &memex, "DE89 3704 0044 0532 0130 00").contains(PRIVATE_MARKER));
    let mut missed = Vec::new();
    for quote in [
        "IBAN DE89370400440532013000",
        "call +15550100777",
        "call 555-010-0777",
    ] {
        if !clean(&gate, &memex, quote).contains(PRIVATE_MARKER) {
            missed.push(quote);
        }
    }
    assert!(
        missed.is_empty(),
        "regrouped private numbers went out: {missed:?}"
    );
}

// ---------------------------------------------------------------------
// 2b. Privacy by file tags; files that do not parse
// ---------------------------------------------------------------------

/// Fail closed: a file that does not parse — here a property drawer
/// without `:END:` (a typo, or the file caught half-written at start-up) —
/// is left out of the memex, and with it every private key it holds: a
/// user quoting their `#+FILETAGS: :@personal:` diary sends it as typed.
/// Likewise a file with one byte that is not UTF-8.
#[test]
fn a_private_file_that_does_not_parse_keeps_its_protection() {
    let diary = "#+FILETAGS: :@personal:\n* Monday\n:PROPERTIES:\n:MOOD: low\n* Tuesday\nThe biopsy results came back positive today.\n";
    let latin1: &[u8] =
        b"#+FILETAGS: :@personal:\n* Caf\xe9\nMy PIN for the joint account with Ann is 4471.\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("diary.org"), diary).unwrap();
    std::fs::write(dir.path().join("old.org"), latin1).unwrap();
    let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(memex.snapshot().failed().len(), 2);
    let gate = gate();
    for quote in [
        "The biopsy results came back positive today.",
        "My PIN for the joint account with Ann is 4471.",
    ] {
        assert!(
            clean(&gate, &memex, quote).contains(PRIVATE_MARKER),
            "a quote of a private file that failed to parse went out: {quote}"
        );
    }
}

// ---------------------------------------------------------------------
// 3. Channels: the log section of the prompt
// ---------------------------------------------------------------------

/// the name of a file private as a whole is private (docs/security.md:
/// "the whole file, from its first byte: … the file's name"), but when it
/// fails to reload the host logs `memex file not reloaded, previous
/// version kept: <path>:<line>: …` at WARN; the ring keeps INFO and up, the
/// prompt's log section (2500) carries it, and the gate has no key for
/// file names. (The watcher also logs every reload with its path at
/// DEBUG.)
#[test]
fn a_private_file_name_never_reaches_the_prompt_through_the_log_section() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let dir = tempfile::tempdir().unwrap();
    let name = "ann-pregnancy-test-results.org";
    let path = dir.path().join(name);
    std::fs::write(&path, "#+FILETAGS: :@personal:\n* Monday\nFine.\n").unwrap();
    std::fs::write(dir.path().join("work.org"), "* Work\n").unwrap();
    let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
    let ring = crate::logs::LogRing::new(100);
    let subscriber = tracing_subscriber::registry().with(ring.layer());
    // The user saves the diary half-way through typing a drawer.
    std::fs::write(
        &path,
        "#+FILETAGS: :@personal:\n* Monday\n:PROPERTIES:\n:MOOD: low\n",
    )
    .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        memex.reload_file(&path.canonicalize().unwrap());
    });
    let mut logs = ring.recent(20);
    logs.reverse();
    let assembler = crate::prompt::Assembler::new(crate::prompt::PromptSettings::default());
    let input = crate::prompt::PromptInput {
        message: Some(Arc::from("hello")),
        logs: &logs,
        ..crate::prompt::PromptInput::default()
    };
    let prompt = assembler
        .assemble(&Snapshot::default(), &memex.snapshot(), &input)
        .unwrap();
    let text = prompt.text();
    assert!(
        !text.contains("pregnancy"),
        "the private file's name is in the prompt:\n{text}"
    );
}

// ---------------------------------------------------------------------
// 4. Performance traps
// ---------------------------------------------------------------------

/// How long the gate takes on `body` (best of 3), with a private memex.
fn gate_time(gate: &Gate, memex: &Memex, body: &str) -> std::time::Duration {
    let snapshot = memex.snapshot();
    let skills = Snapshot::default();
    // Build the matcher first.
    let _ = gate.clean("warm up", &snapshot, &skills).unwrap();
    (0..3)
        .map(|_| {
            let t = std::time::Instant::now();
            let _ = gate.clean(body, &snapshot, &skills).unwrap();
            t.elapsed()
        })
        .min()
        .unwrap()
}

/// every `[[` makes the splitter look up to 4096 bytes ahead for
/// `][` (`link_target_len`), and a `[[` without `][` advances by two
/// bytes only: 1 MiB of `[` costs ~60 times the work of 1 MiB of prose
/// (3.4 s against 56 ms in a debug build), and the gate runs on a body
/// several times a cycle (before and after the budget, on the request,
/// on the recorded tool result).
/// A tool's output or a pasted log of brackets (or `[[` alone, repeated)
/// stalls every cycle's gate for seconds.
#[test]
fn unclosed_link_openers_cost_no_more_than_prose() {
    let (_dir, memex) = memex(&[("a.org", DIARY)]);
    let gate = gate();
    let n = 1 << 20;
    let plain = "ab ".repeat(n / 3);
    let brackets = "[".repeat(n);
    let base = gate_time(&gate, &memex, &plain);
    let slow = gate_time(&gate, &memex, &brackets);
    eprintln!("1 MiB prose {base:?}, 1 MiB of `[` {slow:?}");
    assert!(
        slow < base * 20,
        "1 MiB of `[` took {slow:?}, 1 MiB of prose {base:?}"
    );
}

/// 4 MB of backslashes, a deep JSON escape of every letter, a huge
/// word, a run of combining marks: linear.
#[test]
fn backslashes_escapes_and_huge_words_cost_no_more_than_prose() {
    let (_dir, memex) = memex(&[("a.org", DIARY)]);
    let gate = gate();
    let n = 1 << 20;
    let base = gate_time(&gate, &memex, &"ab ".repeat(n / 3));
    for (what, body) in [
        ("backslashes", "\\".repeat(n)),
        ("deep escapes", "\\\\\\\\\\\\\\u0041".repeat(n / 14)),
        ("broken surrogates", format!("\\ud83d{}", "\\".repeat(n))),
        ("one ASCII word", "a".repeat(n)),
        ("one accented word", "é".repeat(n / 2)),
        (
            "combining marks",
            format!("a{}", "\u{301}\u{316}".repeat(n / 4)),
        ),
        ("cookies", "[1/".repeat(n / 3)),
        ("stars", "\n**".repeat(n / 3)),
    ] {
        let t = gate_time(&gate, &memex, &body);
        eprintln!("{what}: {t:?} (prose {base:?})");
        assert!(t < base * 20, "{what}: {t:?} vs prose {base:?}");
    }
}

// ---------------------------------------------------------------------
// 1b. The view against a naive model of it (property test)
// ---------------------------------------------------------------------

mod view_model {
    use super::*;
    use crate::memex::file::{IdSource, MemexFile};
    use proptest::prelude::*;
    use std::path::Path;

    fn piece() -> impl Strategy<Value = String> {
        let nl = prop_oneof![Just("\n"), Just("\r\n")];
        let stars = prop_oneof![Just("* "), Just("** "), Just("*** ")];
        let title = prop_oneof![
            Just("Work"),
            Just("TODO Plan"),
            Just("DONE [#A] Ship it"),
            Just("Diary"),
            Just("x"),
            Just("Café über"),
            Just(""),
        ];
        let tags = prop_oneof![
            Just(""),
            Just(" :@personal:"),
            Just(" :a:b:"),
            Just("\t:@Personal:x:"),
            Just(" :y:"),
        ];
        let after = prop_oneof![
            Just(String::new()),
            Just(":PROPERTIES:{nl}:ID: id-1{nl}:EMBEDDING: 1 2{nl}:END:{nl}".to_owned()),
            Just(
                ":PROPERTIES:{nl}:EMBEDDING:   3 4  {nl}:ID:   id-2{nl}:X: v{nl}:END:{nl}"
                    .to_owned()
            ),
            Just("SCHEDULED: <2025-01-01>{nl}:PROPERTIES:{nl}:ID: id-1{nl}:END:{nl}".to_owned()),
            Just("body line{nl}- item{nl}".to_owned()),
            Just("{nl}{nl}".to_owned()),
        ];
        (stars, title, tags, after, nl)
            .prop_map(|(s, t, g, a, nl)| format!("{s}{t}{g}{nl}{}", a.replace("{nl}", nl)))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn view_fields_equal_the_files_fields_for_visible_objects(
            pre in prop_oneof![Just(""), Just("pre\n"), Just("#+TITLE: t\r\n")],
            pieces in proptest::collection::vec(piece(), 0..8),
            cut_last in any::<bool>(),
        ) {
            let mut text = format!("{pre}{}", pieces.concat());
            if cut_last {
                while text.ends_with(['\n', '\r']) { text.pop(); }
            }
            let Ok(file) = MemexFile::parse(Path::new("/m/a.org"), "a.org", text.clone()) else {
                return Ok(());
            };
            let privacy = PrivacyTags::new(["@personal"]);
            let mask = privacy.private_mask(&file);
            let prepared = crate::memex::view::prepare(&file, &privacy);
            let view = foveal_sdk::memex::FileView {
                path: "a.org".into(),
                text: prepared.text(&file).into(),
                index: &prepared.index,
            };
            // The visible text: the file without private own ranges and
            // without embedding values.
            let mut expected = String::new();
            let first = file.objects.first().map_or(text.len(), |o| o.headline.own.start as usize);
            expected.push_str(&text[..first]);
            let mut visible = Vec::new();
            for (o, private) in file.objects.iter().zip(&mask) {
                if *private { continue; }
                visible.push(o);
                let h = &o.headline;
                let mut at = h.own.start as usize;
                for p in h.properties.iter() {
                    if file.slice(&p.key).eq_ignore_ascii_case("EMBEDDING") {
                        expected.push_str(&text[at..p.value.start as usize]);
                        at = p.value.end as usize;
                    }
                }
                expected.push_str(&text[at..h.own.end as usize]);
            }
            prop_assert_eq!(view.text.as_str(), expected.as_str());
            prop_assert_eq!(view.len(), visible.len());
            for (i, o) in visible.iter().enumerate() {
                let i = i as u32;
                let h = &o.headline;
                prop_assert_eq!(view.title(i), file.slice(&h.title));
                prop_assert_eq!(view.body(i), file.slice(&h.body));
                prop_assert_eq!(view.todo(i), h.todo.as_deref());
                prop_assert_eq!(view.tags(i).collect::<Vec<_>>(), h.tags(&file.text).collect::<Vec<_>>());
                prop_assert_eq!(view.id(i), o.id(&file.text));
                prop_assert_eq!(view.object(i).id_derived, o.id_source == IdSource::Derived);
                if o.id_source == IdSource::Property || view.find(view.id(i)).is_some() {
                    // Duplicated ids find the first.
                    let found = view.find(view.id(i)).unwrap();
                    prop_assert_eq!(view.id(found), view.id(i));
                }
            }
            for word in ["Diary :@personal:", "@personal", "@Personal"] {
                prop_assert!(!view.text.as_str().contains(word) || !mask.iter().any(|p| *p));
            }
        }
    }
}
