use super::*;

/// A realistic sample for each default pattern, and what must be left of it.
/// (The key material is made up; it has the shape of the real thing.)
const SAMPLES: &[(&str, &str, &str)] = &[
    (
        "private-key",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MfszTdO\nq3S1n7Yd0=\n-----END RSA PRIVATE KEY-----\nthanks",
        "key:\n[REDACTED private-key]\nthanks",
    ),
    (
        "private-key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\\n-----END OPENSSH PRIVATE KEY-----",
        "[REDACTED private-key]",
    ),
    (
        "anthropic-key",
        "ANTHROPIC_KEY is sk-ant-api03-Xq8vR2mT9pLk4wZ7nB3cH6jF1sD5gA0eY-uI_oP2qW8xE4rT6yU9iO1pA3sDfGhJkL-aBcDeFgAA in the vault",
        "ANTHROPIC_KEY is [REDACTED anthropic-key] in the vault",
    ),
    (
        "openai-project-key",
        "client = OpenAI(api=\"sk-proj-4fGh8JkL2mN6pQ9rS3tU7vW1xY5zA0bC4dE8fG2hJ6kL\")",
        "client = OpenAI(api=\"[REDACTED openai-project-key]\")",
    ),
    (
        "openai-key",
        "old key sk-3fA9kLmN2pQ7rStUvWxYz0123456789AbCdEfGhIjKlMnOp, rotated",
        "old key [REDACTED openai-key], rotated",
    ),
    (
        "aws-access-key-id",
        "aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE",
        "aws configure set aws_access_key_id [REDACTED aws-access-key-id]",
    ),
    (
        "github-token",
        "git clone https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r",
        "git clone https://[REDACTED github-token]@github.com/o/r",
    ),
    (
        "github-pat",
        "GH token: github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV done",
        "GH token: [REDACTED github-pat] done",
    ),
    (
        "slack-token",
        "SLACK=xoxb-2048-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "SLACK=[REDACTED slack-token]",
    ),
    (
        "google-api-key",
        "maps?key=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY&q=x",
        "maps?key=[REDACTED google-api-key]&q=x",
    ),
    (
        "jwt",
        "cookie: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U;",
        "cookie: [REDACTED jwt];",
    ),
    (
        "bearer-token",
        "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "Authorization: Bearer [REDACTED bearer-token]",
    ),
    (
        "secret-assignment",
        "DB_PASSWORD=hunter2hunter2 ./run",
        "DB_PASSWORD=[REDACTED secret-assignment] ./run",
    ),
    (
        "secret-assignment",
        r#"{"user": "ann", "password": "correct horse battery staple"}"#,
        r#"{"user": "ann", "password": "[REDACTED secret-assignment]"}"#,
    ),
    (
        "secret-assignment",
        r#"{"content": "config: {\"api_key\": \"k-12345\", \"n\": 1}"}"#,
        r#"{"content": "config: {\"api_key\": \"[REDACTED secret-assignment]\", \"n\": 1}"}"#,
    ),
    (
        "secret-assignment",
        "client_secret: 'abc def'\n",
        "client_secret: '[REDACTED secret-assignment]'\n",
    ),
];

#[test]
fn the_default_patterns_compile_and_have_valid_unique_names() {
    let redactor = Redactor::defaults();
    let names: Vec<&str> = redactor.names().collect();
    assert_eq!(names.len(), DEFAULT_PATTERNS.len());
    for (name, _) in DEFAULT_PATTERNS {
        assert!(check_name(name).is_ok(), "{name}");
    }
}

#[test]
fn each_default_pattern_redacts_a_realistic_sample() {
    let redactor = Redactor::defaults();
    for (name, input, expected) in SAMPLES {
        let out = redactor.redact(input);
        assert_eq!(out.text, *expected, "{name}");
        assert_eq!(out.counts, [(*name, 1)], "{name}: {input}");
    }
    // Every default has a sample.
    for (name, _) in DEFAULT_PATTERNS {
        assert!(
            SAMPLES.iter().any(|(n, _, _)| n == name),
            "no sample for {name}"
        );
    }
}

