//! Waiting out an unreachable store (a PostgreSQL server restarting) in
//! the middle of a run.
//!
//! Owns the retry loop around one store call of the driver: while the call
//! fails because the store cannot be reached, say so on stderr, sleep (the
//! backoff is [`super::outage_backoff`]'s) and call again; when it
//! succeeds, say so and leave a note for `status`. Safe because every call
//! retried here is a read or a commit under an operation id fixed before
//! the first try (an intent, a settlement with its charge, a claim's
//! settlement): a commit whose reply was lost replays on the retry and is
//! never applied twice, and no agent is started again. (A wait record is
//! the exception: each try has its own id, so a lost reply can leave the
//! same wait recorded twice, which only repeats what `status` shows.)
//! What counts as
//! unreachable is [`crate::error::store_outage`]'s; anything else (a
//! refusal, a bug) ends the run as before. Short commands never wait:
//! they report the retryable error and exit.

use super::options::Progress;
use crate::clock;
use crate::loop_dir::LoopDir;
use anyhow::Result;
use std::time::{Duration, Instant};

/// How often a long outage is mentioned again on stderr.
const REMIND_EVERY: Duration = Duration::from_secs(30);

/// Run `call` until it succeeds or fails for a reason other than an
/// unreachable store. `provider` is the one the driver is on, for the
/// note left in `status`.
pub fn through_outages<T>(
    dir: &LoopDir,
    provider: Option<&str>,
    what: &str,
    progress: &dyn Progress,
    mut call: impl FnMut() -> Result<T>,
) -> Result<T> {
    let mut down: Option<(jiff::Timestamp, Instant)> = None;
    let mut reminded = Instant::now();
    let mut attempt = 0u32;
    loop {
        let error = match call() {
            Ok(value) => {
                if let Some((since, started)) = down {
                    let down_for = started.elapsed();
                    progress.say(&format!(
                        "the store is back after {:.1}s; resuming ({what})",
                        down_for.as_secs_f64()
                    ));
                    super::store_back(dir, std::process::id(), provider, since, down_for);
                }
                return Ok(value);
            }
            Err(error) => error,
        };
        let Some(outage) = crate::error::store_outage(&error) else {
            return Err(error);
        };
        let pause = super::outage_backoff(attempt);
        if down.is_none() {
            down = Some((clock::now(), Instant::now()));
            reminded = Instant::now();
            progress.say(&format!(
                "{outage}. The driver waits for it ({what}) and tries again with backoff; nothing committed is lost and no turn runs twice"
            ));
        } else if reminded.elapsed() >= REMIND_EVERY {
            reminded = Instant::now();
            progress.say(&format!(
                "the store at {} is still unavailable; still waiting ({what})",
                dir.store_location()
            ));
        }
        if crate::platform::pause(pause) {
            // Told to stop: the caller's next look at the signal ends the run.
            return Err(error);
        }
        attempt = attempt.saturating_add(1);
    }
}
