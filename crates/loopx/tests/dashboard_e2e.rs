//! Runs the browser suite in `tests/e2e/` (Playwright driving headless
//! Chromium) against the binary this build made, so `cargo test` covers
//! the dashboard too.
//!
//! It needs node, Debian's /usr/bin/chromium and `npm ci` in tests/e2e;
//! `.ci/run` installs all three. Where they are missing it fails under CI
//! (`CI` set) and otherwise says what to install and skips.

use std::path::PathBuf;
use std::process::Command;

#[test]
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
    if !missing.is_empty() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the browser suite cannot run under CI without: {}",
            missing.join(", ")
        );
        eprintln!(
            "skipping the browser suite; install {} to run it (`.ci/run` does)",
            missing.join(", ")
        );
        return;
    }
    let screenshots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("e2e-screenshots");
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