#[test]
fn redacting_twice_changes_nothing_more() {
    let redactor = Redactor::defaults();
    for (name, input, _) in SAMPLES {
        let once = redactor.redact(input);
        let twice = redactor.redact(&once.text);
        assert_eq!(twice.text, once.text, "{name}");
        assert!(twice.counts.is_empty(), "{name}: {:?}", twice.counts);
    }
    // A secret beside a marker still goes.
    let out = redactor.redact("[REDACTED jwt] AKIAIOSFODNN7EXAMPLE");
    assert_eq!(out.text, "[REDACTED jwt] [REDACTED aws-access-key-id]");
}

#[test]
fn ordinary_text_is_left_alone() {
    let redactor = Redactor::defaults();
    let texts = [
        "* Launch :project:\n:PROPERTIES:\n:ID: launch-2024\n:END:\n** TODO Write the docs\n** DONE task-1234 ship it\n",
        "The skill's bearer of bad news is the token bucket; the password reset page explains itself.",
        "let task_id = \"task-1234\"; fn risk_score(desk: &Desk) -> u32 { desk.tasks_completed }",
        "Ask the desk-organizer team; sk-short is fine; AKIA alone is fine; ghp_ too.",
        "GLOBAL MEMEX AWARENESS (Peripheral Vision):\n* Launch\n:PROPERTIES:\n:ID: launch\n:END:\n",
        "Keys: ssh-rsa AAAAB3NzaC1yc2E public keys are public. eyJ alone is not a token.",
        "use tokens carefully: max_tokens = 16384; the secret of success is patience.",
    ];
    for text in texts {
        let out = redactor.redact(text);
        assert_eq!(out.text, text, "{:?}", out.counts);
        assert!(out.counts.is_empty());
        assert!(redactor.is_clean(text));
        assert!(matches!(out.text, Cow::Borrowed(_)));
    }
}

