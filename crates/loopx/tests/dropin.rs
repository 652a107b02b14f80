//! Drop-in for the reference CLI: the flags and values scripts written for
//! the reference runtime pass, run on the real binary. (The Stop hook's
//! payload rules are in tests/hook.rs.)

mod common;

use common::{fingerprint, Fixture};
use predicates::str::contains;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// A loop armed for `project` with `extra` arm flags.
fn armed(extra: &[&str]) -> (Fixture, PathBuf) {
    let f = Fixture::new();
    f.init(5, &[]);
    let root = f.temp.path().join("project");
    std::fs::create_dir_all(root.join("src")).unwrap();
    f.loopx()
        .args(["arm", "--dir", f.d(), "--root", root.to_str().unwrap()])
        .args(extra)
        .assert()
        .success();
    (f, root)
}

fn hook_reason(f: &Fixture, root: &Path) -> (i32, String) {
    let output = f
        .loopx()
        .args(["hook-check", "--json", "--root", root.to_str().unwrap()])
        .write_stdin("{}")
        .output()
        .unwrap();
    let verdict: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    (
        output.status.code().unwrap(),
        verdict["reason"].as_str().unwrap().to_owned(),
    )
}

/// A real process that lives until killed.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Self {
        Sleeper(Command::new("sleep").arg("60").spawn().unwrap())
    }
    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The pid of a process that has exited and been reaped.
fn dead_pid() -> String {
    let mut child = Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    child.id().to_string()
}

#[test]
fn arm_stores_pid_driver_and_notify_as_given() {
    let sleeper = Sleeper::start();
    let pid = sleeper.pid();
    let table: [(&[&str], serde_json::Value); 4] = [
        (
            &[],
            serde_json::json!({"pid": 0, "driver": false, "notify_channel": null}),
        ),
        (
            &["--pid", &pid, "--driver", "--notify", "off"],
            serde_json::json!({"pid": pid.parse::<u32>().unwrap(), "driver": true, "notify_channel": "off"}),
        ),
        (
            &["--notify", "on"],
            serde_json::json!({"pid": 0, "driver": false, "notify_channel": "on"}),
        ),
        (
            &["--notify", "zulip", "--notify", "auto"],
            serde_json::json!({"pid": 0, "driver": false, "notify_channel": "auto"}),
        ),
    ];
    for (flags, expected) in table {
        let (f, _) = armed(flags);
        let active = f.json(&["active"]);
        let entry = &active["loops"][0]["entry"];
        for key in ["pid", "driver", "notify_channel"] {
            assert_eq!(entry[key], expected[key], "{flags:?}: {key}");
        }
    }
}

#[test]
fn arm_refuses_an_unknown_notify_value_and_registers_nothing() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.loopx()
        .args(["arm", "--dir", f.d(), "--notify", "sometimes"])
        .assert()
        .code(2)
        .stderr(contains("sometimes"));
    assert!(!f.registry.join("armed").exists());
}

#[test]
fn arm_pid_and_driver_decide_whether_the_hook_forces_sessions() {
    let live = Sleeper::start();
    let live_pid = live.pid();
    let dead = dead_pid();
    let table: [(&[&str], i32, &str); 5] = [
        (&["--pid", &live_pid], 2, "active_not_done"),
        // pid 1 exists (another user's process counts as alive).
        (&["--pid", "1"], 2, "active_not_done"),
        (&["--pid", &dead], 0, "no_active_loop"),
        (
            &["--pid", &live_pid, "--driver"],
            0,
            "headless_driver_active",
        ),
        (&["--pid", &dead, "--driver"], 0, "no_active_loop"),
    ];
    for (flags, code, reason) in table {
        let (f, root) = armed(flags);
        assert_eq!(
            hook_reason(&f, &root),
            (code, reason.to_owned()),
            "arm {flags:?}"
        );
    }
}

#[test]
fn an_entry_whose_pid_exited_is_retired_and_no_longer_holds_its_root() {
    let dead = dead_pid();
    let (f, root) = armed(&["--pid", &dead]);
    assert_eq!(f.json(&["active"])["loops"][0]["state"], "pid_exited");
    let second = f.temp.path().join("run-2");
    f.loopx()
        .args(["init", "--dir", second.to_str().unwrap()])
        .args(["--goal", "g", "--success-criteria", "c"])
        .assert()
        .success();
    f.loopx()
        .args(["arm", "--dir", second.to_str().unwrap()])
        .args(["--root", root.to_str().unwrap()])
        .assert()
        .success();
    assert_eq!(hook_reason(&f, &root), (2, "active_not_done".to_owned()));
}

