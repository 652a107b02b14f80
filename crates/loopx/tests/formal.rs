//! The formal (Lean) policy through the real binary: each value's prompt
//! section, its sources and their order, bad values refused with nothing
//! written, the drive's pin and the agent's environment, and the force
//! tick with a fake `lake` on PATH that passes, fails, hangs or is not
//! there, until its credits run out.

mod common;

use common::{journal_events, Fixture};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Command;

const FORMAL_VARIABLES: [&str; 6] = [
    "AAS_AUTOLOOP_FORMAL_POLICY",
    "AAS_AUTOLOOP_FORMAL_PROJECT",
    "AAS_AUTOLOOP_FORMAL_FORCE",
    "AAS_AUTOLOOP_FORMAL_TYPECHECK",
    "AAS_AUTOLOOP_FORMAL_FORCE_CREDITS",
    "AAS_AUTOLOOP_FORMAL_TYPECHECK_TIMEOUT",
];

/// `loopx` without any formal variable of the test's own environment.
fn loopx(f: &Fixture) -> assert_cmd::Command {
    let mut command = f.loopx();
    for name in FORMAL_VARIABLES {
        command.env_remove(name);
    }
    command
}

fn init(f: &Fixture, extra: &[&str]) {
    loopx(f)
        .args(f.init_words())
        .args(["--max-iterations", "10"])
        .args(extra)
        .assert()
        .success();
}

#[test]
fn init_replayed_by_operation_id_records_the_standing_orders_once() {
    let f = Fixture::new();
    for _ in 0..2 {
        init(&f, &["--formal-policy", "auto", "--operation-id", "init-1"]);
    }
    assert_eq!(journal_events(&f.dir, "formal.orders_set").len(), 1);
    f.assert_valid();
}

#[test]
fn a_bad_value_is_refused_and_changes_nothing() {
    let f = Fixture::new();
    for bad in [
        &["--formal-policy", "forse"][..],
        &["--formal-project", "../outside"],
        &["--formal-project", "/abs"],
        &["--formal-force-credits", "-1"],
    ] {
        let output = loopx(&f).args(f.init_words()).args(bad).output().unwrap();
        assert!(!output.status.success(), "{bad:?}");
        assert!(!f.dir.exists(), "{bad:?} wrote the loop");
    }

    init(&f, &["--formal-policy", "on"]);
    let before = f.fingerprint();
    let d = Driven::new(f);
    let agent = d.agent("");
    for (name, value) in [
        ("AAS_AUTOLOOP_FORMAL_POLICY", "strict"),
        ("AAS_AUTOLOOP_FORMAL_FORCE", "please"),
        ("AAS_AUTOLOOP_FORMAL_PROJECT", "../up"),
    ] {
        let (code, stderr) = d.drive_with(&["--cmd", &agent], &[(name, value)]);
        assert_eq!(code, 2, "{name}: {stderr}");
        assert!(stderr.contains(name), "the variable is named: {stderr}");
        assert_eq!(d.f.fingerprint(), before, "{name} changed the loop");
    }
    std::fs::write(
        d.f.dir.join("formal/formal_policy.json"),
        r#"{"policy": "sometimes"}"#,
    )
    .unwrap();
    let before = d.f.fingerprint();
    let (code, stderr) = d.drive_with(&["--cmd", &agent], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("formal_policy.json") && stderr.contains("\"sometimes\""),
        "{stderr}"
    );
    assert_eq!(d.f.fingerprint(), before);
}

/// A drive on a loop: a project root, and a PATH whose first folder
/// holds the scripts written for it (`Fixture::fake_provider`'s).
struct Driven {
    f: Fixture,
    root: PathBuf,
    path: String,
}

impl Driven {
    fn new(f: Fixture) -> Self {
        let (root, path) = f.fake_provider("noop", "exit 0");
        Driven { f, root, path }
    }

