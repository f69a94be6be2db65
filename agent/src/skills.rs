//! The skill host a configuration opens: the plugin folders, the shadow
//! folder, the limits and the cells `foveal.toml` asks for, with the
//! prompt's component-id rules. Every command and the live host build
//! their registry here.

use std::path::Path;
use std::time::Duration;

use foveal_registry::registry::{PluginDir, Registry, RegistryOptions};

use crate::config::Config;

/// The registry options a configuration asks for: the drop-in folder first,
/// then (unless disabled) the folder of the running executable, for the
/// first-party skills cargo builds beside it.
pub fn registry_options(config: &Config) -> RegistryOptions {
    let mut dirs = vec![PluginDir {
        path: config.plugins.dir.clone(),
        first_party_only: false,
    }];
    if config.plugins.builtin
        && let Some(exe_dir) = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
        && exe_dir != config.plugins.dir
    {
        dirs.push(PluginDir {
            path: exe_dir,
            first_party_only: true,
        });
    }
    RegistryOptions {
        dirs,
        shadow_dir: config.shadow_dir(),
        quarantine_after: config.plugins.quarantine_after,
        hook_timeout: Duration::from_millis(config.plugins.hook_timeout_ms),
        max_loads: config.plugins.max_loads,
        allow: config.plugins.allow_list(),
        isolation: config.isolation(),
    }
}

pub fn open_registry(config: &Config) -> anyhow::Result<Registry> {
    let registry = new_registry(config)?;
    registry.scan();
    Ok(registry)
}

/// A registry on `options` that holds skills to the prompt's component-id
/// rules: how the host builds every registry.
pub fn host_registry(options: RegistryOptions) -> std::io::Result<Registry> {
    Registry::with_policy(options, foveal_prompt::prompt::components::POLICY)
}

pub fn new_registry(config: &Config) -> anyhow::Result<Registry> {
    configured_registry(config, registry_options(config))
}

/// A [`host_registry`] on `options` whose loader maps at most config
/// `plugins.max_load_mib`; a shadow folder it cannot create is an error
/// that says what to do.
pub fn configured_registry(config: &Config, options: RegistryOptions) -> anyhow::Result<Registry> {
    let registry = host_registry(options).map_err(|e| {
        anyhow::anyhow!(
            "cannot create the shadow folder {}: {e}; set FOVEAL_DATA_DIR to a writable folder",
            config.shadow_dir().display()
        )
    })?;
    registry
        .loader()
        .set_max_bytes(u64::from(config.plugins.max_load_mib) << 20);
    Ok(registry)
}
