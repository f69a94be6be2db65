//! The `[provider]` table read through the whole configuration.

use std::collections::HashMap;

use crate::config::{Config, Overrides};
use foveal_provider::settings::*;
use foveal_settings::ConfigError;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn config(
    text: &str,
    flag: Option<ProviderKind>,
    vars: &[(&str, &str)],
) -> Result<Config, ConfigError> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let env = move |name: &str| vars.get(name).cloned();
    let overrides = Overrides {
        provider: flag,
        ..Overrides::default()
    };
    Config::from_toml(text, Some(Path::new("conf/foveal.toml")), &overrides, &env)
}

fn provider(text: &str, flag: Option<ProviderKind>, vars: &[(&str, &str)]) -> ProviderSettings {
    config(text, flag, vars).unwrap().provider
}

#[test]
fn with_nothing_set_the_local_model_answers() {
    let p = provider("", None, &[]);
    assert_eq!(
        (p.kind, p.kind_source),
        (ProviderKind::Local, KindSource::Default)
    );
    assert_eq!(p, ProviderSettings::default());
}

#[test]
fn openai_base_url_alone_chooses_the_openai_compatible_provider() {
    let p = provider(
        "",
        None,
        &[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/")],
    );
    assert_eq!(p.kind, ProviderKind::OpenAi);
    assert_eq!(p.kind_source, KindSource::OpenAiBaseUrl);
    assert_eq!(p.base_url, "http://127.0.0.1:8080/v1");
}

#[test]
fn flag_beats_environment_beats_file_beats_openai_base_url() {
    let file = "[provider]\nkind = \"local\"\n";
    let url = ("OPENAI_BASE_URL", "http://127.0.0.1:1/v1");
    let p = provider(file, None, &[url]);
    assert_eq!(
        (p.kind, p.kind_source),
        (ProviderKind::Local, KindSource::File)
    );
    let p = provider(file, None, &[url, ("FOVEAL_PROVIDER", "openai")]);
    assert_eq!(
        (p.kind, p.kind_source),
        (ProviderKind::OpenAi, KindSource::Env)
    );
    let p = provider(
        file,
        Some(ProviderKind::Local),
        &[url, ("FOVEAL_PROVIDER", "openai")],
    );
    assert_eq!(
        (p.kind, p.kind_source),
        (ProviderKind::Local, KindSource::Flag)
    );
}

#[test]
fn the_environment_overrides_the_files_address_and_model() {
    let file =
        "[provider]\nkind = \"openai\"\nbase_url = \"http://file:1/v1\"\nmodel = \"from-file\"\n";
    let p = provider(file, None, &[]);
    assert_eq!(
        (p.base_url.as_str(), p.model.as_deref()),
        ("http://file:1/v1", Some("from-file"))
    );
    let p = provider(
        file,
        None,
        &[
            ("OPENAI_BASE_URL", "http://env:2/v1"),
            ("OPENAI_MODEL", "from-env"),
        ],
    );
    assert_eq!(
        (p.base_url.as_str(), p.model.as_deref()),
        ("http://env:2/v1", Some("from-env"))
    );
}

#[test]
fn the_key_is_read_from_the_variable_api_key_env_names_and_never_printed() {
    let p = provider("", None, &[("OPENAI_API_KEY", "sk-test-abcdef0123456789")]);
    assert_eq!(
        p.api_key.as_ref().map(ApiKey::expose_secret),
        Some("sk-test-abcdef0123456789")
    );
    let p = provider(
        "[provider]\napi_key_env = \"MY_KEY\"\n",
        None,
        &[
            ("OPENAI_API_KEY", "sk-wrong"),
            ("MY_KEY", "sk-test-abcdef0123456789"),
        ],
    );
    assert_eq!(p.api_key_env, "MY_KEY");
    assert_eq!(
        p.api_key.as_ref().map(ApiKey::expose_secret),
        Some("sk-test-abcdef0123456789")
    );
    let shown = format!("{p:?} {p:#?}");
    assert!(!shown.contains("abcdef0123456789"), "{shown}");
    assert!(shown.contains("ApiKey(***)"), "{shown}");
    let c = config(
        "[provider]\napi_key_env = \"MY_KEY\"\n",
        None,
        &[("MY_KEY", "sk-test-abcdef0123456789")],
    )
    .unwrap();
    assert!(!format!("{c:?}").contains("abcdef0123456789"));
}

#[test]
fn a_key_pasted_into_api_key_env_is_refused_without_being_echoed() {
    let err = config(
        "[provider]\napi_key_env = \"sk-live-abcdef0123456789\"\n",
        None,
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("conf/foveal.toml:2:15: `provider.api_key_env`: must be the name of an environment variable"), "{err}");
    assert!(!err.contains("abcdef0123456789"), "{err}");
}

#[test]
fn timeouts_and_retries_are_read_and_checked() {
    let p = provider(
        "[provider]\nconnect_timeout_ms = 500\nfirst_byte_timeout_ms = 1500\nidle_timeout_ms = 2500\nrequest_timeout_ms = 9000\nmax_retries = 0\n",
        None,
        &[],
    );
    assert_eq!(
        p.timeouts,
        Timeouts {
            connect: Duration::from_millis(500),
            first_byte: Duration::from_millis(1500),
            idle: Duration::from_millis(2500),
            request: Duration::from_millis(9000),
        }
    );
    assert_eq!(p.retry.max_retries, 0);
    let err = config("[provider]\nidle_timeout_ms = 0\n", None, &[])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "conf/foveal.toml:2:19: `provider.idle_timeout_ms`: 0 is out of range; must be from 1 to 86400000 (a day), in milliseconds"
    );
    let err = config("[provider]\nmax_retries = 11\n", None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`provider.max_retries`: 11 is out of range; must be from 0 to 10"),
        "{err}"
    );
}

