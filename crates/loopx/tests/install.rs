//! `loopx install`, `uninstall` and `doctor` on the real binary, in a
//! temporary HOME and project: merges keep every other entry and byte,
//! a second install changes nothing, a dry run writes nothing, uninstall
//! gives back the original bytes, doctor reads back and writes nothing.

mod common;

use common::{fingerprint, loopx_path};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A temporary user and project, with every variable the installers
/// read pointed inside it.
struct Home {
    _temp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
    bin: PathBuf,
}

impl Home {
    fn new() -> Self {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().canonicalize().unwrap();
        let home = root.join("home");
        let project = root.join("project");
        let bin = root.join("bin");
        for dir in [&home, &project, &bin] {
            std::fs::create_dir_all(dir).unwrap();
        }
        Home {
            _temp: temp,
            root,
            home,
            project,
            bin,
        }
    }

    fn loopx(&self) -> assert_cmd::Command {
        let mut command = assert_cmd::Command::new(loopx_path());
        command
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env_remove("CODEX_HOME")
            .env_remove("LOOPX_DIR")
            .env_remove("LOOPX_REGISTRY_DIR")
            .env_remove("IS_SANDBOX")
            // Only the test's own fake providers, and git for the
            // workspace probe.
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()));
        command
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.loopx().args(args).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    }

    fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn read(&self, path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    /// Every byte under the temporary root (HOME, project), but loopx's
    /// own state directory: install keeps its manifests there, and
    /// uninstall removes them, but not the directory the armed-loop
    /// registry shares.
    fn everything(&self) -> BTreeMap<String, Vec<u8>> {
        let mut all = fingerprint(&self.root);
        all.retain(|name, _| !name.starts_with("home/.local/"));
        all
    }

    /// As [`Home::everything`], with loopx's state directory.
    fn everything_with_state(&self) -> BTreeMap<String, Vec<u8>> {
        fingerprint(&self.root)
    }

    fn doctor(&self, loop_dir: &Path) -> (bool, serde_json::Value) {
        let out = self
            .loopx()
            .args(["doctor", "--json", "--dir", loop_dir.to_str().unwrap()])
            .output()
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.success(), body)
    }

    fn init_loop(&self) -> PathBuf {
        let dir = self.project.join(".loopx");
        self.loopx()
            .args(["init", "--dir", dir.to_str().unwrap()])
            .args([
                "--goal",
                "Prove lemma B",
                "--success-criteria",
                "checked proof",
            ])
            .env("LOOPX_REGISTRY_DIR", self.root.join("registry"))
            .assert()
            .success();
        dir
    }
}

fn check<'a>(body: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    body["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {body:#}"))
}

/// A settings file with an unrelated hook and an odd key order and indent.
const CLAUDE_SETTINGS: &str = "{\n    \"zeta\": 1,\n    \"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"say done\"}]}], \"PreToolUse\": [{\"matcher\": \"Bash\", \"hooks\": [{\"type\":\"command\",\"command\":\"echo hi\"}]}]},\n    \"alpha\": true\n}\n";
const CLAUDE_MCP: &str =
    "{\"mcpServers\":{\"zz-other\":{\"command\":\"npx\",\"args\":[\"-y\",\"other\"]}},\"b\":0}";
const CODEX_CONFIG: &str = "# my codex config\nmodel = \"o3\"  # pinned\n\n[mcp_servers.other]\ncommand = \"npx\" # keep me\nargs = [\"-y\", \"x\"]\n";
const OPENCODE_CONFIG: &str = "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"mcp\": {\n    \"other\": {\"type\": \"local\", \"command\": [\"other\"]}\n  },\n  \"theme\": \"dark\"\n}\n";

