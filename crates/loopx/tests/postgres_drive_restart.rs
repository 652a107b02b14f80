//! `loopx drive --store postgres://…` through a server restart: the driver
//! waits while the server is down (saying so on stderr, and in `status`
//! once it is back), resumes by itself, runs no turn twice and loses no
//! charge or settlement. Its own test binary, so that stopping the shared
//! server disturbs no other test.

mod common;
#[path = "../../loopx-store/tests/support/pg_server.rs"]
mod pg_server;

use common::Fixture;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Wait up to a minute for `path` to exist.
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn drive_waits_out_a_server_restart_and_banks_each_iteration_exactly_once() {
    let Some(server) = pg_server::server() else {
        return;
    };
    let url = pg_server::database().unwrap();
    let f = Fixture::new();
    let out = f
        .loopx()
        .args(f.init_words())
        .args(["--max-iterations", "10"])
        .env("LOOPX_STORE", &url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    // A fake agent that banks its iteration and reports its cost; on its
    // second turn, after banking, it holds its exit until the test has
    // stopped the server, so that the driver meets the outage with a
    // finished turn to charge and settle.
    let marks = f.temp.path().join("marks");
    let bin = f.temp.path().join("bin");
    let root = f.temp.path().join("project");
    for dir in [&marks, &bin, &root] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let agent = bin.join("claude");
    std::fs::write(
        &agent,
        format!(
            r#"#!/bin/sh
[ "$1" = --version ] && {{ echo '2.1.197 (Claude Code)'; exit 0; }}
loopx append-iteration --mode bounded-research --objective "fake turn" --decision continue >/dev/null || exit 3
n=$(ls {marks} | grep -c '^turn-')
touch {marks}/turn-$n
if [ "$n" = 1 ]; then
    touch {marks}/banked
    while [ ! -e {marks}/go ]; do sleep 0.05; done
fi
echo '{{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.25,"usage":{{"input_tokens":1000,"output_tokens":200}}}}'
"#,
            marks = marks.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();

    let driver = Command::new(common::loopx_path())
        .args(["drive", "--dir", f.d(), "--root", root.to_str().unwrap()])
        .args(["--provider", "claude", "--max-iterations", "3"])
        .args(["--store", &url])
        .env_remove("LOOPX_STORE")
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .env_remove("LOOPX_DIR")
        .env_remove("AUTOLOOP_DRIVER")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    wait_for(&marks.join("banked"));
    server.stop();
    std::fs::write(marks.join("go"), "").unwrap();
    // Down long enough for the driver to meet it and retry a few times.
    std::thread::sleep(Duration::from_secs(3));
    // Meanwhile other commands fail fast with the retryable error.
    let started = Instant::now();
    let out = f
        .loopx()
        .args(["status", "--dir", f.d()])
        .env("LOOPX_STORE", &url)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "status succeeded with the server down"
    );
    assert!(
        said.contains("is unavailable") && said.contains("retry"),
        "{said}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "status waited");
    server.start();

    let out = driver.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains(pg_server::PASSWORD), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("is unavailable") && stderr.contains("The driver waits for it"),
        "the driver did not say it waited: {stderr}"
    );
    assert!(stderr.contains("the store is back after"), "{stderr}");

    // Three turns, three iterations, three charges: nothing twice, nothing lost.
    let turns = std::fs::read_dir(&marks)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("turn-")
        })
        .count();
    assert_eq!(turns, 3, "the agent ran {turns} times: {stderr}");
    let status: Value = serde_json::from_slice(
        &f.loopx()
            .args(["status", "--dir", f.d(), "--json"])
            .env("LOOPX_STORE", &url)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let spent = &status["spent"];
    assert_eq!(
        (
            spent["iterations"].as_u64(),
            spent["tokens"].as_u64(),
            spent["usd"].as_f64()
        ),
        (Some(3), Some(3600), Some(0.75)),
        "{status}"
    );
    let count = |kind: &str| -> u64 {
        server
            .query(
                &url,
                &format!("SELECT count(*) FROM journal WHERE kind = '{kind}'"),
            )
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(count("ledger.iteration_appended"), 3);
    assert_eq!(count("ledger.charged"), 3, "one charge per turn");
    let per_dispatch = server.query(
        &url,
        "SELECT kind, count(*) FROM journal WHERE stream = 'driver' AND kind IN ('driver.intended', 'driver.settled') GROUP BY kind ORDER BY kind",
    );
    assert_eq!(
        per_dispatch.trim(),
        "driver.intended|3\ndriver.settled|3",
        "{per_dispatch}"
    );
    // Once back, the driver said in status what it waited for.
    let noted = server.query(
        &url,
        "SELECT count(*) FROM journal WHERE stream = 'driver' AND event LIKE '%was unavailable from%'",
    );
    assert_ne!(noted.trim(), "0", "no outage note in the driver's state");
    let out = f
        .loopx()
        .args(["validate", "--dir", f.d()])
        .env("LOOPX_STORE", &url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}
