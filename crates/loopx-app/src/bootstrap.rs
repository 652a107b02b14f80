//! The force-loop kit's set-up as loopx use cases: `bootstrap` creates a
//! loop (or adopts the one there) and applies a profile's pins;
//! `apply-defaults` re-applies them to an existing loop and reports each
//! change. The profiles are the reference kit's (`profiles/general.yaml`,
//! `profiles/formal.yaml` and `defaults/`): Goal Focus enforce, goal
//! priority enabled with `discipline_mode: hard`, the review panel on, the
//! compute allow/forbid list, and for `formal` the formal policy on with
//! the Lake typecheck (off for `general`).
//!
//! Each pin goes through its own owner: the compute pin and the formal
//! standing orders are store documents (an agent's turn cannot rewrite
//! them); goal priority and the panel are the loop's `goal_priority.json`
//! and `panel.json`, edited as data with every other key kept. Goal Focus's
//! mode is set once, at `init`: an adopted loop in another mode is
//! reported, never changed. Idempotent: applying twice changes nothing the
//! second time.

use crate::fsutil;
use crate::ledger;
use crate::loop_dir::{LoopDir, Place};
use crate::receipt::ReceiptView;
use crate::{clock, AppError};
use anyhow::Context as _;
use loopx_core::focus::compute::ComputePin;
use loopx_core::focus::{self, ComputePinOwner, Revise};
use loopx_core::formal::{Layer, Policy};
use loopx_core::ledger::goal_priority as priority_rule;
use loopx_core::ledger::mode::ModeSource;
use loopx_core::ledger::vocabulary::GoalFocusMode;
use loopx_core::ledger::InitLoop;
use loopx_core::operation::{Clock, OperationId};
use loopx_core::path::{FileProblem, LoopPath};
use loopx_store::sqlite::Access;
use serde::Serialize;
use serde_json::{json, Value};

/// A force-loop profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    General,
    Formal,
}