#[test]
fn claude_project_install_merges_is_idempotent_and_uninstall_restores_every_byte() {
    let h = Home::new();
    let settings = h.project.join(".claude/settings.json");
    let mcp = h.project.join(".mcp.json");
    h.write(&settings, CLAUDE_SETTINGS);
    h.write(&mcp, CLAUDE_MCP);
    let before = h.everything();

    h.run(&["install", "--target", "claude"]);
    let merged: serde_json::Value = serde_json::from_str(&h.read(&settings)).unwrap();
    // The unrelated hooks and keys stay, in their order; loopx's hook is added.
    let text = h.read(&settings);
    assert!(text.find("\"zeta\"").unwrap() < text.find("\"alpha\"").unwrap());
    assert_eq!(
        merged["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "echo hi"
    );
    assert_eq!(
        merged["hooks"]["Stop"][0]["hooks"][0]["command"],
        "say done"
    );
    let ours = merged["hooks"]["Stop"][1]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(
        ours.contains("hook-check") && ours.contains("LOOPX_INSTALLED='loopx "),
        "{ours}"
    );
    let servers: serde_json::Value = serde_json::from_str(&h.read(&mcp)).unwrap();
    assert_eq!(servers["mcpServers"]["zz-other"]["args"][1], "other");
    assert_eq!(servers["mcpServers"]["loopx"]["args"][0], "mcp");
    assert!(servers["mcpServers"]["loopx"]["env"]["LOOPX_INSTALLED"]
        .as_str()
        .unwrap()
        .starts_with(&format!("loopx {} sha256:", env!("CARGO_PKG_VERSION"))));
    let skill = h.read(&h.project.join(".claude/skills/loopx/SKILL.md"));
    assert!(skill.starts_with("---\nname: loopx\n") && skill.contains("loopx-installed: \"loopx "));

    // A second install: no change, same bytes.
    let installed = h.everything();
    let again = h.run(&["install", "--target", "claude"]);
    assert!(again.contains("nothing to change"), "{again}");
    assert_eq!(h.everything(), installed);

    h.run(&["uninstall", "--target", "claude"]);
    assert_eq!(h.everything(), before);
}

#[test]
fn dry_run_prints_a_diff_and_writes_nothing() {
    let h = Home::new();
    let settings = h.project.join(".claude/settings.json");
    h.write(&settings, CLAUDE_SETTINGS);
    let before = h.everything_with_state();
    let out = h.run(&["install", "--target", "claude", "--dry-run"]);
    assert!(
        out.contains(&format!("+++ b{}", settings.display())),
        "{out}"
    );
    assert!(
        out.contains("+    \"Stop\"") || out.contains("hook-check"),
        "{out}"
    );
    assert!(out.contains("would create"), "{out}");
    assert_eq!(h.everything_with_state(), before);

    // Uninstall's dry run too, after a real install.
    h.run(&["install", "--target", "claude"]);
    let installed = h.everything_with_state();
    let out = h.run(&["uninstall", "--target", "claude", "--dry-run"]);
    assert!(out.contains("-") && out.contains("would restore"), "{out}");
    assert_eq!(h.everything_with_state(), installed);
}

#[test]
fn codex_user_install_keeps_toml_comments_and_uninstall_restores_them() {
    let h = Home::new();
    let config = h.home.join(".codex/config.toml");
    h.write(&config, CODEX_CONFIG);
    let before = h.everything();
    h.run(&["install", "--target", "codex", "--user"]);
    let text = h.read(&config);
    assert!(
        text.starts_with(CODEX_CONFIG),
        "the user's lines stay as written:\n{text}"
    );
    assert!(
        text.contains("[mcp_servers.loopx]") && text.contains("LOOPX_INSTALLED"),
        "{text}"
    );
    assert!(h.home.join(".agents/skills/loopx/SKILL.md").is_file());
    // Project files are untouched by a user install.
    assert!(std::fs::read_dir(&h.project).unwrap().next().is_none());

    let installed = h.everything();
    h.run(&["install", "--target", "codex", "--user"]);
    assert_eq!(h.everything(), installed);

    h.run(&["uninstall", "--target", "codex", "--user"]);
    assert_eq!(h.everything(), before);
}

#[test]
fn codex_and_opencode_project_installs_round_trip() {
    let h = Home::new();
    let opencode = h.project.join("opencode.json");
    h.write(&opencode, OPENCODE_CONFIG);
    let before = h.everything();
    h.run(&["install", "--target", "opencode"]);
    h.run(&["install", "--target", "codex"]);
    let merged: serde_json::Value = serde_json::from_str(&h.read(&opencode)).unwrap();
    assert_eq!(merged["mcp"]["other"]["command"][0], "other");
    assert_eq!(merged["mcp"]["loopx"]["type"], "local");
    assert_eq!(merged["mcp"]["loopx"]["command"][1], "mcp");
    assert_eq!(merged["theme"], "dark");
    assert!(h.project.join(".opencode/skills/loopx/SKILL.md").is_file());
    assert!(h.project.join(".codex/config.toml").is_file());
    assert!(h.project.join(".agents/skills/loopx/SKILL.md").is_file());

    h.run(&["uninstall", "--target", "codex"]);
    h.run(&["uninstall", "--target", "opencode"]);
    assert_eq!(h.everything(), before);
}

/// OpenCode's config as people write it: JSONC, with line and block
/// comments and trailing commas (and the `$schema` OpenCode adds itself).
const OPENCODE_JSONC: &str = r#"{
  "$schema": "https://opencode.ai/config.json",
  // my model
  "model": "anthropic/claude-sonnet-4-5", /* pinned */
  "autoupdate": false,
  "mcp": {
    "other": {"type": "local", "command": ["true"], "enabled": false,}, // theirs
  },
}
"#;

