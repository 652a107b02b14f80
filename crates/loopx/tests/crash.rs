//! Crash safety: SIGKILL a real `loopx append-iteration` inside its commit
//! and at random moments, then show the ledger holds the old or the new
//! record, never a part of one, and that replaying the operation id
//! finishes the job exactly once.

mod common;

use common::{iteration_numbers, Fixture};
use std::process::{Command, Stdio};
use std::time::Duration;

fn append_command(f: &Fixture, operation_id: &str) -> Command {
    let mut command = Command::new(common::loopx_path());
    command
        .args(f.append_words("continue"))
        .args(["--operation-id", operation_id])
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Run an append that pauses at `failpoint`, SIGKILL it there.
fn kill_at(f: &Fixture, failpoint: &str, operation_id: &str) {
    common::kill_at_failpoint(append_command(f, operation_id), failpoint);
}

#[test]
fn a_kill_at_any_commit_boundary_leaves_the_old_or_the_new_record() {
    let f = Fixture::new();
    f.init(100, &[]);
    f.append("continue", &[]).success();
    let cases = [
        ("sqlite.commit.before_journal", false),
        ("sqlite.commit.before_snapshot", false),
        ("sqlite.commit.before_commit", false),
        ("sqlite.commit.after_commit", true),
    ];
    for (index, (failpoint, committed)) in cases.into_iter().enumerate() {
        let before = iteration_numbers(&f.dir).len();
        let operation_id = format!("crash-{index}");
        kill_at(&f, failpoint, &operation_id);
        f.assert_valid();
        let after = iteration_numbers(&f.dir).len();
        assert_eq!(after, before + usize::from(committed), "{failpoint}");

        // The caller never saw a reply: replaying the same operation
        // finishes (or returns) it, exactly once.
        let replay = f
            .loopx()
            .args(f.append_words("continue"))
            .args(["--operation-id", &operation_id, "--json"])
            .output()
            .unwrap();
        assert!(
            replay.status.success(),
            "{}",
            String::from_utf8_lossy(&replay.stderr)
        );
        let receipt: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
        assert_eq!(receipt["replayed"], committed, "{failpoint}");
        assert_eq!(
            iteration_numbers(&f.dir),
            (1..=before as u64 + 1).collect::<Vec<_>>(),
            "{failpoint}"
        );
        f.assert_valid();
    }
}

#[test]
fn kills_at_random_moments_never_corrupt_the_ledger() {
    let f = Fixture::new();
    f.init(1000, &[]);
    // A cheap deterministic spread of kill delays (no RNG crate needed).
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut killed_early = 0;
    for round in 0..40 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(seed % 12_000);
        let mut child = append_command(&f, &format!("random-{round}"))
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let status = child.wait().unwrap();
        if !status.success() {
            killed_early += 1;
        }
        let numbers = iteration_numbers(&f.dir);
        assert_eq!(
            numbers,
            (1..=numbers.len() as u64).collect::<Vec<_>>(),
            "round {round}"
        );
    }
    f.assert_valid();
    assert!(
        killed_early > 0,
        "no append was interrupted: the delays are too long to test anything"
    );
}
