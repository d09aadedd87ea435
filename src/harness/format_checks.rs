//! Invariants of a format rather than of a transcript, checked once per run for every format
//! that declares them: `cdata_split` (content with `]]>` at every position renders as split
//! CDATA and parses back byte-exact under every cut) and `type_inference` (every row of the
//! format's machine-readable typing table, under every cut; for schema-typed formats each row
//! carries the parameter's schema, and the value must follow the shared table of
//! `specs/typing.md`).

use super::chunking::Cuts;
use super::corpus::Label;
use super::invariants::Invariant;
use super::run::{CaseReport, Status, Violation};
use crate::backends::{Backend, Outcome};
use crate::event::{ToolCall, excerpt};
use crate::formats::{Format, OptionValues};
use crate::tools::Tools;
use serde::Deserialize;
use serde_json::Value;
use std::time::Instant;

/// One row of a typing table: the raw text, the value it must become, and for schema-typed
/// formats the parameter's schema (with the `$defs` its `$ref` points into).
#[derive(Debug, Deserialize)]
struct Row {
    #[serde(alias = "raw")]
    xml: String,
    json: Value,
    rule: String,
    #[serde(default)]
    schema: Option<Value>,
    #[serde(default)]
    defs: Option<Value>,
}

/// The tools a typing row is parsed with: none, or the format's probe tool whose parameter
/// `key` has the row's schema.
fn row_tools(typing: &crate::formats::Typing, row: &Row) -> Result<Tools, String> {
    match (&row.schema, typing.schema_tool) {
        (None, _) => Ok(Tools::default()),
        (Some(_), None) => Err(format!(
            "rule {} has a schema but the format types without one",
            row.rule
        )),
        (Some(schema), Some(tool)) => {
            let mut parameters = serde_json::json!({
                "type": "object",
                "properties": { typing.key: schema },
            });
            if let Some(defs) = &row.defs {
                parameters["$defs"] = defs.clone();
            }
            let def = crate::tools::ToolDef::new(tool, parameters)
                .map_err(|e| format!("rule {}: {e}", row.rule))?;
            Ok(Tools { defs: vec![def] })
        }
    }
}

