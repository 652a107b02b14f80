use super::owner::{FormalEvent, FormalRequest, OrdersSource};
use super::prompt::on_formal_track;
use super::tick::{conclude, count_sorry, Hygiene, Scan, Terminal, Typecheck, TypecheckStatus};
use super::*;
use crate::operation::{Clock, Owner};

fn layer(policy: Policy) -> Layer {
    Layer {
        policy: Some(policy),
        ..Layer::default()
    }
}

#[test]
fn the_default_is_off_on_formal_with_three_credits_and_no_tick() {
    let settings = Settings::resolve(&[]);
    assert_eq!(settings.policy, Policy::Off);
    assert_eq!(settings.project, "formal/");
    assert_eq!(settings.force_credits, 3);
    assert!(!settings.typecheck && !settings.force_after_iteration);
    assert!(!settings.force_tick());
}

#[test]
fn each_source_overrides_the_ones_below_it_key_by_key() {
    let file = Layer {
        policy: Some(Policy::On),
        project: Some("MyProject/".into()),
        force_credits: Some(7),
        ..Layer::default()
    };
    let standing = layer(Policy::Auto);
    let env = Layer {
        typecheck: Some(true),
        ..Layer::default()
    };
    let flags = Layer {
        policy: Some(Policy::Force),
        force_after_iteration: Some(true),
        ..Layer::default()
    };
    let settings = Settings::resolve(&[&file, &standing, &env, &flags]);
    assert_eq!(settings.policy, Policy::Force, "the flag wins");
    assert_eq!(
        settings.project, "MyProject/",
        "a key only the file names stays"
    );
    assert_eq!(settings.force_credits, 7);
    assert!(settings.typecheck && settings.force_tick());
    assert_eq!(
        Settings::resolve(&[&file, &standing]).policy,
        Policy::Auto,
        "the standing orders are over the file"
    );
}

#[test]
fn a_resolved_policy_handed_down_is_complete_and_resolves_to_itself() {
    let settings = Settings::resolve(&[&layer(Policy::Force)]);
    let handed = settings.as_layer();
    assert!(handed.is_complete() && !layer(Policy::On).is_complete());
    let env = layer(Policy::Off);
    assert_eq!(Settings::resolve(&[&env, &handed]), settings);
}

#[test]
fn policy_words_are_read_in_any_case_and_a_wrong_one_is_named() {
    assert_eq!(
        Policy::parse(" Mention-Only ").unwrap(),
        Policy::MentionOnly
    );
    let why = Policy::parse("forse").unwrap_err();
    assert!(why.contains("\"forse\"") && why.contains("off, mention-only, auto, on, force"));
}

