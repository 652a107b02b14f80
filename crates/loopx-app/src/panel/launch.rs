//! The seam between the panel and whatever runs a reviewer's process:
//! what to run ([`Launch`]) and what came of it ([`Ran`]). The caller's
//! runner starts, limits and reaps the process; the panel only reads
//! what it reports.

use loopx_core::driver::provider::{self, Launcher};
use std::path::PathBuf;
use std::time::Duration;

/// The most of a reviewer's stdout the host keeps; the rest is read and
/// dropped, so a runaway reviewer fills neither memory nor the disk.
pub const OUTPUT_BYTES: usize = 1 << 20;

/// One reviewer process to run.
#[derive(Debug, Clone)]
pub struct Launch {
    pub provider: String,
    pub binary: String,
    pub args: Vec<String>,
    /// Its working directory: the attempt's own artifact directory, so it
    /// starts with nothing of the project in view.
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// A name for its process record, unique in the loop.
    pub name: String,
    /// Variables added to its environment: the endpoint its provider's
    /// `AAS_AUTOLOOP_<PROVIDER>_BASE_URL` points it at, as a turn's.
    pub env: Vec<(&'static str, String)>,
}

impl Launch {
    /// Reviewer `provider` with `launcher`, answering `prompt` in `cwd`,
    /// with its model and thinking pins and pointed at the endpoint its
    /// setting names, the way a turn of it is (`provider::pin_args`,
    /// `provider::point_at`). `Err`: a pin is unusable, or the endpoint
    /// setting cannot be honoured (no known way for this CLI, or not a
    /// URL), in words naming it.
    pub fn reviewer(
        provider: &str,
        launcher: &Launcher,
        prompt: &str,
        cwd: PathBuf,
        timeout: Duration,
        name: String,
    ) -> Result<Launch, String> {
        let mut args = launcher.review_argv(prompt, &cwd.display().to_string());
        let pointed = match provider::find(provider) {
            Some(known) => {
                args.extend(crate::driver::env::pin_args(known)?);
                provider::point_at(
                    known,
                    args,
                    crate::driver::env::base_url(provider).as_deref(),
                )?
            }
            None => provider::Launch {
                args,
                env: Vec::new(),
            },
        };
        Ok(Launch {
            provider: provider.to_owned(),
            binary: launcher.binary.to_owned(),
            args: pointed.args,
            cwd,
            timeout,
            name,
            env: pointed.env,
        })
    }
}

/// What came of a reviewer process.
#[derive(Debug, Clone)]
pub struct Ran {
    pub exit_status: Option<i32>,
    pub timed_out: bool,
    pub elapsed: Duration,
    /// At most [`OUTPUT_BYTES`] of its stdout.
    pub stdout: Vec<u8>,
    /// Whether it wrote more than that.
    pub truncated: bool,
}

/// Why a reviewer process left no answer to read, for a person.
pub(super) enum Unanswered {
    TimedOut(String),
    Failed(String),
}

impl Ran {
    /// `None` when the process exited 0 before its timeout, so its output
    /// is worth reading.
    pub(super) fn unanswered(&self, timeout_s: u64) -> Option<Unanswered> {
        if self.timed_out {
            Some(Unanswered::TimedOut(format!(
                "killed (with everything it started) at its {timeout_s}s timeout"
            )))
        } else if self.exit_status != Some(0) {
            let code = self
                .exit_status
                .map_or("a signal".to_owned(), |c| format!("code {c}"));
            Some(Unanswered::Failed(format!("exited with {code}")))
        } else {
            None
        }
    }
}
