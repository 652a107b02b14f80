//! The operator's commands around a supervisor, with real processes and
//! fake provider CLIs (shell scripts): `loopx smoke` before a long run,
//! `drain` with its recoveries, `logs --turn N`.

mod common;

use common::Fixture;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A loop and a directory of fake CLIs, alone on PATH with the system's
/// own directories (so a real agent CLI on this host is never found).
struct Ops {
    f: Fixture,
    bin: PathBuf,
}

impl Ops {
    fn new() -> Self {
        let f = Fixture::new();
        f.init(5, &[]);
        let bin = f.temp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        Ops { f, bin }
    }

    fn script(&self, name: &str, body: &str) -> String {
        let path = self.bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    /// A fake provider CLI: `--version` prints a version, anything else runs `body`.
    fn provider(&self, name: &str, body: &str) {
        let version = format!(r#"[ "$1" = --version ] && echo "{name} 9.9.9" && exit 0"#);
        self.script(name, &format!("{version}\n{body}"));
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(common::loopx_path());
        command
            .args(args)
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .env("LOOPX_REGISTRY_DIR", &self.f.registry)
            // Stand-in agents may run in enforce mode (a test build only).
            .env("LOOPX_INJECTED_PROVIDERS", "1")
            .env_remove("LOOPX_DIR")
            .env_remove("AUTOLOOP_DRIVER")
            .stdin(Stdio::null());
        command
    }

    /// Run `args` with `--json`: (exit code, the JSON, stderr).
    fn run(&self, args: &[&str]) -> (i32, Value, String) {
        let output = self
            .command(&[args, &["--json"]].concat())
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// `smoke --dir D` with `extra`.
    fn smoke(&self, extra: &[&str]) -> (i32, Value, String) {
        self.run(&[&["smoke", "--dir", self.f.d()][..], extra].concat())
    }
}

/// The check named `name` in a smoke report.
fn check<'a>(view: &'a Value, name: &str) -> &'a Value {
    view["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {view}"))
}

/// Every provider of the order `start` would use is checked with
/// `--version`, the store and the notification settings too; all pass:
/// exit 0, one line a check, and nothing of the loop changed.
#[test]
fn smoke_passes_when_everything_answers_and_writes_nothing() {
    let o = Ops::new();
    o.provider("claude", "exit 0");
    o.provider("codex", "exit 0");
    let hook = o.script("notify-hook", "cat >/dev/null");
    std::fs::write(
        o.f.dir.join("notify.json"),
        format!(r#"{{"command": ["{hook}"]}}"#),
    )
    .unwrap();
    std::fs::write(
        o.f.dir.join("failover.json"),
        r#"{"primary_order": ["codex", "claude"], "max_quota_waits_per_primary": 1}"#,
    )
    .unwrap();
    let before = o.f.fingerprint();
    let (code, view, stderr) = o.smoke(&[]);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(view["status"], "ok");
    assert_eq!(check(&view, "store")["passed"], true);
    let failover = check(&view, "failover");
    assert!(
        failover["detail"]
            .as_str()
            .unwrap()
            .starts_with("codex, claude (from failover.json)"),
        "{view}"
    );
    assert!(check(&view, "provider codex")["detail"]
        .as_str()
        .unwrap()
        .contains("codex 9.9.9"));
    assert_eq!(check(&view, "provider claude")["passed"], true);
    assert!(check(&view, "notify command")["detail"]
        .as_str()
        .unwrap()
        .contains("nothing sent"));
    assert_eq!(o.f.fingerprint(), before, "smoke wrote to the loop");
    // The text: one line a check, then the verdict.
    let output = o.command(&["smoke", "--dir", o.f.d()]).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("ok   provider codex: "), "{text}");
    assert!(text.contains("all checks passed"), "{text}");
}

/// A provider that is missing or does not start fails its own check,
/// named, and the exit is 1; `--provider` is read as `start` reads it.
#[test]
fn smoke_names_the_provider_that_is_missing_or_broken() {
    let o = Ops::new();
    o.script("claude", "echo broken >&2\nexit 3");
    let (code, view, stderr) = o.smoke(&["--provider", "claude,codex,nosuchagent"]);
    assert_eq!(code, 1, "{view} {stderr}");
    assert_eq!(view["status"], "failed");
    assert!(check(&view, "failover")["detail"]
        .as_str()
        .unwrap()
        .contains("--provider"));
    let claude = check(&view, "provider claude");
    assert_eq!(claude["passed"], false, "{view}");
    assert!(claude["detail"]
        .as_str()
        .unwrap()
        .contains("--version failed"));
    let codex = check(&view, "provider codex");
    assert_eq!(codex["passed"], false);
    assert!(codex["detail"].as_str().unwrap().contains("not installed"));
    assert!(check(&view, "provider nosuchagent")["detail"]
        .as_str()
        .unwrap()
        .starts_with("unknown provider"));
    // A notification setting that cannot work fails too.
    std::fs::write(
        o.f.dir.join("notify.json"),
        r#"{"command": ["no-such-notify-hook"]}"#,
    )
    .unwrap();
    let (_, view, _) = o.smoke(&["--provider", "claude"]);
    assert_eq!(check(&view, "notify command")["passed"], false, "{view}");
}

