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
use super::serving::{Got, ReplayPath, Routes};
use super::vocab::tokenizer_for;
use crate::backends::cuts::{Grouping, TokenCuts};
use crate::backends::{Backend, Outcome};
use crate::event::{ToolCall, excerpt};
use crate::formats::{Format, OptionValues};
use crate::tools::Tools;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
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
    /// Who settled the rule: absent for a rule any parser typing by the schema must follow;
    /// `conform` for one of conform's decisions where engines legitimately settle otherwise.
    #[serde(default)]
    settled: Option<Settled>,
    /// Other values an external parser may legitimately give (`yes` read as `true`): never
    /// conform's, which gives `json`.
    #[serde(default)]
    others: Vec<Value>,
}

/// Who settled a typing rule (`specs/typing.md` §5).
#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Settled {
    /// conform decided it among readings engines legitimately take (a big integer kept as
    /// text, `007` read as 7, Python literals…): it binds conform's parsers, and an external
    /// parser is never blamed for another reading.
    Conform,
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

/// The replays of a short transcript, each with the serving path it goes through.
///
/// conform's own parser must hold under every cut: whole, byte by byte, and each single cut.
/// An external parser is fed what its server would feed it (`specs/adapter.md` §2.1): the
/// whole input through its whole-input path, and token-aligned deltas (every token, and each
/// single token boundary) through its streaming path. Splitting a special token in two is a
/// delta no server sends, so it never decides a verdict on someone else's parser.
fn replays(
    format: &Format,
    backend: &dyn Backend,
    transcript: &[u8],
) -> Vec<(Option<ReplayPath>, Cuts)> {
    let len = transcript.len();
    if backend.is_builtin() {
        let mut v = vec![(None, Cuts::At(Vec::new()))];
        if len > 1 {
            v.push((None, Cuts::EveryByte));
            v.extend((1..len).map(|c| (None, Cuts::At(vec![c]))));
        }
        return v;
    }
    let routes = Routes::of(backend.paths());
    let mut v = Vec::new();
    // A streaming-only parser's whole input is the coalesced replay, reported apart by a run
    // and never a failure: here it is not judged at all.
    if !routes.whole_is_coalesced() {
        v.push((routes.whole, Cuts::At(Vec::new())));
    }
    if routes.chunkings && len > 1 {
        let tokens = Arc::new(tokenizer_for(format).tokenize(transcript, format.special_tokens));
        if tokens.boundary_count() > 0 {
            v.push((
                routes.chunked,
                Cuts::Tokens(TokenCuts {
                    tokens: tokens.clone(),
                    grouping: Grouping::EveryToken,
                }),
            ));
            v.extend(tokens.boundary_iter().map(|c| {
                (
                    routes.chunked,
                    Cuts::Tokens(TokenCuts {
                        tokens: tokens.clone(),
                        grouping: Grouping::At(vec![c]),
                    }),
                )
            }));
        }
    }
    v
}

/// Replays `transcript` under every chunking of [`replays`] and returns the first failure of
/// `check`, if any: its cuts, the reason and the path it went through.
fn probe(
    format: &Format,
    backend: &dyn Backend,
    tools: &Tools,
    transcript: &[u8],
    check: &dyn Fn(&crate::event::ParseResult) -> Option<String>,
    report: &mut CaseReport,
) -> Option<Failed> {
    for (path, cuts) in replays(format, backend, transcript) {
        report.replays += 1;
        let mut got = Vec::new();
        // A format-level check judges the format's defaults.
        let why = match backend.replay_on(
            path.map(ReplayPath::serving),
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
                    } else if !backend.is_builtin() {
                        got = vec![Got::of(&t.result)];
                    }
                    w
                }
                None => Some("no turn was parsed".into()),
            },
            Outcome::Panicked(m) => Some(format!("the parser panicked: {m}")),
            Outcome::Broke(b, m) => Some(format!("the parser broke ({b:?}): {m}")),
        };
        if let Some(w) = why {
            return Some(Failed {
                cuts: cuts.to_vec(transcript),
                message: w,
                path,
                got,
            });
        }
    }
    None
}

/// The first failing replay of a check.
struct Failed {
    cuts: Vec<usize>,
    message: String,
    path: Option<ReplayPath>,
    /// What an external parser returned, beside what it should.
    got: Vec<Got>,
}

