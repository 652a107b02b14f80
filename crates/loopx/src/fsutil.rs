//! File-system primitives with the guarantees loopx relies on. Platform
//! detail stays here.

use anyhow::{Context as _, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

/// Replace `path` with `bytes` so that readers see the old or the new file,
/// never a torn one, and the new one survives a power cut.
pub fn write_durable(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, true)
}

/// As [`write_durable`] without the fsync: for derived views, which the
/// next write regenerates anyway.
pub fn write_view(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, false)
}

/// The temporary file is created exclusively, so a pre-planted symlink at
/// its name is never written through.
fn replace(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let parent = path
        .parent()
        .context("a file to write has a parent directory")?;
    let name = path
        .file_name()
        .context("a file to write has a name")?
        .to_string_lossy();
    let temporary = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    let _ = fs::remove_file(&temporary);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    file.write_all(bytes)?;
    if sync {
        file.sync_data()?;
    }
    drop(file);
    fs::rename(&temporary, path).with_context(|| format!("cannot replace {}", path.display()))
}

/// Read a file that must not be a symlink.
pub fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NOFOLLOW closes the gap between the caller's symlink check and
        // this open.
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let mut bytes = Vec::new();
    options.open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Create a directory (and parents) readable only by its owner.
pub fn create_private_dir(path: &Path) -> Result<()> {
    fs::create_dir_all(path).with_context(|| format!("cannot create {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// An exclusive advisory lock held for as long as the value lives.
pub struct Lock(#[allow(dead_code)] File);

pub fn lock(path: &Path) -> Result<Lock> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open lock file {}", path.display()))?;
    file.lock()
        .with_context(|| format!("cannot lock {}", path.display()))?;
    Ok(Lock(file))
}
