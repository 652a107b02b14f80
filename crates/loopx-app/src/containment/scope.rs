//! A contained process's cgroup scope: which backend makes it, the scope
//! itself (its limits written, the process joined, everything in it
//! killed and the scope removed when the process is done), and the gate
//! that checks, from inside the process before it execs the provider,
//! that the scope and the inherited limits are the ones asked for.
//!
//! Backends, in the order they are tried:
//! - a user systemd manager that answers (`systemctl --user` through its
//!   private socket, within two seconds):
//!   `systemd-run --user --scope` with the limits as unit properties (the
//!   specification's backend);
//! - a delegated cgroup v2 subtree: this process's cgroup, with the
//!   memory, pids and cpu controllers enabled for its children;
//! - cgroup v1 as root: a leaf under this process's cgroup in each of the
//!   memory, pids and cpu hierarchies.
//!
//! The two direct paths are a deliberate extension of the specification
//! for containers and CI machines, which have no systemd. Where none is
//! available, trusted-local fails before anything starts, naming what is
//! missing. `LOOPX_CONTAINMENT_BACKEND` (`systemd`, `cgroup-v2`,
//! `cgroup-v1`) insists on one.

use crate::AppError;
use loopx_core::containment::limits::{Limits, SCOPE_MARGIN_SECONDS};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The variable that insists on one backend.
pub const BACKEND_ENV: &str = "LOOPX_CONTAINMENT_BACKEND";

const CGROUP_ROOT: &str = "/sys/fs/cgroup";
const V1_CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];
const CPU_PERIOD_US: u64 = 100_000;

/// What makes a contained process's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// `systemd-run --user --scope`.
    SystemdUser,
    /// A leaf under this delegated cgroup v2 directory.
    CgroupV2 { parent: PathBuf },
    /// A leaf under each of these (controller, directory) v1 parents.
    CgroupV1 { parents: Vec<(String, PathBuf)> },
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::SystemdUser => "systemd user scope",
            Backend::CgroupV2 { .. } => "cgroup v2 (delegated)",
            Backend::CgroupV1 { .. } => "cgroup v1 (root)",
        }
    }

    /// The backend this host offers, or why it offers none.
    pub fn probe() -> Result<Backend, AppError> {
        let insisted = std::env::var(BACKEND_ENV).ok().filter(|v| !v.is_empty());
        let systemd = || systemd_user_manager().map(|()| Backend::SystemdUser);
        let v2 = || cgroup_v2().map(|parent| Backend::CgroupV2 { parent });
        let v1 = || cgroup_v1().map(|parents| Backend::CgroupV1 { parents });
        let refuse = |why: String| {
            AppError::refused(format!(
                "trusted-local cannot contain a process here: {why}; nothing was started"
            ))
        };
        match insisted.as_deref() {
            Some("systemd") => systemd().map_err(refuse),
            Some("cgroup-v2") => v2().map_err(refuse),
            Some("cgroup-v1") => v1().map_err(refuse),
            Some(other) => Err(AppError::refused(format!(
                "{BACKEND_ENV}={other:?} is not a backend; accepted: systemd, cgroup-v2, cgroup-v1"
            ))),
            None => systemd().or_else(|systemd| {
                v2().or_else(|v2| v1().map_err(|v1| refuse(format!("{systemd}; {v2}; {v1}"))))
            }),
        }
    }

    /// The scope a process named `name` (a dispatch id) runs in, with
    /// `limits`, for a phase of `timeout`. For the direct backends the
    /// leaf is made and its limits written now; a systemd scope is made by
    /// `systemd-run` when the process starts ([`Scope::command_prefix`]).
    pub fn scope(&self, name: &str, limits: &Limits, timeout: Duration) -> Result<Scope, AppError> {
        let leaf = format!("loopx-{}", sanitize(name));
        let leaves = match self {
            Backend::SystemdUser => Vec::new(),
            Backend::CgroupV2 { parent } => vec![Leaf {
                controller: String::new(),
                dir: parent.join(&leaf),
                files: v2_files(limits),
            }],
            Backend::CgroupV1 { parents } => parents
                .iter()
                .map(|(controller, parent)| Leaf {
                    controller: controller.clone(),
                    dir: parent.join(&leaf),
                    files: v1_files(controller, limits),
                })
                .collect(),
        };
        let scope = Scope {
            backend: self.clone(),
            unit: format!("{leaf}.scope"),
            leaves,
            limits: *limits,
            lifetime: timeout + Duration::from_secs(SCOPE_MARGIN_SECONDS),
        };
        for leaf in &scope.leaves {
            let made = std::fs::create_dir(&leaf.dir).and_then(|()| {
                leaf.files
                    .iter()
                    .try_for_each(|(file, value)| std::fs::write(leaf.dir.join(file), value))
            });
            if let Err(error) = made {
                // Dropping the scope removes what was made of it.
                return Err(AppError::refused(format!(
                    "cannot make the scope {}: {error}; nothing was started",
                    leaf.dir.display()
                )));
            }
        }
        Ok(scope)
    }
}

