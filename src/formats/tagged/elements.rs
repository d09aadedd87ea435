//! Nested element values: a parameter's value written as child elements named by their tags
//! (MiniMax-M3's `to_xml`: a mapping as `<key>value</key>` children, a list as `<item>value</item>`
//! children, a scalar as raw text), read into JSON by the tool's schema (`specs/tagged.md`,
//! "Nested values"; `specs/typing.md` §5).
//!
//! The tagged parser builds a [`Tree`] while such a value arrives (text and tags as they come,
//! nothing rescanned) and converts it once its element closes: the schema of each element is
//! found by walking the parameter's schema (`properties`, `items`, `$ref`, `anyOf`/`oneOf`/
//! `allOf`), and each leaf is typed by [`type_value`] as a flat value would be.

use crate::event::{ErrorKind, WarningKind, excerpt};
use crate::formats::typing::{Kind, Note, ParamType, TypingOptions, resolve, type_value};
use crate::tools::Tools;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The tag of a list's items, as the template writes an array.
pub const ITEM: &str = "item";

/// The member that keeps text written beside child elements (vLLM's and tool-parser's name).
const MIXED_TEXT: &str = "$text";

/// Deepest `$ref` chain or composition followed while looking for a member's schema.
const MAX_SCHEMA_HOPS: usize = 32;

/// One element: its tag, the text directly inside it, its child elements in order.
#[derive(Debug, Default)]
pub struct Elem {
    name: String,
    text: String,
    children: Vec<Elem>,
}

/// The elements of one parameter's value while it arrives: the parameter's own element at the
/// bottom, the innermost open element on top.
#[derive(Debug)]
pub struct Tree {
    stack: Vec<Elem>,
}

impl Default for Tree {
    fn default() -> Self {
        Tree {
            stack: vec![Elem::default()],
        }
    }
}

impl Tree {
    /// Elements open inside the parameter's own.
    pub fn depth(&self) -> usize {
        self.stack.len() - 1
    }

    /// The tag of the innermost open child element (`None`: the parameter's own is innermost).
    pub fn innermost(&self) -> Option<&str> {
        match self.stack.as_slice() {
            [_, .., top] => Some(&top.name),
            _ => None,
        }
    }

    /// Text directly inside the innermost open element.
    pub fn text(&mut self, s: &str) {
        if let Some(top) = self.stack.last_mut() {
            top.text.push_str(s);
        }
    }

    /// Opens a child element of the innermost one.
    pub fn open(&mut self, name: &str) {
        self.stack.push(Elem {
            name: name.to_string(),
            ..Elem::default()
        });
    }

    /// Closes the innermost child element (its tag was checked by the caller).
    pub fn close(&mut self) {
        if self.stack.len() > 1
            && let Some(done) = self.stack.pop()
            && let Some(parent) = self.stack.last_mut()
        {
            parent.children.push(done);
        }
    }

    /// The parameter's element, once every child has closed.
    pub fn into_root(mut self) -> Elem {
        while self.stack.len() > 1 {
            self.close();
        }
        self.stack.pop().unwrap_or_default()
    }
}

/// Every declared tool's `parameters` schema, by tool name: where a nested value's members
/// find their schemas.
#[derive(Debug, Clone, Default)]
pub struct Schemas {
    tools: HashMap<String, Value>,
}

impl Schemas {
    /// The schemas of `tools` (the first definition of a name wins, as in the typing).
    pub fn new(tools: &Tools) -> Schemas {
        let mut out = HashMap::new();
        for def in &tools.defs {
            out.entry(def.name.clone())
                .or_insert_with(|| def.parameters.clone());
        }
        Schemas { tools: out }
    }

    /// The schema of `param` of `tool`, with the tool's `parameters` it may refer into.
    pub fn param(&self, tool: &str, param: &str) -> Option<(&Value, &Value)> {
        let root = self.tools.get(tool)?;
        let s = root.get("properties")?.get(param)?;
        Some((s, root))
    }
}

/// How a nested value is read: the options that concern it.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// The schema typing's own leniencies.
    pub typing: TypingOptions,
    /// Text beside child elements is kept under `$text` (with a note) rather than refused.
    pub mixed_content: bool,
    /// Leaves without a schema read `true`, `false` and `null` as JSON.
    pub infer_untyped_scalars: bool,
}

/// Why a nested value cannot be read: the error kind and a message.
pub type Failure = (ErrorKind, String);

