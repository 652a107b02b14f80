//! The derived views of a loop directory, rewritten after every commit:
//! `recovery.md` and `status.json` from the ledger, and Goal Focus's
//! projection. Never sources: each is regenerated from the store.
//!
//! Here rather than in `loop_dir` because they read Goal Focus, which
//! reads the loop directory.

use crate::loop_dir::{view_warning, LoopDir, Reading, RECOVERY, STATUS};
use crate::{clock, fsutil};
use loopx_core::ledger::view;

impl LoopDir {
    /// Rewrite `recovery.md` and `status.json` from the store, after a
    /// commit. Never an error: the commit stands whatever happens here (a
    /// command that failed now would invite a retry that duplicates it), so
    /// a view that cannot be written (full disk, a directory in its place)
    /// comes back as a warning for the receipt, and the next write
    /// regenerates it.
    pub fn refresh_views(&self) -> Vec<String> {
        match self.read() {
            Ok(reading) => self.refresh_views_from(&reading),
            Err(error) => vec![view_warning("recovery.md and status.json", error)],
        }
    }

    /// [`refresh_views`](Self::refresh_views) from the state a write just
    /// committed, without reading it back. A view whose text is unchanged
    /// is not rewritten (a read is cheaper than a write and a rename).
    pub fn refresh_views_from(&self, reading: &Reading) -> Vec<String> {
        let Reading { revision, ledger } = reading;
        let verdict = self.verdict(ledger, clock::now());
        let recovery = view::recovery_markdown(ledger, &verdict);
        let mut status = view::status_json(ledger, *revision, &verdict);
        status["dir"] = self.display().into();
        let mut text = serde_json::to_string_pretty(&status).expect("JSON values print");
        text.push('\n');
        let mut warnings: Vec<String> = fsutil::write_views(
            self.root(),
            &[(RECOVERY, recovery.as_bytes()), (STATUS, text.as_bytes())],
        )
        .into_iter()
        .filter_map(|(view, outcome)| outcome.err().map(|error| view_warning(view, error)))
        .collect();
        warnings.extend(crate::focus::refresh_projection(self, ledger));
        warnings
    }

    /// [`refresh_views`](Self::refresh_views) for a caller with no receipt
    /// to carry warnings (the driver): they go to stderr.
    pub fn refresh_views_or_warn(&self) {
        for warning in self.refresh_views() {
            eprintln!("warning: {warning}");
        }
    }
}
