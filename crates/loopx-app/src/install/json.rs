//! JSON that keeps the order a person wrote it in: the documents installers
//! merge into (`.mcp.json`, `settings.json`, `opencode.json`) are parsed
//! into [`Json`], edited, and printed back with every unrelated key where
//! it was.
//!
//! Not `serde_json`'s `preserve_order` feature: features unify across the
//! workspace, and the canonical digests of `loopx_core::digest` rely on
//! `serde_json::Value` maps being sorted by key. Scalars stay
//! `serde_json::Value` (they hold no maps); objects and arrays are ours.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Object(Vec<(String, Json)>),
    Array(Vec<Json>),
    Scalar(serde_json::Value),
}

impl Json {
    pub fn object() -> Self {
        Json::Object(Vec::new())
    }

    /// JSON, or JSONC (comments, trailing commas: OpenCode's config).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        Ok(serde_json::from_str(&super::jsonc::blank(text)?)?)
    }

    /// Two-space indentation and a final newline, as the runtimes' own
    /// `mcp add` commands write these files.
    pub fn print(&self) -> String {
        self.print_like(None)
    }

    /// Printed with the indentation `original` uses (its first indented
    /// line's leading whitespace; two spaces when it has none), so that a
    /// merge into a person's file does not re-indent every line of it.
    pub fn print_like(&self, original: Option<&str>) -> String {
        let indent = original
            .and_then(|text| {
                text.lines()
                    .skip(1)
                    .map(|line| &line[..line.len() - line.trim_start().len()])
                    .find(|lead| !lead.is_empty())
            })
            .unwrap_or("  ");
        let mut out = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
        self.serialize(&mut serializer).expect("a JSON tree prints");
        let mut text = String::from_utf8(out).expect("JSON is UTF-8");
        text.push('\n');
        text
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        match self {
            Json::Object(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Set `key`, in place when it exists, else appended last.
    pub fn set(&mut self, key: &str, value: Json) {
        if let Json::Object(entries) = self {
            match entries.iter_mut().find(|(k, _)| k == key) {
                Some((_, slot)) => *slot = value,
                None => entries.push((key.to_owned(), value)),
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Json> {
        match self {
            Json::Object(entries) => {
                let at = entries.iter().position(|(k, _)| k == key)?;
                Some(entries.remove(at).1)
            }
            _ => None,
        }
    }

    pub fn is_empty_container(&self) -> bool {
        match self {
            Json::Object(entries) => entries.is_empty(),
            Json::Array(items) => items.is_empty(),
            Json::Scalar(_) => false,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Scalar(serde_json::Value::String(s)) => Some(s),
            _ => None,
        }
    }

    /// The child object at `key`, created (empty, appended last) when
    /// missing. `None` when `key` holds something that is not an object.
    pub fn object_at(&mut self, key: &str) -> Option<&mut Json> {
        if self.get(key).is_none() {
            self.set(key, Json::object());
        }
        self.get_mut(key).filter(|v| matches!(v, Json::Object(_)))
    }

    /// As a `serde_json::Value` (key order lost): for digests.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a JSON tree converts")
    }

    pub fn from_value(value: serde_json::Value) -> Self {
        match value {
            serde_json::Value::Object(map) => Json::Object(
                map.into_iter()
                    .map(|(k, v)| (k, Json::from_value(v)))
                    .collect(),
            ),
            serde_json::Value::Array(items) => {
                Json::Array(items.into_iter().map(Json::from_value).collect())
            }
            scalar => Json::Scalar(scalar),
        }
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Scalar(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(|n| Json::Scalar(serde_json::Value::Number(n)))
            .ok_or_else(|| E::custom("a non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Scalar(serde_json::Value::Null))
    }
    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Scalar(serde_json::Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries: Vec<(String, Json)> = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Json>()? {
            // A repeated key: the last one wins, as serde_json decides.
            entries.retain(|(k, _)| *k != key);
            entries.push((key, value));
        }
        Ok(Json::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_survives_a_round_trip() {
        let text = "{\n  \"zeta\": 1,\n  \"alpha\": {\n    \"m\": [\n      true,\n      null\n    ],\n    \"b\": \"x\"\n  }\n}\n";
        assert_eq!(Json::parse(text).unwrap().print(), text);
    }

    #[test]
    fn printing_keeps_the_original_indentation() {
        let text = "{\n    \"a\": [\n        1\n    ]\n}\n";
        assert_eq!(Json::parse(text).unwrap().print_like(Some(text)), text);
    }
}