#[test]
fn mistakes_name_the_file_line_and_key_with_a_suggestion() {
    let err = config("[provider]\nkind = \"opneai\"\n", None, &[])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "conf/foveal.toml:2:8: `provider.kind`: unknown provider \"opneai\"; did you mean `openai`?"
    );
    let err = config("[provider]\nbase_ulr = \"http://x\"\n", None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "conf/foveal.toml:2:1: unknown key `provider.base_ulr`; did you mean `base_url`?"
        ),
        "{err}"
    );
    let err = config("[provider]\nbase_url = \"ftp://x/v1\"\n", None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "conf/foveal.toml:2:12: `provider.base_url`: the scheme must be http or https"
        ),
        "{err}"
    );
    let err = config("", None, &[("FOVEAL_PROVIDER", "remote")])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "environment variable FOVEAL_PROVIDER=\"remote\": unknown provider \"remote\"; expected `local` or `openai`"
    );
    let err = config("", None, &[("OPENAI_BASE_URL", "http://user:pw@/v1")])
        .unwrap_err()
        .to_string();
    assert!(!err.contains("pw"), "{err}");
}

#[test]
fn backoff_doubles_up_to_its_cap_with_jitter_in_the_upper_half() {
    let policy = RetryPolicy::default();
    for retry in 1..=8 {
        let full = (policy.base_delay * (1 << (retry - 1))).min(policy.max_delay);
        let d = policy.backoff(retry);
        assert!(
            d >= full / 2 && d <= full,
            "retry {retry}: {d:?} not in [{:?}, {full:?}]",
            full / 2
        );
    }
    assert!(policy.backoff(u32::MAX) <= policy.max_delay);
}

#[test]
fn the_model_path_is_relative_to_the_file_and_the_environment_wins() {
    let p = provider("[provider]\nmodel_path = \"weights/m.gguf\"\n", None, &[]);
    assert_eq!(p.model_path, Some(PathBuf::from("conf/weights/m.gguf")));
    let p = provider(
        "[provider]\nmodel_path = \"weights/m.gguf\"\n",
        None,
        &[("FOVEAL_MODEL_PATH", "other/m.gguf")],
    );
    assert_eq!(p.model_path, Some(PathBuf::from("other/m.gguf")));
    assert_eq!(provider("", None, &[]).model_path, None);
    let p = provider(
        "[provider]\nmodel_threads = 3\n",
        None,
        &[("FOVEAL_MODEL_THREADS", "2")],
    );
    assert_eq!(p.model_threads, Some(2));
    assert_eq!(
        provider("[provider]\nmodel_threads = 3\n", None, &[]).model_threads,
        Some(3)
    );
    let err = config("", None, &[("FOVEAL_MODEL_THREADS", "0")])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "environment variable FOVEAL_MODEL_THREADS=\"0\": must be a whole number from 1 to 256"
    );
    let err = config("[provider]\nmodel_path = \" \"\n", None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("conf/foveal.toml:2:14: `provider.model_path`: must not be empty"),
        "{err}"
    );
}

#[test]
fn a_flag_value_parses_like_the_file() {
    assert_eq!("OpenAI".parse::<ProviderKind>(), Ok(ProviderKind::OpenAi));
    assert_eq!(" local ".parse::<ProviderKind>(), Ok(ProviderKind::Local));
    assert!(
        "lokal"
            .parse::<ProviderKind>()
            .unwrap_err()
            .contains("did you mean `local`?")
    );
}
