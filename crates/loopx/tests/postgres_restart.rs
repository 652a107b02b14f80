//! The PostgreSQL server restarting under a loop: commands fail with a
//! clear, retryable `unavailable` error naming the store without its
//! password, and nothing committed before is lost. Its own test binary, so
//! that stopping the shared server disturbs no other test.

mod common;
#[path = "../../loopx-store/tests/support/pg_server.rs"]
mod pg_server;

use common::Fixture;

#[test]
fn a_server_restart_fails_commands_retryably_and_loses_nothing() {
    let Some(server) = pg_server::server() else {
        return;
    };
    let url = pg_server::database().unwrap();
    let f = Fixture::new();
    let loopx = |agent: &str, args: &[&str]| {
        let out = f
            .loopx()
            .env("LOOPX_STORE", &url)
            .env("LOOPX_AGENT_ID", agent)
            .args(args)
            .args(["--dir", f.d()])
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains(pg_server::PASSWORD), "{text}");
        (out.status.success(), text)
    };
    let (ok, text) = loopx("a", &["init", "--goal", "g", "--success-criteria", "c"]);
    assert!(ok, "{text}");
    let (ok, text) = loopx("a", &["todo", "add", "--title", "one"]);
    assert!(ok, "{text}");
    server.stop();
    let (ok, text) = loopx("a", &["todo", "claim", "t1"]);
    server.start();
    assert!(!ok, "a claim succeeded with the server down: {text}");
    assert!(
        text.contains("is unavailable") && text.contains("retry"),
        "{text}"
    );
    assert!(text.contains("postgres://postgres@127.0.0.1:"), "{text}");
    // Back up: what was committed is there, the failed claim never was,
    // and the retry succeeds.
    let (ok, text) = loopx("a", &["todo", "claim", "t1", "--json"]);
    assert!(ok && text.contains("todo_claimed"), "{text}");
    let (ok, text) = loopx("a", &["validate"]);
    assert!(ok && text.starts_with("valid"), "{text}");
}
