//! arm / disarm / active and the Stop hook, as Claude Code would call it.

mod common;

use common::Fixture;
use predicates::str::contains;
use std::path::Path;

fn hook(f: &Fixture, root: &Path, payload: &str) -> assert_cmd::assert::Assert {
    hook_bytes(f, root, payload.as_bytes())
}

fn hook_bytes(f: &Fixture, root: &Path, payload: &[u8]) -> assert_cmd::assert::Assert {
    f.loopx()
        .args(["hook-check", "--root", root.to_str().unwrap()])
        .write_stdin(payload.to_vec())
        .assert()
}

/// The hook's `--json` verdict for a payload.
fn verdict(f: &Fixture, root: &Path, payload: &[u8]) -> serde_json::Value {
    let output = f
        .loopx()
        .args(["hook-check", "--json", "--root", root.to_str().unwrap()])
        .write_stdin(payload.to_vec())
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

fn armed_fixture() -> (Fixture, std::path::PathBuf) {
    let f = Fixture::new();
    f.init(5, &[]);
    let root = f.temp.path().join("project");
    std::fs::create_dir_all(root.join("src")).unwrap();
    f.loopx()
        .args(["arm", "--dir", f.d(), "--root", root.to_str().unwrap()])
        .assert()
        .success();
    (f, root)
}

#[test]
fn an_armed_unfinished_loop_blocks_the_stop_with_a_reason() {
    let (f, root) = armed_fixture();
    hook(&f, &root, r#"{"session_id":"s","stop_hook_active":false}"#)
        .code(2)
        .stdout("")
        .stderr(contains("Autoloop is active and not finished"))
        .stderr(contains("STOP_REQUESTED"));
    // A session in a subdirectory of the root is covered too.
    hook(&f, &root.join("src"), "{}").code(2);
}

#[test]
fn the_hook_stands_down_when_it_should() {
    let (f, root) = armed_fixture();
    hook(&f, &root, r#"{"stop_hook_active":true}"#)
        .code(0)
        .stderr("");
    f.loopx()
        .args(["hook-check", "--root", root.to_str().unwrap()])
        .env("AUTOLOOP_DISABLE", "1")
        .assert()
        .code(0);
    f.loopx()
        .args(["hook-check", "--root", root.to_str().unwrap()])
        .env("AUTOLOOP_DRIVER", "1")
        .assert()
        .code(0);
    let unrelated = f.temp.path().join("project-b");
    std::fs::create_dir_all(&unrelated).unwrap();
    hook(&f, &unrelated, "{}").code(0);
    std::fs::write(f.dir.join("PAUSE"), "").unwrap();
    hook(&f, &root, "{}").code(0);
    std::fs::remove_file(f.dir.join("PAUSE")).unwrap();
    std::fs::write(f.dir.join("STOP_REQUESTED"), "").unwrap();
    let verdict = verdict(&f, &root, b"{}");
    assert_eq!(
        (verdict["block"].as_bool(), verdict["reason"].as_str()),
        (Some(false), Some("user_stop_requested"))
    );
}

#[test]
fn the_hook_fails_open_on_damage() {
    let (f, root) = armed_fixture();
    // Corrupt loop state (the database and its write-ahead log) lets the session go.
    std::fs::write(f.dir.join("loopx.sqlite"), b"garbage garbage garbage").unwrap();
    std::fs::write(f.dir.join("loopx.sqlite-wal"), b"garbage").unwrap();
    hook(&f, &root, "{}").code(0);
    // A missing registry, or one with a corrupt entry, blocks nothing.
    let other = Fixture::new();
    hook(&other, &root, "{}").code(0);
    std::fs::create_dir_all(other.registry.join("armed")).unwrap();
    std::fs::write(other.registry.join("armed/broken.json"), "{").unwrap();
    hook(&other, &root, "{}").code(0);
}

#[test]
fn the_root_comes_from_the_environment_then_the_process_directory() {
    let (f, root) = armed_fixture();
    for variable in ["CLAUDE_PROJECT_DIR", "GROK_WORKSPACE_ROOT"] {
        f.loopx()
            .arg("hook-check")
            .env_remove("GROK_WORKSPACE_ROOT")
            .current_dir(f.temp.path())
            .env(variable, &root)
            .write_stdin("{}")
            .assert()
            .code(2);
    }
}

/// Claude Code sends the session's `cwd` in the payload and runs the hook
/// in a working directory of its own; when they disagree, the process's
/// directory decides (as in the reference), never the payload.
#[test]
fn the_payload_cwd_never_decides_the_project_in_either_order() {
    let (f, root) = armed_fixture();
    let outside = f.temp.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    let cases = [
        // (process directory, payload cwd, exit code)
        (root.join("src"), outside.clone(), 2),
        (outside.clone(), root.join("src"), 0),
    ];
    for (process_dir, payload_cwd, code) in cases {
        let payload = serde_json::json!({"cwd": payload_cwd, "stop_hook_active": false});
        f.loopx()
            .arg("hook-check")
            .env_remove("GROK_WORKSPACE_ROOT")
            .current_dir(&process_dir)
            .write_stdin(payload.to_string())
            .assert()
            .code(code);
    }
}

#[test]
fn stop_hook_active_follows_json_truthiness_for_every_type() {
    let (f, root) = armed_fixture();
    let falsy = ["null", "false", "0", "0.0", "\"\"", "[]", "{}"];
    let truthy = [
        "true",
        "1",
        "-2.5",
        "\"false\"",
        "\"0\"",
        "[0]",
        "{\"a\":null}",
    ];
    for (values, code, reason) in [
        (&falsy[..], 2, "active_not_done"),
        (&truthy[..], 0, "stop_hook_active"),
    ] {
        for value in values {
            let payload = format!(r#"{{"session_id":"s","stop_hook_active":{value}}}"#);
            hook(&f, &root, &payload).code(code);
            assert_eq!(
                verdict(&f, &root, payload.as_bytes())["reason"],
                reason,
                "stop_hook_active = {value}"
            );
            // Progress resets the stand-down streak so the table never
            // reaches the block limit.
            std::fs::remove_dir_all(f.registry.join("blocks")).ok();
        }
    }
    // A missing key is not re-entry either.
    hook(&f, &root, r#"{"session_id":"s"}"#).code(2);
}

#[test]
fn anything_but_one_utf8_json_object_lets_the_session_stop() {
    let (f, root) = armed_fixture();
    let table: [(&[u8], &str); 9] = [
        (b"", "invalid_payload:empty"),
        (b"  \n", "invalid_payload:empty"),
        (b"not json", "invalid_payload:not_json"),
        (b"garbage stop_hook_active true", "invalid_payload:not_json"),
        (
            br#"{"stop_hook_active":false} trailing"#,
            "invalid_payload:not_json",
        ),
        (
            br#"{"stop_hook_active":false}{}"#,
            "invalid_payload:not_json",
        ),
        (b"{\"cwd\":\"\xff\xfe\"}", "invalid_payload:not_utf8"),
        (
            br#"[{"stop_hook_active":false}]"#,
            "invalid_payload:not_an_object",
        ),
        (b"false", "invalid_payload:not_an_object"),
    ];
    for (payload, reason) in table {
        hook_bytes(&f, &root, payload).code(0);
        assert_eq!(
            verdict(&f, &root, payload)["reason"],
            reason,
            "{}",
            String::from_utf8_lossy(payload)
        );
    }
    // The same loop still blocks a well-formed payload.
    hook(&f, &root, "{\"stop_hook_active\":false}\n").code(2);
}

#[test]
fn a_pending_success_claim_lets_the_session_stop_and_names_loopx_verify() {
    let f = Fixture::new();
    f.init(5, &["--success-check", "true"]);
    let root = f.temp.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    f.loopx()
        .args(["arm", "--dir", f.d(), "--root", root.to_str().unwrap()])
        .assert()
        .success();
    f.write_proof("q");
    f.append("stop", &["--stop-reason", "success", "--evidence-id", "q"])
        .success();
    let before = f.fingerprint();
    hook(&f, &root, "{}")
        .code(0)
        .stderr(contains("claims success"))
        .stderr(contains(format!(
            "loopx verify --dir {}",
            f.dir.canonicalize().unwrap().display()
        )));
    assert_eq!(verdict(&f, &root, b"{}")["reason"], "success_claim_pending");
    assert_eq!(
        before,
        f.fingerprint(),
        "the hook changes nothing in the loop"
    );
    f.loopx()
        .args(["verify", "--dir", f.d()])
        .assert()
        .success();
    assert_eq!(
        verdict(&f, &root, b"{}")["reason"],
        "terminal_status:stopped"
    );
}

#[test]
fn arming_is_exclusive_per_root_and_registry_lives_outside_the_project() {
    let (f, root) = armed_fixture();
    assert!(!root.join(".loopx").exists() && f.registry.join("armed").is_dir());
    let second = f.temp.path().join("run-2");
    f.loopx()
        .args([
            "init",
            "--dir",
            second.to_str().unwrap(),
            "--goal",
            "g",
            "--success-criteria",
            "c",
        ])
        .assert()
        .success();
    f.loopx()
        .args([
            "arm",
            "--dir",
            second.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ])
        .assert()
        .failure()
        .stderr(contains("already armed"));
    // The refusal is classified, and the CLI names the flags that resolve it.
    let refused = f
        .loopx()
        .args(["arm", "--json", "--dir", second.to_str().unwrap()])
        .args(["--root", root.to_str().unwrap()])
        .output()
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(
        (body["class"].as_str(), body["reason"].as_str()),
        (Some("refused"), Some("already_armed"))
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("hint: disarm it with `loopx disarm --run-id ")
            && stderr.contains("--force"),
        "{stderr}"
    );
    let active = f.loopx().args(["active", "--json"]).output().unwrap();
    let active: serde_json::Value = serde_json::from_slice(&active.stdout).unwrap();
    assert_eq!(
        (
            active["count"].as_u64(),
            active["loops"][0]["state"].as_str()
        ),
        (Some(1), Some("unfinished"))
    );
    f.loopx()
        .args(["disarm", "--dir", f.d()])
        .assert()
        .success()
        .stdout(contains("disarmed"));
    hook(&f, &root, "{}").code(0);
}

#[test]
fn xdg_state_home_is_the_default_registry() {
    let f = Fixture::new();
    f.init(5, &[]);
    let state = f.temp.path().join("state");
    let root = f.temp.path();
    assert_cmd::Command::new(common::loopx_path())
        .env_remove("LOOPX_REGISTRY_DIR")
        .env("XDG_STATE_HOME", &state)
        .args(["arm", "--dir", f.d(), "--root", root.to_str().unwrap()])
        .assert()
        .success();
    assert_eq!(
        std::fs::read_dir(state.join("loopx/armed"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn the_hook_never_blocks_the_same_stalled_loop_forever() {
    let (f, root) = armed_fixture();
    for _ in 0..loopx_core::hook::MAX_CONSECUTIVE_BLOCKS {
        hook(&f, &root, "{}").code(2);
    }
    hook(&f, &root, "{}")
        .code(0)
        .stderr(contains("standing down after 5 blocked stops"));
    // Progress starts a fresh streak.
    f.append("continue", &[]).success();
    hook(&f, &root, "{}").code(2);
}
