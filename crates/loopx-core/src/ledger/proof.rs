//! Proof artifacts: the evidence an early success stop must cite.
//!
//! The artifact schema is checked here, purely. Reading the files is the
//! adapter's job, through [`EvidenceFiles`], which must refuse anything
//! outside the loop directory or reached through a symlink. Where a
//! `proof_path` may point is [`LoopPath`]'s rule, not this module's.

use crate::path::LoopPath;
use crate::text::limits::PROOF_ARTIFACT_BYTES;
use serde_json::Value;

pub const ARTIFACT_SCHEMA_VERSION: &str = "1.0";

pub const ARTIFACT_TYPES: &[&str] = &[
    "lean",
    "coq",
    "isabelle",
    "agda",
    "sagemath",
    "python-verifier",
    "external-verifier",
];

pub use crate::path::FileProblem;

/// Read access to the loop directory, confined to it.
pub trait EvidenceFiles {
    /// The bytes of `proof_artifacts/<id>.json`, read no further than
    /// [`PROOF_ARTIFACT_BYTES`] (a larger one is [`FileProblem::TooLarge`]).
    fn proof_artifact(&self, evidence_id: &str) -> Result<Vec<u8>, FileProblem>;
    /// `Ok` when `path` is a regular file below the loop directory, reached
    /// through no symlink.
    fn regular_file(&self, path: &LoopPath) -> Result<(), FileProblem>;
}

/// A loop directory with nothing in it: for decisions that read no files
/// (`init`) and for checks made before the directory exists.
pub struct NoFiles;

impl EvidenceFiles for NoFiles {
    fn proof_artifact(&self, _: &str) -> Result<Vec<u8>, FileProblem> {
        Err(FileProblem::Missing)
    }
    fn regular_file(&self, _: &LoopPath) -> Result<(), FileProblem> {
        Err(FileProblem::Missing)
    }
}

/// An id is 1-128 letters, digits, `_`, `-` or `.`, starting alphanumeric.
pub fn is_valid_evidence_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Every reason the artifact for `evidence_id` does not prove anything; an
/// empty list means it is a valid, passed, machine-checkable artifact.
pub fn artifact_problems(evidence_id: &str, files: &dyn EvidenceFiles) -> Vec<String> {
    if !is_valid_evidence_id(evidence_id) {
        return vec![format!(
            "proof evidence_id {evidence_id:?} must be 1-128 characters of letters, digits, underscore, hyphen, or dot, and must start with a letter or digit"
        )];
    }
    let location = format!("proof_artifacts/{evidence_id}.json");
    let bytes = match files.proof_artifact(evidence_id) {
        // The adapter bounds its read; this keeps the rule true of any
        // adapter, not only of the ones that remember to.
        Ok(bytes) if bytes.len() as u64 > PROOF_ARTIFACT_BYTES => {
            return vec![format!(
                "proof artifact for evidence_id '{evidence_id}' {}: {location}",
                FileProblem::TooLarge {
                    limit: PROOF_ARTIFACT_BYTES
                }
                .describe()
            )]
        }
        Ok(bytes) => bytes,
        Err(problem) => {
            return vec![format!(
                "proof artifact for evidence_id '{evidence_id}' {}: {location}",
                problem.describe()
            )]
        }
    };
    let artifact: Value = match serde_json::from_slice(&bytes) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => return vec![format!("invalid proof artifact for evidence_id '{evidence_id}': {location} must contain a JSON object")],
        Err(error) => return vec![format!("invalid proof artifact for evidence_id '{evidence_id}': {error}")],
    };
    let text = |key: &str| artifact.get(key).and_then(Value::as_str).unwrap_or("");
    let prefix = format!("proof artifact '{evidence_id}'");
    let mut problems = Vec::new();
    if text("id") != evidence_id {
        problems.push(format!("{prefix} id must match evidence_id"));
    }
    if text("schema_version") != ARTIFACT_SCHEMA_VERSION {
        problems.push(format!(
            "{prefix} schema_version must be '{ARTIFACT_SCHEMA_VERSION}'"
        ));
    }
    if artifact.get("machine_checkable") != Some(&Value::Bool(true)) {
        problems.push(format!("{prefix} machine_checkable must be true"));
    }
    if !ARTIFACT_TYPES.contains(&text("artifact_type")) {
        problems.push(format!(
            "{prefix} artifact_type is invalid (got {:?}; accepted: {})",
            artifact
                .get("artifact_type")
                .unwrap_or(&Value::Null)
                .to_string(),
            ARTIFACT_TYPES.join(", ")
        ));
    }
    match artifact.get("checker") {
        Some(Value::Object(checker)) => {
            let field = |key: &str| checker.get(key).and_then(Value::as_str).unwrap_or("");
            if field("name").trim().is_empty() {
                problems.push(format!("{prefix} checker.name must be non-empty"));
            }
            if field("status") != "passed" {
                problems.push(format!("{prefix} checker.status must be 'passed'"));
            }
        }
        _ => problems.push(format!("{prefix} checker must be an object")),
    }
    if text("target").trim().is_empty() {
        problems.push(format!("{prefix} target must be non-empty"));
    }
    let proof_path = text("proof_path");
    match LoopPath::parse(proof_path) {
        Err(reason) => problems.push(format!("{prefix} proof_path {proof_path:?} {reason}")),
        Ok(path) => {
            if let Err(problem) = files.regular_file(&path) {
                problems.push(format!(
                    "{prefix} proof_path {proof_path:?} {}",
                    problem.describe()
                ));
            }
        }
    }
    problems
}

