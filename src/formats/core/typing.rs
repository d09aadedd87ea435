//! Schema typing: turns a parameter's raw text into a JSON value by the tool's JSON Schema
//! (`specs/typing.md`). Shared by every format whose wire writes arguments as untyped text
//! (the tagged-parameter family); nothing here knows a format.
//!
//! A schema resolves to a set of [`Kind`]s; the text is tried against them in one fixed
//! priority (null, integer, number, boolean, object, array, string) and the first that reads
//! it wins. Text that none reads stays the string it was, with a `type_mismatch` note: a value
//! is never silently turned into `false` or `null`.

use crate::event::WarningKind;
use crate::formats::config::config;
use crate::tools::Tools;
use serde_json::{Map, Number, Value};
use std::collections::HashMap;

/// One JSON type a parameter may take, in the order values are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// JSON `null`.
    Null,
    /// A JSON number with integer syntax.
    Integer,
    /// Any JSON number.
    Number,
    /// `true` / `false`.
    Boolean,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
    /// A string: the raw text.
    String,
}

/// Every kind in the fixed priority order.
pub const PRIORITY: [Kind; 7] = [
    Kind::Null,
    Kind::Integer,
    Kind::Number,
    Kind::Boolean,
    Kind::Object,
    Kind::Array,
    Kind::String,
];

impl Kind {
    fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// The JSON Schema name of the kind.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Integer => "integer",
            Kind::Number => "number",
            Kind::Boolean => "boolean",
            Kind::Object => "object",
            Kind::Array => "array",
            Kind::String => "string",
        }
    }

    fn from_name(s: &str) -> Option<Kind> {
        PRIORITY.iter().copied().find(|k| k.name() == s)
    }

    fn of_value(v: &Value) -> Kind {
        match v {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Boolean,
            Value::Number(n) if n.is_f64() => Kind::Number,
            Value::Number(_) => Kind::Integer,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }
}

/// The kinds a parameter's schema allows (a small set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamType(u8);

impl ParamType {
    /// Only strings: the value is the raw text and can be streamed as it arrives.
    pub const STRING: ParamType = ParamType(1 << (Kind::String as u8));
    /// Any JSON value (a schema that states no type).
    pub const ANY: ParamType = ParamType(0x7f);
    const NONE: ParamType = ParamType(0);

    /// A set of the given kinds.
    pub fn of(kinds: &[Kind]) -> ParamType {
        ParamType(kinds.iter().fold(0, |a, k| a | k.bit()))
    }

    /// True when the set holds `k`.
    pub fn has(self, k: Kind) -> bool {
        self.0 & k.bit() != 0
    }

    /// True when the value is the raw text whatever it says (the streaming case).
    pub fn is_string_only(self) -> bool {
        self == ParamType::STRING
    }

    fn union(self, o: ParamType) -> ParamType {
        ParamType(self.0 | o.0)
    }

    fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The kinds a JSON Schema type name allows (`number` includes the integers), for a wire
    /// that writes each value's type beside it (Kimi K3's `type="…"`); `None` for a name that
    /// is not one of JSON Schema's seven.
    pub fn named(name: &str) -> Option<ParamType> {
        type_name(name).ok()
    }

    /// True when the set allows `v`'s kind (an integer is a number too).
    pub fn admits(self, v: &Value) -> bool {
        let k = Kind::of_value(v);
        self.has(k) || (k == Kind::Integer && self.has(Kind::Number))
    }

    /// The kinds' names joined by `|`, in priority order.
    pub fn describe(self) -> String {
        let names: Vec<&str> = PRIORITY
            .iter()
            .filter(|k| self.has(**k))
            .map(|k| k.name())
            .collect();
        names.join("|")
    }
}

/// A schema the typing cannot read, named by tool and parameter (its value stays a string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// The tool.
    pub tool: String,
    /// The parameter (`*` when the tool's `properties` themselves are unreadable).
    pub param: String,
    /// What could not be read.
    pub why: String,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tool {:?} parameter {:?}: {}; its values are kept as strings",
            self.tool, self.param, self.why
        )
    }
}

