//! `loopx attest` (the pin lines for a provider installed now) and the
//! hidden gate a contained process passes through before it execs its
//! sandbox: parse, call `loopx_app::containment`, render or exec.

use super::Reply;
use anyhow::Result;
use clap::Args;
use loopx_app::containment;
use loopx_app::launchers::installed_launcher_named;
use std::path::PathBuf;

/// Print the pins trusted-local needs for a provider: the export lines
/// for its binary found now (on PATH, or --bin), with its real path, the
/// SHA-256 of the executable, its upstream, model (from
/// AAS_AUTOLOOP_ATTESTED_MODEL_<P> if set) and dependency root. Review
/// them before you export them: a pin says "I trust this binary"; pin
/// again after every update. Reads files; changes nothing.
#[derive(Debug, Args)]
pub struct AttestArgs {
    /// claude, codex or codewhale.
    #[arg(long)]
    pub provider: String,
    /// The binary to attest (default: the provider's launcher on PATH).
    #[arg(long)]
    pub bin: Option<PathBuf>,
}

pub fn attest(args: &AttestArgs) -> Result<Reply> {
    let binary = match &args.bin {
        Some(bin) => bin.clone(),
        None => installed_launcher_named(&args.provider)
            .and_then(|launcher| loopx_app::platform::which(launcher.binary))
            .ok_or_else(|| {
                loopx_app::AppError::not_found(format!(
                    "no {} binary on PATH; install it, or name it with --bin",
                    args.provider
                ))
            })?,
    };
    let lines = containment::attest_lines(&args.provider, &binary)?;
    Ok(Reply::ok(
        serde_json::json!({"status": "ok", "action": "attest", "provider": args.provider, "exports": lines}),
        lines.join("\n"),
    ))
}

/// The gate (internal): check this process's scope and limits, then exec
/// the rest of the line; refuse with exit 126 otherwise.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// What the scope must be (JSON, written by the runner).
    #[arg(long)]
    pub expect: String,
    /// The line to exec once the gate passes.
    #[arg(last = true, required = true)]
    pub line: Vec<std::ffi::OsString>,
}

pub fn gate(args: &GateArgs) -> ! {
    use std::os::unix::process::CommandExt as _;
    let refused = |why: String| -> ! {
        eprintln!("loopx: the containment gate refused to start the provider: {why}");
        std::process::exit(126)
    };
    let expected: containment::scope::Expectation = serde_json::from_str(&args.expect)
        .unwrap_or_else(|e| refused(format!("its expectation is not readable ({e})")));
    if let Err(why) = containment::scope::gate(&expected) {
        refused(why);
    }
    let error = std::process::Command::new(&args.line[0])
        .args(&args.line[1..])
        .exec();
    refused(format!(
        "cannot exec {}: {error}",
        args.line[0].to_string_lossy()
    ))
}
