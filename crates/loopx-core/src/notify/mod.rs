//! Notify v2: the structured progress event an operator receives, and how
//! it reads. The runtime supplies finalized facts; this module validates
//! them into an [`Event`] (schema 2.1), redacts it for leaving the host and
//! renders it by the profile stored on it.
//!
//! Pure: no clock, no network, no files. Choosing a profile from
//! configuration, the audit log, transports, consent and dedupe memory
//! belong to the application layer (`loopx_app::notify`).

mod event;
mod render;

pub use event::*;
pub use render::{escape_html, render, Format, TELEGRAM_LIMIT};

use crate::digest::Digest;

impl Event {
    /// What dedupe remembers: the event and its body, without the wall
    /// clock of this attempt, so a re-sent event matches its first send.
    /// Here, not beside the event, because it reads the rendering, which
    /// reads the event.
    pub fn fingerprint(&self) -> Digest {
        let mut timeless = self.clone();
        timeless.occurred_at = None;
        let body = render(&timeless, Format::Markdown);
        Digest::of_json(&(timeless, body))
    }
}

#[cfg(test)]
mod snapshots;