/// How one parameter is typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The tool is not declared: every value is its raw string.
    UnknownTool,
    /// The tool does not declare the parameter: the value is its raw string.
    UnknownParam,
    /// The parameter's schema could not be read: the value is its raw string.
    Unreadable(SchemaError),
    /// Typed by the schema.
    Typed(ParamType),
}

impl Lookup {
    /// The kinds the value is tried against (strings only unless typed).
    pub fn param_type(&self) -> ParamType {
        match self {
            Lookup::Typed(t) => *t,
            _ => ParamType::STRING,
        }
    }
}

/// Deepest `$ref`/`anyOf` nesting followed while resolving a schema.
const MAX_SCHEMA_DEPTH: usize = 32;

/// Deepest nesting of an object/array value's text.
pub const MAX_VALUE_DEPTH: usize = 128;

/// The resolved parameter types of every declared tool, computed once per parser.
#[derive(Debug, Clone, Default)]
pub struct SchemaTypes {
    tools: HashMap<String, ToolTypes>,
}

#[derive(Debug, Clone, Default)]
struct ToolTypes {
    params: HashMap<String, Result<ParamType, SchemaError>>,
    /// The tool's `properties` could not be read at all.
    broken: Option<SchemaError>,
}

impl SchemaTypes {
    /// Resolves every parameter of every tool in `tools`.
    pub fn new(tools: &Tools) -> SchemaTypes {
        let mut out = SchemaTypes::default();
        for def in &tools.defs {
            let mut tt = ToolTypes::default();
            let root = &def.parameters;
            match root.get("properties") {
                None => {}
                Some(Value::Object(props)) => {
                    for (name, schema) in props {
                        let r = resolve(schema, root, 0).map_err(|why| SchemaError {
                            tool: def.name.clone(),
                            param: name.clone(),
                            why,
                        });
                        tt.params.insert(name.clone(), r);
                    }
                }
                Some(_) => {
                    tt.broken = Some(SchemaError {
                        tool: def.name.clone(),
                        param: "*".into(),
                        why: "\"properties\" is not an object".into(),
                    })
                }
            }
            out.tools.entry(def.name.clone()).or_insert(tt);
        }
        out
    }

    /// True when `tool` is declared.
    pub fn knows_tool(&self, tool: &str) -> bool {
        self.tools.contains_key(tool)
    }

    /// How `param` of `tool` is typed.
    pub fn lookup(&self, tool: &str, param: &str) -> Lookup {
        let Some(t) = self.tools.get(tool) else {
            return Lookup::UnknownTool;
        };
        if let Some(e) = &t.broken {
            return Lookup::Unreadable(e.clone());
        }
        match t.params.get(param) {
            None => Lookup::UnknownParam,
            Some(Ok(pt)) => Lookup::Typed(*pt),
            Some(Err(e)) => Lookup::Unreadable(e.clone()),
        }
    }
}

