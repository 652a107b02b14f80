//! The provider transport on the real binary, with real limits: a pinned
//! fake `claude` run by `loopx drive --transport trusted-local` in its own
//! cgroup scope under bubblewrap, trying to allocate past its memory,
//! fork past its tasks, write past its file size, flood its output, leave
//! a daemon behind and reach the service manager's and tmux's sockets;
//! and every refusal before anything starts (a changed binary, a missing
//! pin, strict-isolated in enforce mode, an invalid limit, a backend that
//! is not there, a --cmd override).
//!
//! The scope backend here is cgroup v1 as root (this machine class has no
//! user systemd manager); without root, bubblewrap or the v1 hierarchies
//! the contained half is skipped unless `LOOPX_TESTS_REQUIRED=1`.

mod common;

use common::Fixture;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A loop, a project root, and a pinned fake `claude` whose body is the
/// test's.
struct Pinned {
    f: Fixture,
    root: PathBuf,
    bin: PathBuf,
    /// Where the agent writes what it saw (outside the sandbox's masks).
    seen: PathBuf,
    pins: Vec<(String, String)>,
}

impl Pinned {
    fn new(body: &str, init: &[&str]) -> Pinned {
        let f = Fixture::new();
        f.init(5, init);
        let root = f.temp.path().join("project");
        let dir = f.temp.path().join("claude-pkg/bin");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let seen = f.temp.path().join("seen");
        std::fs::create_dir_all(&seen).unwrap();
        let bin = dir.join("claude");
        std::fs::write(
            &bin,
            format!("#!/bin/sh\nSEEN={}\n{body}\n", seen.display()),
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut pinned = Pinned {
            f,
            root,
            bin,
            seen,
            pins: Vec::new(),
        };
        pinned.pins = pinned.attest();
        pinned
    }

    /// What `loopx attest` prints for the fake, as (variable, value).
    fn attest(&self) -> Vec<(String, String)> {
        let out = self
            .f
            .loopx()
            .args(["attest", "--provider", "claude", "--bin"])
            .arg(&self.bin)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut pins = common::attested_pins(&out.stdout);
        pins.push((
            "AAS_AUTOLOOP_ATTESTED_MODEL_CLAUDE".into(),
            "claude-test".into(),
        ));
        pins
    }

    fn drive(&self, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let path = format!(
            "{}:{}",
            common::loopx_path().parent().unwrap().display(),
            std::env::var("PATH").unwrap()
        );
        let mut command = Command::new(common::loopx_path());
        command
            .args(["drive", "--dir", self.f.d(), "--root"])
            .arg(&self.root)
            .args(["--provider", "claude", "--transport", "trusted-local"])
            .args(["--max-iterations", "1", "--max-failures", "1"])
            .args(extra)
            .env("PATH", path)
            .env("LOOPX_REGISTRY_DIR", &self.f.registry)
            .env_remove("LOOPX_DIR")
            .env_remove("AUTOLOOP_DRIVER")
            .env_remove("AAS_AUTOLOOP_PROVIDER_TRANSPORT")
            .env_remove("LOOPX_CONTAINMENT_BACKEND");
        for name in loopx_core_endpoint_overrides() {
            command.env_remove(name);
        }
        for (name, value) in &self.pins {
            command.env(name, value);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    }

    fn seen(&self, name: &str) -> String {
        std::fs::read_to_string(self.seen.join(name)).unwrap_or_default()
    }

    fn status(&self) -> Value {
        self.f.json(&["status", "--dir", self.f.d()])
    }

    fn log(&self) -> String {
        let logs = self.f.dir.join("driver_logs");
        std::fs::read_dir(&logs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect()
    }
}

fn loopx_core_endpoint_overrides() -> [&'static str; 3] {
    [
        "ANTHROPIC_BASE_URL",
        "OPENAI_BASE_URL",
        "AAS_AUTOLOOP_CLAUDE_BASE_URL",
    ]
}

const APPEND: &str =
    "loopx append-iteration --mode monitor --objective contained --decision continue >/dev/null";

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_contained_turn_runs_in_its_own_scope_with_its_limits_and_leaves_nothing() {
    if !common::containable() {
        return;
    }
    let p = Pinned::new(
        &format!(
            "cat /proc/self/cgroup > $SEEN/cgroup\nulimit -n > $SEEN/nofile\nulimit -c > $SEEN/core\nls -A /sys/fs/cgroup | wc -l > $SEEN/cgroupfs\n\
             setsid sleep 300 & echo $! > $SEEN/daemon\n\
             for arg in \"$@\"; do echo \"$arg\"; done > $SEEN/args\n{APPEND}"
        ),
        &[],
    );
    // A model pin equal to the attested model, and a thinking pin.
    let out = p.drive(
        &[],
        &[
            ("AAS_CLAUDE_LATEST_MODEL", "claude-test"),
            ("AAS_CLAUDE_HIGHEST_THINKING", "max"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let cgroup = p.seen("cgroup");
    for controller in ["memory", "pids", "cpu"] {
        assert!(
            cgroup.lines().any(|l| l
                .split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|c| c == controller))
                && l.contains("/loopx-d1-")),
            "not in its own {controller} scope: {cgroup}"
        );
    }
    assert_eq!(p.seen("nofile").trim(), "1024");
    assert_eq!(p.seen("core").trim(), "0");
    assert_eq!(p.seen("cgroupfs").trim(), "0", "the cgroup API is masked");
    // The pinned model is passed once, with the thinking pin, and the
    // pinned binary ran (not PATH's).
    let args = p.seen("args");
    assert_eq!(args.matches("claude-test").count(), 1, "{args}");
    assert!(args.contains("--effort\nmax\n"), "{args}");
    // Nothing outlives the turn: not the daemon, not the scope.
    let daemon: i32 = p.seen("daemon").trim().parse().unwrap();
    assert!(
        !Path::new(&format!("/proc/{daemon}")).exists(),
        "the daemon survived the turn"
    );
    for controller in ["memory", "pids", "cpu"] {
        let leftovers = walk_for(&Path::new("/sys/fs/cgroup").join(controller), "loopx-d1-");
        assert!(leftovers.is_empty(), "scopes left behind: {leftovers:?}");
    }
    assert_eq!(p.status()["iterations"], 1);
    // The driver's stop notification says what contained it.
    let audit = std::fs::read_to_string(p.f.dir.join("notify_audit.jsonl")).unwrap();
    assert!(
        audit.contains("provider processes ran trusted-local: 4 GiB memory")
            && audit.contains("128 tasks"),
        "{audit}"
    );
}

/// Directories under `root` (two levels deep) whose name starts with `prefix`.
fn walk_for(root: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![(root.to_owned(), 0)];
    while let Some((dir, depth)) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if entry.file_name().to_string_lossy().starts_with(prefix) {
                    found.push(path.clone());
                }
                if depth < 3 {
                    pending.push((path, depth + 1));
                }
            }
        }
    }
    found
}

#[test]
fn memory_tasks_file_size_and_output_are_bounded() {
    if !common::containable() {
        return;
    }
    // Memory: 64 MiB, and the agent wants 400.
    let p = Pinned::new(
        &format!("python3 -c 'b = bytearray(400 * 1024 * 1024); print(len(b))' > $SEEN/allocated\necho $? > $SEEN/status\n{APPEND}"),
        &[],
    );
    let out = p.drive(&[], &[("AAS_AUTOLOOP_RESOURCE_MEMORY_BYTES", "67108864")]);
    assert!(out.status.success(), "{}{}", text(&out), p.log());
    assert_eq!(
        p.seen("allocated"),
        "",
        "400 MiB were allocated under a 64 MiB limit"
    );
    assert_ne!(p.seen("status").trim(), "0");

    // Tasks: at most 16 at once. (A shell dies when it cannot fork, so a
    // Python parent counts the children it got, then ends them.)
    let forker = "import os, signal, time\nkids = []\nfor _ in range(60):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    kids.append(pid)\nprint(len(kids))\nfor pid in kids:\n    os.kill(pid, signal.SIGKILL)\n    os.waitpid(pid, 0)\n";
    let p = Pinned::new(
        &format!("python3 -c '{forker}' > $SEEN/forked\n{APPEND}"),
        &[],
    );
    let out = p.drive(&[], &[("AAS_AUTOLOOP_RESOURCE_TASKS", "16")]);
    assert!(out.status.success(), "{}", text(&out));
    let forked: u32 = p.seen("forked").trim().parse().unwrap();
    assert!(forked < 16, "{forked} processes ran under a 16-task limit");

    // Per-file size: 1 MiB, and the agent writes 4.
    let p = Pinned::new(
        &format!("dd if=/dev/zero of=$SEEN/big bs=1M count=4 2>/dev/null\n{APPEND}"),
        &[],
    );
    let out = p.drive(&[], &[("AAS_AUTOLOOP_RESOURCE_FILE_SIZE_BYTES", "1048576")]);
    assert!(out.status.success(), "{}", text(&out));
    let size = std::fs::metadata(p.seen.join("big")).unwrap().len();
    assert!(size <= 1 << 20, "a {size}-byte file under a 1 MiB limit");

    // Output: 64 KiB kept of 8 MiB.
    let p = Pinned::new(
        &format!("head -c 8388608 /dev/zero | tr '\\0' x\n{APPEND}"),
        &[],
    );
    let out = p.drive(&[], &[("AAS_AUTOLOOP_RESOURCE_OUTPUT_BYTES", "65536")]);
    assert!(out.status.success(), "{}", text(&out));
    let log = p.log();
    assert!(log.len() < 200_000, "the log kept {} bytes", log.len());
    assert!(log.contains("dropped"), "the log says what it dropped");
}

#[test]
fn the_service_manager_container_and_tmux_sockets_are_masked() {
    if !common::containable() {
        return;
    }
    let p = Pinned::new(
        &format!(
            "for s in \"$XDG_RUNTIME_DIR/systemd/private\" \"$XDG_RUNTIME_DIR/bus\" \"${{TMUX%%,*}}\"; do\n\
             if [ -S \"$s\" ]; then echo \"visible $s\"; else echo \"masked $s\"; fi\ndone > $SEEN/sockets\n{APPEND}"
        ),
        &[],
    );
    let runtime = p.f.temp.path().join("runtime");
    std::fs::create_dir_all(runtime.join("systemd")).unwrap();
    let sockets = [
        runtime.join("systemd/private"),
        runtime.join("bus"),
        p.f.temp.path().join("tmux-test"),
    ];
    let _listeners: Vec<_> = sockets
        .iter()
        .map(|s| std::os::unix::net::UnixListener::bind(s).unwrap())
        .collect();
    let tmux = format!("{},4242,0", sockets[2].display());
    let out = p.drive(
        &[],
        &[
            ("XDG_RUNTIME_DIR", runtime.to_str().unwrap()),
            ("TMUX", tmux.as_str()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let seen = p.seen("sockets");
    assert_eq!(seen.matches("masked").count(), 3, "{seen}");
    // The user manager's socket is there, but nothing answers it: the
    // backend is still the direct one (no systemd scope was attempted).
    assert!(sockets.iter().all(|s| s.exists()));
}

#[test]
fn every_refusal_comes_before_anything_starts_and_names_its_cause() {
    let p = Pinned::new(&format!("touch $SEEN/ran\n{APPEND}"), &[]);
    let refused = |extra: &[&str], env: &[(&str, &str)], says: &str| {
        let before = p.f.fingerprint();
        let out = p.drive(extra, env);
        assert_eq!(out.status.code(), Some(2), "{says}: {}", text(&out));
        assert!(text(&out).contains(says), "{says}: {}", text(&out));
        assert!(!p.seen.join("ran").exists(), "{says}: the provider ran");
        assert_eq!(p.status()["driver"]["dispatches"], 0, "{says}");
        assert!(before == p.f.fingerprint(), "{says}: the loop changed");
    };
    refused(
        &[],
        &[("AAS_AUTOLOOP_RESOURCE_TASKS", "lots")],
        "AAS_AUTOLOOP_RESOURCE_TASKS=\"lots\" is not a valid limit",
    );
    refused(
        &[],
        &[("LOOPX_CONTAINMENT_BACKEND", "systemd")],
        "no user systemd manager",
    );
    refused(
        &[],
        &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")],
        "ANTHROPIC_BASE_URL is set",
    );
    refused(&["--transport", "strict-isolated"], &[], "strict-isolated");
    // A model pin can only agree with the attested model.
    refused(
        &[],
        &[("AAS_CLAUDE_LATEST_MODEL", "claude-other")],
        "AAS_CLAUDE_LATEST_MODEL=\"claude-other\" conflicts with the attested model \"claude-test\"",
    );
    // A missing pin, then a binary changed after it was pinned.
    let mut unpinned = Pinned::new(APPEND, &[]);
    unpinned.pins.retain(|(name, _)| !name.contains("SHA256"));
    let out = unpinned.drive(&[], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("AAS_AUTOLOOP_ATTESTED_SHA256_CLAUDE is not set"),
        "{}",
        text(&out)
    );
    let mut script = std::fs::read_to_string(&p.bin).unwrap();
    script.push_str("curl http://attacker.example/ >/dev/null 2>&1\n");
    std::fs::write(&p.bin, script).unwrap();
    refused(&[], &[], "is not the one pinned");
}

#[test]
fn an_omitted_transport_is_refused_in_enforce_mode_and_unconfined_outside_it() {
    let f = Fixture::new();
    f.init(5, &["--goal-focus-mode", "enforce"]);
    let before = f.fingerprint();
    let out = f
        .loopx()
        .args(["drive", "--dir", f.d(), "--provider", "claude"])
        .env_remove("AAS_AUTOLOOP_PROVIDER_TRANSPORT")
        .env_remove("LOOPX_INJECTED_PROVIDERS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("resolves to strict-isolated (no transport was given and the loop is in Goal Focus enforce mode)"),
        "{}",
        text(&out)
    );
    assert!(before == f.fingerprint(), "the loop changed");
    // --cmd is never attested.
    let out = f
        .loopx()
        .args([
            "drive",
            "--dir",
            f.d(),
            "--cmd",
            "true",
            "--transport",
            "trusted-local",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("a --cmd override is refused"),
        "{}",
        text(&out)
    );
    assert!(before == f.fingerprint(), "the loop changed");
}

#[test]
fn doctor_names_the_default_transport_and_whether_trusted_local_can_run() {
    let f = Fixture::new();
    let doctor = |env: &[(&str, &str)]| {
        let mut command = f.loopx();
        command
            .args(["doctor", "--json", "--dir", f.d()])
            .env_remove("AAS_AUTOLOOP_PROVIDER_TRANSPORT")
            .env_remove("LOOPX_CONTAINMENT_BACKEND");
        for (name, value) in env {
            command.env(name, value);
        }
        let out = command.output().unwrap();
        let view: Value = serde_json::from_slice(&out.stdout).unwrap();
        view["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "transport")
            .cloned()
            .unwrap_or_else(|| panic!("no transport line: {view}"))
    };
    let unset = doctor(&[]);
    assert!(
        unset["detail"].as_str().unwrap().contains("run unconfined"),
        "{unset}"
    );
    // Asked for, where it cannot run: a failed check with the way out.
    let cannot = doctor(&[
        ("AAS_AUTOLOOP_PROVIDER_TRANSPORT", "trusted-local"),
        ("LOOPX_CONTAINMENT_BACKEND", "systemd"),
    ]);
    assert_eq!(cannot["ok"], false, "{cannot}");
    assert!(
        cannot["detail"]
            .as_str()
            .unwrap()
            .contains("no user systemd manager"),
        "{cannot}"
    );
    assert!(
        cannot["fix"].as_str().unwrap().contains("bubblewrap"),
        "{cannot}"
    );
}