#[test]
fn disarm_without_dir_or_run_id_disarms_the_loop_covering_the_working_directory() {
    let (f, root) = armed(&[]);
    // From outside every armed root: a clear refusal, nothing removed.
    let before = fingerprint(&f.registry);
    f.loopx()
        .arg("disarm")
        .current_dir(f.temp.path())
        .assert()
        .code(1)
        .stderr(contains("no armed loop covers"))
        .stderr(contains("--dir or --run-id"));
    assert_eq!(before, fingerprint(&f.registry));
    // A second loop armed for the same root makes the choice ambiguous.
    let second = f.temp.path().join("run-2");
    f.loopx()
        .args(["init", "--dir", second.to_str().unwrap()])
        .args(["--goal", "g", "--success-criteria", "c"])
        .assert()
        .success();
    f.loopx()
        .args(["arm", "--dir", second.to_str().unwrap()])
        .args(["--root", root.to_str().unwrap(), "--force"])
        .assert()
        .success();
    let before = fingerprint(&f.registry);
    f.loopx()
        .arg("disarm")
        .current_dir(root.join("src"))
        .assert()
        .code(1)
        .stderr(contains("2 armed loops cover"));
    assert_eq!(before, fingerprint(&f.registry));
    f.loopx()
        .args(["disarm", "--dir", second.to_str().unwrap()])
        .assert()
        .success();
    // One loop covers the directory: it is disarmed.
    f.loopx()
        .arg("disarm")
        .current_dir(root.join("src"))
        .assert()
        .success()
        .stdout(contains("disarmed"));
    assert_eq!(f.json(&["active"])["count"], 0);
}

#[test]
fn long_flags_take_unambiguous_prefixes_the_last_value_and_negative_numbers() {
    let f = Fixture::new();
    f.init(10, &[]);
    // (flags, field in the last record, expected value)
    let table: [(&[&str], &str, serde_json::Value); 5] = [
        (
            &[
                "--mod", "monitor", "--obj", "short", "--dec", "continue", "--tok", "7",
            ],
            "/budget_delta/tokens",
            7.into(),
        ),
        (
            &[
                "--mode",
                "monitor",
                "--objective",
                "first",
                "--objective",
                "second",
                "--decision",
                "continue",
            ],
            "/objective",
            "second".into(),
        ),
        (
            &[
                "--mode",
                "monitor",
                "--objective",
                "o",
                "--decision",
                "revise",
                "--decision",
                "continue",
                "--tokens",
                "3",
                "--tokens",
                "4",
            ],
            "/budget_delta/tokens",
            4.into(),
        ),
        (
            &[
                "--mode",
                "monitor",
                "--objective",
                "o",
                "--decision",
                "continue",
                "--usd",
                "-0",
            ],
            "/budget_delta/usd",
            serde_json::json!(-0.0),
        ),
        (
            &[
                "--mode",
                "monitor",
                "--objective",
                "-1",
                "--decision",
                "continue",
            ],
            "/objective",
            "-1".into(),
        ),
    ];
    for (flags, field, expected) in table {
        f.loopx()
            .args(["append-iteration", "--dir", f.d()])
            .args(flags)
            .assert()
            .success();
        let last = &f.json(&["status", "--dir", f.d()])["last_iteration"];
        assert_eq!(last.pointer(field), Some(&expected), "{flags:?}");
    }
    // An ambiguous prefix (--d: --dir, --decision, --dry-run) and a value
    // that is a flag, not a number, are still usage errors that write nothing.
    let before = f.fingerprint();
    for flags in [
        &[
            "--d",
            f.d(),
            "--mode",
            "monitor",
            "--objective",
            "o",
            "--decision",
            "continue",
        ][..],
        &[
            "--dir",
            f.d(),
            "--mode",
            "monitor",
            "--objective",
            "--decision",
            "continue",
        ][..],
    ] {
        f.loopx()
            .arg("append-iteration")
            .args(flags)
            .assert()
            .code(2);
    }
    assert_eq!(before, f.fingerprint());
    f.assert_valid();
}

