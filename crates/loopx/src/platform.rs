//! Process groups and signals. Unix only; the rest of the code never
//! calls libc.

use std::process::Command;

/// Start `command` as the leader of a new process group, so that the
/// whole tree it spawns can be signalled at once.
pub fn in_new_group(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    command.process_group(0)
}

/// SIGKILL every process in group `pgid`. A group that is already gone is
/// not an error.
pub fn kill_group(pgid: u32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        // SAFETY: kill(2) with a negative pid signals a process group; it
        // reads no memory of ours.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Whether any process of group `pgid` is alive.
pub fn group_alive(pgid: u32) -> bool {
    let Ok(pgid) = i32::try_from(pgid) else {
        return false;
    };
    // SAFETY: signal 0 only checks for existence and permission.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// Whether process `pid` is alive.
pub fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: as above.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Whether a process with this pid exists, even one of another user
/// (signal 0 refused with EPERM still proves it exists).
pub fn exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: as above.
    let signalled = unsafe { libc::kill(pid, 0) } == 0;
    signalled || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