/// Resolves one schema to the kinds it allows; `root` is the tool's parameters schema, where
/// local `$ref`s point.
pub fn resolve(schema: &Value, root: &Value, depth: usize) -> Result<ParamType, String> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "schema nesting or $ref chain deeper than {MAX_SCHEMA_DEPTH}"
        ));
    }
    let obj = match schema {
        Value::Bool(true) => return Ok(ParamType::ANY),
        Value::Bool(false) => return Err("the schema `false` accepts no value".into()),
        Value::Object(o) => o,
        _ => return Err("the schema is not an object".into()),
    };
    if let Some(r) = obj.get("$ref") {
        let target = r
            .as_str()
            .and_then(|p| p.strip_prefix('#'))
            .ok_or_else(|| format!("$ref {r} does not point inside the tool's schema"))?;
        let found = root
            .pointer(target)
            .ok_or_else(|| format!("$ref {r} points at nothing"))?;
        return resolve(found, root, depth + 1);
    }
    let mut kinds = ParamType::NONE;
    let mut stated = false;
    match obj.get("type") {
        None => {}
        Some(Value::String(t)) => {
            stated = true;
            kinds = kinds.union(type_name(t)?);
        }
        Some(Value::Array(ts)) => {
            stated = true;
            for t in ts {
                let t = t
                    .as_str()
                    .ok_or_else(|| format!("type list entry {t} is not a string"))?;
                kinds = kinds.union(type_name(t)?);
            }
        }
        Some(t) => return Err(format!("type {t} is neither a name nor a list of names")),
    }
    if !stated {
        if let Some(e) = obj.get("enum") {
            let vals = e.as_array().ok_or("enum is not an array")?;
            stated = true;
            for v in vals {
                kinds = kinds.union(value_type(v));
            }
        } else if let Some(c) = obj.get("const") {
            stated = true;
            kinds = value_type(c);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(bs) = obj.get(key) {
            let bs = bs
                .as_array()
                .ok_or_else(|| format!("{key} is not an array"))?;
            stated = true;
            for b in bs {
                kinds = kinds.union(resolve(b, root, depth + 1)?);
            }
        }
    }
    if let Some(bs) = obj.get("allOf") {
        let bs = bs.as_array().ok_or("allOf is not an array")?;
        for b in bs {
            let t = resolve(b, root, depth + 1)?;
            if t != ParamType::ANY {
                kinds = if stated { ParamType(kinds.0 & t.0) } else { t };
                stated = true;
            }
        }
    }
    if obj.get("nullable") == Some(&Value::Bool(true)) {
        kinds = kinds.union(ParamType::of(&[Kind::Null]));
    }
    if !stated {
        // No type stated: the keywords that only make sense for one type say it.
        if obj.contains_key("properties") || obj.contains_key("additionalProperties") {
            kinds = kinds.union(ParamType::of(&[Kind::Object]));
        } else if obj.contains_key("items") || obj.contains_key("prefixItems") {
            kinds = kinds.union(ParamType::of(&[Kind::Array]));
        } else {
            return Ok(ParamType::ANY.union(kinds));
        }
    }
    if kinds.is_empty() {
        return Err("the schema allows no type".into());
    }
    Ok(kinds)
}

/// `number` includes the integers; a name outside JSON Schema's seven is unreadable.
fn type_name(t: &str) -> Result<ParamType, String> {
    match Kind::from_name(t) {
        Some(Kind::Number) => Ok(ParamType::of(&[Kind::Integer, Kind::Number])),
        Some(k) => Ok(ParamType::of(&[k])),
        None => Err(format!("unknown type name {t:?}")),
    }
}

fn value_type(v: &Value) -> ParamType {
    match Kind::of_value(v) {
        Kind::Number => ParamType::of(&[Kind::Integer, Kind::Number]),
        k => ParamType::of(&[k]),
    }
}

config! {
    /// Leniencies of the typing, each recovered reading noted.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct TypingOptions {
        options {
            /// Object/array text in Python literal syntax (`{'a': 1}`, `True`, `None`, tuples) is read
            /// when it is not JSON, with note `python_literal`: templates that render `| string`
            /// write Python repr.
            python_literals,
            /// `None`, `none` and `nil` (any case) read as null where null is allowed, with note
            /// `null_alias`: Python repr writes `None`, MiniMax outputs write `nil`.
            null_aliases,
        }
    }
}

impl Default for TypingOptions {
    fn default() -> Self {
        TypingOptions {
            python_literals: true,
            null_aliases: true,
        }
    }
}

/// The note a typing attaches to its value: a warning kind and its message.
pub type Note = (WarningKind, String);