#[test]
fn an_opencode_jsonc_config_keeps_its_comments_and_commas_and_uninstall_restores_it() {
    let h = Home::new();
    let config = h.project.join("opencode.json");
    h.write(&config, OPENCODE_JSONC);
    let before = h.everything();
    h.run(&["install", "--target", "opencode"]);
    let installed = h.read(&config);
    // Every line the person wrote is still there, as they wrote it, in
    // order; loopx's entry is added after theirs, trailing comma and all.
    let mut from = 0;
    for line in OPENCODE_JSONC.lines() {
        let at = installed[from..]
            .find(line)
            .unwrap_or_else(|| panic!("{line:?} lost or moved in {installed}"));
        from += at + line.len();
    }
    assert!(
        installed.contains("// theirs\n    \"loopx\": {\n      \"type\": \"local\","),
        "{installed}"
    );
    // A second install reads its own JSONC entry back: nothing to change.
    let again = h.run(&["install", "--target", "opencode"]);
    assert!(again.contains("nothing to change"), "{again}");
    // OpenCode itself reads the file (a copy, in a scratch project and
    // HOME: OpenCode writes its own files there): its merged config has
    // both servers.
    if let Some(opencode) = std::env::var_os("LOOPX_AGENT_CLIS")
        .map(|bin| PathBuf::from(bin).join("opencode"))
        .filter(|bin| bin.is_file())
    {
        let scratch = tempfile::tempdir().unwrap();
        std::fs::write(scratch.path().join("opencode.json"), &installed).unwrap();
        let out = std::process::Command::new(opencode)
            .args(["debug", "config"])
            .current_dir(scratch.path())
            .env("HOME", scratch.path())
            .env_remove("XDG_CONFIG_HOME")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .output()
            .unwrap();
        let config: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(config["mcp"]["loopx"]["type"], "local", "{config:#}");
        assert_eq!(config["mcp"]["other"]["enabled"], false, "{config:#}");
        assert_eq!(config["model"], "anthropic/claude-sonnet-4-5");
    }
    h.run(&["uninstall", "--target", "opencode"]);
    assert_eq!(h.everything(), before);
}

#[test]
fn a_config_that_is_not_even_jsonc_is_refused_and_left_as_it_was() {
    let h = Home::new();
    let config = h.project.join("opencode.json");
    for broken in [
        "{\n  \"model\": \"x\" /* never closed\n}\n",
        "{\n  model: \"x\",\n}\n",
    ] {
        h.write(&config, broken);
        let before = h.everything_with_state();
        let out = h
            .loopx()
            .args(["install", "--target", "opencode"])
            .assert()
            .failure();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(
            stderr.contains(
                "opencode.json is not valid JSON (comments and trailing commas are fine)"
            ),
            "{stderr}"
        );
        assert_eq!(h.everything_with_state(), before, "{broken:?}");
    }
}

