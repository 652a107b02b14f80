//! The compute policy a reviewed plan carries, and the check that a
//! candidate's reported compute keeps to it.
//!
//! An approach of the registry may name the compute services its work may
//! use (`allowed_services`) and those it must not (`forbidden_services`);
//! the plan that selects it is reviewed with them, and the registry it is
//! pinned to cannot change under it without a replan. A candidate staged
//! under the plan reports its compute runs (`--compute-run`, or that there
//! were none): one that used a forbidden service, or one outside a
//! non-empty allowlist, is refused; and where the plan restricts compute at
//! all, a report that says nothing about compute cannot show it kept to
//! the policy, and is refused too. Without a policy, nothing is checked.
//!
//! The host may also pin a policy for the whole loop ([`ComputePin`], the
//! force-loop profiles' defaults that `loopx bootstrap` writes): it holds
//! under every plan ([`ComputePolicy::under`]), and without a plan too.
//!
//! Pure: the plan, the registry, the pin and the report's runs arrive as
//! values.

use super::document::Document;
use super::plan::CurrentPlan;
use super::registry::ApproachRegistry;
use super::FocusError;
use crate::text::{self, limits};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The services the force-loop profiles allow (both profiles alike, as
/// the reference kit's `defaults/compute_policy.*.json`).
pub const PROFILE_ALLOWED: [&str; 3] = ["local", "kaggle", "modal"];
/// The services they forbid.
pub const PROFILE_FORBIDDEN: [&str; 2] = ["hetzner", "github-actions"];

/// The host's compute policy for the whole loop, whatever plan is
/// current: an owner's document (stream `focus:compute_pin`), which an
/// agent's turn cannot write.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputePin {
    pub policy: ComputePolicy,
    /// The profile that pinned it (`general`, `formal`), if one did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub profile: String,
}

impl ComputePin {
    /// The force-loop profile `profile`'s pin.
    pub fn profile(profile: &str) -> ComputePin {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        ComputePin {
            policy: ComputePolicy {
                allowed_services: names(&PROFILE_ALLOWED),
                forbidden_services: names(&PROFILE_FORBIDDEN),
            },
            profile: profile.to_owned(),
        }
    }
}

impl Document for ComputePin {
    const WHAT: &'static str = "the host's compute pin";
    const KIND: &'static str = "focus.compute_pin_revised";

    fn check(&self) -> Result<(), FocusError> {
        let policy = &self.policy;
        for (field, list) in [
            ("allowed_services", &policy.allowed_services),
            ("forbidden_services", &policy.forbidden_services),
        ] {
            text::check_all(field, list, limits::LINE)?;
        }
        text::check("profile", &self.profile, limits::LINE)?;
        Ok(())
    }
}

/// Which compute services work may use. Both lists empty: no restriction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputePolicy {
    /// When not empty, the only services work may use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_services: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden_services: Vec<String>,
}

/// Why a candidate's compute does not keep to the plan's policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComputeRefused {
    #[error("the plan restricts compute ({policy}), but the report says nothing about compute: report each run with --compute-run '{{\"service\":\"local\",\"status\":\"succeeded\"}}', or --compute-none")]
    Unreported { policy: String },
    #[error("the report used compute service {service:?}, which the plan forbids ({policy})")]
    Forbidden { service: String, policy: String },
    #[error("the report used compute service {service:?}, which is not among those the plan allows ({policy})")]
    NotAllowed { service: String, policy: String },
}

impl ComputePolicy {
    /// The policy of `plan`: that of each approach it selects in
    /// `registry`, together. A service any of them forbids is forbidden;
    /// the allowed services are those any of them allows, and there is no
    /// allowlist as soon as one of them has none.
    pub fn of(plan: &CurrentPlan, registry: &ApproachRegistry) -> ComputePolicy {
        let Some(selection) = &plan.selection else {
            return ComputePolicy::default();
        };
        let mut allowed = BTreeSet::new();
        let mut forbidden = BTreeSet::new();
        let mut unrestricted = false;
        for id in &selection.approach_ids {
            let policy = registry
                .approach(id)
                .and_then(|c| c.approach.compute_policy.clone())
                .unwrap_or_default();
            unrestricted |= policy.allowed_services.is_empty();
            allowed.extend(policy.allowed_services.iter().map(|s| service_name(s)));
            forbidden.extend(policy.forbidden_services.iter().map(|s| service_name(s)));
        }
        ComputePolicy {
            allowed_services: if unrestricted {
                Vec::new()
            } else {
                allowed.into_iter().collect()
            },
            forbidden_services: forbidden.into_iter().collect(),
        }
    }

    /// This policy under the host's `pin`: what either forbids is
    /// forbidden; where both have an allowlist, only what both allow is
    /// allowed, else the one allowlist there is.
    pub fn under(self, pin: &ComputePolicy) -> ComputePolicy {
        let names = |list: &[String]| -> BTreeSet<String> {
            list.iter().map(|s| service_name(s)).collect()
        };
        let (mine, pinned) = (names(&self.allowed_services), names(&pin.allowed_services));
        let allowed = match (mine.is_empty(), pinned.is_empty()) {
            (false, false) => mine.intersection(&pinned).cloned().collect(),
            (false, true) => mine,
            (true, _) => pinned,
        };
        let mut forbidden = names(&self.forbidden_services);
        forbidden.extend(names(&pin.forbidden_services));
        ComputePolicy {
            allowed_services: allowed.into_iter().collect(),
            forbidden_services: forbidden.into_iter().collect(),
        }
    }

    fn restricts(&self) -> bool {
        !self.allowed_services.is_empty() || !self.forbidden_services.is_empty()
    }

