//! Which launcher of a provider is installed here: the binary a turn or a
//! panel reviewer of that provider runs, found on PATH. The provider table
//! itself is the core's (`loopx_core::driver::provider`).

use crate::platform;
use loopx_core::driver::provider;

/// The launcher of `provider` whose binary is on PATH, if any: what a
/// turn or a panel reviewer of that provider runs.
pub fn installed_launcher(provider: &provider::Provider) -> Option<&'static provider::Launcher> {
    provider::resolve(provider, |binary| platform::which(binary).is_some())
}

/// [`installed_launcher`] of the provider `name` names (an alias too).
pub fn installed_launcher_named(name: &str) -> Option<&'static provider::Launcher> {
    provider::find(name).and_then(installed_launcher)
}