/// Claude Code's files keep their layout while loopx is installed: only
/// loopx's entry is new text, every other line is as the person wrote it.
#[test]
fn claude_install_changes_only_its_own_entries_lines() {
    let h = Home::new();
    let settings = h.project.join(".claude/settings.json");
    // Tabs, a key order and a one-line object no printer would choose.
    let written = "{\n\t\"zeta\": 1,\n\t\"permissions\": {\"allow\": [\"Bash(ls)\"]},\n\t\"alpha\": true\n}\n";
    h.write(&settings, written);
    h.run(&["install", "--target", "claude"]);
    let installed = h.read(&settings);
    assert!(
        installed.starts_with("{\n\t\"zeta\": 1,\n\t\"permissions\": {\"allow\": [\"Bash(ls)\"]},\n\t\"alpha\": true,\n\t\"hooks\": {\n\t\t\"Stop\": ["),
        "{installed}"
    );
    h.run(&["uninstall", "--target", "claude"]);
    assert_eq!(h.read(&settings), written);
}

#[test]
fn claude_user_install_writes_home_files_only() {
    let h = Home::new();
    let claude_json = h.home.join(".claude.json");
    h.write(&claude_json, "{\"numStartups\": 3, \"mcpServers\": {}}\n");
    let before = h.everything();
    h.run(&["install", "--target", "claude", "--user"]);
    let merged: serde_json::Value = serde_json::from_str(&h.read(&claude_json)).unwrap();
    assert_eq!(merged["numStartups"], 3);
    assert_eq!(merged["mcpServers"]["loopx"]["type"], "stdio");
    assert!(h.home.join(".claude/settings.json").is_file());
    assert!(h.home.join(".claude/skills/loopx/SKILL.md").is_file());
    assert!(std::fs::read_dir(&h.project).unwrap().next().is_none());
    h.run(&["uninstall", "--target", "claude", "--user"]);
    assert_eq!(h.everything(), before);
}

