//! Which launcher of a provider is installed here: the binary a turn or a
//! panel reviewer of that provider runs, found on PATH, and (for a turn
//! and `doctor`) its version against the table's qualified rows. The
//! provider table itself is the core's (`loopx_core::driver::provider`).

use crate::platform;
use loopx_core::driver::provider::{self, Choice, Version};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a provider's `--version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// The launcher of `provider` whose binary is on PATH, if any: what a
/// panel reviewer of that provider runs, or a printed command shows. Runs
/// nothing (the newest row of the binary found).
pub fn installed_launcher(provider: &provider::Provider) -> Option<&'static provider::Launcher> {
    provider::resolve(provider, |binary| platform::which(binary).is_some())
}

/// [`installed_launcher`] of the provider `name` names (an alias too).
pub fn installed_launcher_named(name: &str) -> Option<&'static provider::Launcher> {
    provider::find(name).and_then(installed_launcher)
}

/// An installed CLI of a provider: where it is, what `--version` said,
/// and the table's row for that version.
#[derive(Debug, Clone)]
pub struct Installed {
    pub path: PathBuf,
    /// The first line `--version` printed, or why it printed none. `None`
    /// when it was not asked (the table has no qualified rows for it).
    pub version_line: Option<Result<String, String>>,
    pub choice: Choice,
}

impl Installed {
    /// What a person must be told before running this CLI, if anything.
    pub fn warning(&self) -> Option<String> {
        self.choice
            .fit
            .warning(self.choice.launcher.binary, self.choice.version)
    }
}

/// The installed CLI of `provider` with its version's row, asking
/// `--version` once per binary per process (a long driver run asks once).
pub fn installed(provider: &provider::Provider) -> Option<Installed> {
    let mut asked = None;
    let mut path = None;
    let choice = provider::choose(
        provider,
        |binary| platform::which(binary).is_some(),
        |binary| {
            let found = platform::which(binary)?;
            let line = cached_version(&found);
            path = Some(found);
            let version = line.as_ref().ok().and_then(|l| Version::find(l));
            asked = Some(line);
            version
        },
    )?;
    let path = path.or_else(|| platform::which(choice.launcher.binary))?;
    Some(Installed {
        path,
        version_line: asked,
        choice,
    })
}

/// [`installed`] for the provider `name` names (an alias too).
pub fn installed_named(name: &str) -> Option<Installed> {
    provider::find(name).and_then(installed)
}

fn cached_version(path: &Path) -> Result<String, String> {
    static SEEN: Mutex<Option<HashMap<PathBuf, Result<String, String>>>> = Mutex::new(None);
    if let Some(line) = SEEN
        .lock()
        .ok()
        .and_then(|seen| seen.as_ref()?.get(path).cloned())
    {
        return line;
    }
    let line = version(path);
    if let Ok(mut seen) = SEEN.lock() {
        seen.get_or_insert_with(HashMap::new)
            .insert(path.to_owned(), line.clone());
    }
    line
}

/// The first line `--version` prints, within [`VERSION_TIMEOUT`]: a
/// binary that hangs is killed, never waited for.
pub fn version(path: &Path) -> Result<String, String> {
    let mut child = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = String::new();
                if let Some(mut stdout) = child.stdout.take() {
                    use std::io::Read as _;
                    let _ = stdout.read_to_string(&mut out);
                }
                let line = out.lines().next().unwrap_or("").trim().to_owned();
                return if status.success() {
                    Ok(line)
                } else {
                    Err(format!("failed ({status})"))
                };
            }
            Ok(None) if started.elapsed() < VERSION_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "did not answer within {}s",
                    VERSION_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("cannot be waited for: {e}")),
        }
    }
}
