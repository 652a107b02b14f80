//! Which proof artifacts the host can re-check, and how: a `lean` artifact
//! whose checker is Lake, by `lake env lean <proof file>` in the Lake
//! project that holds the file. The artifact's own `checker.status` is
//! what the agent says; a [`super::owner::Recheck`] is what the host saw.
//!
//! Not here: the artifact's schema (`crate::ledger::proof`), running Lake
//! (`loopx_app::formal`).

use crate::path::LoopPath;
use serde_json::Value;

/// The proof file of `artifact` when the host can re-check it: a `lean`
/// artifact whose checker is Lake. Otherwise why not, in words.
pub fn lake_proof(artifact: &Value) -> Result<LoopPath, String> {
    let text = |key: &str| artifact.get(key).and_then(Value::as_str).unwrap_or("");
    if text("artifact_type") != "lean" {
        return Err(format!(
            "the host re-checks only artifacts of type lean (this one is {:?})",
            text("artifact_type")
        ));
    }
    let checker = artifact["checker"]["name"].as_str().unwrap_or("");
    if !checker.trim().eq_ignore_ascii_case("lake") {
        return Err(format!(
            "the host re-checks a lean artifact whose checker is lake (this one names {checker:?})"
        ));
    }
    let path = text("proof_path");
    LoopPath::parse(path).map_err(|problem| format!("proof_path {path:?} {problem}"))
}

/// The command that checks `proof` (relative to the Lake project it lies
/// in): Lean run in the project's environment, so its imports resolve as
/// the build's do.
pub fn argv(proof: &str) -> Vec<String> {
    ["lake", "env", "lean", proof].map(str::to_owned).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(kind: &str, checker: &str) -> Value {
        serde_json::json!({
            "artifact_type": kind, "proof_path": "formal/Proof.lean",
            "checker": {"name": checker, "status": "passed"}
        })
    }

    #[test]
    fn only_a_lean_artifact_checked_by_lake_is_rechecked() {
        assert_eq!(
            lake_proof(&artifact("lean", "Lake")).unwrap().as_str(),
            "formal/Proof.lean"
        );
        assert!(lake_proof(&artifact("coq", "lake"))
            .unwrap_err()
            .contains("type lean"));
        assert!(lake_proof(&artifact("lean", "lean"))
            .unwrap_err()
            .contains("checker is lake"));
        let mut outside = artifact("lean", "lake");
        outside["proof_path"] = "../x.lean".into();
        assert!(lake_proof(&outside).unwrap_err().contains("../x.lean"));
    }

    #[test]
    fn the_proof_is_checked_in_the_projects_environment() {
        assert_eq!(argv("Proof.lean"), ["lake", "env", "lean", "Proof.lean"]);
    }
}