#[test]
fn uninstall_after_an_unrelated_edit_removes_only_loopx_entry() {
    let h = Home::new();
    let settings = h.project.join(".claude/settings.json");
    h.write(&settings, CLAUDE_SETTINGS);
    h.run(&["install", "--target", "claude"]);
    // The person adds a key after the install.
    let edited =
        h.read(&settings)
            .replacen("\"alpha\": true", "\"alpha\": true,\n    \"added\": 2", 1);
    std::fs::write(&settings, &edited).unwrap();
    h.run(&["uninstall", "--target", "claude"]);
    let after: serde_json::Value = serde_json::from_str(&h.read(&settings)).unwrap();
    assert_eq!(after["added"], 2);
    assert_eq!(after["hooks"]["Stop"].as_array().unwrap().len(), 1);
    assert_eq!(after["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
    assert!(!h.project.join(".mcp.json").exists());
    assert!(!h.project.join(".claude/skills").exists());
}

/// A hook the person put in the same Stop group as loopx's is theirs:
/// reinstall keeps it, and uninstall takes out only loopx's hook.
#[test]
fn a_hook_added_inside_loopx_stop_group_survives_reinstall_and_uninstall() {
    let h = Home::new();
    let settings = h.project.join(".claude/settings.json");
    h.run(&["install", "--target", "claude"]);
    let mut doc: serde_json::Value = serde_json::from_str(&h.read(&settings)).unwrap();
    let mine = serde_json::json!({"type": "command", "command": "notify-send done"});
    doc["hooks"]["Stop"][0]["hooks"]
        .as_array_mut()
        .unwrap()
        .push(mine.clone());
    h.write(&settings, &serde_json::to_string_pretty(&doc).unwrap());
    let stop_hooks = |text: &str| -> Vec<serde_json::Value> {
        let doc: serde_json::Value = serde_json::from_str(text).unwrap();
        doc["hooks"]["Stop"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["hooks"].as_array().unwrap().clone())
            .collect()
    };

    h.run(&["install", "--target", "claude"]);
    let hooks = stop_hooks(&h.read(&settings));
    assert_eq!(hooks.len(), 2, "{hooks:?}");
    assert!(hooks.contains(&mine), "reinstall dropped the person's hook");

    h.run(&["uninstall", "--target", "claude"]);
    let hooks = stop_hooks(&h.read(&settings));
    assert_eq!(
        hooks,
        [mine],
        "uninstall took more (or less) than its own hook"
    );
}

/// Makes `file` impossible to replace, and undoes that when dropped.
/// Root passes over permission bits, so for root the file is made
/// immutable (`chattr +i`: even root cannot rename over it, on ext4 and
/// the other filesystems with inode flags); anyone else gets a parent
/// directory without write permission. Either way a write to `file` fails
/// when install applies it, after every plan was made.
struct Unwritable {
    file: PathBuf,
    immutable: bool,
}

impl Unwritable {
    fn new(file: &Path) -> Self {
        let immutable = std::process::Command::new("chattr")
            .arg("+i")
            .arg(file)
            .status()
            .is_ok_and(|s| s.success());
        if !immutable {
            use std::os::unix::fs::PermissionsExt;
            let parent = file.parent().unwrap();
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        let guard = Unwritable {
            file: file.to_owned(),
            immutable,
        };
        let probe = file.with_extension("probe");
        assert!(
            guard.immutable || std::fs::write(&probe, b"").is_err(),
            "cannot make {} unwritable here (root without chattr +i on this filesystem)",
            file.display()
        );
        guard
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        if self.immutable {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.file)
                .status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let parent = self.file.parent().unwrap();
            let _ = std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755));
        }
    }
}

