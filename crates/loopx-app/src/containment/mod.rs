//! The provider transport in the application layer: resolving it for a
//! run (before anything registers or spawns), attesting the pinned
//! providers against what is on disk, and what the runner needs to put a
//! process in its scope. `drive`, the panel and `loopx attest` all come
//! through here.
//!
//! Owns: reading the transport, pin and limit variables from the
//! environment, hashing a provider's executable and dependency closure,
//! and which cgroup backend a scope uses ([`scope`]) and which paths the
//! sandbox masks ([`sandbox`]). Does not own the rules themselves
//! (`loopx_core::containment`) or starting processes (the runner).

pub mod identity;
pub mod sandbox;
pub mod scope;

use crate::AppError;
use loopx_core::containment::limits::{self, Limits};
use loopx_core::containment::pin::{self, Identity, Pin};
use loopx_core::containment::{self as rules, Role, Transport};
use loopx_core::driver::provider::{self, Launcher};
use std::sync::Mutex;

/// A containment rule's refusal: nothing was started.
fn refused(error: impl std::fmt::Display) -> AppError {
    AppError::refused(error.to_string())
}

/// The environment as the rules read it.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// What [`Containment::launcher_for`] found for a provider.
pub struct Launch {
    pub launcher: &'static Launcher,
    /// Unconfined: the CLI PATH found, with its version's row (its
    /// warning, its version).
    pub installed: Option<crate::launchers::Installed>,
}

/// How a run's (or a panel's) provider processes are contained.
pub enum Containment {
    /// A process group and a timeout: the documented default outside
    /// enforce mode.
    Unconfined,
    TrustedLocal(Box<Contained>),
}

impl Containment {
    pub fn transport(&self) -> Transport {
        match self {
            Containment::Unconfined => Transport::Unconfined,
            Containment::TrustedLocal(_) => Transport::TrustedLocal,
        }
    }

    /// The limits in force, under trusted-local.
    pub fn limits(&self) -> Option<&Limits> {
        match self {
            Containment::Unconfined => None,
            Containment::TrustedLocal(contained) => Some(&contained.limits),
        }
    }

    /// What a turn of provider `name` launches: under trusted-local the
    /// attested binary's launcher, never whatever PATH finds; unconfined,
    /// the installed CLI with its version's row. `None`: not installed.
    pub fn launcher_for(&self, name: &str) -> Option<Launch> {
        match self {
            Containment::TrustedLocal(contained) => {
                contained.launcher(name).map(|launcher| Launch {
                    launcher,
                    installed: None,
                })
            }
            Containment::Unconfined => {
                crate::launchers::installed_named(name).map(|installed| Launch {
                    launcher: installed.choice.launcher,
                    installed: Some(installed),
                })
            }
        }
    }

    /// How views say it (`loopx_core::containment::describe`).
    pub fn words(&self) -> String {
        rules::describe(self.transport(), self.limits())
    }
}

/// A trusted-local run: the limits, the scope backend, and each pinned
/// provider with the identity it was attested with at the start.
pub struct Contained {
    pub limits: Limits,
    pub backend: scope::Backend,
    pub providers: Vec<Attested>,
}

/// One provider, pinned and attested.
pub struct Attested {
    pub pin: Pin,
    /// What was on disk when the run attested it.
    pub identity: Identity,
    /// File digests by identity, so revalidating before each spawn hashes
    /// only what changed.
    cache: Mutex<identity::Cache>,
}

impl Contained {
    /// The attested provider `name`, if this run attested it.
    pub fn provider(&self, name: &str) -> Option<&Attested> {
        self.providers.iter().find(|a| a.pin.provider == name)
    }

    /// Ready one process of `provider`, named `name` (a dispatch id or a
    /// reviewer's record), for a phase of `timeout`: the provider on disk
    /// checked against its pins once more, then its scope made.
    pub fn ready(
        &self,
        provider: &str,
        name: &str,
        timeout: std::time::Duration,
    ) -> Result<(&Attested, Confinement), AppError> {
        let attested = self.provider(provider).ok_or_else(|| {
            AppError::refused(format!(
                "trusted-local did not attest {provider}; nothing was started"
            ))
        })?;
        attested.revalidate()?;
        Ok((attested, Confinement::new(self, name, timeout)?))
    }

