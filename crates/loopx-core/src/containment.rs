//! Provider-process trust, the axis beside Goal Focus enforcement: which
//! transport a provider process runs under, the resource limits a
//! trusted-local process gets, and the pins its executable must match.
//!
//! - **strict-isolated** needs credential blindness, a filesystem
//!   allowlist and endpoint-constrained egress, none of which exists yet,
//!   so it is never run: it fails closed before any provider process is
//!   created. An omitted transport resolves to it in enforce mode, and an
//!   explicit or misspelled one resolves to it everywhere.
//! - **trusted-local** is the operator's explicit opt-in (never implied by
//!   enforce): attested providers only, each in its own cgroup scope under
//!   bubblewrap with inherited POSIX limits. It makes no claim against a
//!   hostile process; it bounds a trusted CLI's resources and reach.
//! - **unconfined** is what an omitted transport means outside enforce
//!   mode: a process group and a timeout, as before. Every view names it,
//!   so nobody mistakes it for containment.
//!
//! Pure: adapters read the environment and pass a lookup in; the
//! application layer hashes files and the runner applies the limits.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The variable that names the transport when no flag does.
pub const TRANSPORT_ENV: &str = "AAS_AUTOLOOP_PROVIDER_TRANSPORT";

/// How a provider process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    TrustedLocal,
    Unconfined,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::TrustedLocal => "trusted-local",
            Transport::Unconfined => "unconfined",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How views say what a provider process runs under: `unconfined (a
/// process group and a timeout; no containment)`, or `trusted-local: 4 GiB
/// memory, …` with the limits in force. The one wording `status`, the
/// dashboard and notifications use.
pub fn describe(transport: Transport, limits: Option<&limits::Limits>) -> String {
    match (transport, limits) {
        (Transport::TrustedLocal, Some(limits)) => format!("trusted-local: {limits}"),
        (transport, _) => format!("{transport} (a process group and a timeout; no containment)"),
    }
}

/// Why no provider process may start under the transport asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    #[error("the provider transport resolves to strict-isolated ({why}), which loopx cannot provide yet (it needs credential blindness, a filesystem allowlist and endpoint-constrained egress), so no provider process was started; run it under --transport trusted-local (an explicit opt-in: attested providers in a resource-limited scope, no hostile-process containment){outside}")]
    StrictIsolated { why: String, outside: &'static str },
    #[error("trusted-local runs only attested providers ({allowed}); {provider:?} is not one of them, so no process was started")]
    NotAttestable { provider: String, allowed: String },
    #[error("trusted-local runs only the pinned provider binaries, so a --cmd override is refused; drive --provider {allowed} instead")]
    CommandOverride { allowed: String },
    #[error("trusted-local refuses an endpoint override ({variable} is set): the pinned provider must reach its own upstream; unset it, or run without trusted-local")]
    EndpointOverride { variable: String },
}

/// What a process is: a turn's agent, or a panel reviewer (their limits
/// and the providers allowed differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Primary,
    Panel,
}

impl Role {
    /// The providers trusted-local may run in this role.
    pub fn attestable(self) -> &'static [&'static str] {
        match self {
            Role::Primary => &["claude", "codex"],
            Role::Panel => &["claude", "codex", "codewhale"],
        }
    }
}

/// The transport a run gets: the flag, else [`TRANSPORT_ENV`]; `enforce`
/// is the loop's Goal Focus mode. Never weaker than what was asked: an
/// explicit or misspelled strict-isolated fails everywhere, an omitted one
/// only where the specification requires isolation (enforce mode).
pub fn resolve(
    flag: Option<&str>,
    env: Option<&str>,
    enforce: bool,
) -> Result<Transport, TransportError> {
    let asked = flag.or(env).map(str::trim).filter(|v| !v.is_empty());
    let (source, value) = match (flag, asked) {
        (Some(_), Some(v)) => ("--transport", v),
        (None, Some(v)) => (TRANSPORT_ENV, v),
        (_, None) if enforce => {
            return Err(TransportError::StrictIsolated {
                why: "no transport was given and the loop is in Goal Focus enforce mode".into(),
                outside: "",
            })
        }
        (_, None) => return Ok(Transport::Unconfined),
    };
    match value {
        "trusted-local" => Ok(Transport::TrustedLocal),
        "strict-isolated" => Err(TransportError::StrictIsolated {
            why: format!("{source} asks for it"),
            outside: "",
        }),
        other => Err(TransportError::StrictIsolated {
            why: format!("{source} is {other:?}, which is not a transport; accepted: trusted-local, strict-isolated"),
            outside: if enforce {
                ""
            } else {
                ", or leave it unset outside enforce mode to run unconfined"
            },
        }),
    }
}

/// Refuse what trusted-local never runs: a provider without an
/// attestation row, a `--cmd` override, an endpoint override.
pub fn admit(
    role: Role,
    providers: &[&str],
    command_override: bool,
    endpoint_overrides: &[&str],
) -> Result<(), TransportError> {
    let allowed = role.attestable().join(", ");
    if command_override {
        return Err(TransportError::CommandOverride { allowed });
    }
    if let Some(provider) = providers.iter().find(|p| !role.attestable().contains(p)) {
        return Err(TransportError::NotAttestable {
            provider: (*provider).to_owned(),
            allowed,
        });
    }
    if let Some(variable) = endpoint_overrides.first() {
        return Err(TransportError::EndpointOverride {
            variable: (*variable).to_owned(),
        });
    }
    Ok(())
}

/// The flags that make a trusted-local panel reviewer prompt-only: each
/// CLI's own switches for no shell, no file tools, no MCP servers, no
/// browser or web search, no memory or custom instructions, no
/// subagents. Checked against each pinned CLI's `--help` in the real-CLI
/// suite. CodeWhale's are not known: it gets none, and the README says so.
pub fn prompt_only_flags(provider: &str) -> &'static [&'static str] {
    match provider {
        // --bare skips hooks, plugins, auto-memory and CLAUDE.md; an empty
        // --tools list leaves no built-in tool; --strict-mcp-config with no
        // --mcp-config loads no MCP server.
        "claude" => &["--bare", "--tools", "", "--strict-mcp-config"],
        // A read-only sandbox for anything it would run, and no session
        // written to disk.
        "codex" => &["--sandbox", "read-only", "--ephemeral"],
        _ => &[],
    }
}

/// The variables that point a provider CLI at another endpoint family;
/// any of them set under trusted-local is refused.
pub const ENDPOINT_OVERRIDES: &[&str] = &[
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "AAS_AUTOLOOP_CLAUDE_BASE_URL",
    "AAS_AUTOLOOP_CODEX_BASE_URL",
    "AAS_AUTOLOOP_OPENCODE_BASE_URL",
    "AAS_AUTOLOOP_CODEWHALE_BASE_URL",
];

pub mod limits;
pub mod pin;

#[cfg(test)]
mod tests;
