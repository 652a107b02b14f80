//! Every Unix: process groups, signals, the pre-exec handshake that holds
//! an agent until its pid is on disk, private files, and the PATH search.
//! What only Linux offers (the subreaper, `/proc`) is in `linux.rs`, with
//! `fallback.rs` for the other Unixes; callers use [`super`] only.

use loopx_core::driver::session::StopSignal;
use loopx_core::path::FileProblem;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// Start `command` as the leader of a new process group, so that the
/// whole tree it spawns can be signalled at once.
pub fn in_new_group(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    command.process_group(0)
}

/// Create `path` for writing, readable by its owner only, refusing an
/// existing file or symlink at that name.
pub fn create_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Open `path` for appending, creating it readable by its owner only and
/// refusing a symlink at that name. Each `write` of a whole line lands at
/// the end in one piece (`O_APPEND`), so concurrent writers never interleave
/// inside a line.
pub fn append_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Open `path` for reading when it may have been planted by someone else:
/// a symlink is refused, and a FIFO cannot block the open. The caller
/// still checks what it opened (owner, kind) on the open file.
pub fn open_untrusted(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// This process's effective user, which every trusted file must belong to.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Make `dir` readable by its owner only.
pub fn make_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Flush `dir`'s entries (a rename or a create in it) to disk.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Spawn `command` held before it execs: the child reports its pid, then
/// waits until `record(pid)` has returned `Ok` before it becomes the
/// program. When `record` fails, or this process dies first, the child
/// exits without ever running the program, so nothing can act before its
/// identity is on disk.
pub fn spawn_recorded(
    command: &mut Command,
    record: impl FnOnce(u32) -> io::Result<()> + Send + 'static,
) -> io::Result<Child> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    // Both pipes are close-on-exec: the program never inherits them.
    let (mut report_read, report_write) = io::pipe()?;
    let (release_read, mut release_write) = io::pipe()?;
    let report_fd = report_write.as_raw_fd();
    let release_fd = release_read.as_raw_fd();
    let (report_read_fd, release_write_fd) = (report_read.as_raw_fd(), release_write.as_raw_fd());
    let recorder = std::thread::spawn(move || -> io::Result<()> {
        let mut pid = [0u8; 4];
        report_read.read_exact(&mut pid)?;
        record(u32::from_ne_bytes(pid))?;
        release_write.write_all(&[1])
        // Dropping `release_write` without the byte releases nothing: the
        // child sees end-of-file and gives up.
    });
    // SAFETY: the hook runs in the forked child before exec and calls only
    // async-signal-safe functions (close, getpid, write, read) on file
    // descriptors this process created above; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            // Without the parent's ends, a dead parent reads as end-of-file.
            libc::close(report_read_fd);
            libc::close(release_write_fd);
            let pid = libc::getpid().to_ne_bytes();
            if libc::write(report_fd, pid.as_ptr().cast(), pid.len()) != pid.len() as isize {
                return Err(io::Error::last_os_error());
            }
            libc::close(report_fd);
            let mut byte = 0u8;
            loop {
                match libc::read(release_fd, (&raw mut byte).cast(), 1) {
                    1 => return Ok(()),
                    -1 if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
                    _ => {
                        return Err(io::Error::other(
                            "the driver did not record this agent's pid; not starting it",
                        ))
                    }
                }
            }
        });
    }
    let spawned = command.spawn();
    // The child has exec'd or failed: our copies of its ends must go, so a
    // recorder still waiting for a pid sees end-of-file.
    drop(report_write);
    drop(release_read);
    let recorded = recorder
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the pid recorder panicked")));
    match (spawned, recorded) {
        (Ok(child), Ok(())) => Ok(child),
        (Ok(mut child), Err(error)) => {
            // Unreachable in practice (the child only execs once
            // released), but never leave a program running unrecorded.
            let _ = child.kill();
            let _ = child.wait();
            Err(error)
        }
        (Err(_), Err(error)) => Err(error),
        (Err(error), Ok(())) => Err(error),
    }
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