    /// The launch line of `name`'s pinned binary: the launcher its file
    /// name is, else the provider's first.
    pub fn launcher(&self, name: &str) -> Option<&'static Launcher> {
        let attested = self.provider(name)?;
        let provider = provider::find(name)?;
        let file = std::path::Path::new(&attested.pin.bin).file_name()?;
        provider::resolve(provider, |binary| file == binary).or(provider.launchers.first())
    }
}

impl Attested {
    /// The command line of a process of this provider: its pinned binary
    /// (never what PATH finds) with `args`, then `extra` flags and the
    /// pinned model, once: a model pin in `args` can only be the attested
    /// model (another was refused at attestation, [`attest`]).
    pub fn command(
        &self,
        mut args: Vec<String>,
        extra: &[&str],
    ) -> (std::ffi::OsString, Vec<String>) {
        args.extend(extra.iter().map(|flag| (*flag).to_owned()));
        let model = ["--model".to_owned(), self.pin.model.clone()];
        if !args.windows(2).any(|pair| pair == model) {
            args.extend(model);
        }
        (self.pin.bin.clone().into(), args)
    }

    /// Check, immediately before a spawn, that the provider on disk is
    /// still the pinned one with the closure attested at the start.
    pub fn revalidate(&self) -> Result<(), AppError> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let found = identity::identify(&self.pin, &mut cache)?;
        pin::check(&self.pin, &found, Some(&self.identity)).map_err(refused)
    }
}

/// What the runner needs to run one process contained: its scope, its
/// limits, what the sandbox masks.
pub struct Confinement {
    pub scope: scope::Scope,
    pub limits: Limits,
    pub masks: Vec<std::path::PathBuf>,
    /// Its CPU-time limit: the phase's wall time and the scope margin, on
    /// every CPU its quota allows.
    pub cpu_seconds: u64,
}

/// The hidden subcommand of the loopx binary that checks, from inside the
/// process, its scope and limits before it execs the sandbox.
pub const GATE_COMMAND: &str = "contain-gate";

impl Confinement {
    /// The confinement of the process named `name` (a dispatch id) in a
    /// phase of `timeout`: its scope is made now.
    pub fn new(
        contained: &Contained,
        name: &str,
        timeout: std::time::Duration,
    ) -> Result<Confinement, AppError> {
        let limits = contained.limits;
        let scope = contained.backend.scope(name, &limits, timeout)?;
        let uid = crate::platform::effective_uid();
        let lifetime = timeout.as_secs() + limits::SCOPE_MARGIN_SECONDS;
        Ok(Confinement {
            scope,
            limits,
            masks: sandbox::masks(&var, uid),
            cpu_seconds: lifetime * limits.cpu_percent.div_ceil(100).max(1),
        })
    }

    /// The whole command line of the contained `program`: the scope's
    /// prefix (`systemd-run` for that backend), the gate (the loopx binary
    /// at `gate`), bubblewrap with its masks, then the program.
    pub fn command_line(
        &self,
        gate: &std::path::Path,
        program: &std::ffi::OsStr,
        args: &[String],
    ) -> Vec<std::ffi::OsString> {
        let expectation =
            serde_json::to_string(&self.scope.expectation()).expect("an expectation serializes");
        let mut line: Vec<std::ffi::OsString> = self
            .scope
            .command_prefix()
            .into_iter()
            .map(Into::into)
            .collect();
        line.push(gate.into());
        line.extend([GATE_COMMAND, "--expect"].map(Into::into));
        line.push(expectation.into());
        line.push("--".into());
        line.push(sandbox::BWRAP.into());
        line.extend(sandbox::arguments(&self.masks).into_iter().map(Into::into));
        line.push(program.to_owned());
        line.extend(args.iter().map(Into::into));
        line
    }
}

/// What `doctor` says of the transport: what runs provider processes by
/// default here, and whether trusted-local could contain one now.
pub struct Readiness {
    /// False only when trusted-local is asked for and cannot run here.
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
}

