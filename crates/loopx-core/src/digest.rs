//! Canonical JSON and the `sha256:<hex>` digests computed over it.
//!
//! Canonical means: serde's data model turned into a `serde_json::Value`
//! (whose maps are ordered by key) and printed without whitespace. Two
//! requests that mean the same thing therefore hash the same, whatever field
//! order or spacing the caller used.

use serde::Serialize;
use sha2::{Digest as _, Sha256};
use std::fmt;

/// A content digest, always rendered as `sha256:<64 lowercase hex>`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Digest(String);

impl Digest {
    /// The digest of raw bytes.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        let hash = Sha256::digest(bytes);
        let mut hex = String::with_capacity(7 + 64);
        hex.push_str("sha256:");
        for byte in hash {
            use fmt::Write as _;
            let _ = write!(hex, "{byte:02x}");
        }
        Digest(hex)
    }

    /// The digest of a value's canonical JSON.
    pub fn of_json<T: Serialize + ?Sized>(value: &T) -> Self {
        Self::of_bytes(canonical_json(value).as_bytes())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Canonical JSON text of a value: keys sorted, no insignificant whitespace.
///
/// Serializing the types of this crate cannot fail (no non-string map keys,
/// no non-finite floats reach a state), so a failure here is a programming
/// error and panics with the reason.
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> String {
    let value = serde_json::to_value(value).expect("loopx values serialize to JSON");
    serde_json::to_string(&value).expect("a JSON value prints")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_order_does_not_change_the_digest() {
        let a = json!({"b": 1, "a": [1, 2], "c": {"y": true, "x": null}});
        let b: serde_json::Value =
            serde_json::from_str(r#"{ "c": {"x": null, "y": true}, "a": [1,2], "b": 1 }"#).unwrap();
        assert_eq!(Digest::of_json(&a), Digest::of_json(&b));
        assert_eq!(
            canonical_json(&b),
            r#"{"a":[1,2],"b":1,"c":{"x":null,"y":true}}"#
        );
    }

    #[test]
    fn digest_is_prefixed_lowercase_sha256() {
        // sha256("") is a well-known constant.
        assert_eq!(
            Digest::of_bytes(b"").as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