/// `--live` sends the panel's one-line prompt: a provider that answers
/// PONG passes, one that answers something else fails, naming what it said.
#[test]
fn smoke_live_asks_each_provider_the_one_line_prompt() {
    let o = Ops::new();
    let said = o.f.temp.path().join("claude.args");
    o.provider(
        "claude",
        &format!("printf '%s\\n' \"$@\" > '{}'\necho PONG", said.display()),
    );
    o.provider("codex", "echo 'I would rather not'");
    let (code, view, stderr) = o.smoke(&["--provider", "claude", "--live", "--timeout", "10"]);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(view["live"], true);
    assert!(check(&view, "provider claude")["detail"]
        .as_str()
        .unwrap()
        .contains("answered"));
    let args = std::fs::read_to_string(&said).unwrap();
    assert!(args.contains("Reply with the single word PONG"), "{args}");
    assert!(
        !args.contains(o.f.d()),
        "nothing of the loop is sent: {args}"
    );
    let (code, view, _) = o.smoke(&["--provider", "codex", "--live", "--timeout", "10"]);
    assert_eq!(code, 1, "{view}");
    assert!(check(&view, "provider codex")["detail"]
        .as_str()
        .unwrap()
        .contains("I would rather not"));
}

/// A directory that holds no loop fails the store check and says the rest
/// was not checked.
#[test]
fn smoke_without_a_loop_fails_the_store_check() {
    let o = Ops::new();
    let nowhere = o.f.temp.path().join("nowhere");
    let (code, view, stderr) = o.run(&["smoke", "--dir", nowhere.to_str().unwrap()]);
    assert_eq!(code, 1, "{view} {stderr}");
    assert_eq!(check(&view, "store")["passed"], false);
    assert!(!nowhere.exists(), "smoke created the directory");
}

/// `drain --cancel-dispatch-id` with no supervisor running cancels the
/// exact open dispatch a killed driver left, through `recover --cancel`'s
/// use case (a wrong id fails, exit 1, and cancels nothing);
/// `--recover-quarantine` shows the quarantine. The exit follows the
/// recoveries.
#[test]
fn drain_cancels_the_exact_dispatch_and_shows_the_quarantine() {
    let o = Ops::new();
    let id = o.f.open_dispatch("claude");
    let (code, view, stderr) = o.run(&[
        "drain",
        "--dir",
        o.f.d(),
        "--cancel-dispatch-id",
        "not-the-dispatch",
    ]);
    assert_eq!(code, 1, "{view} {stderr}");
    assert_eq!(view["drain"], Value::Null, "nothing to drain: {view}");
    assert_eq!(view["recovered"][0]["ok"], false, "{view}");
    let open = o.f.json(&["recover", "--dir", o.f.d()]);
    assert_eq!(open["open"]["dispatch_id"], id.as_str(), "{open}");

    let (code, view, stderr) = o.run(&[
        "drain",
        "--dir",
        o.f.d(),
        "--cancel-dispatch-id",
        &id,
        "--recover-quarantine",
    ]);
    assert_eq!(code, 0, "{view} {stderr}");
    assert_eq!(view["status"], "ok");
    let steps = view["recovered"].as_array().unwrap();
    assert!(steps[0]["command"].as_str().unwrap().contains(&format!(
        "recover --dir {} --cancel --dispatch-id {id}",
        o.f.d()
    )));
    assert!(steps[1]["command"]
        .as_str()
        .unwrap()
        .starts_with("loopx goal-focus recover-quarantine"));
    let after = o.f.json(&["recover", "--dir", o.f.d()]);
    assert_eq!(after["open"], Value::Null, "{after}");
    o.f.assert_valid();
    // A plain drain with no supervisor is still refused.
    let (code, _, stderr) = o.run(&["drain", "--dir", o.f.d()]);
    assert_ne!(code, 0);
    assert!(stderr.contains("nothing to drain"), "{stderr}");
}

