//! `start --backend systemd`: the supervisor as a transient systemd user
//! unit (`systemd-run --user`), for hosts where a managed executor reaps
//! what a detached process leaves. Only where a user manager answers;
//! anywhere else it is refused, saying the unit it would have created.
//!
//! The unit's command is `loopx start` itself, in the foreground, so it
//! is the same supervisor with the same lock and record; its environment
//! is the user manager's: no credential is ever passed on the unit's
//! command line or as a unit property (the reference kit's rule).
//!
//! Not here: the supervisor (`super::run`).

use crate::loop_dir::LoopDir;
use loopx_core::digest::Digest;
use serde::Serialize;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the user manager has to answer the probe.
const PROBE: Duration = Duration::from_secs(5);

/// The transient unit for the loop in `dir`: its name and the
/// `systemd-run` command line that creates it.
#[derive(Debug, Clone, Serialize)]
pub struct Unit {
    pub name: String,
    pub argv: Vec<String>,
}

/// The unit that runs `start_args` (the `start` command line without a
/// backend) for the loop in `dir`, with `root` as its working directory.
pub fn unit(dir: &LoopDir, program: &Path, root: &Path, start_args: &[String]) -> Unit {
    // One unit name per loop directory, whatever its length or characters.
    let digest = Digest::of_bytes(dir.display().as_bytes()).to_string();
    let hex = digest.trim_start_matches("sha256:");
    let name = format!("loopx-supervisor-{}.service", &hex[..16]);
    let mut argv: Vec<String> = [
        "systemd-run",
        "--user",
        "--quiet",
        "--collect",
        "--no-ask-password",
        "--service-type=exec",
        "--property=KillMode=control-group",
        "--property=TimeoutStopSec=60s",
    ]
    .map(str::to_owned)
    .to_vec();
    argv.push(format!("--unit={name}"));
    argv.push(format!("--working-directory={}", root.display()));
    argv.push("--".to_owned());
    argv.push(program.display().to_string());
    argv.extend(start_args.iter().cloned());
    Unit { name, argv }
}

/// Whether a systemd user manager answers here (`systemctl --user
/// show-environment` succeeds within [`PROBE`]), or why not.
pub fn user_manager() -> Result<(), String> {
    let child = Command::new("systemctl")
        .args(["--user", "show-environment"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => return Err(format!("systemctl cannot be run ({error})")),
    };
    let deadline = Instant::now() + PROBE;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(_)) => {
                let mut said = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut stderr, &mut said);
                }
                let said = said.lines().next().unwrap_or("").trim().to_owned();
                return Err(format!(
                    "`systemctl --user` got no answer from a user manager ({said})"
                ));
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`systemctl --user` did not answer within {}s",
                    PROBE.as_secs()
                ));
            }
        }
    }
}

/// Create the unit: run its `systemd-run` line. `Err`: what it said.
pub fn create(unit: &Unit) -> Result<(), String> {
    let output = Command::new(&unit.argv[0])
        .args(&unit.argv[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("systemd-run cannot be run ({error})"))?;
    match output.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&output.stderr).trim().to_owned()),
    }
}
