//! Waiting out an unreachable store (a PostgreSQL server restarting) in
//! the middle of a run.
//!
//! Owns the retry loop around one store call of the driver: while the call
//! fails because the store cannot be reached, say so on stderr, sleep (the
//! backoff is `loopx_app::driver::outage_backoff`'s) and call again; when it
//! succeeds, say so and leave a note for `status`. Safe because every call
//! retried here is a read or a commit under an operation id fixed before
//! the first try (an intent, a settlement with its charge, a claim's
//! settlement): a commit whose reply was lost replays on the retry and is
//! never applied twice, and no agent is started again. (A wait record is
//! the exception: each try has its own id, so a lost reply can leave the
//! same wait recorded twice, which only repeats what `status` shows.)
//! What counts as
//! unreachable is `loopx_app::error::store_outage`'s; anything else (a
//! refusal, a bug) ends the run as before. Short commands never wait:
//! they report the retryable error and exit.

use anyhow::Result;
use loopx_app::loop_dir::LoopDir;
use loopx_app::{clock, driver};
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
                    super::progress(&format!(
                        "the store is back after {:.1}s; resuming ({what})",
                        down_for.as_secs_f64()
                    ));
                    driver::store_back(dir, std::process::id(), provider, since, down_for);
                }
                return Ok(value);
            }
            Err(error) => error,
        };
        let Some(outage) = loopx_app::error::store_outage(&error) else {
            return Err(error);
        };
        let pause = driver::outage_backoff(attempt);
        if down.is_none() {
            down = Some((clock::now(), Instant::now()));
            reminded = Instant::now();
            super::progress(&format!(
                "{outage}. The driver waits for it ({what}) and tries again with backoff; nothing committed is lost and no turn runs twice"
            ));
        } else if reminded.elapsed() >= REMIND_EVERY {
            reminded = Instant::now();
            super::progress(&format!(
                "the store at {} is still unavailable; still waiting ({what})",
                dir.store_location()
            ));
        }
        std::thread::sleep(pause);
        attempt = attempt.saturating_add(1);
    }
}