/// `logs --turn N` prints the driver's log of the turn that recorded
/// iteration N (found through the driver journal), bounded by --bytes;
/// a turn that never ran is not found.
#[test]
fn logs_turn_prints_that_turns_driver_log() {
    let o = Ops::new();
    let loopx_dir = common::loopx_path().parent().unwrap().display().to_string();
    o.provider(
        "claude",
        &format!(
            r#"echo "turn-output-MARK"
PATH="{loopx_dir}:$PATH" loopx append-iteration --mode bounded-research --objective "logged turn" --decision continue >/dev/null"#
        ),
    );
    let root = o.f.temp.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    let mut drive = o.command(&[
        "drive",
        "--dir",
        o.f.d(),
        "--root",
        root.to_str().unwrap(),
        "--provider",
        "claude",
        "--max-iterations",
        "2",
    ]);
    drive.env(
        "PATH",
        format!("{}:{loopx_dir}:/usr/bin:/bin", o.bin.display()),
    );
    let ran = drive.output().unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let (code, view, stderr) = o.run(&["logs", "--dir", o.f.d(), "--turn", "2"]);
    assert_eq!(code, 0, "{view} {stderr}");
    assert!(
        view["path"].as_str().unwrap().contains("driver_logs/"),
        "{view}"
    );
    assert!(view["text"].as_str().unwrap().contains("-MARK"), "{view}");
    let (code, small, _) = o.run(&["logs", "--dir", o.f.d(), "--turn", "1", "--bytes", "8"]);
    assert_eq!(code, 0);
    assert_eq!(small["text"].as_str().unwrap().len(), 8, "{small}");
    assert_eq!(small["truncated"], true);
    assert_ne!(small["path"], view["path"], "turn 1 has its own log");
    let (code, missing, stderr) = o.run(&["logs", "--dir", o.f.d(), "--turn", "9"]);
    assert_ne!(code, 0, "{missing}");
    assert!(
        stderr.contains("no driven turn worked on iteration 9"),
        "{stderr}"
    );
}

/// `install --force-loop-wrapper` writes `run_force_loop.sh` (0755) whose
/// verbs run the matching loopx command with every other argument passed
/// through as one word each (run here against a fake `loopx` that prints
/// its arguments); a file loopx did not write is refused without
/// `--force`, and `uninstall` removes only loopx's.
#[test]
fn the_force_loop_wrapper_maps_the_kits_verbs_and_quotes_arguments() {
    let o = Ops::new();
    let project = o.f.temp.path().join("project");
    let home = o.f.temp.path().join("home");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let install = |verb: &str, extra: &[&str]| {
        let mut command = o.command(&[&[verb, "--target", "claude"][..], extra].concat());
        command
            .current_dir(&project)
            .env("HOME", &home)
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env_remove("CODEX_HOME");
        command.output().unwrap()
    };
    let wrapper = project.join("run_force_loop.sh");
    // Someone else's file is refused, and nothing is installed.
    std::fs::write(&wrapper, "#!/bin/sh\necho mine\n").unwrap();
    let refused = install("install", &["--force-loop-wrapper"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"));
    assert_eq!(
        std::fs::read_to_string(&wrapper).unwrap(),
        "#!/bin/sh\necho mine\n"
    );
    assert!(
        !project.join(".claude").exists(),
        "a refusal installs nothing"
    );
    let forced = install("install", &["--force-loop-wrapper", "--force"]);
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    let mode = std::fs::metadata(&wrapper).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    // Written by loopx now: a second install updates it without --force.
    let again = install("install", &["--force-loop-wrapper", "--json"]);
    assert!(again.status.success());
    let view: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(view["force_loop_wrapper"]["action"], "unchanged", "{view}");

    // Run it against a fake loopx that prints one argument a line.
    let fake = o.script(
        "fake-loopx",
        r#"for a in "$@"; do printf '[%s]\n' "$a"; done"#,
    );
    let run = |args: &[&str]| {
        let output = Command::new(&wrapper)
            .args(args)
            .env("LOOPX", &fake)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    assert_eq!(
        run(&["status", "--dir", "/a dir/it's", "--json"]),
        (
            Some(0),
            "[service-status]\n[--dir]\n[/a dir/it's]\n[--json]\n".to_owned()
        )
    );
    assert_eq!(
        run(&["start", "--", "--iteration-timeout", "7200", "$HOME *"]),
        (
            Some(0),
            "[start]\n[--]\n[--iteration-timeout]\n[7200]\n[$HOME *]\n".to_owned()
        )
    );
    for verb in ["bootstrap", "drain", "stop"] {
        assert_eq!(run(&[verb, "x"]), (Some(0), format!("[{verb}]\n[x]\n")));
    }
    assert_eq!(run(&["frobnicate"]).0, Some(2));
    assert_eq!(run(&[]).0, Some(2));

    // Uninstall removes loopx's wrapper, and keeps someone else's.
    let removed = install("uninstall", &["--force-loop-wrapper"]);
    assert!(removed.status.success());
    assert!(!wrapper.exists());
    std::fs::write(&wrapper, "#!/bin/sh\necho mine\n").unwrap();
    let kept = install("uninstall", &["--force-loop-wrapper"]);
    assert!(kept.status.success());
    assert!(String::from_utf8_lossy(&kept.stdout).contains("kept"));
    assert!(wrapper.exists());
}