#[test]
fn the_policy_file_is_read_by_the_keys_it_names() {
    let read = Layer::parse_json(
        br#"{"schema_version":"formal_policy.v1","policy":"force","force_credits":2,
            "typecheck":"yes","notes":["kept"],"status":{"phase":"F3"},"allow_path_steal":true}"#,
    )
    .unwrap();
    assert_eq!(
        read,
        Layer {
            policy: Some(Policy::Force),
            force_credits: Some(2),
            typecheck: Some(true),
            ..Layer::default()
        }
    );
    for (bad, named) in [
        (&br#"{"policy":"sometimes"}"#[..], "\"sometimes\""),
        (br#"{"policy":3}"#, "policy must be a string"),
        (br#"{"force_credits":-1}"#, "force_credits"),
        (br#"{"typecheck":"maybe"}"#, "typecheck"),
        (br#"{"project":"../elsewhere"}"#, "../elsewhere"),
        (br#"{"project":"/abs/formal"}"#, "/abs/formal"),
        (
            br#"{"schema_version":"formal_policy.v9"}"#,
            "formal_policy.v9",
        ),
        (br#"["policy"]"#, "one JSON object"),
        (b"{", "not JSON"),
    ] {
        let why = Layer::parse_json(bad).unwrap_err();
        assert!(why.contains(named), "{why}");
    }
}

#[test]
fn the_environment_is_read_and_a_bad_value_names_its_variable() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    };
    let read = Layer::from_env(env(&[
        (ENV_POLICY, "on"),
        (ENV_FORCE, "1"),
        (ENV_TYPECHECK, "off"),
        (ENV_PROJECT, ""),
    ]))
    .unwrap();
    assert_eq!(read.policy, Some(Policy::On));
    assert_eq!(read.force_after_iteration, Some(true));
    assert_eq!(read.typecheck, Some(false));
    assert_eq!(read.project, None, "an empty variable says nothing");
    let why = Layer::from_env(env(&[(ENV_FORCE, "please")])).unwrap_err();
    assert!(why.starts_with(ENV_FORCE), "{why}");
    let why = Layer::from_env(env(&[(ENV_POLICY, "strict")])).unwrap_err();
    assert!(why.starts_with(ENV_POLICY), "{why}");
}

#[test]
fn the_agent_is_told_every_setting() {
    let settings = Settings {
        policy: Policy::Force,
        typecheck: true,
        ..Settings::default()
    };
    let env: std::collections::BTreeMap<_, _> = settings.env().into_iter().collect();
    assert_eq!(env[ENV_POLICY], "force");
    assert_eq!(env[ENV_PROJECT], "formal/");
    assert_eq!(env[ENV_FORCE_CREDITS], "3");
    assert_eq!(env[ENV_TYPECHECK], "1");
    assert_eq!(env[ENV_FORCE], "0");
    let again = Layer::from_env(|name| env.get(name).cloned()).unwrap();
    assert_eq!(Settings::resolve(&[&again]), settings);
}

#[test]
fn the_typecheck_limit_is_kept_in_bounds_and_under_the_turn_timeout() {
    assert_eq!(typecheck_timeout(None, 3600).unwrap(), 600);
    assert_eq!(typecheck_timeout(Some("5"), 3600).unwrap(), 60);
    assert_eq!(typecheck_timeout(Some("99999"), 7200).unwrap(), 3600);
    assert_eq!(typecheck_timeout(None, 2).unwrap(), 2);
    assert!(typecheck_timeout(Some("soon"), 60).is_err());
}

fn text(policy: Policy, situation: Situation) -> String {
    let settings = Settings {
        policy,
        ..Settings::default()
    };
    prompt(&settings, situation, ".loopx")
}

const QUIET: Situation = Situation {
    formal_track: false,
    stable_candidate: false,
};
const TRACK: Situation = Situation {
    formal_track: true,
    stable_candidate: false,
};

#[test]
fn off_gives_no_formal_section() {
    assert_eq!(text(Policy::Off, QUIET), "");
    assert_eq!(text(Policy::Off, TRACK), "");
}

#[test]
fn mention_only_is_a_short_reminder_without_the_binding_rules() {
    let said = text(Policy::MentionOnly, TRACK);
    assert!(said.starts_with("Policy: mention-only."));
    assert!(said.contains("optional"));
    assert!(!said.contains("Binding rules") && !said.contains("Early stop"));
}

#[test]
fn auto_binds_only_once_a_candidate_or_the_track_is_there() {
    let quiet = text(Policy::Auto, QUIET);
    assert!(quiet.starts_with("Policy: auto, no stable formal candidate"));
    assert!(!quiet.contains("Binding rules"));
    let candidate = Situation {
        stable_candidate: true,
        ..QUIET
    };
    let active = text(Policy::Auto, candidate);
    assert!(active.contains("Binding rules:\n1. On the formal track"));
    assert!(active.contains("### Auto checklist"));
    assert!(!active.contains("### Formal track selected"));
    assert!(
        !active.contains("Early stop"),
        "the reference's auto has none"
    );
}

#[test]
fn on_is_parked_off_the_track_and_binding_on_it() {
    let parked = text(Policy::On, QUIET);
    assert!(parked.starts_with("Policy: on, parked"));
    assert!(!parked.contains("Binding rules"));
    assert!(parked.contains("### Early stop"));
    let bound = text(Policy::On, TRACK);
    assert!(bound.starts_with("Policy: on.\n\nBinding rules:"));
    assert!(bound.contains("### Formal track selected"));
    assert!(bound.contains("11. The Lake build configuration is the host's"));
    assert!(bound.contains("### Early stop"));
    assert!(!bound.contains("Force hygiene"));
}

#[test]
fn force_binds_everywhere_and_says_what_the_hosts_tick_does() {
    let off_tick = text(Policy::Force, QUIET);
    assert!(off_tick.contains("Binding rules:"));
    assert!(
        off_tick.contains("### Force hygiene\n\nThe host's formal hygiene tick is not turned on")
    );
    assert!(off_tick.contains("never marks a claim supported"));
    let ticking = Settings {
        policy: Policy::Force,
        force_after_iteration: true,
        typecheck: true,
        ..Settings::default()
    };
    let said = prompt(&ticking, QUIET, ".loopx");
    assert!(said.contains("a scan of the Lake project and `lake build`"));
    assert!(said.contains(".loopx/formal/force_loop_reports/"));
    let scan_only = Settings {
        typecheck: false,
        ..ticking
    };
    assert!(!prompt(&scan_only, QUIET, ".loopx").contains("lake build"));
}

#[test]
fn the_formal_track_is_named_by_phrase_or_folder_not_by_lookalikes() {
    for yes in [
        "Continue the formal track: fill lemma 3",
        "formalization-track cleanup",
        "Lean-formal check of the bound",
        "edit formal/Main.lean",
        "see `formal/Bound.lean`",
        "work/formal/Foo.lean",
    ] {
        assert!(on_formal_track(yes), "{yes}");
    }
    for no in [
        "an informal track record",
        "write the formal definition",
        "informal/notes.md",
        "",
    ] {
        assert!(!on_formal_track(no), "{no}");
    }
}

fn clock() -> Clock {
    Clock {
        now: "2026-01-01T00:00:00Z".parse().unwrap(),
    }
}

fn apply(state: Option<Standing>, request: &FormalRequest) -> Result<Standing, FormalProblem> {
    let decided = FormalOwner::decide(state.as_ref(), request, &clock())?;
    Ok(match decided.event {
        Some(event) => FormalOwner::evolve(state, &event),
        None => state.unwrap_or_default(),
    })
}

#[test]
fn standing_orders_are_set_once_and_unchanged_orders_write_nothing() {
    let settings = Settings::resolve(&[&layer(Policy::On)]);
    let set = FormalRequest::SetOrders {
        settings: settings.clone(),
        source: OrdersSource::Init,
    };
    let state = apply(None, &set).unwrap();
    assert_eq!(state.orders.as_ref(), Some(&settings));
    let again = FormalOwner::decide(Some(&state), &set, &clock()).unwrap();
    assert!(again.event.is_none());
}

#[test]
fn credits_are_spent_in_turn_and_never_past_the_budget() {
    let spend = |tick| FormalRequest::SpendCredit { tick, budget: 2 };
    let one = apply(None, &spend(1)).unwrap();
    assert_eq!(one.credits_spent, 1);
    assert_eq!(
        apply(Some(one.clone()), &spend(3)).unwrap_err(),
        FormalProblem::OutOfTurn { given: 3, next: 2 }
    );
    let two = apply(Some(one), &spend(2)).unwrap();
    assert_eq!(two.credits_left(2), 0);
    assert_eq!(
        apply(Some(two.clone()), &spend(3)).unwrap_err(),
        FormalProblem::Exhausted { budget: 2 }
    );
    // A later drive's larger budget allows more; the spent ones stay spent.
    let three = apply(
        Some(two),
        &FormalRequest::SpendCredit { tick: 3, budget: 5 },
    )
    .unwrap();
    assert_eq!(three.credits_left(5), 2);
    assert!(matches!(
        FormalOwner::decide(None, &spend(1), &clock())
            .unwrap()
            .event,
        Some(FormalEvent::CreditSpent { tick: 1, .. })
    ));
}

#[test]
fn a_tick_without_a_project_or_lake_is_tool_unavailable_and_never_a_stop() {
    let scan = Scan {
        lean_files: 2,
        sorry_count: 0,
        cut_short: false,
    };
    let build = |status| Typecheck {
        status,
        argv: vec!["lake".into(), "build".into()],
        exit_code: None,
        duration_ms: 0,
        timeout_s: 60,
        log: None,
        detail: String::new(),
    };
    assert_eq!(
        conclude(false, None, None),
        (Terminal::ToolUnavailable, Hygiene::Unavailable)
    );
    assert_eq!(
        conclude(
            true,
            Some(&scan),
            Some(&build(TypecheckStatus::ToolUnavailable))
        ),
        (Terminal::ToolUnavailable, Hygiene::Unavailable)
    );
    assert_eq!(
        conclude(true, Some(&scan), Some(&build(TypecheckStatus::Passed))),
        (Terminal::IssueFree, Hygiene::Clean)
    );
    for gap in [TypecheckStatus::Failed, TypecheckStatus::TimedOut] {
        assert_eq!(
            conclude(true, Some(&scan), Some(&build(gap))),
            (Terminal::IssueFree, Hygiene::Gaps)
        );
    }
    let sorry = Scan {
        sorry_count: 1,
        ..scan
    };
    assert_eq!(
        conclude(true, Some(&sorry), None),
        (Terminal::IssueFree, Hygiene::Gaps)
    );
}

#[test]
fn only_a_whole_word_sorry_is_counted() {
    assert_eq!(
        count_sorry("theorem t : 1 = 1 := by sorry\nlemma u := sorry"),
        2
    );
    assert_eq!(count_sorry("sorryAx no_sorry Sorry foo.sorry sorry'"), 0);
    assert_eq!(count_sorry("(sorry)"), 1);
}

#[test]
fn a_recheck_is_kept_per_evidence_id_and_a_bad_id_is_refused() {
    use super::owner::Recheck;
    let recheck = |sorry_count| Recheck {
        status: TypecheckStatus::Passed,
        sorry_count,
        artifact_digest: crate::digest::Digest::of_bytes(b"artifact"),
        proof_digest: crate::digest::Digest::of_bytes(b"proof"),
        proof_path: "formal/Proof.lean".into(),
        project: "formal".into(),
        argv: super::recheck::argv("Proof.lean"),
        exit_code: Some(0),
        duration_ms: 5,
        log: None,
        at: clock().now,
    };
    let record = |id: &str, sorry| FormalRequest::RecordRecheck {
        evidence_id: id.into(),
        recheck: recheck(sorry),
    };
    let once = apply(None, &record("p1", 0)).unwrap();
    assert!(once.rechecks["p1"].passed());
    let again = apply(Some(once), &record("p1", 2)).unwrap();
    assert!(!again.rechecks["p1"].passed(), "a sorry is never a pass");
    assert_eq!(again.rechecks.len(), 1, "the latest re-check of an id");
    assert_eq!(
        apply(Some(again), &record("../p", 0)).unwrap_err(),
        FormalProblem::BadEvidenceId("../p".into())
    );
}
