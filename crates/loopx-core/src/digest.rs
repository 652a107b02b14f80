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
///
/// Deserializing goes through [`Digest::parse`], so a digest read from a
/// request body or a stored event is a digest, never any string.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct Digest(String);

/// A text that was meant to be a digest and is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text:?} is not a digest: expected sha256:<64 lowercase hex>, as the goal readback prints it"
)]
pub struct NotADigest {
    pub text: String,
}

impl TryFrom<String> for Digest {
    type Error = NotADigest;

    fn try_from(text: String) -> Result<Self, NotADigest> {
        let hex = text.strip_prefix("sha256:").unwrap_or("");
        if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Digest(text))
        } else {
            Err(NotADigest { text })
        }
    }
}

/// A digest fed in pieces (a file read in chunks), for what is too large
/// to hold in memory at once.
#[derive(Default)]
pub struct Hasher(Sha256);

impl Hasher {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn finish(self) -> Digest {
        Digest::of_hash(&self.0.finalize())
    }
}

impl Digest {
    /// The digest of raw bytes.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self::of_hash(&Sha256::digest(bytes))
    }

    fn of_hash(hash: &[u8]) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = String::with_capacity(7 + 64);
        hex.push_str("sha256:");
        for byte in hash {
            hex.push(HEX[usize::from(byte >> 4)] as char);
            hex.push(HEX[usize::from(byte & 0xf)] as char);
        }
        Digest(hex)
    }

    /// The digest of a value's canonical JSON.
    pub fn of_json<T: Serialize + ?Sized>(value: &T) -> Self {
        Self::of_bytes(canonical_json(value).as_bytes())
    }

    /// The one parser of digests a person or a program wrote down
    /// (`sha256:<64 lowercase hex>`); every adapter parses through it.
    pub fn parse(text: &str) -> Result<Self, NotADigest> {
        Self::try_from(text.to_owned())
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

/// The length of a value's canonical JSON, without building it: key order
/// changes where bytes go, never how many there are.
pub fn canonical_len<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).expect("loopx values serialize to JSON");
    count.0
}

impl Digest {
    /// The digest of a value whose plain JSON already is canonical: a
    /// struct whose fields are declared in key order and that holds no
    /// maps. Skips the intermediate `Value` of [`Digest::of_json`]; the
    /// tests pin that both agree.
    pub fn of_ordered_json<T: Serialize + ?Sized>(value: &T) -> Self {
        Self::of_bytes(&serde_json::to_vec(value).expect("loopx values serialize to JSON"))
    }
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
    fn the_shortcuts_agree_with_canonical_json() {
        #[derive(serde::Serialize)]
        struct Ordered<'a> {
            alpha: &'a [(&'a str, &'a str)],
            beta: u32,
        }
        #[derive(serde::Serialize)]
        struct Unordered {
            zeta: u32,
            alpha: Vec<u8>,
        }
        let ordered = Ordered {
            alpha: &[("R1", "keep \"it\" ü")],
            beta: 7,
        };
        assert_eq!(Digest::of_ordered_json(&ordered), Digest::of_json(&ordered));
        let unordered = Unordered {
            zeta: 1,
            alpha: vec![1, 2],
        };
        assert_eq!(canonical_len(&unordered), canonical_json(&unordered).len());
    }

    #[test]
    fn only_a_prefixed_lowercase_sha256_parses() {
        let good = Digest::of_bytes(b"x");
        assert_eq!(Digest::parse(good.as_str()), Ok(good.clone()));
        let upper = good.as_str().to_uppercase().replace("SHA256", "sha256");
        for bad in ["", "sha256:00", "md5:00", &upper, &good.as_str()[7..]] {
            assert!(Digest::parse(bad).is_err(), "{bad:?} parsed");
        }
        let read: Result<Digest, _> = serde_json::from_value(json!("sha256:00"));
        assert!(read.is_err(), "deserializing skips the parser");
        assert_eq!(
            serde_json::from_value::<Digest>(json!(good.as_str())).unwrap(),
            good
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
