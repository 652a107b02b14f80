//! The ledger's enumerations, spelled exactly as the reference runtime spells
//! them so that scripts and Stop hooks keep working when users switch.

use serde::{Deserialize, Serialize};

macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name { $($(#[$vmeta])* #[serde(rename = $text)] $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }

            /// The accepted spellings, for error messages and `--help`.
            pub fn names() -> Vec<&'static str> {
                Self::ALL.iter().map(|v| v.as_str()).collect()
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
// For the other owners whose enumerations are spelled as the reference's.
pub(crate) use vocabulary;

vocabulary! {
    /// What kind of work an iteration did.
    Mode {
        BoundedResearch => "bounded-research",
        ImplementationSupport => "implementation-support",
        Monitor => "monitor",
        PanelLoop => "panel-loop",
        Recovery => "recovery",
    }
}

vocabulary! {
    /// What the iteration decided about the loop.
    Decision {
        Continue => "continue",
        Stop => "stop",
        Blocked => "blocked",
        Revise => "revise",
        Delegate => "delegate",
    }
}

impl Decision {
    /// `stop` and `blocked` end the loop; the others ask for another turn.
    pub fn is_terminal(self) -> bool {
        matches!(self, Decision::Stop | Decision::Blocked)
    }

    pub fn is_continuing(self) -> bool {
        !self.is_terminal()
    }

    /// The loop status an accepted record of this decision leaves behind.
    pub fn resulting_status(self) -> LoopStatus {
        match self {
            Decision::Stop => LoopStatus::Stopped,
            Decision::Blocked => LoopStatus::Blocked,
            Decision::Continue | Decision::Revise | Decision::Delegate => LoopStatus::Running,
        }
    }
}

vocabulary! {
    /// Where the loop stands.
    LoopStatus {
        Initialized => "initialized",
        Running => "running",
        Stopped => "stopped",
        Blocked => "blocked",
    }
}

impl LoopStatus {
    pub fn is_terminal(self) -> bool {
        matches!(self, LoopStatus::Stopped | LoopStatus::Blocked)
    }
}

vocabulary! {
    /// How Goal Focus direction control treats this loop. A plain `init`
    /// defaults to `monitor`: it reports drift and never gates an append.
    GoalFocusMode {
        Off => "off",
        Monitor => "monitor",
        Enforce => "enforce",
    }
}

/// Stop reasons that claim success and therefore need a proof artifact when
/// the stop comes before the budget is spent.
pub const SUCCESS_STOP_REASONS: &[&str] = &[
    "success",
    "success_criteria_met",
    "proof",
    "proof_found",
    "found_proof",
    "proved",
];

/// A stop reason, normalised the way the reference matches it: trimmed,
/// lower-cased, with `-` and spaces read as `_`.
pub fn normalize_stop_reason(reason: &str) -> String {
    reason
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c == '-' || c == ' ' { '_' } else { c })
        .collect()
}

pub fn is_success_stop_reason(reason: &str) -> bool {
    SUCCESS_STOP_REASONS.contains(&normalize_stop_reason(reason).as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip_through_serde_and_parse() {
        for mode in Mode::ALL {
            let json = serde_json::to_string(mode).unwrap();
            assert_eq!(json, format!("\"{}\"", mode.as_str()));
            assert_eq!(Mode::parse(mode.as_str()), Some(*mode));
        }
        assert_eq!(Decision::parse("delegate"), Some(Decision::Delegate));
        assert_eq!(Decision::parse("Delegate"), None);
    }

    #[test]
    fn only_stop_and_blocked_are_terminal() {
        let terminal: Vec<_> = Decision::ALL.iter().filter(|d| d.is_terminal()).collect();
        assert_eq!(terminal, [&Decision::Stop, &Decision::Blocked]);
    }

    #[test]
    fn success_reasons_match_after_normalisation() {
        assert!(is_success_stop_reason(" Proof-Found "));
        assert!(is_success_stop_reason("success criteria met"));
        assert!(!is_success_stop_reason("plateau"));
        assert!(!is_success_stop_reason(""));
    }
}
