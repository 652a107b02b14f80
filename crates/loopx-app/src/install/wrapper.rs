//! `loopx install --force-loop-wrapper`: `run_force_loop.sh` in the
//! project, a small POSIX sh script that maps the reference force-loop
//! kit's verbs (bootstrap, start, drain, stop, status) to `loopx`
//! commands, so an operator's habits and scripts keep working.
//!
//! Owns the script's text and the rule for writing it: the script carries
//! a marker line, and a file without it (someone else's) is never
//! overwritten or removed unless forced. Not here: the runtimes' skill,
//! MCP and hook files (`files.rs`, with their records and undo manifests:
//! the wrapper is a whole file loopx owns, so its marker is its record).

use crate::fsutil;
use anyhow::{bail, Context as _, Result};
use serde::Serialize;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

/// The script's name in the project.
pub const WRAPPER: &str = "run_force_loop.sh";
/// The line that says loopx wrote the file (and may write it again).
pub const MARKER: &str = "# loopx-force-loop-wrapper: written by `loopx install --force-loop-wrapper`; remove this line to keep loopx from rewriting or removing this file";

/// What was done with the wrapper.
#[derive(Debug, Clone, Serialize)]
pub struct WrapperChange {
    pub path: String,
    /// `created`, `updated`, `unchanged`, `removed`, `absent` or `kept: ...`
    /// (`would be ...` on a dry run).
    pub action: String,
}

/// Text for a shell single-quoted word: `'` closes, escapes and reopens.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r#"'\''"#))
}

/// The script: `loopx` is the binary that wrote it unless `$LOOPX` names
/// another; the loop directory is `$LOOPX_DIR` unless `dir` is given (an
/// explicit `--dir` among the arguments wins over both, as loopx reads it).
pub fn script(loopx: &Path, version: &str, dir: Option<&str>) -> String {
    let default_dir = match dir {
        Some(dir) => format!(
            "LOOPX_DIR=\"${{LOOPX_DIR:-{}}}\"\nexport LOOPX_DIR\n",
            sh_quote(dir)
        ),
        None => String::new(),
    };
    format!(
        r#"#!/bin/sh
{MARKER}
# loopx {version}. The reference force-loop kit's verbs as loopx commands;
# every other argument is passed through as it is:
#   bootstrap ... -> loopx bootstrap ...
#   start ...     -> loopx start ...       (the supervisor)
#   drain ...     -> loopx drain ...       (stop after the turn; --cancel-dispatch-id, --recover-quarantine)
#   stop ...      -> loopx stop ...
#   status ...    -> loopx service-status ...
# and, as loopx names them: replace, smoke, logs.
set -eu
LOOPX="${{LOOPX:-{loopx}}}"
{default_dir}if [ "$#" -eq 0 ]; then
    echo "usage: $0 bootstrap|start|drain|stop|status|replace|smoke|logs [ARGS...]" >&2
    exit 2
fi
verb=$1
shift
case "$verb" in
    bootstrap|start|drain|stop|replace|smoke|logs) exec "$LOOPX" "$verb" "$@" ;;
    status) exec "$LOOPX" service-status "$@" ;;
    *)
        echo "$0: unknown verb '$verb' (bootstrap, start, drain, stop, status, replace, smoke, logs)" >&2
        exit 2
        ;;
esac
"#,
        loopx = sh_quote(&loopx.display().to_string()),
    )
}

/// Whether the file at `path` is loopx's wrapper: `None` when there is none.
/// A symlink in its place is refused.
fn ours(path: &Path) -> Result<Option<(bool, Vec<u8>)>> {
    match fsutil::read_no_follow(path) {
        Ok(bytes) => {
            let marked = String::from_utf8_lossy(&bytes)
                .lines()
                .any(|line| line == MARKER);
            Ok(Some((marked, bytes)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| {
            format!(
                "cannot read {} (a symlink there is refused)",
                path.display()
            )
        }),
    }
}

/// Write `script` as `project/run_force_loop.sh`, mode 0755. A file there
/// that loopx did not write (no marker line) is refused unless `force`.
pub fn install(project: &Path, script: &str, force: bool, dry_run: bool) -> Result<WrapperChange> {
    let path = project.join(WRAPPER);
    let action = match ours(&path)? {
        Some((_, bytes)) if bytes == script.as_bytes() => "unchanged",
        Some((false, _)) if !force => bail!(
            "{} exists and loopx did not write it (it has no marker line): nothing was written; move it away, or pass --force to replace it",
            path.display()
        ),
        Some(_) => "updated",
        None => "created",
    };
    if !dry_run && action != "unchanged" {
        fsutil::write_durable(&path, script.as_bytes())?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make {} executable", path.display()))?;
    }
    Ok(change(&path, action, dry_run))
}

/// Remove `project/run_force_loop.sh` when loopx wrote it; a file without
/// the marker is kept, and said so (not an error: the rest of the
/// uninstall goes on).
pub fn uninstall(project: &Path, dry_run: bool) -> Result<WrapperChange> {
    let path = project.join(WRAPPER);
    let action = match ours(&path)? {
        None => "absent",
        Some((false, _)) => "kept: loopx did not write it (no marker line)",
        Some((true, _)) => "removed",
    };
    if !dry_run && action == "removed" {
        std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    }
    Ok(change(&path, action, dry_run))
}

fn change(path: &Path, action: &str, dry_run: bool) -> WrapperChange {
    let action = match (dry_run, action) {
        (true, "created" | "updated" | "removed") => format!("would be {action}"),
        _ => action.to_owned(),
    };
    WrapperChange {
        path: path.display().to_string(),
        action,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_quote_in_a_path_stays_one_word() {
        assert_eq!(sh_quote("/a b/it's"), r#"'/a b/it'\''s'"#);
    }

    #[test]
    fn the_script_carries_its_marker_and_maps_status_to_service_status() {
        let text = script(Path::new("/opt/loopx"), "1.0.0", Some("/loops/one"));
        assert!(text.lines().any(|line| line == MARKER));
        assert!(text.contains(r#"status) exec "$LOOPX" service-status "$@""#));
        assert!(text.contains("LOOPX_DIR=\"${LOOPX_DIR:-'/loops/one'}\""));
    }
}
