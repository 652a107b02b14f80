//! Editing a person's JSON or JSONC file (OpenCode's `opencode.json`
//! takes `//` and `/* */` comments and trailing commas) by splicing: the
//! value at one key path is replaced, inserted or removed as text, and
//! every other byte of the file (comments, order, indentation, blank
//! lines) stays as it was.
//!
//! [`blank`] turns JSONC into JSON of the same length (comments and
//! trailing commas become spaces, newlines kept), so byte offsets in one
//! are offsets in the other: the tree is read from the blanked text by
//! `serde_json`, and spans are found in it.
//!
//! Not here: what value goes where (the installers, on the tree
//! [`super::json::Json`]).

use super::json::Json;
use anyhow::{bail, Result};
use std::ops::Range;

/// `text` with its comments and trailing commas replaced by spaces (a
/// comment's newlines kept), so it is JSON of the very same byte length.
pub fn blank(text: &str) -> Result<String> {
    let mut out = blank_comments(text)?;
    // Trailing commas: a comma whose next non-space byte closes.
    let mut in_string = false;
    let mut i = 0;
    while i < out.len() {
        match out[i] {
            b'\\' if in_string => i += 1,
            b'"' => in_string = !in_string,
            b',' if !in_string => {
                let next = out[i + 1..].iter().find(|b| !b.is_ascii_whitespace());
                if matches!(next, Some(b'}' | b']')) {
                    out[i] = b' ';
                }
            }
            _ => {}
        }
        i += 1;
    }
    // Only ASCII bytes outside strings were replaced, by ASCII.
    Ok(String::from_utf8(out).expect("blanking keeps UTF-8"))
}