impl Failed {
    /// A failure that no replay showed (the check itself could not be made).
    fn unreplayed(message: String) -> Failed {
        Failed {
            cuts: Vec::new(),
            message,
            path: None,
            got: Vec::new(),
        }
    }
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
    failed: Failed,
) {
    report.status = Status::Fail;
    report.violations.push(Violation {
        invariant: inv,
        strategy: None,
        cuts: vec![failed.cuts],
        failing_replays: 1,
        cut_class: None,
        message: failed.message,
        replay: replay_command(format, parser),
        path: failed.path,
        got: failed.got,
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
                    Failed::unreplayed(format!(
                        "content {} is not rendered as split CDATA",
                        excerpt(&text)
                    )),
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
            if let Some(mut failed) =
                probe(format, backend, &Tools::default(), &bytes, &check, &mut r)
            {
                failed.message = format!(
                    "{}; transcript {}",
                    failed.message,
                    excerpt(&String::from_utf8_lossy(&bytes))
                );
                fail(&mut r, (format, &parser), Invariant::CdataSplit, failed);
                break;
            }
        }
        r.elapsed = started.elapsed();
        out.push(r);
    }
    // An external parser is judged only where the probe is what the model writes.
    let typing = format
        .typing
        .as_ref()
        .filter(|t| backend.is_builtin() || t.wire_probe);
    if let Some(typing) = typing {
        let started = Instant::now();
        let mut r = new_report(format, Invariant::TypeInference);
        match serde_json::from_str::<Vec<Row>>(typing.table) {
            Err(e) => fail(
                &mut r,
                (format, &parser),
                Invariant::TypeInference,
                Failed::unreplayed(format!("the typing table is not valid: {e}")),
            ),
            Ok(rows) => {
                let judged = rows
                    .into_iter()
                    .filter(|r| backend.is_builtin() || r.settled.is_none());
                for row in judged {
                    let tools = match row_tools(typing, &row) {
                        Ok(t) => t,
                        Err(msg) => {
                            fail(
                                &mut r,
                                (format, &parser),
                                Invariant::TypeInference,
                                Failed::unreplayed(msg),
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
                            Some(v) if !backend.is_builtin() && row.others.contains(v) => None,
                            got => Some(format!(
                                "rule {}: {:?} typed as {} but the table says {}",
                                row.rule,
                                row.xml,
                                got.map_or("nothing".into(), Value::to_string),
                                row.json
                            )),
                        },
                    };
                    if let Some(failed) = probe(format, backend, &tools, &bytes, &check, &mut r) {
                        fail(&mut r, (format, &parser), Invariant::TypeInference, failed);
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

    /// conform's parsers behind an adapter-like backend that declares both serving paths,
    /// records the path of every replay, and loses the call whenever a delta ends inside one
    /// of the format's special tokens (as a parser matching token ids would).
    struct SplitHater {
        builtin: bool,
        /// What the parser does to every result besides.
        mangle: fn(&mut crate::event::ParseResult),
        /// Whether a split special token loses the call.
        hates_splits: bool,
        seen: std::sync::Mutex<Vec<Option<crate::backends::ServingPath>>>,
    }
    impl Backend for SplitHater {
        fn name(&self) -> String {
            "split-hater".into()
        }
        fn is_builtin(&self) -> bool {
            self.builtin
        }
        fn paths(&self) -> crate::backends::Paths {
            crate::backends::Paths {
                batch: true,
                stream: true,
            }
        }
        fn replay(
            &self,
            f: &Format,
            tools: &Tools,
            options: &OptionValues,
            request: &crate::formats::request::Request,
            turns: &[Vec<u8>],
            cuts: &[Cuts],
        ) -> Outcome {
            self.replay_on(None, f, tools, options, request, turns, cuts)
        }
        fn replay_on(
            &self,
            path: Option<crate::backends::ServingPath>,
            f: &Format,
            tools: &Tools,
            options: &OptionValues,
            request: &crate::formats::request::Request,
            turns: &[Vec<u8>],
            cuts: &[Cuts],
        ) -> Outcome {
            self.seen.lock().unwrap().push(path);
            let out = Builtin.replay(f, tools, options, request, turns, cuts);
            let spans: Vec<(usize, usize)> =
                crate::harness::tokens::special_spans(&turns[0], f.special_tokens)
                    .into_iter()
                    .map(|(s, t)| (s, t.text.len()))
                    .collect();
            match out {
                Outcome::Done(mut t) => {
                    if self.hates_splits && cuts[0].splits_any(&turns[0], &spans) {
                        t[0].result.calls.clear();
                    }
                    (self.mangle)(&mut t[0].result);
                    Outcome::Done(t)
                }
                other => other,
            }
        }
    }

    #[test]
    fn an_external_parser_is_judged_on_token_aligned_deltas_through_its_serving_paths() {
        let glm = crate::formats::by_id("glm47").unwrap();
        assert!(glm.typing.is_some() && !glm.special_tokens.is_empty());
        let external = SplitHater {
            builtin: false,
            mangle: |_| {},
            hates_splits: true,
            seen: Default::default(),
        };
        let r = check_format(glm, &external);
        assert!(
            r.iter().all(|r| r.status == Status::Pass),
            "{:?}",
            r.iter().map(|r| &r.violations).collect::<Vec<_>>()
        );
        let seen = external.seen.lock().unwrap();
        use crate::backends::ServingPath::{Batch, Stream};
        assert!(seen.contains(&Some(Batch)) && seen.contains(&Some(Stream)));
        assert!(!seen.contains(&None), "every replay names its path");

        // The same parser, held to conform's own bar, fails on the split special tokens.
        let own = SplitHater {
            builtin: true,
            mangle: |_| {},
            hates_splits: true,
            seen: Default::default(),
        };
        let r = check_format(glm, &own);
        let v = &r
            .iter()
            .find(|r| r.status == Status::Fail)
            .unwrap()
            .violations[0];
        assert!(v.message.contains("0 calls parsed"), "{}", v.message);
        assert_eq!(v.path, None);
    }

    /// Reads an integer beyond 64 bits as a float, as a Python engine's exact integer comes
    /// back through serde_json.
    fn big_integer_as_number(r: &mut crate::event::ParseResult) {
        for c in &mut r.calls {
            if c.arguments["v"] == "18446744073709551616" {
                c.arguments["v"] = serde_json::json!(1.8446744073709552e19);
            }
        }
    }

    #[test]
    fn an_external_parser_is_judged_only_on_typing_rules_any_schema_typing_must_follow() {
        let glm = crate::formats::by_id("glm47").unwrap();
        let status = |builtin: bool, f: &Format| {
            let b = SplitHater {
                builtin,
                mangle: big_integer_as_number,
                hates_splits: false,
                seen: Default::default(),
            };
            check_format(f, &b)
                .into_iter()
                .find(|r| r.id.ends_with("#type_inference"))
                .map(|r| (r.status, r.violations))
        };
        // conform settled a big integer as text; an engine may return the number.
        assert_eq!(status(false, glm).unwrap().0, Status::Pass);
        let (s, v) = status(true, glm).unwrap();
        assert_eq!(s, Status::Fail);
        assert!(
            v[0].message.contains("integer_beyond_64_bits"),
            "{}",
            v[0].message
        );
        // DSML's probe leaves out the `string` attribute the model always writes.
        let dsml = crate::formats::by_id("deepseek_v32").unwrap();
        assert!(status(false, dsml).is_none());
        assert!(status(true, dsml).is_some());
    }

    #[test]
    fn the_typing_table_says_who_settled_each_rule() {
        let rows: Vec<Row> = serde_json::from_str(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/specs/typing.json"
        )))
        .unwrap();
        let settled = |rule: &str| {
            rows.iter()
                .find(|r| r.rule == rule)
                .unwrap()
                .settled
                .is_some()
        };
        assert!(!settled("string_json_text") && !settled("boolean_yes_mismatch"));
        assert!(settled("integer_leading_zeros") && settled("object_python_literal"));
        let yes = rows
            .iter()
            .find(|r| r.rule == "boolean_yes_mismatch")
            .unwrap();
        assert_eq!(
            yes.others,
            [Value::Bool(true)],
            "`yes` read as true, never false"
        );
        let bad = r#"[{"rule": "x", "raw": "1", "json": 1, "settled": "vllm"}]"#;
        assert!(serde_json::from_str::<Vec<Row>>(bad).is_err());
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
                wire_probe: true,
            }),
            special_tokens: &[],
            vocabulary: None,
            stop_tokens: &[],
            reasoning: None,
            options: FORGE.options,
            thinking: None,
            guided: true,
            channel_reasoning: None,
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
