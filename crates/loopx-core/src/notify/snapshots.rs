//! Snapshot tests of every rendering under every profile (`insta`), and the
//! rule that no rendering of a redacted event carries a planted secret.

use super::*;
use serde_json::json;

const PLANTED: &[&str] = &[
    "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "Hook-Secret-777",
    "ada@example.org",
    "+44 20 7946 0958",
];

fn sample(profile: Profile) -> Event {
    let at = |t: &str| Some(t.parse().unwrap());
    let mut extensions = serde_json::Map::new();
    extensions.insert("raw".into(), json!({"nested": ["token=Hook-Secret-777"]}));
    Event::build(Facts {
        kind: "iteration_ok".into(),
        event_id: "iteration_ok-3".into(),
        research_title: "Bridge lemma for Ramsey R(5,5) <bounds> & more".into(),
        dir_name: "run".into(),
        occurred_at: at("2026-12-03T10:15:00Z"),
        iteration: Some(3),
        status: Status {
            iteration: IterationStatus::Success,
            review: ReviewStatus::Passed,
            loop_status: "active".into(),
        },
        progress: Progress {
            iterations_used: 3,
            iterations_remaining: Some(7),
            tokens_used: 48_200,
            usd_used: 1.25,
            goal: "2 of 5 obligations met".into(),
        },
        timing: Timing {
            started_at: at("2026-12-03T10:00:00Z"),
            finished_at: at("2026-12-03T10:12:30Z"),
        },
        agents: Agents {
            executor: "claude".into(),
            driver: AgentGroup::of(vec!["claude (opus)".into()]),
            panel: AgentGroup::of(vec!["codex".into()]),
            other: AgentGroup::default(),
        },
        compute: Some(vec![ComputeRun::parse(
            r#"{"service":"hetzner","status":"succeeded","job_ref":"job-123"}"#,
        )
        .unwrap()]),
        issues: Issues::default(),
        goal: "Bound R(5,5) from above using the bridge lemma.".into(),
        completed: "Verified bridge lemma B; the key ghp_0123456789abcdefghijABCDEFGHIJ012345 leaked in a log was redacted.".into(),
        results: vec!["claim-7: lemma B holds for n <= 43".into()],
        current: "One terminal obligation remains open; ask ada@example.org or +44 20 7946 0958.".into(),
        decision: "continue".into(),
        decision_reason: "obligation C open".into(),
        plan: "Test the registered falsifier for approach A3.".into(),
        profile,
        extensions,
    })
    .unwrap()
    .redacted(&["Hook-Secret-777"])
}

const PROFILES: [Profile; 3] = [
    Profile::OperatorFull,
    Profile::OperatorCompact,
    Profile::Legacy,
];
const FORMATS: [Format; 4] = [
    Format::Markdown,
    Format::Plain,
    Format::TelegramHtml,
    Format::Compact,
];

#[test]
fn every_rendering_under_every_profile_matches_its_snapshot() {
    for profile in PROFILES {
        for format in FORMATS {
            let name = format!("{}_{format:?}", profile.as_str());
            insta::assert_snapshot!(name, render(&sample(profile), format));
        }
    }
}

#[test]
fn no_rendering_or_serialization_of_a_redacted_event_carries_a_planted_secret() {
    for profile in PROFILES {
        let event = sample(profile);
        let mut outputs: Vec<String> = FORMATS.iter().map(|f| render(&event, *f)).collect();
        outputs.push(serde_json::to_string(&event).unwrap());
        for output in outputs {
            for secret in PLANTED {
                assert!(!output.contains(secret), "{secret} in {output}");
            }
        }
    }
}

#[test]
fn a_stored_event_re_renders_identically_under_its_own_profile() {
    let event = sample(Profile::OperatorCompact);
    let stored: Event = serde_json::from_str(&serde_json::to_string(&event).unwrap()).unwrap();
    for format in FORMATS {
        assert_eq!(render(&stored, format), render(&event, format));
    }
}

#[test]
fn telegram_rendering_is_bounded_escaped_and_keeps_the_mandatory_blocks() {
    let mut event = sample(Profile::OperatorFull);
    event.completed = "<b>x</b> & ".repeat(2000);
    event.results = (0..500).map(|i| format!("claim-{i} <ok>")).collect();
    event.plan = "Next <step> & check".into();
    let html = render(&event, Format::TelegramHtml);
    assert!(html.chars().count() <= TELEGRAM_LIMIT, "{}", html.len());
    assert!(!html.contains("<b>x</b>"));
    for label in [
        "<b>Status:</b>",
        "<b>Event time:</b>",
        "<b>Plan:</b> Next &lt;step&gt; &amp; check",
    ] {
        assert!(html.contains(label), "{label} missing from {html}");
    }
}

#[test]
fn the_fingerprint_ignores_the_wall_clock_and_follows_the_content() {
    let a = sample(Profile::OperatorFull);
    let mut later = a.clone();
    later.occurred_at = Some("2026-12-04T00:00:00Z".parse().unwrap());
    assert_eq!(a.fingerprint(), later.fingerprint());
    let mut other = a.clone();
    other.plan = "another plan".into();
    assert_ne!(a.fingerprint(), other.fingerprint());
}