#[test]
fn an_unterminated_private_key_block_is_redacted_to_the_end_of_its_string() {
    let redactor = Redactor::defaults();
    let out = redactor.redact(
        r#"{"text": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "n": 1}"#,
    );
    assert_eq!(out.text, r#"{"text": "[REDACTED private-key]", "n": 1}"#);
}

#[test]
fn overlapping_matches_are_merged_and_named_by_the_first() {
    let redactor = Redactor::defaults();
    // The assignment's value and the key pattern cover the same bytes.
    let out = redactor.redact("OPENAI_API_KEY=sk-proj-4fGh8JkL2mN6pQ9rS3tU7vW1xY5zA0bC4dE8");
    assert_eq!(out.text, "OPENAI_API_KEY=[REDACTED openai-project-key]");
    assert_eq!(out.total(), 1);
    // An Anthropic key also looks like an OpenAI one: the earlier name wins.
    let out = redactor.redact("sk-ant-api03-aaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    assert_eq!(out.counts, [("anthropic-key", 1)]);
}

#[test]
fn several_secrets_are_counted_by_name() {
    let redactor = Redactor::defaults();
    let text =
        "a AKIAIOSFODNN7EXAMPLE b AKIAI44QH8DHBEXAMPLE c ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    let out = redactor.redact(text);
    assert_eq!(out.counts, [("aws-access-key-id", 2), ("github-token", 1)]);
    assert_eq!(
        count_markers(&out.text),
        [
            ("aws-access-key-id".to_owned(), 2),
            ("github-token".to_owned(), 1)
        ]
    );
}

#[test]
fn configured_patterns_add_to_or_replace_the_defaults() {
    let mine = [Pattern::new("ticket", r"TKT-[0-9]{6}")];
    let both = Redactor::configured(&mine, true).unwrap();
    let only = Redactor::configured(&mine, false).unwrap();
    let text = "TKT-123456 and AKIAIOSFODNN7EXAMPLE";
    assert_eq!(
        both.redact(text).text,
        "[REDACTED ticket] and [REDACTED aws-access-key-id]"
    );
    assert_eq!(
        only.redact(text).text,
        "[REDACTED ticket] and AKIAIOSFODNN7EXAMPLE"
    );
    assert_eq!(only.names().collect::<Vec<_>>(), ["ticket"]);
}

#[test]
fn a_secret_group_limits_what_is_replaced_and_empty_matches_are_ignored() {
    let r = Redactor::new(&[
        Pattern::new("pin", r"PIN (?P<secret>\d{4})"),
        Pattern::new("nothing", r"x*"),
    ])
    .unwrap();
    let out = r.redact("PIN 1234 ok");
    assert_eq!(out.text, "PIN [REDACTED pin] ok");
    assert_eq!(out.counts, [("pin", 1)]);
}

#[test]
fn bad_patterns_are_refused_with_a_clear_message() {
    let err = Redactor::new(&[Pattern::new("t", "TKT-[0-9")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "pattern \"t\": invalid regex: unclosed character class (at character 5 of the regex)"
    );
    let err = Redactor::new(&[Pattern::new("a b", "x")]).unwrap_err();
    assert!(matches!(err, PatternError::InvalidName { .. }), "{err}");
    let err = Redactor::new(&[Pattern::new("private", "x")]).unwrap_err();
    assert_eq!(err, PatternError::ReservedName);
    let err = Redactor::configured(&[Pattern::new("jwt", "x")], true).unwrap_err();
    assert!(
        err.to_string().contains("default_patterns = false"),
        "{err}"
    );
    assert!(Pattern::new("ok", "[a-z]+").check().is_ok());
}

#[test]
fn markers_keep_json_valid() {
    for (name, _) in DEFAULT_PATTERNS {
        let m = marker(name);
        assert!(!m.contains('"') && !m.contains('\\'), "{m}");
    }
}

#[test]
fn count_markers_ignores_text_that_only_looks_like_a_marker() {
    assert_eq!(
        count_markers("[REDACTED a] [REDACTED b c] [REDACTED ] [REDACTED a]"),
        [("a".to_owned(), 2)]
    );
}

#[test]
fn a_bad_pattern_among_good_ones_is_named() {
    let mut patterns = Pattern::defaults();
    patterns.push(Pattern::new("mine", "(unclosed"));
    let err = Redactor::new(&patterns).unwrap_err();
    assert!(
        matches!(&err, PatternError::InvalidRegex { name, .. } if name == "mine"),
        "{err}"
    );
}

#[test]
fn word_boundaries_are_ascii_so_a_key_beside_a_non_ascii_letter_is_found() {
    let redactor = Redactor::defaults();
    let out = redactor.redact("clé:ésk-3fA9kLmN2pQ7rStUvWxYz0123456789 🙂 fin");
    assert_eq!(out.text, "clé:é[REDACTED openai-key] 🙂 fin");
    // Still no match inside an ASCII word.
    assert!(redactor.is_clean("task-3fA9kLmN2pQ7rStUvWxYz0123456789"));
}

#[test]
fn each_pattern_is_compiled_alone_only_when_the_set_matches() {
    let redactor = Redactor::defaults();
    assert!(redactor.is_clean("nothing to see"));
    assert!(redactor.find("nothing to see").is_empty());
    assert!(redactor.patterns.iter().all(|p| p.matcher.get().is_none()));
    let out = redactor.redact("Authorization: Bearer abcdef0123456789abcdef");
    assert_eq!(out.counts, [("bearer-token", 1)]);
    let compiled: Vec<&str> = redactor
        .patterns
        .iter()
        .filter(|p| p.matcher.get().is_some())
        .map(|p| &*p.name)
        .collect();
    assert_eq!(compiled, ["bearer-token"]);
}
