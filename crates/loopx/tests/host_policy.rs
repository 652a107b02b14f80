//! The host policy file of `loopx start` through the real binary: read as
//! data from an owner-private file outside the loop tree, its values in
//! the driver's environment, and anything else refused before a process
//! starts.

mod common;

use common::Fixture;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A one-iteration loop whose `--cmd` agent notes the policy variable it
/// sees in `seen` (its one turn is the last the cap allows: it stops).
fn setup() -> (Fixture, PathBuf, String) {
    let f = Fixture::new();
    f.init(1, &[]);
    let seen = f.temp.path().join("seen");
    let agent = format!(
        "printf '%s' \"$AAS_AUTOLOOP_NOTIFY\" > '{}'; loopx append-iteration --mode bounded-research --objective turn --decision stop --stop-reason loops_reached >/dev/null",
        seen.display()
    );
    (f, seen, agent)
}

fn policy(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn start(f: &Fixture, agent: &str, policy: &Path) -> (i32, String) {
    let output = Command::new(common::loopx_path())
        .args(["start", "--dir", f.d(), "--root"])
        .arg(f.temp.path())
        .args(["--cmd", agent, "--policy-file"])
        .arg(policy)
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .env_remove("LOOPX_DIR")
        .env_remove("AAS_AUTOLOOP_NOTIFY")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_policys_values_reach_the_driver_and_its_agent() {
    let (f, seen, agent) = setup();
    let file = f.temp.path().join("host.policy");
    policy(&file, "# the host's\nAAS_AUTOLOOP_NOTIFY=off\n", 0o600);
    let (code, stderr) = start(&f, &agent, &file);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), "off");
}

#[test]
fn a_policy_file_anyone_could_have_written_is_refused_before_anything_starts() {
    let (f, seen, agent) = setup();
    let good = "AAS_AUTOLOOP_NOTIFY=off\n";
    let outside = f.temp.path().join("host.policy");
    let link = f.temp.path().join("link.policy");
    policy(&outside, good, 0o600);
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let readable = f.temp.path().join("readable.policy");
    policy(&readable, good, 0o644);
    let inside = f.dir.join("host.policy");
    policy(&inside, good, 0o600);
    let foreign_key = f.temp.path().join("foreign.policy");
    policy(&foreign_key, "PATH=/tmp/evil\n", 0o600);
    for (path, says) in [
        (link, "symlink"),
        (readable, "private to you"),
        (inside, "inside the loop directory"),
        (foreign_key, "not a key this file may set"),
        (PathBuf::from("relative.policy"), "absolute path"),
    ] {
        let before = f.fingerprint();
        let (code, stderr) = start(&f, &agent, &path);
        assert_ne!(code, 0, "{} was accepted", path.display());
        assert!(stderr.contains(says), "{}: {stderr}", path.display());
        assert!(
            !stderr.contains("evil"),
            "the value reached a message: {stderr}"
        );
        assert!(!seen.exists(), "an agent ran");
        assert_eq!(f.fingerprint(), before, "{}", path.display());
    }
}

#[test]
fn provider_secrets_reach_the_agent_and_no_output_or_record_holds_them() {
    let f = Fixture::new();
    f.init(1, &[]);
    let seen = f.temp.path().join("seen");
    // The agent proves it has the key without printing it: its length.
    let agent = format!(
        "printf '%s' \"${{#OPENAI_API_KEY}}\" > '{}'; loopx append-iteration --mode bounded-research --objective turn --decision stop --stop-reason loops_reached >/dev/null",
        seen.display()
    );
    let secret = "sk-proj-Zq8wN3vT5yR1uK7pL2mX9cB4";
    let file = f.temp.path().join("provider.secrets");
    policy(&file, &format!("OPENAI_API_KEY={secret}\n"), 0o600);
    let output = Command::new(common::loopx_path())
        .args(["start", "--dir", f.d(), "--root"])
        .arg(f.temp.path())
        .args(["--cmd", &agent, "--json", "--secrets-file"])
        .arg(&file)
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .env_remove("LOOPX_DIR")
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{printed}");
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        secret.len().to_string()
    );
    assert!(!printed.contains(secret), "start printed the secret");
    for args in [&["service-status"][..], &["status"], &["logs"]] {
        let shown = Command::new(common::loopx_path())
            .args(args)
            .args(["--dir", f.d(), "--json"])
            .env("LOOPX_REGISTRY_DIR", &f.registry)
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&shown.stdout);
        assert!(!shown.contains(secret), "{args:?} showed the secret");
    }
    assert!(
        !common::stored_text(&f.dir).contains(secret),
        "the store holds it"
    );
    // Nothing loopx writes holds it (what an agent prints of its own
    // environment is the agent's, kept raw in its private turn log).
    let logs = std::fs::read_dir(f.dir.join("driver_logs")).unwrap();
    for entry in logs {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        assert!(!text.contains(secret), "a driver log holds the secret");
    }
    // A secrets file others can read is refused before anything runs.
    let open = f.temp.path().join("open.secrets");
    policy(&open, &format!("OPENAI_API_KEY={secret}\n"), 0o640);
    let output = Command::new(common::loopx_path())
        .args(["start", "--dir", f.d(), "--root"])
        .arg(f.temp.path())
        .args(["--cmd", "true", "--secrets-file"])
        .arg(&open)
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0));
    assert!(
        stderr.contains("private to you") && !stderr.contains(secret),
        "{stderr}"
    );
}
