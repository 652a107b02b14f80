//! What only Linux offers the driver: the child-subreaper role, the
//! parent-death signal (a supervised driver stops when its supervisor is
//! killed), and the `/proc` walk that finds a process's start time and this process's
//! children; and the views: swapping two files in one step. Reached only through [`super`]; `fallback.rs` is the same API
//! for the other Unixes.

/// When process `pid` started (clock ticks since boot): with the pid it
/// names one process across pid reuse.
pub fn start_time(pid: u32) -> Option<u64> {
    // Field 22 of /proc/<pid>/stat; fields 3.. follow the last ')'.
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// Become the reaper of every orphaned descendant. Returns whether it took.
pub fn become_subreaper() -> bool {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) only sets a flag on this
    // process.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) == 0 }
}

/// Have the kernel send the process `command` starts SIGTERM when this
/// process dies, however it dies (SIGKILL included): a supervised child
/// stops at its next safe point instead of running on unsupervised.
pub fn die_with_parent(command: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid(2) before the fork; prctl(2) and getppid(2) after it
    // are async-signal-safe and touch no memory of ours.
    let parent = unsafe { libc::getpid() };
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the request took: act on it now.
            if libc::getppid() != parent {
                libc::raise(libc::SIGTERM);
            }
            Ok(())
        })
    }
}

/// The pids whose parent is this process: each of its threads' children
/// as the kernel lists them (`/proc/self/task/<tid>/children`, a few
/// reads), or, on a kernel built without that list, from every
/// `/proc/<pid>/stat` (a read per process on the machine). The driver asks
/// after every turn.
pub fn children() -> Vec<u32> {
    listed_children().unwrap_or_else(walked_children)
}

/// The children the kernel lists per thread; `None` when it keeps no list.
fn listed_children() -> Option<Vec<u32>> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let list = match std::fs::read_to_string(task.path().join("children")) {
            Ok(list) => list,
            // A thread that ended since the directory was read...
            Err(_) if !task.path().exists() => continue,
            // ...else the kernel keeps no list (CONFIG_PROC_CHILDREN).
            Err(_) => return None,
        };
        pids.extend(
            list.split_whitespace()
                .filter_map(|pid| pid.parse::<u32>().ok()),
        );
    }
    Some(pids)
}

fn walked_children() -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(me))
        .collect()
}

/// The fields of `/proc/<pid>/stat` from the third on ("pid (comm) state
/// ppid …"; the command name may itself hold parentheses and spaces, so
/// split after the last ')').
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// Swap two existing files in one step (`renameat2(RENAME_EXCHANGE)`).
pub fn exchange(a: &std::path::Path, b: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = |p: &std::path::Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (a, b) = (path(a)?, path(b)?);
    // SAFETY: two NUL-terminated paths resolved against the working
    // directory; the call changes nothing but the two names.
    let swapped = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if swapped == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_list_and_the_walk_both_find_a_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let listed = listed_children();
        let walked = walked_children();
        let either = children();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(walked.contains(&pid), "{walked:?}");
        // Where the kernel keeps the list (most do), it finds it too.
        if let Some(listed) = listed {
            assert!(listed.contains(&pid), "{listed:?}");
        }
        assert!(either.contains(&pid), "{either:?}");
    }
}
