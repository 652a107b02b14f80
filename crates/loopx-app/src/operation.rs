//! Operation ids and run-unique names: the one place a fresh id or name is
//! generated.
//!
//! Owns: the shape of a generated id (`auto-<nanos>-<random>`), unique per
//! invocation so that only a deliberate repeat of an id is a replay.
//! Does not own: what an id may look like (`loopx_core::operation::OperationId`)
//! or what a replay does (the store's authority).

use crate::AppError;
use loopx_core::operation::OperationId;

/// A fresh operation id, never equal to one generated before.
pub fn generate() -> OperationId {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    OperationId::parse(&format!(
        "auto-{nanos:x}-{:016x}",
        crate::platform::random_u64()
    ))
    .expect("a generated id has only letters, digits and '-'")
}

/// The operation id the caller gave, or a fresh one. A given id that is
/// not a valid operation id is refused, naming the value.
pub fn given_or_generated(given: Option<&str>) -> Result<OperationId, AppError> {
    match given {
        Some(id) => OperationId::parse(id).map_err(|e| AppError::refused(e.to_string())),
        None => Ok(generate()),
    }
}

/// A name no other dispatch, claim check or registration of this loop
/// uses: `prefix` (the iteration, say), a per-process nonce, and the clock.
pub fn fresh_name(prefix: &str) -> String {
    format!(
        "{prefix}-{}{:04x}",
        crate::platform::nonce(),
        crate::clock::now().as_millisecond() as u16
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_differ_and_a_given_one_is_kept() {
        assert_ne!(generate(), generate());
        assert_eq!(given_or_generated(Some("op-7")).unwrap().as_str(), "op-7");
        let refused = given_or_generated(Some("bad id")).unwrap_err();
        assert_eq!(refused.class, crate::ErrorClass::Refused);
        assert!(
            refused.message.contains("\"bad id\""),
            "{}",
            refused.message
        );
    }
}
