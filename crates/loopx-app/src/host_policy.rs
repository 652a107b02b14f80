//! Opening the host policy file (`loopx start --policy-file`,
//! `AAS_FORCE_LOOP_POLICY_FILE`) and the provider secrets file
//! (`--secrets-file`, `AAS_PROVIDER_SECRETS_FILE`) so that only their
//! owner's intent can be read from them: an absolute path outside the loop tree (an agent's turn
//! can write there), opened without following a final symlink, a regular
//! file with one link, owned by the user loopx runs as and private to
//! them, at most [`MAX_BYTES`], unchanged while it is read. Its format is
//! `loopx_core::host_policy`'s.

use crate::AppError;
use loopx_core::host_policy::{self, MAX_BYTES};
use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

/// The variable naming the policy file when `--policy-file` does not.
pub const ENV: &str = "AAS_FORCE_LOOP_POLICY_FILE";
/// The variable naming the secrets file when `--secrets-file` does not.
pub const SECRETS_ENV: &str = "AAS_PROVIDER_SECRETS_FILE";

/// The policy in `path`, for the loop whose directory is `loop_root`.
pub fn load(path: &Path, loop_root: &Path) -> Result<BTreeMap<String, String>, AppError> {
    let text = read_private(path, loop_root, "host policy file")?;
    host_policy::parse(&text, &path.display().to_string())
        .map_err(|problem| AppError::refused(format!("{problem}; nothing was started")))
}

/// Provider credentials: their names can be shown, their values only set
/// in a child's environment (`Debug` prints the names alone).
#[derive(Clone, Default)]
pub struct Secrets(BTreeMap<String, String>);

impl Secrets {
    /// Name and value, for a child's environment.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// The provider credentials in `path`, for the loop whose directory is
/// `loop_root`.
pub fn load_secrets(path: &Path, loop_root: &Path) -> Result<Secrets, AppError> {
    let text = read_private(path, loop_root, "secrets file")?;
    host_policy::parse_secrets(&text, &path.display().to_string())
        .map(Secrets)
        .map_err(|problem| AppError::refused(format!("{problem}; nothing was started")))
}

/// The text of the owner-private file `path` (the `what` of messages).
fn read_private(path: &Path, loop_root: &Path, what: &str) -> Result<String, AppError> {
    let refused = |why: &str| {
        AppError::refused(format!(
            "the {what} {}: {why}; nothing was started",
            path.display()
        ))
    };
    if !path.is_absolute() {
        return Err(refused("give it as an absolute path"));
    }
    let parent = (path.parent())
        .and_then(|p| p.canonicalize().ok())
        .ok_or_else(|| refused("its folder cannot be opened"))?;
    if let Ok(loop_root) = loop_root.canonicalize() {
        if parent.starts_with(&loop_root) {
            return Err(refused(
                "it is inside the loop directory, which an agent's turn can write: keep it outside",
            ));
        }
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            refused(&format!(
                "it cannot be opened as a file ({e}); a symlink is refused"
            ))
        })?;
    let before = file.metadata().map_err(|e| refused(&e.to_string()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if !before.file_type().is_file()
        || before.nlink() != 1
        || before.uid() != euid
        || before.mode() & 0o077 != 0
        || before.len() > MAX_BYTES
    {
        return Err(refused(&format!(
            "it must be a regular file with one link, owned by you (uid {euid}), private to you (mode 0600 or 0400) and at most {MAX_BYTES} bytes"
        )));
    }
    let mut bytes = Vec::new();
    (&mut file)
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refused(&e.to_string()))?;
    let after = file.metadata().map_err(|e| refused(&e.to_string()))?;
    let same = |m: &std::fs::Metadata| {
        (
            m.dev(),
            m.ino(),
            m.len(),
            m.mtime_nsec(),
            m.mtime(),
            m.ctime(),
            m.ctime_nsec(),
            m.nlink(),
        )
    };
    if bytes.len() as u64 > MAX_BYTES || same(&before) != same(&after) {
        return Err(refused("it changed while it was read"));
    }
    String::from_utf8(bytes).map_err(|_| refused("it is not UTF-8"))
}
