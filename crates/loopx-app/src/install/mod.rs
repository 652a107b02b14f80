//! Installers: `install` and `uninstall` for the agent runtimes (Claude
//! Code, Codex, OpenCode), and the readback `doctor` uses.
//!
//! Each runtime's module (`claude.rs`, `codex.rs`, `opencode.rs`) says
//! what goes where: a list of [`Component`]s, each a file and an [`Edit`]
//! to it. This module owns the rules every component shares:
//!
//! - **Merging** into a user's file changes only loopx's entry: JSON is
//!   parsed into an order-keeping tree ([`json::Json`]), TOML with
//!   `toml_edit`, so other keys, comments and layout stay.
//! - **Records**: every installed file or entry carries
//!   `loopx <version> sha256:<digest>`, the digest over the entry's
//!   canonical content without the record (`loopx_core::digest`). A file
//!   carries it in its frontmatter, an MCP entry in its environment map
//!   (`LOOPX_INSTALLED`), the Stop hook as an environment prefix of its
//!   command. The record is how a later install, uninstall and doctor tell
//!   loopx's entry from a person's, and a hand edit from an install.
//! - **Undo**: install keeps, per file it changed, a manifest in the
//!   user's loopx state directory (`installs/`): the file's bytes before
//!   the first install and the digest of what install wrote. `uninstall`
//!   restores those bytes exactly while the file is still what install
//!   wrote (removing a file install created, and the directories it
//!   created); once something else has changed the file since, it removes
//!   only loopx's entry and keeps the rest.
//! - **IO** happens in `files.rs` only ([`install`], [`uninstall`] and
//!   the readback [`read_for_inspection`]): reads never
//!   follow a symlink planted at a target (refused), writes are atomic
//!   (`fsutil::write_durable`: temp file + rename, never through a link).
//!
//! - [`wrapper`]: `run_force_loop.sh`, the reference kit's verbs as loopx
//!   commands (`--force-loop-wrapper`), a whole file marked as loopx's.
//!
//! Not here: argument parsing and rendering (the CLI's `install.rs`), the
//! checks `doctor` adds beyond installs (`crate::doctor`).

mod claude;
pub mod codex;
mod files;
pub mod json;
mod jsonc;
mod opencode;
pub mod wrapper;

pub use files::{
    install, read_for_inspection, uninstall, Action, FileChange, InstallView, Request,
};

use crate::registry::Registry;
use anyhow::{bail, Context as _, Result};
use json::Json;
use loopx_core::digest::Digest;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The environment key (MCP entries) and command prefix (the Stop hook)
/// that carries an install's record.
pub const RECORD_KEY: &str = "LOOPX_INSTALLED";
/// The skill frontmatter's metadata key that carries a file's record.
const FILE_RECORD_KEY: &str = "loopx-installed";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Claude,
    Codex,
    Opencode,
}

impl Target {
    pub const ALL: [Target; 3] = [Target::Claude, Target::Codex, Target::Opencode];

    pub fn name(self) -> &'static str {
        match self {
            Target::Claude => "claude",
            Target::Codex => "codex",
            Target::Opencode => "opencode",
        }
    }

    pub fn parse(name: &str) -> Result<Self> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .with_context(|| {
                format!("{name:?} is not an install target: use claude, codex or opencode")
            })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Project,
    User,
}