/// One cgroup directory of a scope and the limit files written in it.
#[derive(Debug, Clone)]
struct Leaf {
    /// The v1 controller (empty for v2).
    controller: String,
    dir: PathBuf,
    files: Vec<(&'static str, String)>,
}

fn v2_files(limits: &Limits) -> Vec<(&'static str, String)> {
    vec![
        ("memory.max", limits.memory_bytes.to_string()),
        ("memory.swap.max", "0".into()),
        ("pids.max", limits.tasks.to_string()),
        (
            "cpu.max",
            format!("{} {CPU_PERIOD_US}", cpu_quota_us(limits)),
        ),
    ]
}

fn v1_files(controller: &str, limits: &Limits) -> Vec<(&'static str, String)> {
    match controller {
        // With swap accounting, memory and swap together may not exceed
        // memory: zero swap. (`memsw` must be written after the memory
        // limit it may not undercut.)
        "memory" => {
            let mut files = vec![("memory.limit_in_bytes", limits.memory_bytes.to_string())];
            if Path::new(CGROUP_ROOT)
                .join("memory/memory.memsw.limit_in_bytes")
                .exists()
            {
                files.push((
                    "memory.memsw.limit_in_bytes",
                    limits.memory_bytes.to_string(),
                ));
            }
            files.push(("memory.swappiness", "0".into()));
            files
        }
        "pids" => vec![("pids.max", limits.tasks.to_string())],
        "cpu" => vec![
            ("cpu.cfs_period_us", CPU_PERIOD_US.to_string()),
            ("cpu.cfs_quota_us", cpu_quota_us(limits).to_string()),
        ],
        _ => Vec::new(),
    }
}

fn cpu_quota_us(limits: &Limits) -> u64 {
    CPU_PERIOD_US * limits.cpu_percent / 100
}

/// A dispatch id as a cgroup and unit name: letters, digits, `-`, `_`.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One contained process's scope.
#[derive(Debug)]
pub struct Scope {
    backend: Backend,
    /// The systemd unit name (`loopx-<name>.scope`).
    unit: String,
    leaves: Vec<Leaf>,
    limits: Limits,
    /// The phase's wall timeout plus the scope margin.
    lifetime: Duration,
}

impl Scope {
    /// What comes before the gate on the command line: `systemd-run` with
    /// the limits as properties for the systemd backend, nothing for the
    /// direct ones (the runner joins the held process to the leaf).
    pub fn command_prefix(&self) -> Vec<String> {
        match self.backend {
            Backend::SystemdUser => {
                let l = &self.limits;
                vec![
                    "systemd-run".into(),
                    "--user".into(),
                    "--scope".into(),
                    "--quiet".into(),
                    "--collect".into(),
                    format!("--unit={}", self.unit),
                    format!("--property=MemoryMax={}", l.memory_bytes),
                    "--property=MemorySwapMax=0".into(),
                    format!("--property=TasksMax={}", l.tasks),
                    format!("--property=CPUQuota={}%", l.cpu_percent),
                    format!("--property=RuntimeMaxSec={}", self.lifetime.as_secs()),
                    "--".into(),
                ]
            }
            _ => Vec::new(),
        }
    }

    /// What puts a held process in this scope, for the thread that holds
    /// it (nothing to do for systemd, which puts its own process there).
    pub fn joiner(&self) -> Joiner {
        Joiner {
            procs: self
                .leaves
                .iter()
                .map(|leaf| leaf.dir.join("cgroup.procs"))
                .collect(),
        }
    }