/// The example artifact shown to agents when an early stop is refused.
pub fn expected_artifact_example(evidence_id: &str) -> Value {
    serde_json::json!({
        "schema_version": ARTIFACT_SCHEMA_VERSION,
        "id": evidence_id,
        "artifact_type": "lean",
        "machine_checkable": true,
        "target": "<theorem or claim this artifact proves>",
        "proof_path": "<path relative to the loop dir, e.g. proof_artifacts/final.lean>",
        "checker": {"name": "lake", "status": "passed"}
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// An in-memory loop directory.
    #[derive(Default)]
    pub(crate) struct MemoryFiles {
        pub artifacts: BTreeMap<String, Vec<u8>>,
        pub files: Vec<String>,
    }

    impl MemoryFiles {
        pub(crate) fn with_valid_artifact(id: &str) -> Self {
            let mut files = MemoryFiles::default();
            files
                .artifacts
                .insert(id.into(), valid_artifact(id).to_string().into_bytes());
            files.files.push("proofs/p.lean".into());
            files
        }
    }

    impl EvidenceFiles for MemoryFiles {
        fn proof_artifact(&self, id: &str) -> Result<Vec<u8>, FileProblem> {
            self.artifacts.get(id).cloned().ok_or(FileProblem::Missing)
        }
        fn regular_file(&self, path: &LoopPath) -> Result<(), FileProblem> {
            if self.files.iter().any(|f| f == path.as_str()) {
                Ok(())
            } else {
                Err(FileProblem::Missing)
            }
        }
    }

    pub(crate) fn valid_artifact(id: &str) -> Value {
        serde_json::json!({
            "schema_version": "1.0", "id": id, "artifact_type": "lean",
            "machine_checkable": true, "target": "lemma B", "proof_path": "proofs/p.lean",
            "checker": {"name": "lean", "status": "passed"}
        })
    }

    #[test]
    fn a_complete_artifact_has_no_problems() {
        let files = MemoryFiles::with_valid_artifact("proof-1");
        assert_eq!(artifact_problems("proof-1", &files), Vec::<String>::new());
    }

    #[test]
    fn every_schema_field_is_checked() {
        let mut files = MemoryFiles::with_valid_artifact("p");
        let broken = serde_json::json!({
            "schema_version": "2.0", "id": "other", "artifact_type": "vibes",
            "machine_checkable": "yes", "target": " ", "proof_path": "../escape",
            "checker": {"name": "", "status": "failed"}
        });
        files
            .artifacts
            .insert("p".into(), broken.to_string().into_bytes());
        let problems = artifact_problems("p", &files);
        for needle in [
            "id must match",
            "schema_version",
            "machine_checkable",
            "artifact_type",
            "checker.name",
            "checker.status",
            "target",
            "'..' is not allowed",
        ] {
            assert!(
                problems.iter().any(|p| p.contains(needle)),
                "{needle} not reported in {problems:?}"
            );
        }
    }

    #[test]
    fn a_proof_path_that_names_no_file_is_refused_before_any_lookup() {
        for bad in [".", "", "a/../b", "/etc/passwd", "./proofs/p.lean"] {
            let mut files = MemoryFiles::with_valid_artifact("p");
            let mut artifact = valid_artifact("p");
            artifact["proof_path"] = bad.into();
            // Even a loop directory that claims the path exists is not asked.
            files.files.push(bad.into());
            files
                .artifacts
                .insert("p".into(), artifact.to_string().into_bytes());
            let problems = artifact_problems("p", &files);
            assert!(
                problems.iter().any(|p| p.contains("proof_path")),
                "{bad:?} accepted: {problems:?}"
            );
        }
    }

    #[test]
    fn an_oversized_artifact_is_refused_with_the_limit() {
        let mut files = MemoryFiles::with_valid_artifact("p");
        files
            .artifacts
            .insert("p".into(), vec![b' '; PROOF_ARTIFACT_BYTES as usize + 1]);
        let problems = artifact_problems("p", &files);
        assert!(problems[0].contains("65536-byte limit"), "{problems:?}");
    }

    #[test]
    fn bad_ids_and_missing_files_are_explained() {
        let files = MemoryFiles::default();
        assert!(artifact_problems("../x", &files)[0].contains("must be 1-128 characters"));
        assert!(artifact_problems("absent", &files)[0].contains("does not exist"));
    }
}