#[test]
fn append_iteration_stores_goal_focus_and_compute_flags_faithfully() {
    let f = Fixture::new();
    f.init(10, &[]);
    std::fs::write(
        f.temp.path().join("run.json"),
        r#"{"service":"kaggle","status":"succeeded","job_ref":"k-1"}"#,
    )
    .unwrap();
    let from_file = format!("@{}", f.temp.path().join("run.json").display());
    let table: [(Vec<&str>, serde_json::Value); 5] = [
        (vec![], serde_json::Value::Null),
        (
            vec![
                "--goal-contribution",
                "bridge",
                "--goal-contribution-detail",
                "lemma B",
                "--campaign-id",
                "C2",
                "--local-without-goal-delta",
                "--local-without-goal-delta-tag",
                "cleanup",
                "--residual-id",
                "R7",
                "--scope-lock",
                "goal_sc",
            ],
            serde_json::json!({
                "goal_contribution": "bridge", "goal_contribution_detail": "lemma B",
                "campaign_id": "C2", "local_without_goal_delta": true,
                "local_without_goal_delta_tag": "cleanup", "residual_id": "R7", "scope_lock": "goal_sc",
            }),
        ),
        (
            vec![
                "--global-delta",
                "reduced",
                "--campaign-delta",
                "incremental",
                "--obligation-id",
                "O1",
                "--obligation-id",
                "O2",
            ],
            serde_json::json!({"global_delta": "reduced", "campaign_delta": "incremental", "obligation_ids": ["O1", "O2"]}),
        ),
        (
            vec!["--global-delta", "none", "--compute-none"],
            serde_json::json!({"global_delta": "none", "compute_runs": []}),
        ),
        (
            vec![
                "--compute-run",
                r#"{"service":"local","status":"succeeded"}"#,
                "--compute-run",
                &from_file,
            ],
            serde_json::json!({"compute_runs": [
                {"service": "local", "status": "succeeded"},
                {"service": "kaggle", "status": "succeeded", "job_ref": "k-1"},
            ]}),
        ),
    ];
    for (flags, expected) in table {
        f.append("continue", &flags).success();
        let last = &f.json(&["status", "--dir", f.d()])["last_iteration"];
        assert_eq!(last["direction"], expected, "{flags:?}");
    }
    f.assert_valid();
    // Refusals write nothing.
    let before = f.fingerprint();
    let refused: [(&[&str], i32, &str); 4] = [
        (
            &["--compute-none", "--compute-run", "{}"],
            1,
            "mutually exclusive",
        ),
        (&["--compute-run", "[1]"], 1, "must be a JSON object"),
        (
            &["--compute-run", "@/nonexistent/run.json"],
            1,
            "cannot read --compute-run file",
        ),
        (&["--global-delta", "halved"], 2, "halved"),
    ];
    for (flags, code, message) in refused {
        f.append("continue", flags)
            .code(code)
            .stderr(contains(message));
    }
    assert_eq!(before, f.fingerprint());
}

/// A directory of stand-in provider binaries.
fn fake_path(f: &Fixture, binaries: &[&str]) -> PathBuf {
    let bin = f.temp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in binaries {
        let path = bin.join(name);
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

#[test]
fn agent_cmd_prints_every_provider_pinned_with_its_family() {
    let f = Fixture::new();
    f.init(5, &[]);
    let bin = fake_path(&f, &["codex", "codewhale", "grok-remote", "kimi"]);
    let agent_cmd = |provider: &str, extra_env: Option<(&str, &str)>| {
        let mut command = f.loopx();
        command
            .args(["agent-cmd", "--json", "--dir", f.d(), "--root", "/proj"])
            .args(["--provider", provider])
            .env("PATH", &bin)
            .env_remove("OPENAI_BASE_URL")
            .env_remove("ANTHROPIC_BASE_URL");
        if let Some((name, value)) = extra_env {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        (output.status.code().unwrap(), json)
    };
    let (code, all) = agent_cmd("all", None);
    assert_eq!(code, 0);
    let providers = all["providers"].as_object().unwrap();
    assert_eq!(providers.len(), 8);
    // (provider, found, family, argv before the prompt)
    let table: [(&str, bool, &str, &[&str]); 8] = [
        ("claude", false, "anthropic", &[]),
        (
            "codex",
            true,
            "openai",
            &[
                "exec",
                "--ignore-user-config",
                "-c",
                "model_provider=\"openai\"",
                "-c",
                "allow_login_shell=false",
                "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check",
                "--json",
            ],
        ),
        (
            "deepseek",
            true,
            "deepseek",
            &[
                "--provider",
                "deepseek",
                "--no-project-config",
                "-C",
                "/proj",
                "exec",
                "--auto",
            ],
        ),
        ("opencode", false, "unverified", &[]),
        ("copilot", false, "unverified", &[]),
        ("antigravity", false, "google", &[]),
        ("grok", true, "xai", &["-p"]),
        ("kimi", true, "unverified", &["-p"]),
    ];
    for (name, found, family, before) in table {
        let entry = &providers[name];
        assert_eq!(entry["binary_found"], found, "{name}");
        assert_eq!(entry["family"], family, "{name}");
        if found {
            let argv: Vec<&str> = entry["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            assert_eq!(&argv[..before.len()], before, "{name}");
            assert_eq!(argv[before.len()], "<prompt>", "{name}");
        }
    }
    // One provider: found, missing (exit 6), unknown (exit 2); an endpoint
    // override makes the family unverified.
    let (code, codex) = agent_cmd("codex", None);
    assert_eq!((code, codex["family"].as_str()), (0, Some("openai")));
    let (code, _) = agent_cmd("claude", None);
    assert_eq!(code, 6);
    let (code, unknown) = agent_cmd("gpt", None);
    assert_eq!(
        (code, unknown["reason"].as_str()),
        (2, Some("bad_arguments"))
    );
    for variable in ["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "DEEPSEEK_BASE_URL"] {
        let (code, codex) = agent_cmd("codex", Some((variable, "https://gateway.example")));
        assert_eq!(
            (code, codex["family"].as_str()),
            (0, Some("unverified")),
            "{variable}"
        );
    }
}
