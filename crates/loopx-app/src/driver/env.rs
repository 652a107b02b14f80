//! The environment a process loopx starts sees: the names of the variables
//! the driver sets for an agent's turn (which the agent's own `loopx` calls
//! read back as defaults), and the ones a panel reviewer is never given.
//!
//! One list, so the driver that sets a variable, the CLI flag that reads it
//! and the reviewer that must not inherit it cannot drift apart. Not here:
//! the variables users configure loopx with (`AAS_AUTOLOOP_*` policies),
//! which their owners name.

/// The loop directory the turn works on.
pub const LOOP_DIR: &str = "LOOPX_DIR";
/// The store the loop's state is in, when it is not the directory's own
/// `loopx.sqlite` (a PostgreSQL locator).
pub const STORE: &str = "LOOPX_STORE";
/// The agent id the turn acts as (claims, leases, notes).
pub const AGENT_ID: &str = "LOOPX_AGENT_ID";
/// The dispatch the turn runs under: its iteration's charge is tied to it.
pub const DISPATCH_ID: &str = "LOOPX_DISPATCH_ID";
/// A worker's turn (`drive --workers`): the todo that is its to work.
pub const TODO_ID: &str = "LOOPX_TODO_ID";
/// Set for a turn the driver started: the Stop hook lets such a turn end,
/// since the driver decides whether another runs.
pub const UNDER_DRIVER: &str = "AUTOLOOP_DRIVER";
/// The provider running the turn, as the reference runtime names it.
pub const PRIMARY_PROVIDER: &str = "AAS_AUTOLOOP_PRIMARY_PROVIDER";
/// Set for a panel reviewer's process.
pub const PANEL_REVIEWER: &str = "AUTOLOOP_PANEL_REVIEWER";

/// What a reviewer never inherits: where the loop is, who acts on it, and
/// the consents that let state leave the host. A reviewer answers from its
/// brief; it has no business reaching the loop.
pub const WITHHELD_FROM_REVIEWERS: &[&str] = &[
    LOOP_DIR,
    STORE,
    AGENT_ID,
    DISPATCH_ID,
    UNDER_DRIVER,
    PRIMARY_PROVIDER,
    loopx_core::panel::EGRESS_ENV,
    crate::notify::EGRESS_ENV,
];

/// The model API endpoint a user set for `provider`'s CLI
/// (`AAS_AUTOLOOP_<PROVIDER>_BASE_URL`, e.g. `AAS_AUTOLOOP_CLAUDE_BASE_URL`),
/// when set and not empty. The provider table says how each CLI is told
/// (`loopx_core::driver::provider::endpoint_launch`).
pub fn base_url(provider: &str) -> Option<String> {
    std::env::var(loopx_core::driver::provider::base_url_variable(provider))
        .ok()
        .filter(|url| !url.is_empty())
}

/// The arguments the model and thinking pins set here
/// (`AAS_<PROVIDER>_LATEST_MODEL`, `AAS_<PROVIDER>_HIGHEST_THINKING`) add
/// to a command line of `provider`
/// (`loopx_core::driver::provider::pin_args`). `Err`: a pin is unusable,
/// in words naming it.
pub fn pin_args(provider: &loopx_core::driver::provider::Provider) -> Result<Vec<String>, String> {
    loopx_core::driver::provider::pin_args(provider, |name| std::env::var(name).ok())
}