/// `text` with only its comments replaced by spaces.
fn blank_comments(text: &str) -> Result<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match (b, bytes.get(i + 1)) {
            (b'"', _) => in_string = true,
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            (b'/', Some(b'*')) => {
                let Some(end) = text[i + 2..].find("*/") else {
                    bail!("a /* comment that never ends (at byte {i})");
                };
                for byte in &mut out[i..i + 2 + end + 2] {
                    if *byte != b'\n' {
                        *byte = b' ';
                    }
                }
                i += 2 + end + 2;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(out)
}

/// One member of an object in the blanked text.
struct Member {
    key: String,
    /// From the key's opening quote to the value's last byte.
    whole: Range<usize>,
    value: Range<usize>,
}

fn skip_space(text: &[u8], mut at: usize) -> usize {
    while at < text.len() && text[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}

/// The end of the JSON value starting at `at` (valid JSON assumed: the
/// caller parsed it first).
fn value_end(text: &[u8], at: usize) -> usize {
    match text[at] {
        b'"' => string_end(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < text.len() {
                match text[i] {
                    b'"' => {
                        i = string_end(text, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            text.len()
        }
        _ => {
            let mut i = at;
            while i < text.len() && !matches!(text[i], b',' | b'}' | b']') {
                i += 1;
            }
            // Back over trailing spaces.
            while i > at && text[i - 1].is_ascii_whitespace() {
                i -= 1;
            }
            i
        }
    }
}

fn string_end(text: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

/// The members of the object whose `{` is at `open`, and the position of
/// its `}`.
fn members(text: &str, open: usize) -> (Vec<Member>, usize) {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = skip_space(bytes, open + 1);
    while at < bytes.len() && bytes[at] == b'"' {
        let key_end = string_end(bytes, at);
        let key = serde_json::from_str(&text[at..key_end]).unwrap_or_default();
        let colon = skip_space(bytes, key_end);
        let start = skip_space(bytes, colon + 1);
        let end = value_end(bytes, start);
        found.push(Member {
            key,
            whole: at..end,
            value: start..end,
        });
        at = skip_space(bytes, end);
        if at < bytes.len() && bytes[at] == b',' {
            at = skip_space(bytes, at + 1);
        }
    }
    (found, at)
}

/// The leading whitespace of the line `at` is on.
fn line_indent(text: &str, at: usize) -> &str {
    let start = text[..at].rfind('\n').map_or(0, |n| n + 1);
    let line = &text[start..];
    &line[..line.len() - line.trim_start().len()]
}

/// `value` printed with the file's indentation `unit`, its inner lines
/// indented under a line indented by `indent`; on one line when the
/// object it goes into is on one line.
fn print(value: &Json, unit: &str, indent: &str, one_line: bool) -> String {
    if one_line {
        return serde_json::to_string(value).expect("a JSON tree prints");
    }
    let printed = value.print_like(Some(&format!("{{\n{unit}x")));
    printed.trim_end().replace('\n', &format!("\n{indent}"))
}

/// The file's indentation unit: its first indented line's leading
/// whitespace, two spaces when it has none.
fn unit(text: &str) -> &str {
    text.lines()
        .skip(1)
        .map(|line| &line[..line.len() - line.trim_start().len()])
        .find(|lead| !lead.is_empty())
        .unwrap_or("  ")
}

/// Make the value at `path` of the JSON or JSONC document `text` what it
/// is in `updated` (set, or removed when `updated` has nothing there,
/// together with the first level of `path` it lacks), leaving every other
/// byte of `text` as it was. `updated` is `text`'s tree after the edit.
pub fn carry(text: &str, updated: &Json, path: &[&str]) -> Result<String> {
    let blanked = blank(text)?;
    let mut node = Some(updated);
    let mut present = 0;
    for key in path {
        node = node.and_then(|n| n.get(key));
        if node.is_none() {
            break;
        }
        present += 1;
    }
    match node {
        Some(value) if present == path.len() => Ok(splice(text, &blanked, path, Some(value))),
        _ => Ok(splice(text, &blanked, &path[..present + 1], None)),
    }
}

/// Set (`Some`) or remove (`None`) the value at `path` in `text`.
fn splice(text: &str, blanked: &str, path: &[&str], value: Option<&Json>) -> String {
    let bytes = blanked.as_bytes();
    let plain = blank_comments(text).expect("blanked once already");
    let unit = unit(text);
    let mut open = skip_space(bytes, 0);
    for (depth, key) in path.iter().enumerate() {
        let (found, close) = members(blanked, open);
        let one_line = !blanked[open..close].contains('\n');
        let last = depth + 1 == path.len();
        match found.iter().position(|m| m.key == *key) {
            Some(at) if last => {
                let member = &found[at];
                return match value {
                    Some(value) => {
                        let indent = line_indent(text, member.whole.start);
                        let printed = print(value, unit, indent, one_line);
                        format!(
                            "{}{printed}{}",
                            &text[..member.value.start],
                            &text[member.value.end..]
                        )
                    }
                    None => remove_member(text, &plain, &found, at, close),
                };
            }
            Some(at) => {
                let start = found[at].value.start;
                if bytes[start] != b'{' {
                    // Not an object: the tree edit refused this already.
                    return text.to_owned();
                }
                open = start;
            }
            None => {
                let Some(value) = value else {
                    return text.to_owned();
                };
                // `key: {rest: …: value}` inserted as the object's last
                // member.
                let nested = path[depth + 1..]
                    .iter()
                    .rev()
                    .fold(value.clone(), |inner, k| {
                        Json::Object(vec![((*k).to_owned(), inner)])
                    });
                return insert_member(text, &plain, &found, open, close, key, &nested, unit);
            }
        }
    }
    text.to_owned()
}

/// Where the comma after a member is, if it has one before `close`
/// (`plain`: the text with only its comments blanked, so a trailing
/// comma still shows).
fn comma_after(plain: &[u8], end: usize, close: usize) -> Option<usize> {
    let at = skip_space(plain, end);
    (at < close && plain[at] == b',').then_some(at)
}

/// Where the line holding `at` ends (its `\n`), when that is before
/// `close`.
fn line_end(text: &str, at: usize, close: usize) -> Option<usize> {
    text[at..close].find('\n').map(|n| at + n)
}

#[allow(clippy::too_many_arguments)]
fn insert_member(
    text: &str,
    plain: &[u8],
    found: &[Member],
    open: usize,
    close: usize,
    key: &str,
    value: &Json,
    unit: &str,
) -> String {
    let one_line = !text[open..close].contains('\n');
    let key = serde_json::to_string(key).expect("a key prints");
    match found.last() {
        Some(last) => {
            let end = last.whole.end;
            let comma = comma_after(plain, end, close);
            if one_line {
                // `{"a":1}` -> `{"a":1, "k": v}`; a trailing comma stays last.
                let printed = print(value, unit, "", true);
                let at = comma.map_or(end, |c| c + 1);
                let lead = if comma.is_some() { " " } else { ", " };
                let tail = if comma.is_some() { "," } else { "" };
                return format!("{}{lead}{key}: {printed}{tail}{}", &text[..at], &text[at..]);
            }
            // On its own line after the last member's line (its comment
            // stays with it), ending with a comma when the person's did.
            let indent = line_indent(text, last.whole.start);
            let printed = print(value, unit, indent, false);
            let after = comma.map_or(end, |c| c + 1);
            let at = line_end(text, after, close).unwrap_or(after);
            let (lead, tail) = match comma {
                Some(_) => ("", ","),
                None => (",", ""),
            };
            format!(
                "{}{lead}{}\n{indent}{key}: {printed}{tail}{}",
                &text[..end],
                &text[end..at],
                &text[at..]
            )
        }
        None if one_line => {
            let printed = print(value, unit, "", true);
            format!("{}{key}: {printed}{}", &text[..open + 1], &text[open + 1..])
        }
        None => {
            let outer = line_indent(text, close);
            let indent = format!("{outer}{unit}");
            let printed = print(value, unit, &indent, false);
            // On the line before the closing brace's.
            let at = text[..close].rfind('\n').unwrap_or(close).max(open + 1);
            format!("{}\n{indent}{key}: {printed}{}", &text[..at], &text[at..])
        }
    }
}

/// `text` without the member `at` of an object (closing at `close`): the
/// member and the comma that joined it; the lines it stood on, when it
/// stood on lines of its own (what [`insert_member`] writes).
fn remove_member(text: &str, plain: &[u8], found: &[Member], at: usize, close: usize) -> String {
    let member = &found[at];
    let (start, end) = (member.whole.start, member.whole.end);
    let comma = comma_after(plain, end, close);
    let after = comma.map_or(end, |c| c + 1);
    let line_start = text[..start].rfind('\n');
    let alone_before = line_start.is_some_and(|n| text[n + 1..start].trim().is_empty());
    let next_line = line_end(text, after, close);
    let alone_after = next_line.is_some_and(|n| text[after..n].trim().is_empty());
    if alone_before && alone_after && at > 0 {
        // Its own lines, from the newline before it to the end of its
        // last line; the previous member's comma goes when this one was
        // last without a comma of its own.
        let (from, to) = (line_start.unwrap_or(start), next_line.unwrap_or(after));
        let previous = &found[at - 1];
        return match (at + 1 == found.len(), comma) {
            (true, None) => match comma_after(plain, previous.whole.end, close) {
                Some(c) => format!("{}{}{}", &text[..c], &text[c + 1..from], &text[to..]),
                None => format!("{}{}", &text[..from], &text[to..]),
            },
            _ => format!("{}{}", &text[..from], &text[to..]),
        };
    }
    match (at + 1 < found.len(), at > 0) {
        // Up to the next member.
        (true, _) => format!("{}{}", &text[..start], &text[found[at + 1].whole.start..]),
        // The last of several: from the previous member's end, keeping a
        // trailing comma.
        (false, true) => {
            let from = found[at - 1].whole.end;
            let tail = if comma.is_some() { "," } else { "" };
            format!("{}{tail}{}", &text[..from], &text[after..])
        }
        // The only member: the object is left empty.
        (false, false) => {
            let open = text[..start].rfind('{').unwrap_or(start);
            format!("{}{}", &text[..open + 1], &text[close..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(text: &str) -> Json {
        Json::parse(&blank(text).unwrap()).unwrap()
    }

    fn entry() -> Json {
        Json::parse(r#"{"type":"local","enabled":true}"#).unwrap()
    }

    const JSONC: &str = r#"{
    // the model, chosen by hand
    "model": "anthropic/claude-sonnet-4-5", /* keep */
    "mcp": {
        "other": { "type": "remote", "url": "https://x", }, // theirs
    },
    "autoupdate": false,
}
"#;

    #[test]
    fn blanking_keeps_every_offset_and_strings_that_look_like_comments() {
        let text = r#"{"a": "http://x/*y*/", /* c */ "b": [1, 2,], // d
}"#;
        let blanked = blank(text).unwrap();
        assert_eq!(blanked.len(), text.len());
        let value: serde_json::Value = serde_json::from_str(&blanked).unwrap();
        assert_eq!(value["a"], "http://x/*y*/");
        assert_eq!(value["b"], serde_json::json!([1, 2]));
        assert!(blank("{ /* open").is_err());
    }

    #[test]
    fn an_entry_goes_in_and_comes_out_with_every_other_byte_kept() {
        let mut doc = tree(JSONC);
        doc.get_mut("mcp").unwrap().set("loopx", entry());
        let installed = carry(JSONC, &doc, &["mcp", "loopx"]).unwrap();
        // The comments, the trailing commas and the indentation stay.
        for kept in [
            "    // the model, chosen by hand\n",
            "/* keep */",
            "// theirs",
            "\"autoupdate\": false,\n}",
        ] {
            assert!(installed.contains(kept), "{kept:?} in {installed}");
        }
        assert!(
            installed.contains("        \"loopx\": {\n            \"type\": \"local\",\n"),
            "{installed}"
        );
        assert_eq!(tree(&installed), doc);
        // Replaced in place, then removed: the bytes are back.
        let replaced = carry(&installed, &doc, &["mcp", "loopx"]).unwrap();
        assert_eq!(replaced, installed);
        let mut removed = tree(&installed);
        removed.get_mut("mcp").unwrap().remove("loopx");
        let back = carry(&installed, &removed, &["mcp", "loopx"]).unwrap();
        assert_eq!(back, JSONC);
    }

    #[test]
    fn a_missing_parent_is_made_and_removed_whole() {
        let text = "{\n  \"theme\": \"dark\" // mine\n}\n";
        let mut doc = tree(text);
        doc.object_at("mcp").unwrap().set("loopx", entry());
        let installed = carry(text, &doc, &["mcp", "loopx"]).unwrap();
        // The comment stays on its line; the new member goes after it.
        assert!(
            installed.starts_with(
                "{\n  \"theme\": \"dark\", // mine\n  \"mcp\": {\n    \"loopx\": {\n      \"type\""
            ),
            "{installed}"
        );
        assert_eq!(tree(&installed), doc);
        let mut removed = tree(&installed);
        removed.remove("mcp");
        let back = carry(&installed, &removed, &["mcp", "loopx"]).unwrap();
        assert_eq!(back, "{\n  \"theme\": \"dark\" // mine\n}\n");
    }

    #[test]
    fn one_line_and_empty_objects_keep_their_shape() {
        let text = r#"{"model":"m","autoupdate":false}"#;
        let mut doc = tree(text);
        doc.object_at("mcp").unwrap().set("loopx", entry());
        let installed = carry(text, &doc, &["mcp", "loopx"]).unwrap();
        assert_eq!(
            installed,
            r#"{"model":"m","autoupdate":false, "mcp": {"loopx":{"type":"local","enabled":true}}}"#
        );
        for text in ["{}\n", "{\n}\n"] {
            let mut doc = tree(text);
            doc.object_at("mcp").unwrap().set("loopx", entry());
            let installed = carry(text, &doc, &["mcp", "loopx"]).unwrap();
            assert_eq!(tree(&installed), doc, "{text:?} became {installed}");
        }
    }
}
