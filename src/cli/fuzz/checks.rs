//! The oracles of the `parse` and `roundtrip` fuzz targets, shared with `conform fuzz-case` so
//! a minimized case fails for exactly the reason the fuzzer found.

use conform::event::{Folder, ParseResult, ToolCall};
use conform::formats::Format;
use conform::tools::{ToolDef, Tools};
use serde_json::{Map, Value, json};

/// Feeds `pieces` to a fresh parser and folds the events; returns the result, the
/// delta-contract anomalies and the warning kinds.
pub fn feed<'a>(
    format: &Format,
    tools: &Tools,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> (ParseResult, Vec<String>, Vec<String>) {
    let mut parser = (format.new_parser)(tools);
    let mut folder = Folder::default();
    let mut buf = Vec::new();
    for p in pieces {
        parser.feed(p, &mut buf);
        for ev in buf.drain(..) {
            folder.push(&ev);
        }
    }
    parser.finish(&mut buf);
    for ev in buf.drain(..) {
        folder.push(&ev);
    }
    let (result, anomalies) = folder.finish_with_anomalies();
    let warnings = result.warnings.iter().map(|w| w.kind.clone()).collect();
    (result, anomalies, warnings)
}

/// Splits `data` at sorted offsets strictly inside it.
pub fn pieces<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    super::layout::pieces(data, cuts)
}

/// The `parse` oracle: the whole feed and the cut feed keep the delta contract, and agree on
/// the result and on the warning kinds.
pub fn check_parse(
    format: &Format,
    tools: &Tools,
    data: &[u8],
    cuts: &[usize],
) -> Result<(), String> {
    let (whole, wa, ww) = feed(format, tools, [data]);
    if !wa.is_empty() {
        return Err(format!("whole feed breaks the delta contract: {wa:?}"));
    }
    if cuts.is_empty() {
        return Ok(());
    }
    let (cut, ca, cw) = feed(format, tools, pieces(data, cuts));
    if !ca.is_empty() {
        return Err(format!("cut feed breaks the delta contract: {ca:?}"));
    }
    if cut != whole {
        return Err(format!(
            "split invariance: whole {} vs cut {}",
            summary(&whole),
            summary(&cut)
        ));
    }
    if cw != ww {
        return Err(format!(
            "split invariance: warnings whole {ww:?} vs cut {cw:?}"
        ));
    }
    Ok(())
}

/// Tool definitions that declare every call's name, and each argument with the JSON type of its
/// value, so formats that consult definitions (names, parameters, types) can carry the calls.
pub fn tools_for_calls(calls: &[ToolCall]) -> Tools {
    let mut props_of: Vec<(&str, Map<String, Value>)> = Vec::new();
    for c in calls {
        let props: Map<String, Value> = c
            .arguments
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), json!({ "type": json_type(v) })))
                    .collect()
            })
            .unwrap_or_default();
        match props_of.iter_mut().find(|(n, _)| *n == c.name) {
            Some((_, p)) => {
                for (k, v) in props {
                    // A parameter seen with two types accepts any.
                    let merged = match p.get(&k) {
                        Some(old) if *old != v => json!({}),
                        _ => v,
                    };
                    p.insert(k, merged);
                }
            }
            None => props_of.push((&c.name, props)),
        }
    }
    let defs = props_of
        .into_iter()
        .map(|(name, props)| {
            ToolDef::new(name, json!({"type": "object", "properties": props}))
                .expect("a schema of plain type names compiles")
        })
        .collect();
    Tools { defs }
}

/// The JSON Schema type name of a value.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The `roundtrip` oracle: render, then parse whole and cut; both give back exactly the text and
/// the calls without errors, and the same warnings. `Ok(None)` when the renderer refuses the calls.
pub fn check_roundtrip(
    format: &Format,
    text: &str,
    calls: &[ToolCall],
    cuts_of: impl Fn(usize) -> Vec<usize>,
) -> Result<Option<Vec<u8>>, String> {
    let Some(render) = format.render else {
        return Ok(None);
    };
    let tools = tools_for_calls(calls);
    let Ok(bytes) = render(text, calls, &tools) else {
        return Ok(None);
    };
    let want = ParseResult {
        text: text.to_string(),
        calls: calls.to_vec(),
        ..ParseResult::default()
    };
    let cuts = cuts_of(bytes.len());
    let mut whole_warnings = None;
    for (what, ps) in [("whole", vec![&bytes[..]]), ("cut", pieces(&bytes, &cuts))] {
        let (got, anomalies, warnings) = feed(format, &tools, ps);
        // Warnings are allowed (a renderer may rely on a documented leniency, as the spec's
        // result equality ignores them) but, like everything else, may not depend on the cuts.
        let warned_alike = whole_warnings.get_or_insert_with(|| warnings.clone()) == &warnings;
        if got != want || !anomalies.is_empty() || !warned_alike {
            return Err(format!(
                "{what} parse of the rendering {:?} gives {} (anomalies {anomalies:?}, warnings \
                 {warnings:?}), want {}",
                String::from_utf8_lossy(&bytes),
                summary(&got),
                summary(&want)
            ));
        }
    }
    Ok(Some(bytes))
}

/// A one-line description of a result for failure messages.
pub fn summary(r: &ParseResult) -> String {
    let calls: Vec<String> = r
        .calls
        .iter()
        .map(|c| {
            format!(
                "{}{}{}({})",
                c.server
                    .as_deref()
                    .map(|s| format!("{s}/"))
                    .unwrap_or_default(),
                c.name,
                c.id.as_deref().map(|s| format!("#{s}")).unwrap_or_default(),
                c.arguments
            )
        })
        .collect();
    let kinds = r.error_kinds();
    let shown = &kinds[..kinds.len().min(8)];
    let more = if kinds.len() > 8 { " …" } else { "" };
    format!(
        "{{text {}, calls [{}], {} error(s) {shown:?}{more}}}",
        conform::event::excerpt(&r.text),
        calls.join(", "),
        kinds.len()
    )
}