/// Types `raw` (the value text after the format's own whitespace rule) as `t` allows.
///
/// Strings are `raw` untouched; every other kind is read from `raw` trimmed of ASCII
/// whitespace. The first kind in [`PRIORITY`] that reads the text wins; none → `raw` as a
/// string with note `type_mismatch`.
pub fn type_value(raw: &str, t: ParamType, opts: TypingOptions) -> (Value, Option<Note>) {
    if t.is_string_only() {
        return (Value::String(raw.to_string()), None);
    }
    let s = raw.trim_matches(|c: char| c.is_ascii_whitespace());
    // A template writes a null argument as `null` whatever the parameter's type, so the text
    // `null` is null wherever it cannot be a string, noted where the schema does not allow it.
    if !t.has(Kind::Null)
        && !t.has(Kind::String)
        && let Some((v, alias)) = read_null(s, opts)
    {
        let msg = format!(
            "{} for a parameter of type {}, which does not allow null",
            crate::event::excerpt(s),
            t.describe()
        );
        let note = alias.map_or((WarningKind::NullNotAllowed, msg), |(_, m)| {
            (WarningKind::NullAlias, m)
        });
        return (v, Some(note));
    }
    for k in PRIORITY {
        if !t.has(k) {
            continue;
        }
        let got = match k {
            Kind::Null => read_null(s, opts),
            Kind::Integer => read_integer(s).map(|v| (v, None)),
            Kind::Number => read_number(s).map(|v| (v, None)),
            Kind::Boolean => read_bool(s).map(|v| (v, None)),
            Kind::Object | Kind::Array => read_structured(s, k, opts),
            Kind::String => return (Value::String(raw.to_string()), None),
        };
        if let Some(got) = got {
            return got;
        }
    }
    let msg = format!(
        "{} is not a valid {}; kept as a string",
        crate::event::excerpt(raw),
        t.describe()
    );
    (
        Value::String(raw.to_string()),
        Some((WarningKind::TypeMismatch, msg)),
    )
}

fn read_null(s: &str, opts: TypingOptions) -> Option<(Value, Option<Note>)> {
    if s.eq_ignore_ascii_case("null") {
        return Some((Value::Null, None));
    }
    if opts.null_aliases && ["none", "nil"].iter().any(|a| s.eq_ignore_ascii_case(a)) {
        let msg = format!("{s:?} read as null");
        return Some((Value::Null, Some((WarningKind::NullAlias, msg))));
    }
    None
}

fn read_bool(s: &str) -> Option<Value> {
    if s.eq_ignore_ascii_case("true") {
        Some(Value::Bool(true))
    } else if s.eq_ignore_ascii_case("false") {
        Some(Value::Bool(false))
    } else {
        None
    }
}

/// `[+-]?[0-9]+` (leading zeros allowed) that fits i64 or u64; beyond 64 bits it is not read
/// (a float would lose digits).
fn read_integer(s: &str) -> Option<Value> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let unsigned = s.strip_prefix('+').unwrap_or(s);
    if let Ok(i) = unsigned.parse::<i64>() {
        return Some(Value::Number(i.into()));
    }
    unsigned
        .parse::<u64>()
        .ok()
        .map(|u| Value::Number(u.into()))
}

/// Integer syntax as [`read_integer`]; decimal or exponent syntax as a finite f64, so `5.0`
/// stays the float 5.0 and `5` the integer 5.
fn read_number(s: &str) -> Option<Value> {
    if let Some(v) = read_integer(s) {
        return Some(v);
    }
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    if !is_float_syntax(body.as_bytes()) {
        return None;
    }
    let f: f64 = s.strip_prefix('+').unwrap_or(s).parse().ok()?;
    Number::from_f64(f).map(Value::Number)
}

/// `(d+ '.' d* | '.' d+) exp? | d+ exp`, exp = `[eE][+-]?d+` (sign already stripped); also
/// forge_xml's float syntax.
pub(crate) fn is_float_syntax(b: &[u8]) -> bool {
    let int = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut i = int;
    let mut frac = 0;
    let dot = b.get(i) == Some(&b'.');
    if dot {
        i += 1;
        frac = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        i += frac;
    }
    if int + frac == 0 {
        return false;
    }
    let mut exp = false;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let e = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if e == 0 {
            return false;
        }
        i += e;
        exp = true;
    }
    i == b.len() && (dot || exp)
}

/// Reads `s` (trimmed) as one JSON value, integers beyond 64 bits refused rather than rounded.
pub fn read_json(s: &str) -> Option<Value> {
    Literal::parse(s.trim_matches(|c: char| c.is_ascii_whitespace()), false)
}