    /// What the gate must find from inside the process.
    pub fn expectation(&self) -> Expectation {
        let leaves = match &self.backend {
            Backend::SystemdUser => vec![ExpectedLeaf {
                controller: String::new(),
                mount: PathBuf::from(CGROUP_ROOT),
                suffix: format!("/{}", self.unit),
                files: v2_files(&self.limits)
                    .into_iter()
                    .filter(|(file, _)| *file != "cpu.max")
                    .map(|(f, v)| (f.to_owned(), v))
                    .collect(),
            }],
            _ => self
                .leaves
                .iter()
                .map(|leaf| ExpectedLeaf {
                    controller: leaf.controller.clone(),
                    mount: mount_of(&leaf.controller),
                    suffix: format!(
                        "/{}",
                        leaf.dir.file_name().unwrap_or_default().to_string_lossy()
                    ),
                    files: leaf
                        .files
                        .iter()
                        .filter(|(file, _)| *file != "memory.swappiness")
                        .map(|(f, v)| ((*f).to_owned(), v.clone()))
                        .collect(),
                })
                .collect(),
        };
        Expectation {
            leaves,
            limits: self.limits,
        }
    }

    /// Kill everything left in the scope, then remove it. Never fails:
    /// what cannot be removed is left for the next sweep to find. Dropping
    /// the scope does this.
    fn remove(&self) {
        for leaf in &self.leaves {
            let procs = leaf.dir.join("cgroup.procs");
            for _ in 0..200 {
                let pids: Vec<i32> = std::fs::read_to_string(&procs)
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|line| line.trim().parse().ok())
                    .collect();
                if pids.is_empty() {
                    break;
                }
                for pid in pids {
                    crate::platform::kill_pid(pid);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = std::fs::remove_dir(&leaf.dir);
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Puts a held process in a scope's leaves.
#[derive(Debug, Clone)]
pub struct Joiner {
    procs: Vec<PathBuf>,
}

impl Joiner {
    /// Put the process `pid` in every leaf of the scope.
    pub fn join(&self, pid: u32) -> std::io::Result<()> {
        for procs in &self.procs {
            std::fs::write(procs, pid.to_string())?;
        }
        Ok(())
    }
}

/// The cgroup of `controller` (empty: the unified hierarchy) in a
/// `/proc/<pid>/cgroup` text (`id:controllers:path` lines).
fn cgroup_of<'a>(membership: &'a str, controller: &str) -> Option<&'a str> {
    membership.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path)
    })
}

/// Where the hierarchy of `controller` is mounted (v2: the root).
fn mount_of(controller: &str) -> PathBuf {
    match controller {
        "" => PathBuf::from(CGROUP_ROOT),
        c => Path::new(CGROUP_ROOT).join(c),
    }
}

/// What the gate checks from inside the process before it execs the
/// provider: its cgroup leaf in each hierarchy and the limits read back
/// there, and the POSIX limits it inherited.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Expectation {
    pub leaves: Vec<ExpectedLeaf>,
    pub limits: Limits,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpectedLeaf {
    /// The v1 controller, or empty for the unified hierarchy.
    pub controller: String,
    pub mount: PathBuf,
    /// How the leaf's path in `/proc/self/cgroup` must end.
    pub suffix: String,
    /// Limit files in the leaf and the values they must hold.
    pub files: Vec<(String, String)>,
}

/// Whether this process (the gate, about to exec the provider) runs in
/// the scope `expected` describes with the limits it asks for.
pub fn gate(expected: &Expectation) -> Result<(), String> {
    let membership = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    for leaf in &expected.leaves {
        let path = cgroup_of(&membership, &leaf.controller)
            .ok_or_else(|| format!("not in a {} cgroup", leaf_name(leaf)))?;
        if !path.ends_with(&leaf.suffix) {
            return Err(format!(
                "in the {} cgroup {path}, not in the scope …{} asked for",
                leaf_name(leaf),
                leaf.suffix
            ));
        }
        let dir = leaf.mount.join(path.trim_start_matches('/'));
        for (file, value) in &leaf.files {
            let found = std::fs::read_to_string(dir.join(file))
                .map_err(|e| format!("cannot read {}: {e}", dir.join(file).display()))?;
            // v2 writes `max` back as is; compare numbers as numbers.
            let first = found.split_whitespace().next().unwrap_or("");
            if first != value.split_whitespace().next().unwrap_or("") {
                return Err(format!(
                    "{} holds {:?}, not the {value:?} asked for",
                    dir.join(file).display(),
                    found.trim()
                ));
            }
        }
    }
    crate::platform::check_inherited_limits(&expected.limits)
}

fn leaf_name(leaf: &ExpectedLeaf) -> &str {
    match leaf.controller.as_str() {
        "" => "unified",
        c => c,
    }
}