/// Reads `elem` (a parameter's element, named `key` in messages) as JSON by `schema` (with the
/// tool's `root` schema its `$ref`s point into); `None`: untyped. Notes are appended to
/// `notes` in document order.
pub fn read(
    elem: &Elem,
    key: &str,
    schema: Option<(&Value, &Value)>,
    opts: ReadOptions,
    notes: &mut Vec<Note>,
) -> Result<Value, Failure> {
    let mut r = Reader {
        opts,
        notes,
        root: schema.map(|s| s.1),
    };
    r.value(elem, key, schema.map(|s| s.0))
}

struct Reader<'a, 'n> {
    opts: ReadOptions,
    notes: &'n mut Vec<Note>,
    root: Option<&'a Value>,
}

impl<'a> Reader<'a, '_> {
    /// The kinds `schema` allows; `None` for no schema, or one the typing cannot read (noted).
    fn kinds(&mut self, schema: Option<&'a Value>, path: &str) -> Option<ParamType> {
        let (s, root) = (schema?, self.root?);
        match resolve(s, root, 0) {
            Ok(t) => Some(t),
            Err(why) => {
                let msg = format!(
                    "the schema of {path:?} cannot be read: {why}; its values are kept as strings"
                );
                self.notes.push((WarningKind::UnreadableSchema, msg));
                None
            }
        }
    }

    fn value(&mut self, e: &Elem, path: &str, schema: Option<&'a Value>) -> Result<Value, Failure> {
        let kinds = self.kinds(schema, path);
        if e.children.is_empty() {
            return Ok(self.leaf(&e.text, path, kinds));
        }
        let all_items = e.children.iter().all(|c| c.name == ITEM);
        let (array, object) =
            kinds.map_or((true, true), |k| (k.has(Kind::Array), k.has(Kind::Object)));
        let fits = array || object;
        if !fits {
            let msg = format!(
                "{path:?} holds elements but its schema says {}; kept as they are",
                kinds.map_or(String::new(), ParamType::describe)
            );
            self.notes.push((WarningKind::TypeMismatch, msg));
        }
        // Members of a value that does not fit its schema are untyped.
        let schema = if fits { schema } else { None };
        let mixed = !e.text.chars().all(char::is_whitespace);
        // The schema decides where it allows one container only; else the tags do.
        let as_array = if (array && object) || !fits {
            all_items
        } else {
            array
        };
        if as_array {
            if mixed {
                let msg = format!(
                    "text {} between the items of {path:?}",
                    excerpt(e.text.trim())
                );
                return Err((ErrorKind::MalformedMarkup, msg));
            }
            let mut out = Vec::with_capacity(e.children.len());
            for (i, c) in e.children.iter().enumerate() {
                let s = schema.and_then(|s| self.item(s, i));
                out.push(self.value(c, &format!("{path}[{i}]"), s)?);
            }
            return Ok(Value::Array(out));
        }
        let mut out = Map::new();
        let mut collected: Vec<&str> = Vec::new();
        for c in &e.children {
            let s = schema.and_then(|s| self.member(s, &c.name));
            let v = self.value(c, &format!("{path}.{}", c.name), s)?;
            match out.get_mut(&c.name) {
                None => {
                    out.insert(c.name.clone(), v);
                }
                Some(Value::Array(a)) if collected.contains(&c.name.as_str()) => a.push(v),
                Some(prev) => {
                    let first = prev.take();
                    *prev = Value::Array(vec![first, v]);
                    collected.push(&c.name);
                }
            }
        }
        if mixed {
            if !self.opts.mixed_content {
                let msg = format!(
                    "text {} beside the elements of {path:?}",
                    excerpt(e.text.trim())
                );
                return Err((ErrorKind::MalformedMarkup, msg));
            }
            let mut field = MIXED_TEXT.to_string();
            while out.contains_key(&field) {
                field.insert(0, '$');
            }
            let msg = format!(
                "text {} beside the elements of {path:?} kept as {field:?}",
                excerpt(e.text.trim())
            );
            self.notes.push((WarningKind::MixedContent, msg));
            out.insert(field, Value::String(e.text.clone()));
        }
        Ok(Value::Object(out))
    }

    /// A leaf's text: typed by its schema; an empty element is an empty array or object where
    /// the schema wants one and no string (the template writes `[]` and `{}` as nothing).
    fn leaf(&mut self, text: &str, path: &str, kinds: Option<ParamType>) -> Value {
        let Some(k) = kinds else {
            let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
            return match t {
                "true" if self.opts.infer_untyped_scalars => Value::Bool(true),
                "false" if self.opts.infer_untyped_scalars => Value::Bool(false),
                "null" if self.opts.infer_untyped_scalars => Value::Null,
                _ => Value::String(text.to_string()),
            };
        };
        if !k.has(Kind::String) && text.chars().all(char::is_whitespace) {
            if k.has(Kind::Array) {
                return Value::Array(Vec::new());
            }
            if k.has(Kind::Object) {
                return Value::Object(Map::new());
            }
        }
        let (v, note) = type_value(text, k, self.opts.typing);
        if let Some((kind, msg)) = note {
            self.notes.push((kind, format!("{path:?}: {msg}")));
        }
        v
    }

    /// `s` with its `$ref`s followed (`None`: a reference that leads nowhere, or too long a
    /// chain).
    fn deref(&self, mut s: &'a Value) -> Option<&'a Value> {
        for _ in 0..MAX_SCHEMA_HOPS {
            match s.get("$ref") {
                None => return Some(s),
                Some(r) => s = self.root?.pointer(r.as_str()?.strip_prefix('#')?)?,
            }
        }
        None
    }

    /// The schema of member `name` of an object schema: its `properties`, else a composition
    /// branch's, else `additionalProperties` when that is a schema object.
    fn member(&self, s: &'a Value, name: &str) -> Option<&'a Value> {
        self.search(s, MAX_SCHEMA_HOPS, &|s| {
            s.get("properties")
                .and_then(|p| p.get(name))
                .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
        })
    }

    /// The schema of item `i` of an array schema: `prefixItems[i]`, else `items`, in it or in a
    /// composition branch.
    fn item(&self, s: &'a Value, i: usize) -> Option<&'a Value> {
        self.search(s, MAX_SCHEMA_HOPS, &|s| {
            s.get("prefixItems")
                .and_then(|p| p.get(i))
                .or_else(|| s.get("items").filter(|a| a.is_object()))
        })
    }

    /// The first schema `find` gives in `s` or, depth first, in its `anyOf`/`oneOf`/`allOf`
    /// branches.
    fn search(
        &self,
        s: &'a Value,
        hops: usize,
        find: &dyn Fn(&'a Value) -> Option<&'a Value>,
    ) -> Option<&'a Value> {
        let s = self.deref(s)?;
        if let Some(found) = find(s) {
            return Some(found);
        }
        let hops = hops.checked_sub(1)?;
        ["anyOf", "oneOf", "allOf"]
            .iter()
            .filter_map(|k| s.get(*k)?.as_array())
            .flatten()
            .find_map(|b| self.search(b, hops, find))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tree(build: &[(&str, &str)]) -> Elem {
        // ("<", name) opens, (">", "") closes, ("", text) is text.
        let mut t = Tree::default();
        for (op, s) in build {
            match *op {
                "<" => t.open(s),
                ">" => t.close(),
                _ => t.text(s),
            }
        }
        t.into_root()
    }

    fn opts() -> ReadOptions {
        ReadOptions {
            typing: TypingOptions::default(),
            mixed_content: true,
            infer_untyped_scalars: false,
        }
    }

    fn read_with(e: &Elem, schema: Option<Value>) -> (Result<Value, Failure>, Vec<WarningKind>) {
        let root = json!({"type": "object", "properties": {"p": schema.clone().unwrap_or(json!({}))},
            "$defs": {"pt": {"type": "object", "properties": {"x": {"type": "number"}}}}});
        let mut notes = Vec::new();
        let s = schema.is_some().then(|| (&root["properties"]["p"], &root));
        let r = read(e, "p", s, opts(), &mut notes);
        (r, notes.into_iter().map(|n| n.0).collect())
    }

    #[test]
    fn members_follow_properties_items_refs_and_branches() {
        let e = tree(&[
            ("<", "a"),
            ("<", "item"),
            ("<", "x"),
            ("", "1.5"),
            (">", ""),
            (">", ""),
            (">", ""),
            ("<", "b"),
            ("", "7"),
            (">", ""),
        ]);
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "array", "items": {"$ref": "#/$defs/pt"}},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}});
        let (r, notes) = read_with(&e, Some(schema));
        assert_eq!(r.unwrap(), json!({"a": [{"x": 1.5}], "b": 7}));
        assert!(notes.is_empty());
    }

    #[test]
    fn untyped_elements_are_objects_item_lists_arrays_and_repeats_lists() {
        let e = tree(&[
            ("<", "h"),
            ("", "a"),
            (">", ""),
            ("<", "h"),
            ("", "b"),
            (">", ""),
            ("<", "l"),
            ("<", "item"),
            ("", "1"),
            (">", ""),
            ("<", "item"),
            ("", "true"),
            (">", ""),
            (">", ""),
        ]);
        let (r, _) = read_with(&e, None);
        assert_eq!(r.unwrap(), json!({"h": ["a", "b"], "l": ["1", "true"]}));
        // A collected list stays one list when the name repeats again; a list value does not
        // swallow a repeat.
        let e = tree(&[
            ("<", "h"),
            ("<", "item"),
            ("", "x"),
            (">", ""),
            (">", ""),
            ("<", "h"),
            ("", "y"),
            (">", ""),
        ]);
        assert_eq!(read_with(&e, None).0.unwrap(), json!({"h": [["x"], "y"]}));
    }

    #[test]
    fn empty_elements_are_empty_containers_only_without_a_string() {
        let e = tree(&[("", " ")]);
        assert_eq!(
            read_with(&e, Some(json!({"type": "array"}))).0.unwrap(),
            json!([])
        );
        assert_eq!(
            read_with(&e, Some(json!({"type": "object"}))).0.unwrap(),
            json!({})
        );
        assert_eq!(
            read_with(&e, Some(json!({"type": ["object", "string"]})))
                .0
                .unwrap(),
            json!(" ")
        );
        assert_eq!(read_with(&e, None).0.unwrap(), json!(" "));
    }

    #[test]
    fn mixed_text_is_a_member_of_objects_and_an_error_in_arrays() {
        let e = tree(&[
            ("", "note "),
            ("<", "a"),
            ("", "1"),
            (">", ""),
            ("<", "$text"),
            ("", "2"),
            (">", ""),
        ]);
        let (r, notes) = read_with(&e, None);
        assert_eq!(
            r.unwrap(),
            json!({"a": "1", "$text": "2", "$$text": "note "})
        );
        assert_eq!(notes, [WarningKind::MixedContent]);
        let e = tree(&[("<", "item"), ("", "1"), (">", ""), ("", "x")]);
        assert_eq!(
            read_with(&e, None).0.unwrap_err().0,
            ErrorKind::MalformedMarkup
        );
        let strict = ReadOptions {
            mixed_content: false,
            ..opts()
        };
        let e = tree(&[("", "t"), ("<", "a"), (">", "")]);
        let r = read(&e, "p", None, strict, &mut Vec::new());
        assert_eq!(r.unwrap_err().0, ErrorKind::MalformedMarkup);
    }

    #[test]
    fn elements_in_a_scalar_parameter_are_kept_untyped_with_a_note() {
        let e = tree(&[("<", "id"), ("", "5"), (">", "")]);
        let (r, notes) = read_with(&e, Some(json!({"type": "integer"})));
        assert_eq!(r.unwrap(), json!({"id": "5"}));
        assert_eq!(notes, [WarningKind::TypeMismatch]);
    }

    #[test]
    fn untyped_scalars_are_read_only_with_the_option() {
        let e = tree(&[
            ("<", "a"),
            ("", "true"),
            (">", ""),
            ("<", "b"),
            ("", " null "),
            (">", ""),
            ("<", "c"),
            ("", "True"),
            (">", ""),
        ]);
        assert_eq!(
            read_with(&e, None).0.unwrap(),
            json!({"a": "true", "b": " null ", "c": "True"})
        );
        let on = ReadOptions {
            infer_untyped_scalars: true,
            ..opts()
        };
        let r = read(&e, "p", None, on, &mut Vec::new()).unwrap();
        assert_eq!(r, json!({"a": true, "b": null, "c": "True"}));
    }

    #[test]
    fn a_reference_cycle_is_no_schema_not_a_hang() {
        let root = json!({"properties": {"p": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#/$defs/a"}}});
        let e = tree(&[("<", "k"), ("", "1"), (">", "")]);
        let mut notes = Vec::new();
        let r = read(
            &e,
            "p",
            Some((&root["properties"]["p"], &root)),
            opts(),
            &mut notes,
        );
        assert_eq!(r.unwrap(), json!({"k": "1"}));
        assert_eq!(notes[0].0, WarningKind::UnreadableSchema);
    }
}