fn read_structured(s: &str, k: Kind, opts: TypingOptions) -> Option<(Value, Option<Note>)> {
    let want = |v: &Value| Kind::of_value(v) == k;
    if let Some(v) = Literal::parse(s, false).filter(want) {
        return Some((v, None));
    }
    if opts.python_literals
        && let Some(v) = Literal::parse(s, true).filter(want)
    {
        let msg = format!("{} read as a Python literal", crate::event::excerpt(s));
        return Some((v, Some((WarningKind::PythonLiteral, msg))));
    }
    None
}

/// A reader of JSON text, or (with `python`) of Python literal syntax: single-quoted strings,
/// `True`/`False`/`None`, tuples, trailing commas. Integers beyond 64 bits are refused rather
/// than rounded; depth is bounded by [`MAX_VALUE_DEPTH`].
struct Literal<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
    python: bool,
}

impl<'a> Literal<'a> {
    fn parse(s: &'a str, python: bool) -> Option<Value> {
        let mut p = Literal {
            b: s.as_bytes(),
            s,
            i: 0,
            python,
        };
        let v = p.value(0)?;
        p.ws();
        (p.i == p.b.len()).then_some(v)
    }

    fn ws(&mut self) {
        while let Some(c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn word(&mut self, w: &str) -> bool {
        if self.b[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_VALUE_DEPTH {
            return None;
        }
        self.ws();
        let c = *self.b.get(self.i)?;
        match c {
            b'{' => {
                self.i += 1;
                self.object(depth)
            }
            b'[' => {
                self.i += 1;
                self.array(b']', depth)
            }
            b'(' if self.python => {
                self.i += 1;
                self.array(b')', depth)
            }
            b'"' => self.string(b'"').map(Value::String),
            b'\'' if self.python => self.string(b'\'').map(Value::String),
            b'-' | b'0'..=b'9' => self.number(),
            _ => {
                let words: [(&str, Value); 3] = if self.python {
                    [
                        ("True", Value::Bool(true)),
                        ("False", Value::Bool(false)),
                        ("None", Value::Null),
                    ]
                } else {
                    [
                        ("true", Value::Bool(true)),
                        ("false", Value::Bool(false)),
                        ("null", Value::Null),
                    ]
                };
                words
                    .into_iter()
                    .find_map(|(w, v)| self.word(w).then_some(v))
            }
        }
    }

    fn object(&mut self, depth: usize) -> Option<Value> {
        let mut m = Map::new();
        if self.eat(b'}') {
            return Some(Value::Object(m));
        }
        loop {
            self.ws();
            let q = *self.b.get(self.i)?;
            if !(q == b'"' || (self.python && q == b'\'')) {
                return None;
            }
            let k = self.string(q)?;
            if !self.eat(b':') {
                return None;
            }
            let v = self.value(depth + 1)?;
            m.insert(k, v);
            if self.eat(b',') {
                if self.python && self.eat(b'}') {
                    return Some(Value::Object(m));
                }
                continue;
            }
            return self.eat(b'}').then_some(Value::Object(m));
        }
    }

    fn array(&mut self, close: u8, depth: usize) -> Option<Value> {
        let mut v = Vec::new();
        if self.eat(close) {
            return Some(Value::Array(v));
        }
        loop {
            v.push(self.value(depth + 1)?);
            if self.eat(b',') {
                if self.python && self.eat(close) {
                    return Some(Value::Array(v));
                }
                continue;
            }
            return self.eat(close).then_some(Value::Array(v));
        }
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        while let Some(c) = self.b.get(self.i) {
            if c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E') {
                self.i += 1;
            } else {
                break;
            }
        }
        let t = &self.s[start..self.i];
        let body = t.strip_prefix('-').unwrap_or(t);
        // JSON: no leading zeros, digits on both sides of the dot.
        let int_len = body.bytes().take_while(u8::is_ascii_digit).count();
        if int_len == 0 || (int_len > 1 && body.starts_with('0')) {
            return None;
        }
        if body.as_bytes().get(int_len) == Some(&b'.')
            && !body
                .as_bytes()
                .get(int_len + 1)
                .is_some_and(u8::is_ascii_digit)
        {
            return None;
        }
        if int_len == body.len() {
            return read_integer(t);
        }
        if !is_float_syntax(body.as_bytes()) {
            return None;
        }
        Number::from_f64(t.parse().ok()?).map(Value::Number)
    }

    fn string(&mut self, q: u8) -> Option<String> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let rest = &self.b[self.i..];
            let n = rest.iter().position(|&c| c == q || c == b'\\')?;
            let piece = &self.s[self.i..self.i + n];
            if !self.python && piece.chars().any(|c| (c as u32) < 0x20) {
                return None;
            }
            out.push_str(piece);
            self.i += n;
            if self.b[self.i] == q {
                self.i += 1;
                return Some(out);
            }
            self.i += 1;
            let e = *self.b.get(self.i)?;
            self.i += 1;
            let c = match e {
                b'"' => '"',
                b'\\' => '\\',
                b'/' if !self.python => '/',
                b'\'' if self.python => '\'',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => self.unicode()?,
                b'x' if self.python => self.hex(2).and_then(char::from_u32)?,
                b'U' if self.python => self.hex(8).and_then(char::from_u32)?,
                _ => return None,
            };
            out.push(c);
        }
    }