/// SIGKILL the one process `pid`; one that is gone is not an error.
pub fn kill_pid(pid: i32) {
    if pid > 0 {
        // SAFETY: kill(2) with a positive pid signals that process; it
        // reads no memory of ours.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Whether this user may create entries in the directory `dir`.
pub fn may_write(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access(2) reads the NUL-terminated path we own.
    unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// SIGTERM every process in group `pgid`: asks them to end, which they
/// may take a moment to do (see [`kill_group`] for the end that cannot be
/// refused). A group that is already gone is not an error.
pub fn terminate_group(pgid: u32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        // SAFETY: as in `kill_group`.
        unsafe {
            libc::kill(-pgid, libc::SIGTERM);
        }
    }
}

/// SIGTERM the one process `pid`: asks it to end. One that is gone is not
/// an error.
pub fn terminate(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        if pid > 0 {
            // SAFETY: kill(2) with a positive pid signals that process; it
            // reads no memory of ours.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }
}

/// Start `command` in a session of its own (setsid): no controlling
/// terminal, so closing the terminal that started it does not end it, and
/// a process group of its own.
pub fn in_new_session(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| match libc::setsid() {
            -1 => Err(io::Error::last_os_error()),
            _ => Ok(()),
        })
    }
}

/// Reap every child of this process that has exited, but those in `keep`
/// (a child the caller waits for itself): an orphan the subreaper adopted
/// stays a zombie until reaped, and a zombie's group still answers
/// [`group_alive`]. Never blocks.
pub fn reap_exited(keep: &[u32]) {
    for pid in super::os::children() {
        if keep.contains(&pid) {
            continue;
        }
        let Ok(pid) = i32::try_from(pid) else {
            continue;
        };
        let mut status = 0;
        // SAFETY: waitpid(2) on our own child with WNOHANG: it returns at
        // once, whether or not the child has exited.
        unsafe {
            libc::waitpid(pid, &mut status, libc::WNOHANG);
        }
    }
}

/// The first stop signal this process caught (0: none yet), and how many
/// it has caught.
static FIRST_STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);
static STOP_SIGNALS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_stop_signal(signal: libc::c_int) {
    // Only atomics here: a handler may interrupt anything.
    let _ = FIRST_STOP_SIGNAL.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    STOP_SIGNALS.fetch_add(1, Ordering::SeqCst);
}

/// From now on, SIGTERM and SIGINT no longer end this process: they are
/// noted, for [`stop_signal`] to report, and the process stops itself at
/// its next safe point. A program that execs gets the default handling
/// back, so the processes it starts are not affected.
pub fn catch_stop_signals() -> io::Result<()> {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask"
        // value; the handler touches only atomics, which is
        // async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// The first stop signal caught since [`catch_stop_signals`], if any.
pub fn stop_signal() -> Option<StopSignal> {
    match FIRST_STOP_SIGNAL.load(Ordering::SeqCst) {
        libc::SIGINT => Some(StopSignal::Interrupt),
        libc::SIGTERM => Some(StopSignal::Terminate),
        _ => None,
    }
}

/// Whether a second stop signal came (a second Ctrl-C): the person wants
/// it over now, without the grace a first signal gives.
pub fn stop_is_urgent() -> bool {
    STOP_SIGNALS.load(Ordering::SeqCst) >= 2
}

/// This machine's host name (`gethostname(2)`), empty if it has none.
pub fn hostname() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is writable for its length; the name is cut to it.
    let ok = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) } == 0;
    if !ok {
        return String::new();
    }
    let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
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

/// The process groups of the turns running now, while this process runs
/// several at once (`drive --workers`): [`sweep_after_turn`] spares them.
static CONCURRENT_TURNS: std::sync::Mutex<Option<Vec<u32>>> = std::sync::Mutex::new(None);

fn concurrent_turns() -> std::sync::MutexGuard<'static, Option<Vec<u32>>> {
    CONCURRENT_TURNS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// From now on this process runs turns side by side (and git beside
/// them): a turn's end sweeps only what is nobody's, not every child.
pub fn run_turns_concurrently() {
    concurrent_turns().get_or_insert_with(Vec::new);
}

/// [`spawn_recorded`] for a turn's process (it leads its own group): while
/// turns run side by side, its group is known as a running turn's before
/// any sweep can look, so another turn's end never takes it for a
/// leftover.
pub fn spawn_turn(
    command: &mut Command,
    record: impl FnOnce(u32) -> io::Result<()> + Send + 'static,
) -> io::Result<Child> {
    let mut live = concurrent_turns();
    let child = spawn_recorded(command, record)?;
    if let Some(live) = live.as_mut() {
        live.push(child.id());
    }
    Ok(child)
}