/// The texts the `cdata_split` check renders: `]]>` at every position of a probe, twice, at
/// the edges, beside look-alikes and non-ASCII.
pub fn cdata_texts() -> Vec<String> {
    let mut texts: Vec<String> = [
        "",
        "]]>",
        "]]>]]>",
        "]]]]>>",
        "x]]",
        "]",
        "]]",
        "</tool>]]><tool>",
        "line1\n]]>\nline2 é😀",
        "<![CDATA[inner]]>",
        "a && b < c ]]> d",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let probe = "ab]c>d";
    for i in 0..=probe.len() {
        texts.push(format!("{}]]>{}", &probe[..i], &probe[i..]));
        for j in i..=probe.len() {
            texts.push(format!(
                "{}]]>{}]]>{}",
                &probe[..i],
                &probe[i..j],
                &probe[j..]
            ));
        }
    }
    texts
}

/// The command that re-runs a format's checks through `parser` (a `--parser` value).
fn replay_command(format: &Format, parser: &str) -> String {
    if parser == "builtin" {
        format!("conform self-check --format {}", format.id)
    } else {
        format!(
            "conform self-check --format {} --parser {}",
            format.id,
            super::run::shell_quote(parser)
        )
    }
}

/// Every cut of a short transcript: whole, byte by byte, and each single cut.
fn all_cuts(len: usize) -> Vec<Cuts> {
    let mut v = vec![Cuts::At(Vec::new())];
    if len > 1 {
        v.push(Cuts::EveryByte);
        v.extend((1..len).map(|c| Cuts::At(vec![c])));
    }
    v
}

/// Replays `transcript` under every cut and returns the first failure of `check`, if any.
fn probe(
    format: &Format,
    backend: &dyn Backend,
    tools: &Tools,
    transcript: &[u8],
    check: &dyn Fn(&crate::event::ParseResult) -> Option<String>,
    report: &mut CaseReport,
) -> Option<(Vec<usize>, String)> {
    for cuts in all_cuts(transcript.len()) {
        report.replays += 1;
        // A format-level check judges the format's defaults.
        let why = match backend.replay(
            format,
            tools,
            &OptionValues::new(),
            &crate::formats::request::Request::default(),
            std::slice::from_ref(&transcript.to_vec()),
            std::slice::from_ref(&cuts),
        ) {
            Outcome::Done(turns) => match turns.first() {
                Some(t) => {
                    if t.result.errors.is_empty() {
                        report.error_free += 1;
                    }
                    let w = check(&t.result);
                    if w.is_none() {
                        report.matched += 1;
                    }
                    w
                }
                None => Some("no turn was parsed".into()),
            },
            Outcome::Panicked(m) => Some(format!("the parser panicked: {m}")),
            Outcome::Broke(b, m) => Some(format!("the parser broke ({b:?}): {m}")),
        };
        if let Some(w) = why {
            return Some((cuts.to_vec(transcript), w));
        }
    }
    None
}

fn one_call(r: &crate::event::ParseResult) -> Result<&ToolCall, String> {
    if let Some(e) = r.errors.first() {
        return Err(format!("{}: {}", e.kind, e.message));
    }
    match r.calls.as_slice() {
        [c] => Ok(c),
        cs => Err(format!("{} calls parsed, not 1", cs.len())),
    }
}

fn new_report(format: &Format, inv: Invariant) -> CaseReport {
    CaseReport::new(
        format!("{}#{}", format.id, inv.as_str()),
        format.id,
        Label::Accept,
    )
}

fn fail(
    report: &mut CaseReport,
    (format, parser): (&Format, &str),
    inv: Invariant,
    cuts: Vec<usize>,
    msg: String,
) {
    report.status = Status::Fail;
    report.violations.push(Violation {
        invariant: inv,
        strategy: None,
        cuts: vec![cuts],
        failing_replays: 1,
        cut_class: None,
        message: msg,
        replay: replay_command(format, parser),
        path: None,
        got: Vec::new(),
    });
}

/// The ids and defining material of the checks `format` declares (for report digests).
pub fn declared(format: &Format) -> Vec<(String, String)> {
    let mut v = Vec::new();
    if format.cdata.is_some() {
        v.push((
            format!("{}#{}", format.id, Invariant::CdataSplit.as_str()),
            cdata_texts().join("\u{0}"),
        ));
    }
    if let Some(t) = &format.typing {
        v.push((
            format!("{}#{}", format.id, Invariant::TypeInference.as_str()),
            t.table.to_string(),
        ));
    }
    v
}

/// Runs the format-level checks `format` declares; one report per invariant.
pub fn check_format(format: &Format, backend: &dyn Backend) -> Vec<CaseReport> {
    let mut out = Vec::new();
    let parser = backend.name();
    if let Some(render) = format.cdata {
        let started = Instant::now();
        let mut r = new_report(format, Invariant::CdataSplit);
        for text in cdata_texts() {
            let (bytes, want) = render(&text);
            if text.contains("]]>") && !String::from_utf8_lossy(&bytes).contains("]]]]><![CDATA[>")
            {
                fail(
                    &mut r,
                    (format, &parser),
                    Invariant::CdataSplit,
                    vec![],
                    format!("content {} is not rendered as split CDATA", excerpt(&text)),
                );
                break;
            }
            let check = |res: &crate::event::ParseResult| match one_call(res) {
                Err(e) => Some(e),
                Ok(c) if *c != want || c.arguments != want.arguments => Some(format!(
                    "content {} came back as {}",
                    excerpt(&text),
                    excerpt(&c.arguments.to_string())
                )),
                Ok(_) => None,
            };
            if let Some((cuts, msg)) =
                probe(format, backend, &Tools::default(), &bytes, &check, &mut r)
            {
                fail(
                    &mut r,
                    (format, &parser),
                    Invariant::CdataSplit,
                    cuts,
                    format!(
                        "{msg}; transcript {}",
                        excerpt(&String::from_utf8_lossy(&bytes))
                    ),
                );
                break;
            }
        }
        r.elapsed = started.elapsed();
        out.push(r);
    }
    if let Some(typing) = &format.typing {
        let started = Instant::now();
        let mut r = new_report(format, Invariant::TypeInference);
        match serde_json::from_str::<Vec<Row>>(typing.table) {
            Err(e) => fail(
                &mut r,
                (format, &parser),
                Invariant::TypeInference,
                vec![],
                format!("the typing table is not valid: {e}"),
            ),
            Ok(rows) => {
                for row in rows {
                    let tools = match row_tools(typing, &row) {
                        Ok(t) => t,
                        Err(msg) => {
                            fail(
                                &mut r,
                                (format, &parser),
                                Invariant::TypeInference,
                                vec![],
                                msg,
                            );
                            break;
                        }
                    };
                    let bytes = (typing.transcript)(&row.xml);
                    let check = |res: &crate::event::ParseResult| match one_call(res) {
                        Err(e) => Some(e),
                        // Exact equality: 7 and 7.0 are different types here.
                        Ok(c) => match c.arguments.get(typing.key) {
                            Some(v) if *v == row.json => None,
                            got => Some(format!(
                                "rule {}: {:?} typed as {} but the table says {}",
                                row.rule,
                                row.xml,
                                got.map_or("nothing".into(), Value::to_string),
                                row.json
                            )),
                        },
                    };
                    if let Some((cuts, msg)) =
                        probe(format, backend, &tools, &bytes, &check, &mut r)
                    {
                        fail(
                            &mut r,
                            (format, &parser),
                            Invariant::TypeInference,
                            cuts,
                            msg,
                        );
                        break;
                    }
                }
            }
        }
        r.elapsed = started.elapsed();
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::Builtin;

    #[test]
    fn every_registered_format_passes_its_own_checks() {
        for f in crate::formats::REGISTRY {
            for r in check_format(f, &Builtin) {
                assert_eq!(r.status, Status::Pass, "{}: {:?}", r.id, r.violations);
                assert!(r.replays > 0);
            }
        }
    }

    static FORGE: &Format = &crate::formats::forge_xml::FORMAT;

    fn unsplit(text: &str) -> (Vec<u8>, ToolCall) {
        let (_, call) = (FORGE.cdata.unwrap())(text);
        let t = format!(
            "<tool><server_name>local</server_name><tool_name>write_file</tool_name><arguments><content><![CDATA[{text}]]></content></arguments></tool>"
        );
        (t.into_bytes(), call)
    }

    #[test]
    fn a_wrong_table_row_and_an_unsplit_terminator_are_caught() {
        let typing = FORGE.typing.as_ref().unwrap();
        let bad = Format {
            id: "forge_xml",
            summary: "",
            new_parser: FORGE.new_parser,
            render: None,
            markers: FORGE.markers,
            cdata: Some(unsplit),
            typing: Some(crate::formats::Typing {
                table: r#"[{"xml": "1", "json": 1, "rule": "ok"}, {"xml": "007", "json": "007", "rule": "wrong"}]"#,
                transcript: typing.transcript,
                key: typing.key,
                schema_tool: None,
            }),
            special_tokens: &[],
            vocabulary: None,
            stop_tokens: &[],
            reasoning: None,
            options: FORGE.options,
            thinking: None,
            guided: true,
        };
        let r = check_format(&bad, &Builtin);
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|r| r.status == Status::Fail));
        assert!(
            r[0].violations[0]
                .message
                .contains("not rendered as split CDATA")
        );
        assert!(
            r[1].violations[0].message.contains("rule wrong"),
            "{}",
            r[1].violations[0].message
        );
    }

    #[test]
    fn cdata_texts_put_the_terminator_everywhere() {
        let t = cdata_texts();
        assert!(t.contains(&"]]>ab]c>d".to_string()));
        assert!(t.contains(&"ab]c>d]]>".to_string()));
        assert!(t.contains(&"a]]>b]]>]c>d".to_string()));
    }
}