    fn hex(&mut self, n: usize) -> Option<u32> {
        let h = self.s.get(self.i..self.i + n)?;
        if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        self.i += n;
        u32::from_str_radix(h, 16).ok()
    }

    /// `\uXXXX`, a surrogate pair joined.
    fn unicode(&mut self) -> Option<char> {
        let hi = self.hex(4)?;
        if (0xD800..0xDC00).contains(&hi) {
            if !self.word("\\u") {
                return None;
            }
            let lo = self.hex(4)?;
            if !(0xDC00..0xE000).contains(&lo) {
                return None;
            }
            return char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
        }
        char::from_u32(hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(schema: Value) -> ParamType {
        resolve(&schema, &json!({}), 0).unwrap()
    }

    fn ty(raw: &str, schema: Value) -> (Value, Option<&'static str>) {
        let (v, n) = type_value(raw, t(schema), TypingOptions::default());
        (v, n.map(|n| n.0.as_str()))
    }

    #[test]
    fn strings_are_raw_whatever_they_say() {
        for raw in ["null", "123", " x ", "{\"a\":1}", "true", ""] {
            assert_eq!(ty(raw, json!({"type": "string"})), (json!(raw), None));
        }
        assert_eq!(
            ty("null", json!({"enum": ["a", "null"]})),
            (json!("null"), None)
        );
    }

    #[test]
    fn integers_are_lossless_and_never_rounded() {
        let s = json!({"type": "integer"});
        assert_eq!(ty(" 007 ", s.clone()), (json!(7), None));
        assert_eq!(ty("+5", s.clone()), (json!(5), None));
        assert_eq!(
            ty("18446744073709551615", s.clone()),
            (json!(18446744073709551615u64), None)
        );
        assert_eq!(
            ty("18446744073709551616", s.clone()).1,
            Some("type_mismatch")
        );
        assert_eq!(ty("5.0", s.clone()).1, Some("type_mismatch"));
        assert_eq!(
            ty("2026-01-15", s),
            (json!("2026-01-15"), Some("type_mismatch"))
        );
    }

    #[test]
    fn numbers_keep_their_identity() {
        let s = json!({"type": "number"});
        let (v, _) = ty("5.0", s.clone());
        assert!(v.as_number().unwrap().is_f64());
        assert_eq!(v, json!(5.0));
        let (v, _) = ty("5", s.clone());
        assert!(v.is_u64());
        assert_eq!(ty("1e400", s.clone()).1, Some("type_mismatch"));
        assert_eq!(ty("inf", s.clone()).1, Some("type_mismatch"));
        assert_eq!(ty("NaN", s.clone()).1, Some("type_mismatch"));
        assert_eq!(ty("-.5", s), (json!(-0.5), None));
    }

    #[test]
    fn booleans_never_become_false_silently() {
        let s = json!({"type": "boolean"});
        assert_eq!(ty("TRUE", s.clone()), (json!(true), None));
        assert_eq!(ty("False", s.clone()), (json!(false), None));
        for raw in ["yes", "1", "0", "off"] {
            assert_eq!(ty(raw, s.clone()), (json!(raw), Some("type_mismatch")));
        }
    }

    #[test]
    fn null_only_where_allowed() {
        assert_eq!(
            ty("null", json!({"type": "integer"})),
            (json!(null), Some("null_not_allowed"))
        );
        assert_eq!(
            ty("nil", json!({"type": "boolean"})),
            (json!(null), Some("null_alias"))
        );
        assert_eq!(
            ty("null", json!({"type": ["integer", "string"]})),
            (json!("null"), None)
        );
        assert_eq!(
            ty("NULL", json!({"type": ["string", "null"]})),
            (json!(null), None)
        );
        assert_eq!(
            ty("x", json!({"type": ["string", "null"]})),
            (json!("x"), None)
        );
        assert_eq!(
            ty("None", json!({"type": "integer", "nullable": true})),
            (json!(null), Some("null_alias"))
        );
    }

    #[test]
    fn objects_and_arrays_json_then_python() {
        let o = json!({"type": "object"});
        assert_eq!(
            ty(" {\"a\": [1, 2.5]} ", o.clone()),
            (json!({"a": [1, 2.5]}), None)
        );
        assert_eq!(
            ty("{'a': True, 'b': None, 'c': (1, 2),}", o.clone()),
            (
                json!({"a": true, "b": null, "c": [1, 2]}),
                Some("python_literal")
            )
        );
        assert_eq!(ty("[1]", o.clone()).1, Some("type_mismatch"));
        assert_eq!(ty("{a: 1}", o).1, Some("type_mismatch"));
        let a = json!({"type": "array"});
        assert_eq!(
            ty("[\"a\", true, null]", a.clone()),
            (json!(["a", true, null]), None)
        );
        assert_eq!(ty("['x', 'it\\'s']", a.clone()).1, Some("python_literal"));
        assert_eq!(
            ty("[123456789012345678901234567890]", a.clone()).1,
            Some("type_mismatch")
        );
        assert_eq!(ty("[01]", a.clone()).1, Some("type_mismatch"));
        assert_eq!(ty("[\"\\ud83d\\ude00\"]", a), (json!(["😀"]), None));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(ty(&deep, json!({"type": "array"})).1, Some("type_mismatch"));
    }

    #[test]
    fn unions_follow_the_fixed_priority() {
        let u = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
        assert_eq!(ty("42", u.clone()), (json!(42), None));
        assert_eq!(ty("forty", u.clone()), (json!("forty"), None));
        let l = json!({"type": ["boolean", "number"]});
        assert_eq!(ty("1", l.clone()), (json!(1), None));
        assert_eq!(ty("true", l), (json!(true), None));
        let o = json!({"oneOf": [{"type": "array"}, {"type": "null"}]});
        assert_eq!(ty("null", o.clone()), (json!(null), None));
        assert_eq!(ty("[1]", o), (json!([1]), None));
    }

    #[test]
    fn enums_consts_and_untyped_schemas() {
        assert_eq!(ty("2", json!({"enum": [1, 2, 3]})), (json!(2), None));
        assert_eq!(ty("2", json!({"const": "2"})), (json!("2"), None));
        assert_eq!(
            ty("{\"a\":1}", json!({"properties": {}})),
            (json!({"a": 1}), None)
        );
        assert_eq!(ty("[]", json!({"items": {}})), (json!([]), None));
        assert_eq!(ty("42", json!({"description": "any"})), (json!(42), None));
        assert_eq!(ty("hello", json!({})), (json!("hello"), None));
    }

    #[test]
    fn refs_resolve_inside_the_tool() {
        let root = json!({"$defs": {"n": {"type": "integer"}, "loop": {"$ref": "#/$defs/loop"}},
                          "definitions": {"b": {"type": "boolean"}}});
        let r = |s: Value| resolve(&s, &root, 0);
        assert_eq!(
            r(json!({"$ref": "#/$defs/n"})),
            Ok(ParamType::of(&[Kind::Integer]))
        );
        assert_eq!(
            r(json!({"anyOf": [{"$ref": "#/definitions/b"}, {"type": "null"}]})),
            Ok(ParamType::of(&[Kind::Boolean, Kind::Null]))
        );
        assert!(
            r(json!({"$ref": "#/$defs/loop"}))
                .unwrap_err()
                .contains("deeper")
        );
        assert!(
            r(json!({"$ref": "#/$defs/none"}))
                .unwrap_err()
                .contains("nothing")
        );
        assert!(r(json!({"$ref": "other.json#/x"})).is_err());
    }

    #[test]
    fn unreadable_schemas_are_named() {
        // Schemas tools.json loading refuses (they do not compile): the typing still names them.
        let tools = Tools {
            defs: vec![
                crate::tools::ToolDef::unchecked(
                    "f",
                    json!({"type":"object","properties":{"a":{"type":"int"},"b":{"type":"integer"}}}),
                ),
                crate::tools::ToolDef::unchecked("g", json!({"properties":[1]})),
            ],
        };
        let st = SchemaTypes::new(&tools);
        match st.lookup("f", "a") {
            Lookup::Unreadable(e) => {
                assert_eq!((e.tool.as_str(), e.param.as_str()), ("f", "a"));
                assert!(e.to_string().contains("\"int\""));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            st.lookup("f", "b"),
            Lookup::Typed(ParamType::of(&[Kind::Integer]))
        );
        assert_eq!(st.lookup("f", "c"), Lookup::UnknownParam);
        assert_eq!(st.lookup("h", "c"), Lookup::UnknownTool);
        assert!(matches!(st.lookup("g", "x"), Lookup::Unreadable(_)));
        assert!(resolve(&json!({"type": 3}), &json!({}), 0).is_err());
        assert!(resolve(&json!(false), &json!({}), 0).is_err());
        assert!(
            resolve(
                &json!({"allOf": [{"type": "string"}, {"type": "integer"}]}),
                &json!({}),
                0
            )
            .is_err()
        );
    }

    #[test]
    fn options_off_leave_strings() {
        let off = TypingOptions {
            python_literals: false,
            null_aliases: false,
        };
        let (v, n) = type_value("{'a': 1}", ParamType::of(&[Kind::Object]), off);
        assert_eq!(
            (v, n.map(|n| n.0.as_str())),
            (json!("{'a': 1}"), Some("type_mismatch"))
        );
        let (_, n) = type_value("None", ParamType::of(&[Kind::Null, Kind::Integer]), off);
        assert_eq!(n.map(|n| n.0.as_str()), Some("type_mismatch"));
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;

    const TABLE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/typing.json"));

    fn rows() -> Vec<Value> {
        serde_json::from_str(TABLE).unwrap()
    }

    #[test]
    fn every_table_row_types_as_stated() {
        for r in rows() {
            let mut root = serde_json::json!({});
            if let Some(d) = r.get("defs") {
                root["$defs"] = d.clone();
            }
            let t = resolve(&r["schema"], &root, 0).unwrap();
            let (v, note) = type_value(r["raw"].as_str().unwrap(), t, TypingOptions::default());
            assert_eq!(v, r["json"], "rule {}", r["rule"]);
            // Exact identity: 5 and 5.0 are different here.
            assert_eq!(v.to_string(), r["json"].to_string(), "rule {}", r["rule"]);
            let mismatch = r["rule"].as_str().unwrap().ends_with("_mismatch");
            assert_eq!(
                note.as_ref().map(|n| n.0.as_str()) == Some("type_mismatch"),
                mismatch,
                "rule {}: {note:?}",
                r["rule"]
            );
        }
    }

    #[test]
    fn typing_markdown_table_matches_the_json_rows() {
        let md = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/typing.md"));
        let start = md.find("<!-- typing-table:begin -->").unwrap();
        let end = md.find("<!-- typing-table:end -->").unwrap();
        let md_rules: Vec<&str> = md[start..end]
            .lines()
            .skip(3)
            .map(|l| l.rsplit(" | ").nth(1).unwrap().trim())
            .collect();
        let json_rules: Vec<String> = rows()
            .iter()
            .map(|r| r["rule"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(md_rules, json_rules);
    }
}