/// How long a user systemd manager has to answer before it is taken to
/// be absent.
const SYSTEMD_ANSWER: Duration = Duration::from_secs(2);

/// A user systemd manager that answers: its private socket exists, and
/// `systemctl --user show-environment` succeeds through it in time (a
/// socket nobody serves must not hang every turn).
fn systemd_user_manager() -> Result<(), String> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .ok_or("no user systemd manager (XDG_RUNTIME_DIR is not set)")?;
    let socket = Path::new(&runtime).join("systemd/private");
    if !socket.exists() {
        return Err(format!(
            "no user systemd manager ({} does not exist)",
            socket.display()
        ));
    }
    let mut child = std::process::Command::new("systemctl")
        .args(["--user", "--no-pager", "show-environment"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("no user systemd manager (cannot run systemctl: {e})"))?;
    let asked = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                return Err(format!(
                    "no user systemd manager answers at {} (systemctl --user: {status})",
                    socket.display()
                ))
            }
            Ok(None) if asked.elapsed() < SYSTEMD_ANSWER => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no user systemd manager answers at {} within {}s",
                    socket.display(),
                    SYSTEMD_ANSWER.as_secs()
                ));
            }
        }
    }
}

/// This process's unified cgroup, when it is a delegated subtree with the
/// memory, pids and cpu controllers enabled for its children.
fn cgroup_v2() -> Result<PathBuf, String> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let path = cgroup_of(&membership, "").ok_or("no cgroup v2 hierarchy")?;
    let dir = Path::new(CGROUP_ROOT).join(path.trim_start_matches('/'));
    let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
    let missing: Vec<&str> = V1_CONTROLLERS
        .iter()
        .copied()
        .filter(|c| !enabled.split_whitespace().any(|e| e == *c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "no delegated cgroup v2 subtree ({} does not enable {} for its children)",
            dir.display(),
            missing.join(", ")
        ));
    }
    writable(&dir).map(|()| dir)
}

/// This process's cgroup in each v1 hierarchy it needs, when all are
/// mounted and writable (root).
fn cgroup_v1() -> Result<Vec<(String, PathBuf)>, String> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    V1_CONTROLLERS
        .iter()
        .map(|controller| {
            let path = cgroup_of(&membership, controller)
                .ok_or_else(|| format!("no cgroup v1 {controller} hierarchy"))?;
            let dir = mount_of(controller).join(path.trim_start_matches('/'));
            writable(&dir).map(|()| ((*controller).to_owned(), dir))
        })
        .collect()
}

fn writable(dir: &Path) -> Result<(), String> {
    if crate::platform::may_write(dir) {
        Ok(())
    } else {
        Err(format!("{} is not writable by this user", dir.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopx_core::containment::limits::limits;
    use loopx_core::containment::Role;

    #[test]
    fn a_systemd_scope_carries_every_cgroup_limit_and_the_lifetime_margin() {
        let limits = limits(Role::Panel, &|_| None).unwrap();
        let scope = Backend::SystemdUser
            .scope("d7-abc", &limits, Duration::from_secs(600))
            .unwrap();
        assert_eq!(
            scope.command_prefix(),
            [
                "systemd-run",
                "--user",
                "--scope",
                "--quiet",
                "--collect",
                "--unit=loopx-d7-abc.scope",
                "--property=MemoryMax=3221225472",
                "--property=MemorySwapMax=0",
                "--property=TasksMax=64",
                "--property=CPUQuota=100%",
                "--property=RuntimeMaxSec=615",
                "--",
            ]
        );
        // The gate looks for the unit's own cgroup and its limits.
        let expected = scope.expectation();
        assert_eq!(expected.leaves[0].suffix, "/loopx-d7-abc.scope");
        assert!(expected.leaves[0]
            .files
            .contains(&("pids.max".to_owned(), "64".to_owned())));
    }

    #[test]
    fn a_process_is_found_in_each_hierarchy_of_its_cgroup_file() {
        let membership =
            "9:name=systemd:/\n8:pids:/loopx-d1\n2:cpu,cpuacct:/a/loopx-d1\n0::/user.slice\n";
        assert_eq!(cgroup_of(membership, "pids"), Some("/loopx-d1"));
        assert_eq!(cgroup_of(membership, "cpu"), Some("/a/loopx-d1"));
        assert_eq!(cgroup_of(membership, ""), Some("/user.slice"));
        assert_eq!(cgroup_of(membership, "memory"), None);
        assert_eq!(sanitize("d1-ab/../c"), "d1-ab____c");
    }
}
