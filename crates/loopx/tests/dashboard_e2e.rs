//! Runs the browser suite in `tests/e2e/` (Playwright driving headless
//! Chromium) against the binary this build made, so `cargo test` covers
//! the dashboard too.
//!
//! It needs node, Debian's /usr/bin/chromium and `npm ci` in tests/e2e,
//! which a plain `cargo test` cannot assume, and a test that skipped at run
//! time would still count as passed. So it is `#[ignore]`d, and `cargo
//! test` reports it as ignored with the reason; it runs only when asked for
//! (`cargo test -p loopx --test dashboard_e2e -- --ignored`, as `.ci/run`
//! does), and then a missing prerequisite fails it, naming what to install.

use std::path::PathBuf;
use std::process::Command;

#[test]
#[ignore = "browser suite: needs node, chromium and `npm ci --prefix tests/e2e`; run with `cargo test -p loopx --test dashboard_e2e -- --ignored`"]
fn the_dashboard_works_in_a_real_browser() {
    let suite = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let missing: Vec<&str> = [
        (
            Command::new("node").arg("--version").output().is_err(),
            "node",
        ),
        (
            !PathBuf::from(&chromium).exists(),
            "chromium (apt-get install chromium)",
        ),
        (
            !suite.join("node_modules/playwright-core").exists(),
            "playwright-core (npm ci --prefix tests/e2e)",
        ),
    ]
    .into_iter()
    .filter_map(|(absent, what)| absent.then_some(what))
    .collect();
    assert!(
        missing.is_empty(),
        "the browser suite was asked for but cannot run; install: {}",
        missing.join(", ")
    );
    // Kept as artifacts beside the build (target/e2e-artifacts), never committed.
    let screenshots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("../e2e-artifacts");
    let output = Command::new("node")
        .arg("--test")
        .current_dir(&suite)
        .env("LOOPX_BIN", assert_cmd::cargo::cargo_bin("loopx"))
        .env("LOOPX_SCREENSHOTS", &screenshots)
        .env("CHROMIUM", &chromium)
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the browser suite failed:\n{report}"
    );
    assert!(
        report.contains("# fail 0") && !report.contains("# pass 0"),
        "the browser suite ran nothing:\n{report}"
    );
    eprintln!(
        "browser suite passed; screenshots in {}",
        screenshots.display()
    );
}