pub fn readiness() -> Readiness {
    let asked = var(rules::TRANSPORT_ENV).filter(|v| !v.trim().is_empty());
    let bwrap = crate::platform::which(sandbox::BWRAP).is_some();
    let backend = scope::Backend::probe();
    let default = match asked.as_deref() {
        None => "unset: provider processes run unconfined (a process group and a timeout) outside Goal Focus enforce mode, and are refused in it".to_owned(),
        Some(value) => format!("{} is {value:?}", rules::TRANSPORT_ENV),
    };
    let can_contain = match (&backend, bwrap) {
        (Ok(backend), true) => Ok(format!(
            "trusted-local can run here ({}, bubblewrap)",
            backend.name()
        )),
        (Ok(_), false) => {
            Err("trusted-local cannot run here: bubblewrap (bwrap) is not on PATH".to_owned())
        }
        (Err(why), _) => Err(why.message.clone()),
    };
    let wanted = asked.as_deref() == Some("trusted-local");
    match can_contain {
        Ok(yes) => Readiness {
            ok: true,
            detail: format!("{default}; {yes}"),
            fix: None,
        },
        Err(no) => Readiness {
            ok: !wanted,
            detail: format!("{default}; {no}"),
            fix: wanted.then(|| {
                "install bubblewrap, and run where a user systemd manager answers, a cgroup v2 subtree is delegated, or as root with cgroup v1".to_owned()
            }),
        },
    }
}

/// Resolve the transport of a `role` process set for `providers` (or a
/// `--cmd` override), in a loop whose Goal Focus mode is `enforce`. Every
/// refusal comes before registration and before any process exists.
pub fn prepare(
    role: Role,
    flag: Option<&str>,
    enforce: bool,
    providers: &[&str],
    command_override: bool,
) -> Result<Containment, AppError> {
    // Offline contract tests drive stand-in providers in enforce mode; only
    // a test build lets them (see `failpoint::injected_providers`).
    let isolation_required = enforce && !loopx_store::failpoint::injected_providers();
    let transport = rules::resolve(
        flag,
        var(rules::TRANSPORT_ENV).as_deref(),
        isolation_required,
    )
    .map_err(refused)?;
    if transport == Transport::Unconfined {
        return Ok(Containment::Unconfined);
    }
    let overrides: Vec<&str> = rules::ENDPOINT_OVERRIDES
        .iter()
        .copied()
        .filter(|name| var(name).is_some_and(|v| !v.is_empty()))
        .collect();
    rules::admit(role, providers, command_override, &overrides).map_err(refused)?;
    let limits = limits::limits(role, &var).map_err(refused)?;
    let backend = scope::Backend::probe()?;
    let providers = providers
        .iter()
        .map(|provider| attest(provider))
        .collect::<Result<_, _>>()?;
    Ok(Containment::TrustedLocal(Box::new(Contained {
        limits,
        backend,
        providers,
    })))
}

/// Read `provider`'s pins and check what is on disk against them.
fn attest(provider: &str) -> Result<Attested, AppError> {
    let pin = pin::read(provider, &var).map_err(refused)?;
    if let Some(known) = provider::find(provider) {
        provider::check_attested_model(known, var, &pin.model).map_err(refused)?;
    }
    let mut cache = identity::Cache::default();
    let identity = identity::identify(&pin, &mut cache)?;
    pin::check(&pin, &identity, None).map_err(refused)?;
    Ok(Attested {
        pin,
        identity,
        cache: Mutex::new(cache),
    })
}

/// `loopx attest --provider P`: the pin lines for the binary of `provider`
/// found now, for the operator to review and export.
pub fn attest_lines(provider: &str, binary: &std::path::Path) -> Result<Vec<String>, AppError> {
    let upstream = pin::upstream_of(provider).ok_or_else(|| {
        AppError::refused(format!(
            "{provider:?} cannot be attested; attestable providers: claude, codex, codewhale"
        ))
    })?;
    let found = identity::identify_path(binary, None, &mut identity::Cache::default())?;
    let quoted = |value: &str| format!("'{}'", value.replace('\'', r"'\''"));
    let export = |what: &str, value: &str| {
        format!("export {}={}", pin::variable(what, provider), quoted(value))
    };
    let model = match var(&pin::variable("MODEL", provider)) {
        Some(model) => export("MODEL", &model),
        None => format!(
            "# export {}='<the model the provider is to run>'",
            pin::variable("MODEL", provider)
        ),
    };
    Ok(vec![
        export("BIN", &found.real_path),
        export("SHA256", found.sha256.as_str()),
        export("UPSTREAM", upstream),
        model,
        export("DEPENDENCY_ROOT", &found.root),
    ])
}
