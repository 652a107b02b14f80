//! What an attested provider must be: the operator's pins, read from
//! `AAS_AUTOLOOP_ATTESTED_*_<PROVIDER>`, and the rule that compares them
//! with what is on disk now. The application layer resolves the binary
//! and hashes it and its dependency closure; this module only says which
//! pins there are, whether they are well formed, and whether an identity
//! found on disk is the pinned one.

use crate::digest::Digest;
use serde::Serialize;

/// The prefix of every pin variable.
pub const PREFIX: &str = "AAS_AUTOLOOP_ATTESTED";

/// The upstream each attestable provider must name.
pub fn upstream_of(provider: &str) -> Option<&'static str> {
    match provider {
        "claude" => Some("anthropic"),
        "codex" => Some("openai"),
        "codewhale" => Some("deepseek"),
        _ => None,
    }
}

/// The variable of pin `what` (`BIN`, `SHA256`, ...) for `provider`.
pub fn variable(what: &str, provider: &str) -> String {
    format!("{PREFIX}_{what}_{}", provider.to_ascii_uppercase())
}

/// One provider's pins, as the operator set them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    pub provider: String,
    /// The exact absolute real path of the executable.
    pub bin: String,
    /// `sha256:<hex>` of the executable, after resolving any launcher link.
    pub sha256: Digest,
    pub upstream: String,
    pub model: String,
    /// The package root whose files the closure digest covers; `None`:
    /// inferred from the executable.
    pub dependency_root: Option<String>,
}

/// A pin that is missing or malformed: nothing starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    #[error("trusted-local needs {provider} pinned before it may run: {variable} is not set (`loopx attest --provider {provider}` prints the export lines for the binary installed now, to review and set)")]
    Missing { provider: String, variable: String },
    #[error("{variable} must be {expected} (got {value:?})")]
    Malformed {
        variable: String,
        value: String,
        expected: &'static str,
    },
}

/// The pins of `provider`, from the variables `var` finds.
pub fn read(provider: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<Pin, PinError> {
    let required = |what: &str| {
        let variable = variable(what, provider);
        var(&variable)
            .filter(|v| !v.trim().is_empty())
            .ok_or(PinError::Missing {
                provider: provider.to_owned(),
                variable: variable.clone(),
            })
            .map(|value| (variable, value))
    };
    let malformed = |variable: String, value: String, expected| PinError::Malformed {
        variable,
        value,
        expected,
    };
    let (variable, bin) = required("BIN")?;
    if !bin.starts_with('/') {
        return Err(malformed(variable, bin, "an absolute path"));
    }
    let (variable, sha) = required("SHA256")?;
    let sha256 = Digest::parse(&sha)
        .map_err(|_| malformed(variable, sha, "sha256:<64 lowercase hex digits>"))?;
    let (variable, upstream) = required("UPSTREAM")?;
    let expected = upstream_of(provider);
    if expected != Some(upstream.as_str()) {
        return Err(malformed(
            variable,
            upstream,
            match provider {
                "claude" => "anthropic",
                "codex" => "openai",
                _ => "deepseek",
            },
        ));
    }
    let (_, model) = required("MODEL")?;
    let root_variable = variable_of_root(provider);
    let dependency_root = var(&root_variable).filter(|v| !v.trim().is_empty());
    if let Some(root) = dependency_root.as_ref().filter(|r| !r.starts_with('/')) {
        return Err(malformed(root_variable, root.clone(), "an absolute path"));
    }
    Ok(Pin {
        provider: provider.to_owned(),
        bin,
        sha256,
        upstream,
        model,
        dependency_root,
    })
}

fn variable_of_root(provider: &str) -> String {
    variable("DEPENDENCY_ROOT", provider)
}

/// What is on disk now, as the application layer found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    /// The executable's real path (every link resolved).
    pub real_path: String,
    pub sha256: Digest,
    /// The package root the closure digest covers.
    pub root: String,
    /// One digest over every file under `root` (path and content).
    pub closure: Digest,
}

/// Why what is on disk is not what was pinned (or attested at the start
/// of the run): nothing starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("{provider}'s pinned binary {pinned} resolves to {found}: pin the exact real path")]
    Path {
        provider: String,
        pinned: String,
        found: String,
    },
    #[error("{provider}'s binary {path} is not the one pinned (sha256 {found}, pinned {pinned}); if you updated it, review it and pin it again (`loopx attest --provider {provider}`)")]
    Digest {
        provider: String,
        path: String,
        found: Digest,
        pinned: Digest,
    },
    #[error("{provider}'s dependency closure under {root} changed since this run attested it ({found}, was {attested}); nothing was started")]
    Closure {
        provider: String,
        root: String,
        found: Digest,
        attested: Digest,
    },
}

/// Whether `found` is what `pin` pins, and (when the run already
/// attested one) the same closure as `attested`.
pub fn check(pin: &Pin, found: &Identity, attested: Option<&Identity>) -> Result<(), Mismatch> {
    if found.real_path != pin.bin {
        return Err(Mismatch::Path {
            provider: pin.provider.clone(),
            pinned: pin.bin.clone(),
            found: found.real_path.clone(),
        });
    }
    if found.sha256 != pin.sha256 {
        return Err(Mismatch::Digest {
            provider: pin.provider.clone(),
            path: found.real_path.clone(),
            found: found.sha256.clone(),
            pinned: pin.sha256.clone(),
        });
    }
    match attested {
        Some(first) if first.closure != found.closure => Err(Mismatch::Closure {
            provider: pin.provider.clone(),
            root: found.root.clone(),
            found: found.closure.clone(),
            attested: first.closure.clone(),
        }),
        _ => Ok(()),
    }
}