impl Profile {
    pub fn parse(text: &str) -> Result<Profile, AppError> {
        match text {
            "general" => Ok(Profile::General),
            "formal" => Ok(Profile::Formal),
            other => Err(AppError::refused(format!(
                "profile {other:?} is not a force-loop profile; use general or formal"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::General => "general",
            Profile::Formal => "formal",
        }
    }

    /// The formal policy the profile pins.
    fn formal(self) -> Layer {
        let on = self == Profile::Formal;
        Layer {
            policy: Some(if on { Policy::On } else { Policy::Off }),
            typecheck: Some(on),
            ..Layer::default()
        }
    }

    /// A formal campaign outlives a smoke-scale budget (the reference
    /// kit's reason): its iterations and wall time when none are given.
    pub fn budget_defaults(self) -> (Option<u64>, Option<u64>) {
        match self {
            Profile::General => (None, None),
            Profile::Formal => (Some(40), Some(259_200)),
        }
    }
}

/// What a host policy file (`--policy-file`, [`crate::host_policy`])
/// changes of a profile's pins: goal priority on or off, the formal policy
/// and typecheck, and the compute lanes the loop may use (allowed beside
/// `local`, and no longer forbidden). `AAS_AUTOLOOP_NOTIFY` pins nothing
/// here: the driver reads it from the environment `start` gives it.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub goal_priority: Option<bool>,
    pub formal: Layer,
    pub lanes: Option<Vec<String>>,
}

impl Overrides {
    /// The overrides a host policy's assignments make; a value they
    /// cannot take is refused naming the key.
    pub fn of_policy(
        policy: &std::collections::BTreeMap<String, String>,
    ) -> Result<Overrides, AppError> {
        let bad = |key: &str, why: String| {
            AppError::refused(format!(
                "the host policy's {key}: {why}; nothing was changed"
            ))
        };
        let switch = |key: &str| -> Result<Option<bool>, AppError> {
            (policy.get(key))
                .map(|v| loopx_core::formal::parse_switch(v).map_err(|why| bad(key, why)))
                .transpose()
        };
        Ok(Overrides {
            goal_priority: switch("AAS_AUTOLOOP_GOAL_PRIORITY")?,
            formal: Layer {
                policy: (policy.get("AAS_AUTOLOOP_FORMAL_POLICY"))
                    .map(|v| Policy::parse(v).map_err(|why| bad("AAS_AUTOLOOP_FORMAL_POLICY", why)))
                    .transpose()?,
                typecheck: switch("AAS_AUTOLOOP_FORMAL_TYPECHECK")?,
                ..Layer::default()
            },
            lanes: (policy.get("AAS_FORCE_LOOP_COMPUTE_LANES")).map(|v| {
                v.split(',')
                    .map(|lane| lane.trim().to_ascii_lowercase())
                    .collect()
            }),
        })
    }
}

/// One pin: what the profile wants, what the loop had, and whether it was
/// changed (a note says why not, when it could not be).
#[derive(Debug, Clone, Serialize)]
pub struct PinChange {
    pub pin: &'static str,
    pub wanted: String,
    pub was: String,
    pub changed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What `bootstrap` or `apply-defaults` did.
#[derive(Debug, Clone, Serialize)]
pub struct DefaultsView {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    pub profile: Profile,
    /// `bootstrap` created the loop (rather than adopting it).
    pub created: bool,
    pub pins: Vec<PinChange>,
}

impl DefaultsView {
    pub fn text(&self) -> String {
        let mut text = format!(
            "{} {} with the {} profile\n",
            if self.created { "created" } else { "adopted" },
            self.dir,
            self.profile.name()
        );
        for p in &self.pins {
            let how = match (p.changed, &p.note) {
                (true, _) => format!("set (was {})", p.was),
                (false, Some(note)) => format!("NOT set: {note}"),
                (false, None) => "already so".to_owned(),
            };
            text.push_str(&format!("  {}: {} — {how}\n", p.pin, p.wanted));
        }
        let changed = self.pins.iter().filter(|p| p.changed).count();
        text.push_str(&format!("{changed} pin(s) changed"));
        text
    }
}

/// A loop to create when `bootstrap` finds none.
pub struct NewLoop {
    pub request: InitLoop,
    pub operation_id: Option<String>,
}

/// `bootstrap`: create the loop at `root` with `new` when there is none
/// (Goal Focus enforce, the profile's formal policy and budget), or adopt
/// the one there; then apply the profile's pins.
pub fn bootstrap(
    root: Place<'_>,
    profile: Profile,
    new: Option<NewLoop>,
    overrides: &Overrides,
) -> Result<DefaultsView, AppError> {
    let exists = LoopDir::open(root, Access::ReadOnly).is_ok();
    let created = match (exists, new) {
        (true, _) => false,
        (false, None) => {
            return Err(AppError::refused(format!(
                "{} holds no loop: pass --goal and --success-criteria to create one",
                root.dir.display()
            )))
        }
        (
            false,
            Some(NewLoop {
                mut request,
                operation_id,
            }),
        ) => {
            // The files the pins edit are checked before the loop is made,
            // so a refusal never follows a loop half set up.
            if root.dir.is_dir() {
                crate::panel::configured(root.dir)?;
                crate::goal_priority::resolve_at(root.dir)?;
            }
            request.goal_focus_mode = GoalFocusMode::Enforce;
            request.goal_focus_mode_source = Some(ModeSource::ChosenAtInit);
            let _: ReceiptView<_> = ledger::init_with_template(
                root,
                operation_id.as_deref(),
                request,
                None,
                &profile.formal().under(&overrides.formal),
            )?;
            true
        }
    };
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let mut view = apply_defaults(&dir, profile, overrides)?;
    view.action = "bootstrap";
    view.created = created;
    Ok(view)
}

/// `apply-defaults`: the profile's pins on the loop `dir`, each change
/// reported.
pub fn apply_defaults(
    dir: &LoopDir,
    profile: Profile,
    overrides: &Overrides,
) -> Result<DefaultsView, AppError> {
    let ledger = dir.read()?.ledger;
    let mode = ledger.config.goal_focus_mode;
    let mut pins = vec![PinChange {
        pin: "goal_focus_mode",
        wanted: "enforce".into(),
        was: mode.to_string(),
        changed: false,
        note: (mode != GoalFocusMode::Enforce).then(|| {
            "a loop's Goal Focus mode is set at init and never changed; create a new loop (`loopx bootstrap` in an empty directory, or `loopx import`) to run it in enforce mode".to_owned()
        }),
    }];
    // Every file is read and checked before anything is written: a file
    // that refuses leaves the loop as it was.
    let files = [
        goal_priority(dir, overrides.goal_priority.unwrap_or(true))?,
        panel(dir)?,
    ];
    for (change, edited) in files {
        if let Some(value) = edited {
            write_object(dir, change.file, &value)?;
        }
        pins.push(change.pin);
    }
    pins.push(compute(dir, profile, overrides.lanes.as_deref())?);
    pins.push(formal(dir, profile, &overrides.formal)?);
    Ok(DefaultsView {
        status: "ok",
        action: "apply-defaults",
        dir: dir.display(),
        profile,
        created: false,
        pins,
    })
}

fn operation(label: &str) -> Result<OperationId, AppError> {
    OperationId::parse(&crate::operation::fresh_name(label))
        .map_err(|e| anyhow::Error::new(e).into())
}

/// A JSON object file of the loop directory, read as data (no symlink
/// followed, bounded); `None` when absent.
fn read_object(dir: &LoopDir, name: &str, limit: u64) -> Result<Option<Value>, AppError> {
    let path = LoopPath::parse(name).expect("a plain file name");
    let bytes = match fsutil::read_confined(dir.root(), &path, limit) {
        Ok(bytes) => bytes,
        Err(FileProblem::Missing) => return Ok(None),
        Err(problem) => {
            return Err(AppError::refused(format!(
                "{}/{name} {}: nothing was changed",
                dir.display(),
                problem.describe()
            )))
        }
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value) if value.is_object() => Ok(Some(value)),
        _ => Err(AppError::refused(format!(
            "{}/{name} is not a JSON object: fix or remove it; nothing was changed",
            dir.display()
        ))),
    }
}

fn write_object(dir: &LoopDir, name: &str, value: &Value) -> Result<(), AppError> {
    let text = format!("{value:#}\n");
    fsutil::write_durable(&dir.root().join(name), text.as_bytes())
        .with_context(|| format!("cannot write {name}"))?;
    Ok(())
}

/// A pin kept in a file of the loop directory: the change, and the
/// file's new contents when it changes.
struct FilePin {
    file: &'static str,
    pin: PinChange,
}

/// goal_priority.json: enabled, `discipline_mode: hard`; the template
/// (with the base's streak cap of 2) when there is no file.
fn goal_priority(dir: &LoopDir, enabled: bool) -> Result<(FilePin, Option<Value>), AppError> {
    let current = read_object(dir, priority_rule::FILE, priority_rule::MAX_BYTES)?;
    let was = match &current {
        Some(value) => {
            // The rule's own parse first: a file it refuses is the
            // operator's to fix, not ours to overwrite.
            let bytes = serde_json::to_vec(value).expect("a value serializes");
            priority_rule::parse(&bytes).map_err(|problem| {
                AppError::refused(format!(
                    "{}/{}: {problem}; nothing was changed",
                    dir.display(),
                    priority_rule::FILE
                ))
            })?;
            format!(
                "enabled {}, discipline_mode {}",
                value["enabled"],
                value["discipline_mode"].as_str().unwrap_or("soft")
            )
        }
        None => format!("no {}", priority_rule::FILE),
    };
    let mut value = current.clone().unwrap_or_else(|| {
        let mut template: Value =
            serde_json::from_str(priority_rule::TEMPLATE).expect("the template is JSON");
        template["max_consecutive_local_without_goal_delta"] = json!(2);
        template
    });
    value["enabled"] = json!(enabled);
    value["discipline_mode"] = json!("hard");
    let changed = current.as_ref() != Some(&value);
    let pin = PinChange {
        pin: "goal_priority",
        wanted: format!(
            "{}, discipline_mode hard",
            if enabled {
                "enabled"
            } else {
                "disabled (host policy)"
            }
        ),
        was,
        changed,
        note: None,
    };
    Ok((
        FilePin {
            file: priority_rule::FILE,
            pin,
        },
        changed.then_some(value),
    ))
}

/// panel.json: `"enabled": true`, every other key kept (and checked by
/// the panel's own parser, which refuses unknown keys).
fn panel(dir: &LoopDir) -> Result<(FilePin, Option<Value>), AppError> {
    crate::panel::load_config(dir)?;
    let current = read_object(dir, loopx_core::panel::FILE, 64 * 1024)?;
    let was = match &current {
        Some(value) => format!("enabled {}", value["enabled"].as_bool().unwrap_or(false)),
        None => "no panel.json".to_owned(),
    };
    let mut value = current.clone().unwrap_or_else(|| json!({}));
    value["enabled"] = json!(true);
    let changed = current.as_ref() != Some(&value);
    let pin = PinChange {
        pin: "panel",
        wanted: "enabled".into(),
        was,
        changed,
        note: None,
    };
    Ok((
        FilePin {
            file: loopx_core::panel::FILE,
            pin,
        },
        changed.then_some(value),
    ))
}

/// The host's compute pin: the profile's allow/forbid list.
fn compute(
    dir: &LoopDir,
    profile: Profile,
    lanes: Option<&[String]>,
) -> Result<PinChange, AppError> {
    let mut wanted = ComputePin::profile(profile.name());
    if let Some(lanes) = lanes {
        // The host's lanes: allowed beside local, and no longer forbidden.
        let policy = &mut wanted.policy;
        policy.allowed_services = std::iter::once("local".to_owned())
            .chain(lanes.iter().cloned())
            .collect();
        policy.forbidden_services.retain(|s| !lanes.contains(s));
    }
    let loaded = (dir
        .authority()
        .load::<ComputePinOwner>(focus::COMPUTE_PIN_STREAM))
    .map_err(anyhow::Error::from)?;
    let describe = |pin: &ComputePin| pin.policy.describe();
    let was = loaded
        .state
        .as_ref()
        .map_or("none".to_owned(), |pin| describe(&pin.document));
    let changed = loaded.state.as_ref().map(|pin| &pin.document) != Some(&wanted);
    if changed {
        let now = clock::now();
        let request = Revise {
            base_revision: Some(loaded.revision),
            document: wanted.clone(),
        };
        dir.authority()
            .execute::<ComputePinOwner>(
                focus::COMPUTE_PIN_STREAM,
                &operation("compute-pin")?,
                &request,
                &Clock { now },
                now,
            )
            .map_err(anyhow::Error::from)?;
    }
    Ok(PinChange {
        pin: "compute",
        wanted: describe(&wanted),
        was,
        changed,
        note: None,
    })
}

/// The formal standing orders: the profile's policy and typecheck, under
/// the host policy's.
fn formal(dir: &LoopDir, profile: Profile, host: &Layer) -> Result<PinChange, AppError> {
    let wanted = profile.formal().under(host);
    let (before, after) = crate::formal::pin_profile(dir, &operation("formal-profile")?, &wanted)?;
    let say = |s: &loopx_core::formal::Settings| {
        format!("policy {}, typecheck {}", s.policy.as_str(), s.typecheck)
    };
    Ok(PinChange {
        pin: "formal",
        wanted: say(&after),
        was: say(&before),
        changed: before != after,
        note: None,
    })
}
