//! The byte layouts of the fuzz targets' inputs, shared by the targets in `fuzz/` (which include
//! this file by path) and by `conform fuzz-seeds` / `conform fuzz-case` (which encode corpus
//! cases into it and decode artifacts from it).
//!
//! Every layout is total: any byte string decodes to some input (missing bytes read as zero), so
//! libFuzzer's mutations always reach a target, and every corpus case encodes to bytes that
//! decode back to it exactly.
//!
//! - `parse`: `[format][n][n × cut u16 LE][transcript…]`; `n == 255` means a cut after every byte.
//! - `json`: `[n][n × cut u16 LE][text…]`.
//! - `sse`: `[n][n × cut u16 LE][stream…]`.
//! - `roundtrip`: `[format][n][n × cut u16 LE][string text][ncalls][calls…]`, where a call is
//!   `[string name][flags: 1 = id, 2 = server][string id]?[string server]?[object arguments]`.
//!   A string is `[varint length][bytes]` in which 0x01..=0x1f stand for the [`SNIPPETS`] (the
//!   awkward pieces every format must escape) and 0x00 quotes the next byte.

use serde_json::{Map, Number, Value};

/// The `n` that asks for a cut after every byte.
pub const EVERY_BYTE: u8 = 255;

/// Deepest JSON nesting a roundtrip input can decode to.
const MAX_DEPTH: usize = 8;

/// Most calls a roundtrip input can decode to.
const MAX_CALLS: u8 = 8;

/// What the string bytes 0x01..=0x1f expand to: markup, entities, CDATA ends, quotes, special
/// token brackets and multi-byte characters, so short inputs reach the escaping code.
pub const SNIPPETS: [&str; 31] = [
    "<",
    ">",
    "&",
    "]]>",
    "\"",
    "'",
    "<|",
    "|>",
    "</",
    "\\",
    "\n",
    "é",
    "😀",
    "&amp;",
    "&lt;",
    "<![CDATA[",
    "]]",
    "data: ",
    "\r\n",
    "{",
    "}",
    ":",
    ",",
    "\t",
    " ",
    "\u{a0}",
    "\u{2028}",
    "<tool>",
    "</tool>",
    "functions.",
    "\u{0}",
];

/// A cursor over fuzz bytes that reads zeros once they run out.
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading `data` from its first byte.
    pub fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data, pos: 0 }
    }

    /// The next byte, or 0 past the end.
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos = (self.pos + 1).min(self.data.len());
        b
    }

    /// The next little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// The next little-endian u64.
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.u8();
        }
        u64::from_le_bytes(b)
    }

    /// A LEB128 length, capped so a corrupt one cannot ask for absurd allocations.
    pub fn varint(&mut self) -> usize {
        let mut v = 0usize;
        for shift in (0..21).step_by(7) {
            let b = self.u8();
            v |= ((b & 0x7f) as usize) << shift;
            if b & 0x80 == 0 {
                break;
            }
        }
        v
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        let r = &self.data[self.pos..];
        self.pos = self.data.len();
        r
    }

    /// True once every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// A string in the snippet encoding (see the module doc).
    pub fn string(&mut self) -> String {
        let n = self.varint();
        let mut raw = Vec::new();
        let mut i = 0;
        while i < n && !self.is_empty() {
            let b = self.u8();
            i += 1;
            match b {
                0 => {
                    raw.push(self.u8());
                    i += 1;
                }
                1..=0x1f => raw.extend_from_slice(SNIPPETS[b as usize - 1].as_bytes()),
                _ => raw.push(b),
            }
        }
        String::from_utf8_lossy(&raw).into_owned()
    }
}

/// Appends `v` as LEB128.
fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Appends `s` in the snippet encoding; control bytes are quoted so they decode to themselves.
pub fn put_string(out: &mut Vec<u8>, s: &str) {
    let mut body = Vec::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b < 0x20 {
            body.push(0);
        }
        body.push(b);
    }
    put_varint(out, body.len());
    out.extend_from_slice(&body);
}

/// Reads `[n][n × u16]` and turns it into sorted, distinct cut offsets strictly inside
/// `0..len` (each raw offset is taken modulo `len`, so any value is usable).
pub fn read_cuts(r: &mut Reader<'_>) -> RawCuts {
    let n = r.u8();
    if n == EVERY_BYTE {
        return RawCuts::EveryByte;
    }
    RawCuts::At((0..n).map(|_| r.u16()).collect())
}

