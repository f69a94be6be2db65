//! The `[embedding]` table read through the whole configuration.

use std::collections::HashMap;

use crate::config::{Config, Overrides};
use foveal_provider::embed::settings::*;
use foveal_provider::settings::ApiKey;
use foveal_settings::ConfigError;
use std::path::{Path, PathBuf};

fn config(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let env = move |name: &str| vars.get(name).cloned();
    Config::from_toml(
        text,
        Some(Path::new("conf/foveal.toml")),
        &Overrides::default(),
        &env,
    )
}

#[test]
fn local_is_the_default_even_when_the_chat_provider_is_remote() {
    let c = config("", &[("OPENAI_BASE_URL", "http://chat:1/v1")]).unwrap();
    assert_eq!(c.embedding.kind, EmbedKind::Local);
    assert_eq!(c.embedding.base_url, "http://chat:1/v1");
    assert_eq!(c.embedding.batch, 32);
}

#[test]
fn the_file_and_the_environment_configure_it_like_the_chat_provider() {
    let file = "[embedding]\nkind = \"openai\"\nbase_url = \"http://emb:2/v1/\"\nmodel = \"m\"\napi_key_env = \"EMB_KEY\"\nmodel_dir = \"w\"\n";
    let c = config(file, &[("EMB_KEY", "sk-abcdef0123456789")]).unwrap();
    let e = &c.embedding;
    assert_eq!(e.kind, EmbedKind::OpenAi);
    assert_eq!(e.base_url, "http://emb:2/v1");
    assert_eq!(e.model, "m");
    assert_eq!(e.model_dir, Some(PathBuf::from("conf/w")));
    assert_eq!(
        e.api_key.as_ref().map(ApiKey::expose_secret),
        Some("sk-abcdef0123456789")
    );
    assert!(!format!("{e:?}").contains("abcdef0123456789"));
    let c = config(
        file,
        &[
            ("FOVEAL_EMBEDDING", "off"),
            ("FOVEAL_EMBEDDING_BASE_URL", "http://env:3/v1"),
            ("FOVEAL_EMBEDDING_MODEL", "n"),
        ],
    )
    .unwrap();
    assert_eq!(c.embedding.kind, EmbedKind::Off);
    assert_eq!(c.embedding.base_url, "http://env:3/v1");
    assert_eq!(c.embedding.model, "n");
}

#[test]
fn mistakes_name_the_file_line_and_key() {
    let err = config("[embedding]\nkind = \"remote\"\n", &[])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "conf/foveal.toml:2:8: `embedding.kind`: unknown embedder \"remote\"; expected `local`, `openai` or `off`"
    );
    let err = config("[embedding]\nbatch = 0\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`embedding.batch`: 0 is out of range"),
        "{err}"
    );
}
