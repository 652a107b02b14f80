//! arm / disarm / active and the Stop hook, as Claude Code would call it.

mod common;

use common::Fixture;
use predicates::str::contains;
use std::path::Path;

fn hook(f: &Fixture, root: &Path, payload: &str) -> assert_cmd::assert::Assert {
    f.loopx()
        .args(["hook-check", "--root", root.to_str().unwrap()])
        .write_stdin(payload.to_owned())
        .assert()
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
    let verdict: serde_json::Value = serde_json::from_slice(
        &f.loopx()
            .args(["hook-check", "--json", "--root", root.to_str().unwrap()])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(
        (verdict["block"].as_bool(), verdict["reason"].as_str()),
        (Some(false), Some("user_stop_requested"))
    );
}

#[test]
fn the_hook_fails_open_on_damage() {
    let (f, root) = armed_fixture();
    // A payload that is not JSON is ignored: the loop is still unfinished.
    hook(&f, &root, "not json").code(2);
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
fn the_root_comes_from_the_environment_or_the_payload() {
    let (f, root) = armed_fixture();
    f.loopx()
        .arg("hook-check")
        .env("CLAUDE_PROJECT_DIR", &root)
        .write_stdin("{}")
        .assert()
        .code(2);
    let payload = serde_json::json!({"cwd": root.join("src")}).to_string();
    f.loopx()
        .arg("hook-check")
        .current_dir(f.temp.path())
        .write_stdin(payload)
        .assert()
        .code(2);
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
