//! The platform, fenced: processes, signals, the subreaper, private files,
//! the PATH search and per-process randomness. Every call into libc and
//! every read of `/proc` lives below this module, so the rest of the code
//! sees only the portable functions here.
//!
//! `unix.rs` holds what every Unix has (process groups, signals, the
//! pre-exec handshake, private files, `which`); `linux.rs` what only Linux
//! has (the child-subreaper role, `/proc`); `fallback.rs` stands in for it
//! on the other Unixes, where the process group is the only fence. File
//! locks need nothing here: `std::fs::File::try_lock` is portable. The
//! confined reads built on [`open_child`] are `crate::fsutil`'s.

#[cfg(not(target_os = "linux"))]
mod fallback;
mod limits;
#[cfg(target_os = "linux")]
mod linux;
mod unix;

pub use limits::{check_inherited_limits, limit_before_exec};

#[cfg(not(target_os = "linux"))]
use fallback as os;
#[cfg(target_os = "linux")]
use linux as os;

pub use unix::{
    alive, append_private, catch_stop_signals, create_private, effective_uid, exists, free_bytes,
    group_alive, hostname, in_new_group, in_new_session, kill_adopted, kill_group, kill_pid,
    make_private_dir, may_write, open_child, open_untrusted, reap_exited, run_turns_concurrently,
    spawn_recorded, spawn_turn, stop_is_urgent, stop_signal, sweep_after_turn, sync_dir, terminate,
    terminate_group, which,
};

/// When process `pid` started (clock ticks since boot), where the platform
/// says: with the pid it names one process across pid reuse.
pub fn start_time(pid: u32) -> Option<u64> {
    os::start_time(pid)
}

/// Swap the two existing files `a` and `b` in one step, where the platform
/// can (Linux: `renameat2(RENAME_EXCHANGE)`); an error of kind
/// `Unsupported` or `InvalidInput` where it cannot, `NotFound` when either
/// is missing.
pub fn exchange(a: &std::path::Path, b: &std::path::Path) -> std::io::Result<()> {
    os::exchange(a, b)
}

/// Have the process `command` starts get SIGTERM when this one dies,
/// where the platform can (Linux: `PR_SET_PDEATHSIG`); elsewhere nothing.
pub fn die_with_parent(command: &mut std::process::Command) -> &mut std::process::Command {
    os::die_with_parent(command)
}

/// Become the reaper of every orphaned descendant, so that a process a
/// turn detaches (`setsid`, a double fork) is re-parented to this process
/// instead of init and [`kill_adopted`] can find it. Returns whether the
/// platform supports it.
pub fn become_subreaper() -> bool {
    os::become_subreaper()
}

/// A number that differs between processes and between calls (the
/// standard library's per-process random hash keys, mixed with the pid and
/// the clock): enough to keep generated names apart, not a secret.
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    hasher.finish()
}

/// Eight hex digits from [`random_u64`]: enough to keep the names of two
/// drivers' writes apart, not a secret.
pub fn nonce() -> String {
    format!("{:08x}", random_u64() as u32)
}

/// `bytes` bytes from the kernel's random source, as hex: for secrets
/// (tokens, one-time links, sessions).
pub fn secret_hex(bytes: usize) -> std::io::Result<String> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(std::io::Error::other)?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

/// How often whatever waits looks at the stop signal (a sleep, a running
/// process's watch): the longest a stop waits to be noticed.
pub const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Sleep up to `duration`, waking early when a stop signal comes (see
/// [`catch_stop_signals`]). Returns whether one came.
pub fn pause(duration: std::time::Duration) -> bool {
    use std::time::Instant;
    let until = Instant::now() + duration;
    loop {
        if stop_signal().is_some() {
            return true;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(left.min(STOP_POLL));
    }
}
