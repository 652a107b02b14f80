//! The review panel as the application runs it: `loopx panel --phase
//! result_review` and `drive --panel`, one use case returning a typed view,
//! and `loopx panel --smoke`, which checks the reviewers answer at all.
//!
//! Owns the IO around the panel's rules: reading `panel.json` (confined,
//! bounded), the environment (consent, the session's invite list, endpoint
//! overrides through the provider family), resolving each reviewer's
//! launcher on PATH, the artifacts under
//! `panel/<candidate>/<phase>/<attempt>-<provider>.{prompt,out,json}`
//! (atomic, mode 0600, output redacted), committing each attempt's start
//! before its launch and its outcome after, and handing a well-formed
//! review to `focus::candidate::review`, the one use case that banks a
//! candidate, or a strategy advice to `focus::strategy::review`, the one
//! that commits a reviewed direction. Does not own any rule (`loopx_core::panel` and
//! `loopx_core::focus::review` do) or the process itself: the caller
//! passes a runner (the binary's, which gives it its own process group, a
//! timeout and a bounded capture).
//!
//! Files by job: `advice` (the target-advice brief from the loop's state,
//! and the synthesis the primary reads), `config` (panel.json, the
//! switches, a new loop's mode),
//! `launch` (the runner seam: what to run, what came of it), `prepare`
//! (the checks before a run, the attempts left), `run` (the attempts and
//! the run's view), `smoke` (`--smoke`); their items are re-exported here.

mod advice;
mod config;
mod launch;
mod prepare;
mod run;
mod smoke;

pub use config::{configured, enabled, load_config, mode_for_new_loop};
pub use launch::{Launch, Ran, OUTPUT_BYTES};
pub use prepare::{budget, prepare, prepare_merge, Prepared};
pub use run::{AttemptView, MergeDecision, PanelView, ARTIFACTS};
pub use smoke::{ping, smoke, SmokeReviewer, SmokeView, SMOKE_PROMPT, SMOKE_TIMEOUT_S};