/// Where a runtime's files are, for one project and one user.
pub struct Places {
    pub project: PathBuf,
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME`, else `~/.config` (OpenCode's user config).
    pub config_home: PathBuf,
    /// `$CODEX_HOME`, else `~/.codex`.
    pub codex_home: PathBuf,
    /// The user's loopx state directory (manifests under `installs/`).
    pub state: PathBuf,
}

impl Places {
    /// From the process environment, for the project at `project`.
    pub fn from_env(project: &Path) -> Result<Self> {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home =
            var("HOME").context("HOME is not set: the user's config files cannot be found")?;
        let project = project.canonicalize().with_context(|| {
            format!("the project directory {} does not exist", project.display())
        })?;
        Ok(Places {
            config_home: var("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config")),
            codex_home: var("CODEX_HOME").unwrap_or_else(|| home.join(".codex")),
            state: Registry::locate(None)?.state_dir().to_path_buf(),
            project,
            home,
        })
    }
}

/// What this binary installs: itself, its version, and the loop directory
/// the MCP server is started on.
pub struct Source {
    /// The absolute path of this loopx, so the runtimes start the binary
    /// that installed them whatever their PATH is.
    pub loopx: PathBuf,
    pub version: String,
    /// As the MCP server's `--dir` gets it: absolute when given, else
    /// `.loopx`, which the runtimes resolve in the project they start in.
    pub dir: String,
}

impl Source {
    pub fn this_binary(dir: Option<&Path>) -> Result<Self> {
        let loopx = std::env::current_exe().context("cannot find this loopx binary's path")?;
        let dir = match dir {
            Some(dir) if dir.is_absolute() => dir.display().to_string(),
            Some(dir) => std::env::current_dir()?.join(dir).display().to_string(),
            None => ".loopx".to_owned(),
        };
        Ok(Source {
            loopx,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            dir,
        })
    }

    fn record(&self, digest: &Digest) -> String {
        Record {
            version: self.version.clone(),
            digest: digest.clone(),
        }
        .to_string()
    }

    fn mcp_args(&self) -> Vec<String> {
        vec!["mcp".into(), "--dir".into(), self.dir.clone()]
    }
}

/// One thing an install puts in one file.
pub struct Component {
    /// `skill`, `mcp` or `hook`.
    pub name: &'static str,
    pub path: PathBuf,
    pub edit: Edit,
}

pub enum Edit {
    /// A whole file install owns (the skill); its record in the
    /// frontmatter's `metadata`.
    File { text: String },
    /// `entry` at `parents…/key` of a JSON object; its record at
    /// `entry[env][LOOPX_INSTALLED]`.
    JsonKey {
        parents: &'static [&'static str],
        key: &'static str,
        env: &'static str,
        entry: Json,
    },
    /// A Claude Code hook group appended to the array at `parents`,
    /// running `command`; its record a `LOOPX_INSTALLED=…` prefix.
    JsonHook {
        parents: &'static [&'static str],
        command: String,
    },
    /// `[table.key]` of a TOML document; its record at `env.LOOPX_INSTALLED`.
    TomlKey {
        table: &'static str,
        key: &'static str,
        command: String,
        args: Vec<String>,
    },
}

/// The components of `target` in `scope`.
pub fn components(
    target: Target,
    scope: Scope,
    places: &Places,
    source: &Source,
) -> Vec<Component> {
    match target {
        Target::Claude => claude::components(scope, places, source),
        Target::Codex => codex::components(scope, places, source),
        Target::Opencode => opencode::components(scope, places, source),
    }
}

/// The skill component, at `<skills>/loopx/SKILL.md`.
fn skill(skills: &Path, source: &Source) -> Component {
    Component {
        name: "skill",
        path: skills.join("loopx/SKILL.md"),
        edit: Edit::File {
            text: skill_text(source),
        },
    }
}

/// The Stop hook `loopx hook-check` in the hooks file at `path`, in the
/// shape Claude Code and Codex share (`hooks.Stop`, a group of command
/// hooks).
fn stop_hook(path: PathBuf, source: &Source) -> Component {
    Component {
        name: "hook",
        path,
        edit: Edit::JsonHook {
            parents: &["hooks", "Stop"],
            command: format!(
                "{} hook-check",
                shell_quote(&source.loopx.display().to_string())
            ),
        },
    }
}

/// The skill every runtime gets: when to call loopx, and how. One text
/// for all three (they share the Agent Skills format: `name`,
/// `description`, string-to-string `metadata`).
fn skill_text(source: &Source) -> String {
    let body = include_str!("skill.md");
    // The description is quoted: it holds ": ", which a plain YAML scalar may not.
    let unrecorded =
        format!("---\nname: loopx\ndescription: \"{SKILL_DESCRIPTION}\"\nmetadata:\n---\n{body}");
    let digest = Digest::of_bytes(unrecorded.as_bytes());
    unrecorded.replacen(
        "metadata:\n",
        &format!(
            "metadata:\n  {FILE_RECORD_KEY}: \"{}\"\n",
            source.record(&digest)
        ),
        1,
    )
}

const SKILL_DESCRIPTION: &str = "Work inside a loopx loop: read the task, claim a todo, record evidence and the iteration through the loopx MCP tools or CLI. Use when a loopx loop directory (.loopx) exists or the prompt names loopx.";

/// What an install record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub version: String,
    pub digest: Digest,
}

/// The one text of a record: `loopx <version> sha256:<hex>`.
impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "loopx {} {}", self.version, self.digest)
    }
}

impl Record {
    fn parse(text: &str) -> Option<Self> {
        let mut words = text.split(' ');
        let (Some("loopx"), Some(version), Some(digest), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return None;
        };
        Some(Record {
            version: version.to_owned(),
            digest: Digest::parse(digest).ok()?,
        })
    }
}

/// What a file holds of one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Absent,
    /// Installed by loopx: its record, and whether its content still has
    /// the recorded digest (false: edited by hand since).
    Installed {
        record: Record,
        intact: bool,
    },
    /// Something at loopx's place that loopx did not write.
    Foreign,
}

impl Edit {
    /// `current` with this component installed.
    fn merge(&self, current: Option<&str>, path: &Path, source: &Source) -> Result<String> {
        match self {
            Edit::File { text } => {
                if let Some(current) = current {
                    if matches!(self.inspect(Some(current)), Found::Foreign) {
                        bail!(
                            "{} exists and was not written by loopx: move it away, then install again",
                            path.display()
                        );
                    }
                }
                Ok(text.clone())
            }
            Edit::JsonKey {
                parents,
                key,
                env,
                entry,
            } => {
                let mut doc = parse_json(current, path)?;
                let slot = walk_json(&mut doc, parents, path)?;
                if slot.get(key).is_some()
                    && !matches!(self.inspect(current), Found::Installed { .. })
                {
                    bail!(
                        "{} already has an entry {:?} under {} that loopx did not write: rename or remove it, then install again",
                        path.display(),
                        key,
                        parents.join(".")
                    );
                }
                let mut entry = entry.clone();
                let record = source.record(&Digest::of_json(&entry.to_value()));
                entry
                    .object_at(env)
                    .expect("an env map is an object")
                    .set(RECORD_KEY, Json::Scalar(record.into()));
                slot.set(key, entry);
                print_json(current, &doc, &[*parents, &[*key]].concat())
            }
            Edit::JsonHook { parents, command } => {
                let mut doc = parse_json(current, path)?;
                let (parent_keys, array_key) = parents.split_at(parents.len() - 1);
                let slot = walk_json(&mut doc, parent_keys, path)?;
                if slot.get(array_key[0]).is_none() {
                    slot.set(array_key[0], Json::Array(Vec::new()));
                }
                let Some(Json::Array(groups)) = slot.get_mut(array_key[0]) else {
                    bail!(
                        "{}: {} is not a list of hooks; fix it by hand",
                        path.display(),
                        parents.join(".")
                    );
                };
                let record = source.record(&Digest::of_json(&hook_group(command).to_value()));
                let hook = hook_entry(&format!("{RECORD_KEY}='{record}' {command}"));
                // In place of loopx's own hook, wherever it is: another
                // hook in its group is the person's and stays.
                let ours = groups
                    .iter_mut()
                    .find_map(|group| match group.get_mut("hooks") {
                        Some(Json::Array(hooks)) => {
                            hooks.iter_mut().find(|h| hook_entry_record(h).is_some())
                        }
                        _ => None,
                    });
                match ours {
                    Some(slot) => *slot = hook,
                    None => groups.push(Json::Object(vec![(
                        "hooks".into(),
                        Json::Array(vec![hook]),
                    )])),
                }
                print_json(current, &doc, parents)
            }
            Edit::TomlKey {
                table,
                key,
                command,
                args,
            } => {
                let mut doc: toml_edit::DocumentMut =
                    current.unwrap_or("").parse().with_context(|| {
                        format!(
                            "{} is not valid TOML: fix it, then install again",
                            path.display()
                        )
                    })?;
                if !doc.contains_key(table) {
                    let mut created = toml_edit::Table::new();
                    created.set_implicit(true);
                    doc.insert(table, toml_edit::Item::Table(created));
                }
                let Some(servers) = doc[*table].as_table_mut() else {
                    bail!("{}: {table} is not a table; fix it by hand", path.display());
                };
                if servers.contains_key(key)
                    && !matches!(self.inspect(current), Found::Installed { .. })
                {
                    bail!(
                        "{} already has [{table}.{key}] that loopx did not write: rename or remove it, then install again",
                        path.display()
                    );
                }
                let digest = Digest::of_json(&toml_entry_value(command, args));
                let mut entry = toml_edit::Table::new();
                entry.insert("command", toml_edit::value(command.as_str()));
                entry.insert(
                    "args",
                    toml_edit::value(
                        args.iter()
                            .map(String::as_str)
                            .collect::<toml_edit::Array>(),
                    ),
                );
                let mut env = toml_edit::InlineTable::new();
                env.insert(RECORD_KEY, source.record(&digest).into());
                entry.insert("env", toml_edit::value(env));
                servers.insert(key, toml_edit::Item::Table(entry));
                Ok(doc.to_string())
            }
        }
    }

    /// `current` without this component: `None` when nothing is left of
    /// a file loopx owns.
    fn unmerge(&self, current: &str, path: &Path) -> Result<Option<String>> {
        match self {
            Edit::File { .. } => Ok(None),
            Edit::JsonKey { parents, key, .. } => {
                let mut doc = parse_json(Some(current), path)?;
                remove_json(&mut doc, parents, |slot| {
                    slot.remove(key);
                });
                print_json(Some(current), &doc, &[*parents, &[*key]].concat()).map(Some)
            }
            Edit::JsonHook { parents, .. } => {
                let mut doc = parse_json(Some(current), path)?;
                remove_json(&mut doc, parents, |groups| {
                    if let Json::Array(groups) = groups {
                        groups.retain_mut(|group| !remove_loopx_hook(group));
                    }
                });
                print_json(Some(current), &doc, parents).map(Some)
            }
            Edit::TomlKey { table, key, .. } => {
                let mut doc: toml_edit::DocumentMut = current.parse()?;
                if let Some(servers) = doc.get_mut(table).and_then(|t| t.as_table_mut()) {
                    servers.remove(key);
                    if servers.is_empty() {
                        doc.remove(table);
                    }
                }
                Ok(Some(doc.to_string()))
            }
        }
    }

    /// What `current` holds of this component.
    pub fn inspect(&self, current: Option<&str>) -> Found {
        let Some(current) = current else {
            return Found::Absent;
        };
        match self {
            Edit::File { .. } => inspect_file(current),
            Edit::JsonKey {
                parents, key, env, ..
            } => {
                let Ok(doc) = Json::parse(current) else {
                    return Found::Absent;
                };
                let Some(entry) = parents
                    .iter()
                    .try_fold(&doc, |node, k| node.get(k))
                    .and_then(|s| s.get(key))
                else {
                    return Found::Absent;
                };
                let mut unrecorded = entry.clone();
                let record = unrecorded.get_mut(env).and_then(|e| e.remove(RECORD_KEY));
                let Some(record) = record
                    .as_ref()
                    .and_then(Json::as_str)
                    .and_then(Record::parse)
                else {
                    return Found::Foreign;
                };
                if unrecorded.get(env).is_some_and(Json::is_empty_container) {
                    unrecorded.remove(env);
                }
                let intact = Digest::of_json(&unrecorded.to_value()) == record.digest;
                Found::Installed { record, intact }
            }
            Edit::JsonHook { parents, .. } => {
                let Ok(doc) = Json::parse(current) else {
                    return Found::Absent;
                };
                let Some(Json::Array(groups)) =
                    parents.iter().try_fold(&doc, |node, k| node.get(k))
                else {
                    return Found::Absent;
                };
                groups
                    .iter()
                    .find_map(|g| {
                        let (text, command) = hook_record(g)?;
                        let record = Record::parse(&text)?;
                        // Intact: the command is the one recorded, and the
                        // group holds nothing install did not write.
                        let intact = Digest::of_json(&hook_group(&command).to_value())
                            == record.digest
                            && *g == hook_group(&format!("{RECORD_KEY}='{text}' {command}"));
                        Some(Found::Installed { record, intact })
                    })
                    .unwrap_or(Found::Absent)
            }
            Edit::TomlKey { table, key, .. } => {
                let Ok(doc) = current.parse::<toml_edit::DocumentMut>() else {
                    return Found::Absent;
                };
                let Some(entry) = doc.get(table).and_then(|t| t.get(key)) else {
                    return Found::Absent;
                };
                let mut value = toml_to_json(entry);
                let record = value
                    .get_mut("env")
                    .and_then(|e| e.as_object_mut())
                    .and_then(|e| e.remove(RECORD_KEY));
                let Some(record) = record
                    .as_ref()
                    .and_then(|r| r.as_str())
                    .and_then(Record::parse)
                else {
                    return Found::Foreign;
                };
                if value
                    .get("env")
                    .and_then(|e| e.as_object())
                    .is_some_and(|e| e.is_empty())
                {
                    value.as_object_mut().map(|v| v.remove("env"));
                }
                let intact = Digest::of_json(&value) == record.digest;
                Found::Installed { record, intact }
            }
        }
    }

    /// The hook command loopx installed in `current`, without its record
    /// prefix (for doctor's check of the binary it calls).
    pub fn hook_command(&self, current: &str) -> Option<String> {
        let Edit::JsonHook { parents, .. } = self else {
            return None;
        };
        let doc = Json::parse(current).ok()?;
        let Some(Json::Array(groups)) = parents.iter().try_fold(&doc, |node, k| node.get(k)) else {
            return None;
        };
        groups
            .iter()
            .find_map(|g| hook_record(g).map(|(_, command)| command))
    }
}

/// `doc`, the tree of `current` after an edit at `path`, as text: the
/// person's file with only the value at `path` changed (every comment,
/// key order and indentation kept), or printed whole for a new file.
fn print_json(current: Option<&str>, doc: &Json, path: &[&str]) -> Result<String> {
    match current {
        Some(text) if !text.trim().is_empty() => jsonc::carry(text, doc, path),
        _ => Ok(doc.print()),
    }
}

fn parse_json(current: Option<&str>, path: &Path) -> Result<Json> {
    let doc = match current {
        None => Json::object(),
        Some(text) if text.trim().is_empty() => Json::object(),
        Some(text) => Json::parse(text).with_context(|| {
            format!(
                "{} is not valid JSON (comments and trailing commas are fine): fix it, then install again",
                path.display()
            )
        })?,
    };
    if !matches!(doc, Json::Object(_)) {
        bail!(
            "{} does not hold a JSON object: fix it, then install again",
            path.display()
        );
    }
    Ok(doc)
}

/// The object at `parents` (created where missing).
fn walk_json<'a>(doc: &'a mut Json, parents: &[&str], path: &Path) -> Result<&'a mut Json> {
    let mut node = doc;
    for key in parents {
        node = node.object_at(key).with_context(|| {
            format!(
                "{}: {} is not an object; fix it by hand",
                path.display(),
                parents.join(".")
            )
        })?;
    }
    Ok(node)
}

/// Apply `edit` to the node at `parents`, then drop every container on
/// the way that the edit left empty (loopx created it).
fn remove_json(doc: &mut Json, parents: &[&str], edit: impl FnOnce(&mut Json)) {
    fn go(node: &mut Json, parents: &[&str], edit: Box<dyn FnOnce(&mut Json) + '_>) {
        let Some((first, rest)) = parents.split_first() else {
            edit(node);
            return;
        };
        if let Some(child) = node.get_mut(first) {
            go(child, rest, edit);
            if child.is_empty_container() {
                node.remove(first);
            }
        }
    }
    go(doc, parents, Box::new(edit));
}

fn hook_entry(command: &str) -> Json {
    Json::Object(vec![
        ("type".into(), Json::Scalar("command".into())),
        ("command".into(), Json::Scalar(command.into())),
    ])
}

fn hook_group(command: &str) -> Json {
    Json::Object(vec![(
        "hooks".into(),
        Json::Array(vec![hook_entry(command)]),
    )])
}

/// The record and the bare command of the hook loopx installed in `group`.
fn hook_record(group: &Json) -> Option<(String, String)> {
    let Some(Json::Array(hooks)) = group.get("hooks") else {
        return None;
    };
    hooks.iter().find_map(hook_entry_record)
}

/// The record and the bare command of one hook, when loopx installed it.
fn hook_entry_record(hook: &Json) -> Option<(String, String)> {
    let command = hook.get("command")?.as_str()?;
    let rest = command.strip_prefix(&format!("{RECORD_KEY}='"))?;
    let (record, command) = rest.split_once("' ")?;
    Some((record.to_owned(), command.to_owned()))
}

/// Take loopx's hooks out of `group`, keeping every other hook in it:
/// true when that left the group with no hook (drop it then).
fn remove_loopx_hook(group: &mut Json) -> bool {
    let Some(Json::Array(hooks)) = group.get_mut("hooks") else {
        return false;
    };
    let before = hooks.len();
    hooks.retain(|hook| hook_entry_record(hook).is_none());
    hooks.len() < before && hooks.is_empty()
}

fn inspect_file(text: &str) -> Found {
    let prefix = format!("  {FILE_RECORD_KEY}: \"");
    let Some(line) = text.lines().find(|l| l.starts_with(&prefix)) else {
        return Found::Foreign;
    };
    let Some(record) = line
        .strip_prefix(&prefix)
        .and_then(|l| l.strip_suffix('"'))
        .and_then(Record::parse)
    else {
        return Found::Foreign;
    };
    let unrecorded = text.replacen(&format!("{line}\n"), "", 1);
    let intact = Digest::of_bytes(unrecorded.as_bytes()) == record.digest;
    Found::Installed { record, intact }
}

fn toml_entry_value(command: &str, args: &[String]) -> serde_json::Value {
    serde_json::json!({"command": command, "args": args})
}

/// A TOML item as JSON, for digests (dates become their text).
fn toml_to_json(item: &toml_edit::Item) -> serde_json::Value {
    use serde_json::Value as J;
    fn value(v: &toml_edit::Value) -> J {
        match v {
            toml_edit::Value::String(s) => J::String(s.value().clone()),
            toml_edit::Value::Integer(i) => J::from(*i.value()),
            toml_edit::Value::Float(f) => {
                serde_json::Number::from_f64(*f.value()).map_or(J::Null, J::Number)
            }
            toml_edit::Value::Boolean(b) => J::Bool(*b.value()),
            toml_edit::Value::Datetime(d) => J::String(d.value().to_string()),
            toml_edit::Value::Array(a) => J::Array(a.iter().map(value).collect()),
            toml_edit::Value::InlineTable(t) => {
                J::Object(t.iter().map(|(k, v)| (k.to_owned(), value(v))).collect())
            }
        }
    }
    match item {
        toml_edit::Item::None => J::Null,
        toml_edit::Item::Value(v) => value(v),
        toml_edit::Item::Table(t) => J::Object(
            t.iter()
                .map(|(k, v)| (k.to_owned(), toml_to_json(v)))
                .collect(),
        ),
        toml_edit::Item::ArrayOfTables(a) => J::Array(
            a.iter()
                .map(|t| {
                    J::Object(
                        t.iter()
                            .map(|(k, v)| (k.to_owned(), toml_to_json(v)))
                            .collect(),
                    )
                })
                .collect(),
        ),
    }
}

/// `text` quoted for a POSIX shell when it needs to be.
fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The first word of a shell command, unquoted (single quotes only, as
/// [`shell_quote`] writes them).
pub fn first_word(command: &str) -> String {
    let mut word = String::new();
    let mut chars = command.trim_start().chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '\'' => quoted = !quoted,
            '\\' if !quoted => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            c if c.is_whitespace() && !quoted => break,
            c => word.push(c),
        }
    }
    word
}