/// After the turn whose group was `pgid` is gone: end what it detached
/// (re-parented here by the subreaper). Alone, every child is such a
/// leftover ([`kill_adopted`]). With turns side by side, the children in
/// another running turn's group, and those in this process's own group
/// (the git and helper commands it runs meanwhile), are spared; the run's
/// end sweeps everything ([`kill_adopted`]) once they are done.
pub fn sweep_after_turn(pgid: u32) -> usize {
    let mut live = concurrent_turns();
    let Some(live) = live.as_mut() else {
        return kill_adopted(&[]);
    };
    live.retain(|g| *g != pgid);
    // SAFETY: getpgrp(2) cannot fail.
    let own = unsafe { libc::getpgrp() };
    // Held meanwhile: no turn starts while the sweep looks.
    kill_adopted_unless(&|pid| {
        // SAFETY: getpgid(2) only reads; -1 for a pid already gone.
        let group = unsafe { libc::getpgid(pid as i32) };
        group < 0 || group == own || live.contains(&(group as u32))
    })
}

/// SIGKILL and reap every child of this process except `keep`, over and
/// over until none is left: killing one re-parents its own children here.
/// Returns how many were killed. Call it only when no child of ours should
/// be running (after a turn was waited for).
pub fn kill_adopted(keep: &[u32]) -> usize {
    kill_adopted_unless(&|pid| keep.contains(&pid))
}

/// [`kill_adopted`], sparing each child `spare` says to, asked afresh on
/// every pass.
fn kill_adopted_unless(spare: &dyn Fn(u32) -> bool) -> usize {
    let mut killed = 0;
    // Bounded: a fork bomb cannot keep the driver here forever.
    for _ in 0..10_000 {
        let children: Vec<u32> = super::os::children()
            .into_iter()
            .filter(|p| !spare(*p))
            .collect();
        if children.is_empty() {
            break;
        }
        for pid in children {
            let Ok(pid) = i32::try_from(pid) else {
                continue;
            };
            // SAFETY: `pid` is our own child (its parent is us), so it
            // cannot be a recycled pid until we reap it below.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
            }
            killed += 1;
        }
    }
    killed
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

/// The executable `binary` on PATH, if any.
pub fn which(binary: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The bytes an unprivileged user may still write on the file system
/// holding `path` (`statvfs`).
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    // SAFETY: statvfs fills the zeroed struct it is given; the path is a
    // valid C string that outlives the call.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stats) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    Ok(stats.f_bavail as u64 * stats.f_frsize as u64)
}

/// One step of a confined walk below the loop directory: open `name` in
/// the directory `parent` with `openat(O_NOFOLLOW)`. The name is resolved
/// in the directory already opened, so a rename or a symlink planted above
/// it after the check changes nothing.
pub fn open_child(parent: &File, name: &str, last: bool) -> Result<File, FileProblem> {
    let name = CString::new(name).map_err(|_| FileProblem::Missing)?;
    // Look before opening, so that a FIFO or a device is never opened
    // (opening one can block or have effects); the fstat after the
    // open confirms what was opened.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid directory fd, a NUL-terminated name and a
    // writable stat buffer.
    let looked = unsafe {
        libc::fstatat(
            parent.as_raw_fd(),
            name.as_ptr(),
            &mut stat,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if looked != 0 {
        return Err(problem(std::io::Error::last_os_error()));
    }
    let kind = stat.st_mode & libc::S_IFMT;
    match kind {
        libc::S_IFLNK => return Err(FileProblem::BehindSymlink),
        libc::S_IFREG if last => {}
        libc::S_IFDIR if !last => {}
        _ => return Err(FileProblem::NotARegularFile),
    }
    let mut flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
    if !last {
        flags |= libc::O_DIRECTORY;
    }
    // SAFETY: as above; the returned fd is owned by the File.
    let fd = unsafe { libc::openat(parent.as_raw_fd(), name.as_ptr(), flags) };
    if fd < 0 {
        return Err(problem(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn problem(error: io::Error) -> FileProblem {
    match error.raw_os_error() {
        Some(libc::ENOENT) => FileProblem::Missing,
        Some(libc::ELOOP) => FileProblem::BehindSymlink,
        Some(libc::ENOTDIR) | Some(libc::ENXIO) => FileProblem::NotARegularFile,
        _ => FileProblem::Unreadable(error.to_string()),
    }
}