    fn script(&self, name: &str, body: &str) -> String {
        self.f.fake_provider(name, body);
        self.f
            .temp
            .path()
            .join("bin")
            .join(name)
            .display()
            .to_string()
    }

    /// An agent that runs `before`, then records one iteration.
    fn agent(&self, before: &str) -> String {
        self.script(
            "agent",
            &format!(
                "{before}\nloopx append-iteration --mode bounded-research --objective turn --decision continue >/dev/null"
            ),
        )
    }

    fn drive_with(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
        let output = loopx(&self.f)
            .args(["drive", "--dir", self.f.d(), "--root"])
            .arg(&self.root)
            .args(args)
            .env("PATH", &self.path)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

#[test]
fn the_pin_is_written_once_per_drive_start_and_the_agent_is_told_the_policy() {
    let f = Fixture::new();
    init(&f, &["--formal-policy", "on"]);
    let d = Driven::new(f);
    let seen = d.f.temp.path().join("seen");
    let agent = d.agent(&format!(
        "{{ env | grep '^AAS_AUTOLOOP_FORMAL_' | sort; cat \"$LOOPX_DIR/formal/host_policy.pin.json\"; }} >> {}",
        seen.display()
    ));
    // The flag is over the environment, and the turns go by it.
    let (code, stderr) = d.drive_with(
        &[
            "--cmd",
            &agent,
            "--max-iterations",
            "2",
            "--formal-policy",
            "force",
        ],
        &[("AAS_AUTOLOOP_FORMAL_POLICY", "mention-only")],
    );
    assert_eq!(code, 0, "{stderr}");
    let pin_path = d.f.dir.join("formal/host_policy.pin.json");
    let first: Value = serde_json::from_slice(&std::fs::read(&pin_path).unwrap()).unwrap();
    assert_eq!(first["policy"], "force");
    assert_eq!(first["project"], "formal/");
    assert_eq!(first["force_credits"], 3);
    assert_eq!(first["pin_source"], "drive_start");
    assert_eq!(first["schema_version"], "formal_policy.v1");
    let mode = std::fs::metadata(&pin_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the pin is private");
    let told = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(
        told.matches("AAS_AUTOLOOP_FORMAL_POLICY=force\n").count(),
        2,
        "{told}"
    );
    assert!(
        told.contains("AAS_AUTOLOOP_FORMAL_PROJECT=formal/\n"),
        "{told}"
    );
    assert!(told.contains("AAS_AUTOLOOP_FORMAL_FORCE=0\n"), "{told}");
    assert_eq!(
        told.matches(first["pinned_at"].as_str().unwrap()).count(),
        2,
        "both turns saw the one pin of this start: {told}"
    );
    // The resolved policy became the standing orders: the next drive,
    // without the flag, goes by them.
    let orders = journal_events(&d.f.dir, "formal.orders_set");
    assert_eq!(orders.last().unwrap()["settings"]["policy"], "force");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (code, stderr) = d.drive_with(&["--cmd", &agent, "--max-iterations", "1"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let second: Value = serde_json::from_slice(&std::fs::read(&pin_path).unwrap()).unwrap();
    assert_eq!(second["policy"], "force");
    assert_ne!(
        second["pinned_at"], first["pinned_at"],
        "a new start, a new pin"
    );
    assert_ne!(second["driver_pid"], first["driver_pid"]);
    d.f.assert_valid();
}

#[test]
fn the_force_flags_help_names_every_source() {
    let help = |command: &str| {
        let output = Command::new(common::loopx_path())
            .args([command, "--help"])
            .output()
            .unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    for command in ["init", "drive"] {
        let text = help(command);
        for flag in [
            "--formal-policy",
            "--formal-project",
            "--formal-force-after-iteration",
            "--formal-typecheck",
            "--formal-force-credits",
            "AAS_AUTOLOOP_FORMAL_POLICY",
        ] {
            assert!(text.contains(flag), "{command} --help lacks {flag}");
        }
    }
}