/// The settings file is written last; when it cannot be written, the
/// skill and `.mcp.json` already written are put back, and the error says
/// what failed and that nothing was left changed.
#[test]
fn an_install_that_cannot_write_the_settings_puts_back_what_it_wrote() {
    let h = Home::new();
    let settings = h.project.join(".claude/settings.json");
    h.write(&settings, CLAUDE_SETTINGS);
    h.write(&h.project.join(".mcp.json"), CLAUDE_MCP);
    // A non-root run needs the skill's folder to exist beside the
    // read-only one.
    std::fs::create_dir_all(h.project.join(".claude/skills")).unwrap();
    let before = h.everything_with_state();
    let unwritable = Unwritable::new(&settings);

    let output = h
        .loopx()
        .args(["install", "--target", "claude"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "install succeeded: {stderr}");
    assert!(stderr.contains("settings.json"), "{stderr}");
    assert!(stderr.contains("put back"), "{stderr}");
    assert!(
        stderr.contains(".mcp.json") && stderr.contains("SKILL.md"),
        "{stderr}"
    );
    drop(unwritable);
    assert_eq!(
        h.everything_with_state(),
        before,
        "a failed install left files changed"
    );
}

#[test]
fn install_refuses_a_symlink_and_an_entry_it_did_not_write() {
    let h = Home::new();
    let elsewhere = h.root.join("elsewhere.json");
    h.write(&elsewhere, "{}\n");
    std::os::unix::fs::symlink(&elsewhere, h.project.join(".mcp.json")).unwrap();
    let before = h.everything();
    h.loopx()
        .args(["install", "--target", "claude"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("symbolic link"));
    assert_eq!(h.everything(), before);

    std::fs::remove_file(h.project.join(".mcp.json")).unwrap();
    h.write(
        &h.project.join(".mcp.json"),
        "{\"mcpServers\": {\"loopx\": {\"command\": \"mine\"}}}\n",
    );
    let before = h.everything();
    h.loopx()
        .args(["install", "--target", "claude"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("that loopx did not write"));
    assert_eq!(h.everything(), before);
}

#[test]
fn doctor_passes_on_a_fresh_install_and_writes_nothing() {
    let h = Home::new();
    let dir = h.init_loop();
    h.run(&["install", "--target", "claude"]);
    h.run(&["install", "--target", "codex", "--user"]);
    let before = h.everything_with_state();
    let (ok, body) = h.doctor(&dir);
    assert!(ok, "{body:#}");
    assert_eq!(check(&body, "install.claude.project")["ok"], true);
    assert!(check(&body, "install.codex.user")["detail"]
        .as_str()
        .unwrap()
        .contains("matches"));
    assert_eq!(check(&body, "store")["ok"], true);
    assert_eq!(check(&body, "disk")["ok"], true);
    for c in body["checks"].as_array().unwrap() {
        assert!(
            c.get("name").is_some()
                && c.get("ok").is_some()
                && c.get("detail").is_some()
                && c.get("fix").is_some()
        );
    }
    assert_eq!(h.everything_with_state(), before);
}

#[test]
fn doctor_catches_a_hand_edited_skill_and_a_stale_hook() {
    let h = Home::new();
    let dir = h.init_loop();
    h.run(&["install", "--target", "claude"]);
    let skill = h.project.join(".claude/skills/loopx/SKILL.md");
    let text = h.read(&skill).replace("Work through it", "Ignore it");
    std::fs::write(&skill, text).unwrap();
    let before = h.everything_with_state();
    let (ok, body) = h.doctor(&dir);
    assert!(!ok);
    let install = check(&body, "install.claude.project");
    assert_eq!(install["ok"], false);
    assert!(
        install["detail"]
            .as_str()
            .unwrap()
            .contains("edited since install"),
        "{install}"
    );
    assert_eq!(install["fix"], "loopx install --target claude");
    assert_eq!(h.everything_with_state(), before);

    // Reinstall repairs it; then point the hook at a binary that is gone.
    h.run(&["install", "--target", "claude"]);
    assert!(h.doctor(&dir).0);
    let settings = h.project.join(".claude/settings.json");
    let loopx = loopx_path().display().to_string();
    let stale = h.read(&settings).replace(&loopx, "/nowhere/loopx");
    std::fs::write(&settings, stale).unwrap();
    let (ok, body) = h.doctor(&dir);
    assert!(!ok);
    let detail = check(&body, "install.claude.project")["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        detail.contains("/nowhere/loopx") && detail.contains("does not exist"),
        "{detail}"
    );

    // The text rendering says the fix too, on a failing exit, on stdout
    // as when all is well: the report is read in one place.
    h.loopx()
        .args(["doctor", "--dir", dir.to_str().unwrap()])
        .assert()
        .code(1)
        .stdout(predicates::str::contains(
            "fix: loopx install --target claude",
        ))
        .stderr("");
}

#[test]
fn doctor_does_not_wait_for_a_hanging_provider() {
    use std::os::unix::fs::PermissionsExt as _;
    let h = Home::new();
    let dir = h.init_loop();
    let codex = h.bin.join("codex");
    std::fs::write(&codex, "#!/bin/sh\nexec sleep 60\n").unwrap();
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).unwrap();
    let opencode = h.bin.join("opencode");
    std::fs::write(&opencode, "#!/bin/sh\necho 'opencode 9.9.9'\n").unwrap();
    std::fs::set_permissions(&opencode, std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = Instant::now();
    let (ok, body) = h.doctor(&dir);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(!ok);
    assert_eq!(check(&body, "provider.codex")["ok"], false);
    let opencode = check(&body, "provider.opencode");
    assert_eq!(opencode["ok"], true);
    assert!(opencode["detail"]
        .as_str()
        .unwrap()
        .contains("opencode 9.9.9"));
    // Newer than the table's qualified opencode: used, with a warning.
    let warning = opencode["warning"].as_str().unwrap();
    assert!(
        warning.contains("9.9.9") && warning.contains("newer than the newest version"),
        "{warning}"
    );
    let providers = check(&body, "providers");
    let detail = providers["detail"].as_str().unwrap();
    assert!(
        detail.contains("codex") && detail.contains("opencode"),
        "{detail}"
    );
}

#[test]
fn doctor_names_the_providers_on_path_and_whether_each_version_is_qualified() {
    use std::os::unix::fs::PermissionsExt as _;
    let h = Home::new();
    let dir = h.init_loop();
    let (_, body) = h.doctor(&dir);
    // The line --help promises, also when no provider is installed.
    let providers = check(&body, "providers");
    assert_eq!(providers["ok"], true);
    let qualified = format!("#!/bin/sh\necho '{} (Claude Code)'\n", "2.1.197");
    let claude = h.bin.join("claude");
    std::fs::write(&claude, qualified).unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (_, body) = h.doctor(&dir);
    let claude = check(&body, "provider.claude");
    assert_eq!(claude["ok"], true);
    assert!(
        claude["detail"]
            .as_str()
            .unwrap()
            .contains("a qualified version"),
        "{claude}"
    );
    // As root, Claude Code refuses its autonomy flag: doctor says what to
    // do, and nothing once IS_SANDBOX says the machine is a sandbox.
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let warning = claude["warning"].as_str().unwrap();
        assert!(
            warning.contains("IS_SANDBOX=1") && warning.contains("another user"),
            "{warning}"
        );
    } else {
        assert!(claude.get("warning").is_none(), "{claude}");
    }
    let sandboxed = h
        .loopx()
        .args(["doctor", "--json", "--dir", dir.to_str().unwrap()])
        .env("IS_SANDBOX", "1")
        .output()
        .unwrap();
    let sandboxed: serde_json::Value = serde_json::from_slice(&sandboxed.stdout).unwrap();
    assert!(
        check(&sandboxed, "provider.claude")
            .get("warning")
            .is_none(),
        "{sandboxed}"
    );
    // The text report: one stream, with the warning marked.
    let newer = h.bin.join("codex");
    std::fs::write(&newer, "#!/bin/sh\necho 'codex-cli 0.999.0'\n").unwrap();
    std::fs::set_permissions(&newer, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = h
        .loopx()
        .args(["doctor", "--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("warn provider.codex"), "{text}");
    assert!(
        text.contains("ok   providers: on PATH: claude, codex"),
        "{text}"
    );
    assert!(output.stderr.is_empty(), "{output:?}");
}

#[test]
fn doctor_calls_an_install_of_another_loopx_version_a_mixed_revision() {
    let h = Home::new();
    let dir = h.init_loop();
    h.run(&["install", "--target", "claude"]);
    let mcp = h.project.join(".mcp.json");
    let older = h.read(&mcp).replace(
        &format!("\"loopx {} sha256:", env!("CARGO_PKG_VERSION")),
        "\"loopx 0.0.1 sha256:",
    );
    std::fs::write(&mcp, older).unwrap();
    let (ok, body) = h.doctor(&dir);
    assert!(!ok);
    let install = check(&body, "install.claude.project");
    let detail = install["detail"].as_str().unwrap();
    assert!(
        detail.contains("installed by loopx 0.0.1") && detail.contains("mixed revisions"),
        "{detail}"
    );
    assert!(
        !detail.contains("edited since install"),
        "only the version differs: {detail}"
    );
    assert_eq!(install["fix"], "loopx install --target claude");
    // The fix fixes it.
    h.run(&["install", "--target", "claude"]);
    assert!(h.doctor(&dir).0);
}

#[test]
fn doctor_tells_a_repository_without_commits_from_no_repository() {
    let h = Home::new();
    let dir = h.init_loop();
    let workspace = |h: &Home| {
        check(&h.doctor(&dir).1, "workspace")["detail"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        workspace(&h).contains("not a git repository"),
        "{}",
        workspace(&h)
    );
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&h.project)
        .status()
        .unwrap();
    assert!(init.success());
    assert!(
        workspace(&h).contains("a git repository with no commits yet"),
        "{}",
        workspace(&h)
    );
}

/// The MCP server exactly as the installed project config starts it (its
/// command and args, read back from `.mcp.json`), from a subdirectory of
/// the project, as Claude Code starts it in the session's directory: it
/// finds the project's loop.
#[test]
fn the_installed_mcp_server_started_in_a_subdirectory_finds_the_projects_loop() {
    use std::io::{BufRead as _, Write as _};
    let h = Home::new();
    h.init_loop();
    h.run(&["install", "--target", "claude"]);
    let config: serde_json::Value =
        serde_json::from_str(&h.read(&h.project.join(".mcp.json"))).unwrap();
    let server = &config["mcpServers"]["loopx"];
    let args: Vec<String> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let sub = h.project.join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    for project_env in [None, Some(&h.project)] {
        let mut command = std::process::Command::new(server["command"].as_str().unwrap());
        command
            .args(&args)
            .current_dir(&sub)
            .env("HOME", &h.home)
            .env_remove("LOOPX_DIR")
            .env_remove("CLAUDE_PROJECT_DIR")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        if let Some(project) = project_env {
            command.env("CLAUDE_PROJECT_DIR", project);
        }
        let mut child = command.spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        let messages = [
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}}),
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "work_context", "arguments": {}}}),
        ];
        for message in messages {
            writeln!(input, "{message}").unwrap();
        }
        let mut replies = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let answer = loop {
            let line = replies.next().unwrap().unwrap();
            let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
            if reply["id"] == 2 {
                break reply;
            }
        };
        drop(input);
        let _ = child.kill();
        let _ = child.wait();
        let text = answer.to_string();
        assert!(
            answer["result"]["isError"] != true && text.contains("Prove lemma B"),
            "with CLAUDE_PROJECT_DIR {project_env:?}: {text}"
        );
    }
}

