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

#[cfg(test)]
mod snapshots;