/// Cuts as read, before they meet the length of what they cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawCuts {
    /// A cut after every byte.
    EveryByte,
    /// Raw offsets, reduced modulo the length later.
    At(Vec<u16>),
}

impl RawCuts {
    /// The sorted, distinct offsets in `1..len` these cuts make on `len` bytes.
    pub fn resolve(&self, len: usize) -> Vec<usize> {
        if len < 2 {
            return Vec::new();
        }
        let mut v: Vec<usize> = match self {
            RawCuts::EveryByte => (1..len).collect(),
            RawCuts::At(raw) => raw.iter().map(|&c| c as usize % len).collect(),
        };
        v.retain(|&c| c > 0);
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Appends `[n][cuts]` for exact offsets (each below 65536).
pub fn put_cuts(out: &mut Vec<u8>, cuts: &[usize]) {
    let cuts: Vec<u16> = cuts
        .iter()
        .filter_map(|&c| u16::try_from(c).ok())
        .take(EVERY_BYTE as usize - 1)
        .collect();
    out.push(cuts.len() as u8);
    for c in cuts {
        out.extend_from_slice(&c.to_le_bytes());
    }
}

/// Splits `data` at sorted offsets.
pub fn pieces<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut prev = 0;
    for &c in cuts {
        out.push(&data[prev..c]);
        prev = c;
    }
    out.push(&data[prev..]);
    out
}

/// A decoded `parse` input.
#[derive(Debug, Clone)]
pub struct ParseInput {
    /// The format selector (taken modulo the registry length).
    pub format: u8,
    /// The cuts.
    pub cuts: RawCuts,
    /// The transcript bytes.
    pub transcript: Vec<u8>,
}

/// Decodes a `parse` input.
pub fn decode_parse(data: &[u8]) -> ParseInput {
    let mut r = Reader::new(data);
    let format = r.u8();
    let cuts = read_cuts(&mut r);
    ParseInput {
        format,
        cuts,
        transcript: r.rest().to_vec(),
    }
}

/// Encodes a `parse` input.
pub fn encode_parse(format: u8, cuts: &[usize], transcript: &[u8]) -> Vec<u8> {
    let mut out = vec![format];
    put_cuts(&mut out, cuts);
    out.extend_from_slice(transcript);
    out
}

/// Decodes a `json` or `sse` input: cuts, then the text.
pub fn decode_cut_text(data: &[u8]) -> (RawCuts, Vec<u8>) {
    let mut r = Reader::new(data);
    let cuts = read_cuts(&mut r);
    (cuts, r.rest().to_vec())
}

/// Encodes a `json` or `sse` input.
pub fn encode_cut_text(cuts: &[usize], text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_cuts(&mut out, cuts);
    out.extend_from_slice(text);
    out
}

/// A decoded `roundtrip` input.
#[derive(Debug, Clone)]
pub struct RoundtripInput {
    /// The format selector (taken modulo the registry length).
    pub format: u8,
    /// The cuts made in the rendered transcript.
    pub cuts: RawCuts,
    /// The text before the calls.
    pub text: String,
    /// The calls.
    pub calls: Vec<conform::event::ToolCall>,
}

/// Decodes a `roundtrip` input.
pub fn decode_roundtrip(data: &[u8]) -> RoundtripInput {
    let mut r = Reader::new(data);
    let format = r.u8();
    let cuts = read_cuts(&mut r);
    let text = r.string();
    let n = r.u8() % (MAX_CALLS + 1);
    let mut calls = Vec::new();
    for _ in 0..n {
        let name = r.string();
        let flags = r.u8();
        let id = (flags & 1 != 0).then(|| r.string());
        let server = (flags & 2 != 0).then(|| r.string());
        let arguments = Value::Object(read_object(&mut r, 0));
        calls.push(conform::event::ToolCall {
            name,
            id,
            server,
            arguments,
        });
    }
    RoundtripInput {
        format,
        cuts,
        text,
        calls,
    }
}

/// Encodes a `roundtrip` input; `None` when a value cannot be written in the layout (too deep,
/// too many calls or members, a number neither i64, u64 nor f64).
pub fn encode_roundtrip(
    format: u8,
    cuts: &[usize],
    text: &str,
    calls: &[conform::event::ToolCall],
) -> Option<Vec<u8>> {
    let mut out = vec![format];
    put_cuts(&mut out, cuts);
    put_string(&mut out, text);
    if calls.len() > MAX_CALLS as usize {
        return None;
    }
    out.push(calls.len() as u8);
    for c in calls {
        put_string(&mut out, &c.name);
        out.push(c.id.is_some() as u8 | (c.server.is_some() as u8) << 1);
        if let Some(id) = &c.id {
            put_string(&mut out, id);
        }
        if let Some(s) = &c.server {
            put_string(&mut out, s);
        }
        put_object(&mut out, c.arguments.as_object()?, 0)?;
    }
    Some(out)
}

/// Value tags of the roundtrip layout.
const TAGS: u8 = 8;

fn read_object(r: &mut Reader<'_>, depth: usize) -> Map<String, Value> {
    let n = r.u8() % 16;
    let mut m = Map::new();
    for _ in 0..n {
        let k = r.string();
        let v = read_value(r, depth + 1);
        m.insert(k, v);
    }
    m
}

fn read_value(r: &mut Reader<'_>, depth: usize) -> Value {
    let tag = r.u8() % TAGS;
    match tag {
        0 => Value::Null,
        1 => Value::Bool(r.u8() & 1 == 1),
        2 => Value::Number((r.u64() as i64).into()),
        3 => Value::Number(r.u64().into()),
        4 => Number::from_f64(f64::from_bits(r.u64()))
            .map(Value::Number)
            .unwrap_or(Value::Null),
        5 => Value::String(r.string()),
        6 if depth < MAX_DEPTH => {
            let n = r.u8() % 16;
            Value::Array((0..n).map(|_| read_value(r, depth + 1)).collect())
        }
        7 if depth < MAX_DEPTH => Value::Object(read_object(r, depth)),
        _ => Value::Null,
    }
}

fn put_object(out: &mut Vec<u8>, m: &Map<String, Value>, depth: usize) -> Option<()> {
    if m.len() >= 16 {
        return None;
    }
    out.push(m.len() as u8);
    for (k, v) in m {
        put_string(out, k);
        put_value(out, v, depth + 1)?;
    }
    Some(())
}

fn put_value(out: &mut Vec<u8>, v: &Value, depth: usize) -> Option<()> {
    match v {
        Value::Null => out.push(0),
        Value::Bool(b) => out.extend_from_slice(&[1, *b as u8]),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push(2);
                out.extend_from_slice(&(i as u64).to_le_bytes());
            } else if let Some(u) = n.as_u64() {
                out.push(3);
                out.extend_from_slice(&u.to_le_bytes());
            } else {
                out.push(4);
                out.extend_from_slice(&n.as_f64()?.to_bits().to_le_bytes());
            }
        }
        Value::String(s) => {
            out.push(5);
            put_string(out, s);
        }
        Value::Array(a) => {
            if depth >= MAX_DEPTH || a.len() >= 16 {
                return None;
            }
            out.extend_from_slice(&[6, a.len() as u8]);
            for x in a {
                put_value(out, x, depth + 1)?;
            }
        }
        Value::Object(m) => {
            if depth >= MAX_DEPTH {
                return None;
            }
            out.push(7);
            put_object(out, m, depth)?;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform::event::ToolCall;
    use serde_json::json;

    #[test]
    fn parse_inputs_decode_to_what_was_encoded() {
        let enc = encode_parse(3, &[5, 1], b"hello world");
        let d = decode_parse(&enc);
        assert_eq!(d.format, 3);
        assert_eq!(d.transcript, b"hello world");
        assert_eq!(d.cuts.resolve(11), vec![1, 5]);
        assert_eq!(decode_parse(&[0, EVERY_BYTE]).cuts, RawCuts::EveryByte);
        assert!(decode_parse(&[]).transcript.is_empty());
    }

    #[test]
    fn roundtrip_inputs_decode_to_what_was_encoded() {
        let calls = vec![ToolCall {
            name: "write\u{1}file".into(),
            id: Some("call_0".into()),
            server: None,
            arguments: json!({"path": "a<b>&]]>\"é", "n": -3, "u": u64::MAX, "f": 1.5,
                              "deep": [{"x": [null, true]}], "nl": "a\nb\u{0}"}),
        }];
        let enc = encode_roundtrip(1, &[2], "text <|x|>", &calls).unwrap();
        let d = decode_roundtrip(&enc);
        assert_eq!((d.format, d.text.as_str()), (1, "text <|x|>"));
        assert_eq!(d.calls, calls);
        assert_eq!(d.cuts, RawCuts::At(vec![2]));
    }

    #[test]
    fn snippets_expand_in_strings() {
        let d = Reader::new(&[3, 1, b'a', 4]).string();
        assert_eq!(d, "<a]]>");
    }
}