    /// The policy as the prompt and the refusals say it.
    pub fn describe(&self) -> String {
        let list = |services: &[String], none: &str| {
            if services.is_empty() {
                none.to_owned()
            } else {
                services.join(", ")
            }
        };
        format!(
            "allowed: {}; forbidden: {}",
            list(&self.allowed_services, "any"),
            list(&self.forbidden_services, "none")
        )
    }

    /// What the turn prompt's compute-policy section says of it: nothing
    /// without a restriction.
    pub fn prompt(&self) -> String {
        if !self.restricts() {
            return String::new();
        }
        format!(
            "- The compute services the host and the reviewed plan allow: {}.\n- Report every service you use (`--compute-run '{{\"service\":\"local\",\"status\":\"succeeded\"}}'`), or that you used none (`--compute-none`): a result outside this policy, or silent about compute, is refused when it is staged.",
            self.describe()
        )
    }

    /// Whether the compute a report gives (`None`: it said nothing;
    /// `Some` of no runs: it used none) keeps to this policy.
    pub fn admits(&self, services: Option<&[String]>) -> Result<(), ComputeRefused> {
        if !self.restricts() {
            return Ok(());
        }
        let policy = self.describe();
        let Some(services) = services else {
            return Err(ComputeRefused::Unreported { policy });
        };
        for used in services {
            let service = service_name(used);
            if self.forbidden_services.contains(&service) {
                return Err(ComputeRefused::Forbidden { service, policy });
            }
            if !self.allowed_services.is_empty() && !self.allowed_services.contains(&service) {
                return Err(ComputeRefused::NotAllowed { service, policy });
            }
        }
        Ok(())
    }
}

/// A service's name as policies compare it: trimmed, lower case, with the
/// spellings people use for the same service made one.
pub fn service_name(text: &str) -> String {
    let name = text.trim().to_lowercase();
    match name.as_str() {
        "github_actions" | "github action" | "github actions" | "github_action" => {
            "github-actions".to_owned()
        }
        "hetzner-cloud" => "hetzner".to_owned(),
        _ => name,
    }
}

/// The services a report's compute runs name (each run is an object with
/// a `service`), `None` when it reported nothing about compute.
pub fn reported_services(
    runs: Option<&[serde_json::Map<String, serde_json::Value>]>,
) -> Option<Vec<String>> {
    runs.map(|runs| {
        runs.iter()
            .map(|run| {
                run.get("service")
                    .and_then(|s| s.as_str())
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_pin_holds_under_every_plan() {
        let pin = ComputePin::profile("general").policy;
        // No plan policy: the pin's.
        let none = ComputePolicy::default().under(&pin);
        assert_eq!(none.allowed_services, ["kaggle", "local", "modal"]);
        assert_eq!(none.forbidden_services, ["github-actions", "hetzner"]);
        assert!(none.admits(Some(&["GitHub Actions".to_owned()])).is_err());
        // A plan allowing more than the pin gets only what both allow; a
        // plan's own forbidden service stays forbidden.
        let plan = ComputePolicy {
            allowed_services: vec!["local".into(), "hetzner".into(), "other:gpu".into()],
            forbidden_services: vec!["modal".into()],
        };
        let both = plan.under(&pin);
        assert_eq!(both.allowed_services, ["local"]);
        assert_eq!(
            both.forbidden_services,
            ["github-actions", "hetzner", "modal"]
        );
        // No pin: the plan's, unchanged.
        let alone = ComputePolicy {
            allowed_services: vec!["local".into()],
            forbidden_services: vec![],
        };
        assert_eq!(alone.clone().under(&ComputePolicy::default()), alone);
    }

    fn policy(allowed: &[&str], forbidden: &[&str]) -> ComputePolicy {
        ComputePolicy {
            allowed_services: allowed.iter().map(|s| s.to_string()).collect(),
            forbidden_services: forbidden.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn used(services: &[&str]) -> Vec<String> {
        services.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn without_a_policy_anything_or_nothing_reported_passes() {
        let open = ComputePolicy::default();
        assert_eq!(open.admits(None), Ok(()));
        assert_eq!(open.admits(Some(&used(&["hetzner"]))), Ok(()));
    }

    #[test]
    fn a_forbidden_or_unlisted_service_and_silence_are_refused_under_a_policy() {
        // The force-loop general profile's defaults.
        let general = policy(
            &["local", "kaggle", "modal"],
            &["hetzner", "github-actions"],
        );
        assert_eq!(general.admits(Some(&used(&["local", "Kaggle"]))), Ok(()));
        assert_eq!(general.admits(Some(&[])), Ok(()), "no compute used");
        assert!(matches!(
            general.admits(Some(&used(&["local", "GitHub Actions"]))),
            Err(ComputeRefused::Forbidden { service, .. }) if service == "github-actions"
        ));
        assert!(matches!(
            general.admits(Some(&used(&["other:lab-cluster"]))),
            Err(ComputeRefused::NotAllowed { .. })
        ));
        assert!(matches!(
            general.admits(None),
            Err(ComputeRefused::Unreported { .. })
        ));
        assert!(general
            .prompt()
            .contains("allowed: local, kaggle, modal; forbidden: hetzner, github-actions"));
        assert!(ComputePolicy::default().prompt().is_empty());
        // A deny list alone: anything else goes.
        let deny = policy(&[], &["hetzner"]);
        assert_eq!(deny.admits(Some(&used(&["modal"]))), Ok(()));
        assert!(deny.admits(Some(&used(&["hetzner-cloud"]))).is_err());
    }
}