#[test]
fn a_codex_project_install_says_codex_ignores_it_until_the_project_is_trusted() {
    let h = Home::new();
    let dir = h.init_loop();
    let said = h.run(&["install", "--target", "codex"]);
    assert!(
        said.contains(
            "note: Codex ignores this project's .codex/config.toml until it trusts the project"
        ) && said.contains("trust_level = \"trusted\""),
        "{said}"
    );
    let warned = check(&h.doctor(&dir).1, "install.codex.project").clone();
    assert!(
        warned["warning"]
            .as_str()
            .is_some_and(|w| w.contains("trusts the project")),
        "{warned}"
    );
    // Codex's own trust record, as `codex exec --trust` writes it.
    let root = h.project.canonicalize().unwrap();
    h.write(
        &h.home.join(".codex/config.toml"),
        &format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            root.display()
        ),
    );
    let said = h.run(&["install", "--target", "codex"]);
    assert!(!said.contains("trusts the project"), "{said}");
    // The Stop hook still waits for a person's trust, and both say so.
    let hook_note = "Codex runs loopx's Stop hook only once you trust it";
    assert!(
        said.contains(hook_note) && said.contains("/hooks"),
        "{said}"
    );
    let hooks = root.join(".codex/hooks.json");
    let warned = check(&h.doctor(&dir).1, "install.codex.project").clone();
    assert!(
        warned["warning"]
            .as_str()
            .is_some_and(|w| w.contains(hook_note) && !w.contains("trusts the project")),
        "{warned}"
    );
    // Codex's record of a trusted hook, as its hook review writes it: the
    // hook's place in hooks.json and the hash it approved.
    h.write(
        &h.home.join(".codex/config.toml"),
        &format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n\n[hooks.state.\"{}:stop:0:0\"]\ntrusted_hash = \"sha256:00\"\n",
            root.display(),
            hooks.display()
        ),
    );
    let said = h.run(&["install", "--target", "codex"]);
    assert!(!said.contains("note:"), "{said}");
    let trusted = check(&h.doctor(&dir).1, "install.codex.project").clone();
    assert!(trusted["warning"].is_null(), "{trusted}");
}
