use super::limits::{limits, InvalidLimit};
use super::pin::{self, Identity, Mismatch, Pin, PinError};
use super::*;
use crate::digest::Digest;
use std::collections::HashMap;

fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn an_omitted_transport_is_unconfined_outside_enforce_and_strict_inside() {
    assert_eq!(resolve(None, None, false), Ok(Transport::Unconfined));
    assert_eq!(resolve(None, Some("  "), false), Ok(Transport::Unconfined));
    let strict = resolve(None, None, true).unwrap_err();
    assert!(
        strict.to_string().contains("enforce mode") && strict.to_string().contains("trusted-local"),
        "{strict}"
    );
}

#[test]
fn trusted_local_is_only_ever_explicit_and_the_flag_outranks_the_variable() {
    assert_eq!(
        resolve(None, Some("trusted-local"), true),
        Ok(Transport::TrustedLocal)
    );
    assert_eq!(
        resolve(Some("trusted-local"), Some("strict-isolated"), false),
        Ok(Transport::TrustedLocal)
    );
    // Asked for isolation, or misspelled: never weaker than asked.
    for (flag, env) in [
        (Some("strict-isolated"), None),
        (None, Some("strict-isolated")),
        (Some("trusted_local"), None),
        (None, Some("unconfined")),
    ] {
        let error = resolve(flag, env, false).unwrap_err();
        assert!(
            matches!(error, TransportError::StrictIsolated { .. }),
            "{flag:?} {env:?}: {error}"
        );
    }
    let typo = resolve(Some("trusted_local"), None, false)
        .unwrap_err()
        .to_string();
    assert!(
        typo.contains("\"trusted_local\", which is not a transport")
            && typo.contains("leave it unset outside enforce mode"),
        "{typo}"
    );
}

#[test]
fn trusted_local_admits_only_attested_providers_without_overrides() {
    assert_eq!(
        admit(Role::Primary, &["claude", "codex"], false, &[]),
        Ok(())
    );
    let opencode = admit(Role::Primary, &["claude", "opencode"], false, &[]).unwrap_err();
    assert_eq!(
        opencode.to_string(),
        "trusted-local runs only attested providers (claude, codex); \"opencode\" is not one of them, so no process was started"
    );
    assert!(admit(Role::Panel, &["codewhale"], false, &[]).is_ok());
    assert!(matches!(
        admit(Role::Primary, &[], true, &[]),
        Err(TransportError::CommandOverride { .. })
    ));
    assert!(
        admit(Role::Primary, &["claude"], false, &["ANTHROPIC_BASE_URL"])
            .unwrap_err()
            .to_string()
            .contains("ANTHROPIC_BASE_URL is set")
    );
}

#[test]
fn limits_default_per_role_and_overrides_are_validated_by_name() {
    let none = lookup(&[]);
    let primary = limits(Role::Primary, &none).unwrap();
    let panel = limits(Role::Panel, &none).unwrap();
    assert_eq!(primary.memory_bytes, 4 << 30);
    assert_eq!(panel.memory_bytes, 3 << 30);
    assert_eq!((primary.tasks, panel.tasks), (128, 64));
    assert_eq!(primary.address_space_bytes, 64 << 30);
    assert_eq!(primary.output_bytes, 16_000_000);
    assert_eq!(
        primary.to_string(),
        "4 GiB memory, no swap, 128 tasks, 100% CPU, 64 GiB address space, 1024 open files, 4 GiB per file, no core dumps, 16 MB output"
    );
    let set = lookup(&[
        ("AAS_AUTOLOOP_RESOURCE_MEMORY_BYTES", "67108864"),
        ("AAS_AUTOLOOP_RESOURCE_PANEL_TASKS", "16"),
    ]);
    assert_eq!(limits(Role::Primary, &set).unwrap().memory_bytes, 64 << 20);
    assert_eq!(limits(Role::Primary, &set).unwrap().tasks, 128);
    assert_eq!(limits(Role::Panel, &set).unwrap().tasks, 16);
    for bad in ["-1", "4G", "", "0", "99999999999999999999"] {
        let error = limits(
            Role::Primary,
            &lookup(&[("AAS_AUTOLOOP_RESOURCE_TASKS", bad)]),
        )
        .unwrap_err();
        assert_eq!(
            error,
            InvalidLimit {
                variable: "AAS_AUTOLOOP_RESOURCE_TASKS".into(),
                value: bad.into(),
                min: 4,
                max: 1 << 22
            }
        );
    }
}

fn pins(provider: &str) -> Vec<(String, String)> {
    vec![
        (
            pin::variable("BIN", provider),
            "/opt/claude/bin/claude".into(),
        ),
        (
            pin::variable("SHA256", provider),
            Digest::of_bytes(b"claude").to_string(),
        ),
        (pin::variable("UPSTREAM", provider), "anthropic".into()),
        (pin::variable("MODEL", provider), "claude-fable-5".into()),
    ]
}

fn read(pairs: &[(String, String)]) -> Result<Pin, PinError> {
    let borrowed: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    pin::read("claude", &lookup(&borrowed))
}

#[test]
fn every_pin_is_required_and_well_formed() {
    let pin = read(&pins("claude")).unwrap();
    assert_eq!(pin.upstream, "anthropic");
    assert_eq!(pin.dependency_root, None);
    for drop in 0..4 {
        let mut partial = pins("claude");
        let (gone, _) = partial.remove(drop);
        let error = read(&partial).unwrap_err().to_string();
        assert!(
            error.contains(&format!("{gone} is not set"))
                && error.contains("loopx attest --provider claude"),
            "{error}"
        );
    }
    let mut wrong = pins("claude");
    wrong[2].1 = "openai".into();
    assert!(read(&wrong)
        .unwrap_err()
        .to_string()
        .contains("must be anthropic"));
    let mut relative = pins("claude");
    relative[0].1 = "bin/claude".into();
    assert!(read(&relative)
        .unwrap_err()
        .to_string()
        .contains("absolute path"));
    let mut short = pins("claude");
    short[1].1 = "sha256:abc".into();
    assert!(matches!(read(&short), Err(PinError::Malformed { .. })));
}

#[test]
fn an_identity_must_be_the_pinned_path_digest_and_the_attested_closure() {
    let pin = read(&pins("claude")).unwrap();
    let found = Identity {
        real_path: "/opt/claude/bin/claude".into(),
        sha256: Digest::of_bytes(b"claude"),
        root: "/opt/claude".into(),
        closure: Digest::of_bytes(b"closure"),
    };
    assert_eq!(pin::check(&pin, &found, None), Ok(()));
    assert_eq!(pin::check(&pin, &found, Some(&found)), Ok(()));
    let changed = Identity {
        sha256: Digest::of_bytes(b"patched"),
        ..found.clone()
    };
    assert!(matches!(
        pin::check(&pin, &changed, None),
        Err(Mismatch::Digest { .. })
    ));
    let moved = Identity {
        real_path: "/tmp/claude".into(),
        ..found.clone()
    };
    assert!(matches!(
        pin::check(&pin, &moved, None),
        Err(Mismatch::Path { .. })
    ));
    let tampered = Identity {
        closure: Digest::of_bytes(b"other"),
        ..found.clone()
    };
    assert!(matches!(
        pin::check(&pin, &tampered, Some(&found)),
        Err(Mismatch::Closure { .. })
    ));
}
