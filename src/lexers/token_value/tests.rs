use super::*;
use proptest::prelude::*;
use serde_json::{Value, json};

const Q: &str = "<|\"|>";

fn cfg() -> Config {
    Config {
        quote: Q,
        close: b'}',
        max_depth: 127,
        max_key_bytes: 256,
        python_literals: true,
        bare_words: true,
    }
}

#[derive(Default)]
struct Collect {
    json: String,
    notes: Vec<String>,
}

impl Out for Collect {
    fn json(&mut self, s: &str) {
        self.json.push_str(s);
    }
    fn note(&mut self, n: Note<'_>) {
        self.notes.push(format!("{n:?}"));
    }
}

/// How a read ended: the offset (in the whole input) where the body closed, or the stop.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    Done(usize),
    Markup(usize),
    Error(ErrorKind),
}

/// Reads `pieces` in turn; the JSON, the notes and how it ended.
fn read_pieces(cfg: Config, pieces: &[&str]) -> (String, Vec<String>, End) {
    let mut r = Reader::new(cfg, 0);
    let mut out = Collect::default();
    let mut offset = 0;
    for p in pieces {
        let fast = match r.continue_string(p) {
            Some(j) => {
                out.json.push_str(j);
                true
            }
            None => false,
        };
        if !fast {
            match r.feed(p, &mut out) {
                Ok(Step::More) => {}
                Ok(Step::Done(n)) => return (out.json, out.notes, End::Done(offset + n)),
                Err(Stop::Markup(n)) => {
                    let held = r.take_held();
                    return (out.json, out.notes, End::Markup(offset + n - held.len()));
                }
                Err(Stop::Error(e, _)) => return (out.json, out.notes, End::Error(e.kind)),
            }
        }
        offset += p.len();
    }
    match r.finish() {
        Ok(()) => (out.json, out.notes, End::Done(offset)),
        Err(e) => (out.json, out.notes, End::Error(e.kind)),
    }
}

/// Reads `body` whole, character by character and cut once at every character boundary;
/// asserts all agree (JSON, notes, end), and returns the whole read.
fn read_cfg(cfg: Config, body: &str) -> (String, Vec<String>, End) {
    let whole = read_pieces(cfg, &[body]);
    let chars: Vec<&str> = body
        .char_indices()
        .map(|(i, c)| &body[i..i + c.len_utf8()])
        .collect();
    let by_char = read_pieces(cfg, &chars);
    assert_eq!(by_char, whole, "char by char: {body:?}");
    for (i, _) in body.char_indices().skip(1) {
        let cut = read_pieces(cfg, &[&body[..i], &body[i..]]);
        assert_eq!(cut, whole, "cut at {i}: {body:?}");
    }
    whole
}

fn read(body: &str) -> (String, Vec<String>, End) {
    read_cfg(cfg(), body)
}

/// The value a body reads to, the whole input being the body.
fn value(body: &str) -> Value {
    let (j, _, end) = read(body);
    assert_eq!(end, End::Done(body.len()), "{body:?} → {j}");
    serde_json::from_str(&j).unwrap_or_else(|e| panic!("{j:?}: {e}"))
}

#[test]
fn strings_numbers_literals_and_containers_become_json() {
    assert_eq!(
        value("city:<|\"|>Paris<|\"|>,days:3}"),
        json!({"city": "Paris", "days": 3})
    );
    assert_eq!(value("}"), json!({}));
    assert_eq!(
        value("a:[<|\"|>x<|\"|>,1,-2.5e3,true,false,null,[],{}],o:{k:{z:0}}}"),
        json!({"a": ["x", 1, -2500.0, true, false, null, [], {}], "o": {"k": {"z": 0}}})
    );
    // Whitespace between tokens, as a model may write it.
    assert_eq!(
        value(" a : 1 ,\n b :\t[ 1 , 2 ] \n}"),
        json!({"a": 1, "b": [1, 2]})
    );
}

#[test]
fn numbers_keep_their_digits() {
    let (j, _, _) = read("n:12345678901234567890123,f:1.50,e:1E+2}");
    assert_eq!(j, r#"{"n":12345678901234567890123,"f":1.50,"e":1E+2}"#);
}

#[test]
fn string_content_is_byte_exact_and_nothing_but_the_quote_is_structure() {
    let s = "a}b,c:d{e[f]\"g\\h\ni\t<tool_call|> <| <|\"| 漢字 😀 \u{1}";
    let body = format!("v:{Q}{s}{Q}}}");
    assert_eq!(value(&body), json!({ "v": s }));
    assert_eq!(value(&format!("v:{Q}{Q}}}")), json!({"v": ""}));
}

#[test]
fn keys_are_bare_or_quoted_and_trimmed_when_bare() {
    assert_eq!(
        value("my key :1,x-y.z_0:2,漢字:3}"),
        json!({"my key": 1, "x-y.z_0": 2, "漢字": 3})
    );
    assert_eq!(
        value(&format!("{Q} spaced:key {Q}:1,{Q}{Q}:2}}")),
        json!({" spaced:key ": 1, "": 2})
    );
}

#[test]
fn members_note_their_top_level_kind() {
    let (_, notes, _) = read(&format!(
        "s:{Q}x{Q},i:1,n:1.5,b:true,z:null,o:{{a:1}},l:[1]}}"
    ));
    let kinds: Vec<&String> = notes.iter().filter(|n| n.starts_with("Member")).collect();
    assert_eq!(
        kinds,
        [
            "Member { key: \"s\", kind: String }",
            "Member { key: \"i\", kind: Integer }",
            "Member { key: \"n\", kind: Number }",
            "Member { key: \"b\", kind: Boolean }",
            "Member { key: \"z\", kind: Null }",
            "Member { key: \"o\", kind: Object }",
            "Member { key: \"l\", kind: Array }",
        ]
    );
}

#[test]
fn bare_words_are_strings_python_literals_are_literals_both_noted() {
    let (j, notes, end) = read("unit: celsius ,t:True,f:False,n:None,x:nan,y:+1,z:007,w:12:30}");
    assert!(matches!(end, End::Done(_)));
    let v: Value = serde_json::from_str(&j).unwrap();
    assert_eq!(
        v,
        json!({"unit": "celsius", "t": true, "f": false, "n": null, "x": "nan", "y": "+1", "z": "007", "w": "12:30"})
    );
    let bare = notes.iter().filter(|n| n.starts_with("BareWord")).count();
    let python = notes
        .iter()
        .filter(|n| n.starts_with("PythonLiteral"))
        .count();
    assert_eq!((bare, python), (5, 3));
    // Off, a bare word is an error and a Python literal a bare word.
    let strict = Config {
        bare_words: false,
        ..cfg()
    };
    assert_eq!(
        read_cfg(strict, "unit:celsius}").2,
        End::Error(ErrorKind::Syntax)
    );
    let no_python = Config {
        python_literals: false,
        ..cfg()
    };
    let (j, notes, _) = read_cfg(no_python, "t:True}");
    assert_eq!(j, r#"{"t":"True"}"#);
    assert!(notes[0].starts_with("BareWord"), "{notes:?}");
}

#[test]
fn a_duplicate_key_is_noted_and_both_go_out() {
    let (j, notes, _) = read("a:1,o:{a:1,a:2},a:3}");
    assert_eq!(j, r#"{"a":1,"o":{"a":1,"a":2},"a":3}"#);
    let dups = notes
        .iter()
        .filter(|n| n.starts_with("DuplicateKey"))
        .count();
    assert_eq!(dups, 2);
}

#[test]
fn the_body_ends_at_its_close_and_the_rest_is_the_callers() {
    let body = "a:{b:1}}<tool_call|>more";
    assert_eq!(read(body).2, End::Done(8));
    let paren = Config {
        close: b')',
        ..cfg()
    };
    let (j, _, end) = read_cfg(paren, "a:1,b:{c:x)}),tail");
    assert_eq!(end, End::Done(13));
    assert_eq!(j, r#"{"a":1,"b":{"c":"x)"}}"#);
    assert_eq!(read_cfg(paren, ")").0, "{}");
    // A brace where the parenthesis belongs.
    assert_eq!(read_cfg(paren, "a:1}").2, End::Error(ErrorKind::Syntax));
}

#[test]
fn markup_outside_a_string_stops_the_reader_where_it_begins() {
    assert_eq!(read("a:1<tool_call|>").2, End::Markup(3));
    assert_eq!(read("a:1,<|tool_call>").2, End::Markup(4));
    assert_eq!(read("a:<tool_call|>").2, End::Markup(2));
    assert_eq!(read("ke<y:1}").2, End::Markup(2));
    // A quote where no string may begin is a syntax error, not markup.
    assert_eq!(
        read(&format!("a:{{b:1}}{Q}x{Q}}}")).2,
        End::Error(ErrorKind::Syntax)
    );
    // Inside a bare value it is markup like any other.
    assert_eq!(read(&format!("a:1{Q}x{Q}}}")).2, End::Markup(3));
}

#[test]
fn broken_bodies_are_syntax_errors() {
    for body in [
        "a:1,}", ",a:1}", "a:}", "a:,b:1}", ":1}", "a 1}", "a:[1,]}", "a:[1}", "a:{b:1]}",
        "\"a\":1}", "a{b:1}", "a::1}",
    ] {
        assert_eq!(read(body).2, End::Error(ErrorKind::Syntax), "{body:?}");
    }
}

#[test]
fn limits_are_limit_errors() {
    let deep = format!("a:{}1{}}}", "[".repeat(200), "]".repeat(200));
    assert_eq!(read_pieces(cfg(), &[&deep]).2, End::Error(ErrorKind::Limit));
    let ok = format!("a:{}1{}}}", "[".repeat(125), "]".repeat(125));
    assert!(matches!(read_pieces(cfg(), &[&ok]).2, End::Done(_)));
    let long = format!("{}:1}}", "k".repeat(300));
    assert_eq!(read(&long).2, End::Error(ErrorKind::Limit));
    let quoted = format!("{Q}{}{Q}:1}}", "k".repeat(300));
    assert_eq!(read(&quoted).2, End::Error(ErrorKind::Limit));
}

#[test]
fn an_early_end_is_unterminated() {
    for body in [
        "",
        "a",
        "a:",
        "a:<|\"|>open",
        "a:<|\"|>open<|\"",
        "a:1",
        "a:[1",
        "a:{b:1}",
        "<|\"|>k",
    ] {
        assert_eq!(
            read(body).2,
            End::Error(ErrorKind::Unterminated),
            "{body:?}"
        );
    }
}

#[test]
fn json_numbers_are_recognised_exactly() {
    for s in ["0", "-0", "1", "-12", "1.5", "1e5", "1E-5", "-0.0e+0", "10"] {
        assert!(json_number(s).is_some(), "{s}");
    }
    for s in [
        "", "-", "01", "1.", ".5", "+1", "1e", "1e+", "0x10", "1_000", "NaN", "inf", "1 ",
    ] {
        assert!(json_number(s).is_none(), "{s}");
    }
    assert_eq!(json_number("3"), Some(false));
    assert_eq!(json_number("3.0"), Some(true));
}

/// Writes `v` in the notation (keys bare when they can be, quoted otherwise).
fn notate(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(Q);
            out.push_str(s);
            out.push_str(Q);
        }
        Value::Object(m) => {
            out.push('{');
            notate_members(m, out);
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                notate(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn notate_members(m: &serde_json::Map<String, Value>, out: &mut String) {
    for (i, (k, x)) in m.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let bare = !k.is_empty() && k.trim() == k && k.bytes().all(|b| key_byte(b) && b != b'<');
        if bare {
            out.push_str(k);
        } else {
            out.push_str(Q);
            out.push_str(k);
            out.push_str(Q);
        }
        out.push(':');
        notate(x, out);
    }
}

fn arb_value() -> impl Strategy<Value = Value> {
    let strings = "[a-z <>|\"{}\\[\\],:\\\\\n漢😀]{0,8}";
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        strings.prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 24, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(strings, inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_value_reads_back_under_cycling_small_chunks(
        m in prop::collection::btree_map("[a-z_ ]{0,6}", arb_value(), 0..5),
        sizes in prop::collection::vec(1usize..9, 1..6),
    ) {
        let obj: serde_json::Map<String, Value> =
            m.into_iter().filter(|(k, _)| !k.is_empty()).collect();
        let mut body = String::new();
        notate_members(&obj, &mut body);
        body.push('}');
        // Cut into cycling sizes, moved to character boundaries.
        let mut pieces = Vec::new();
        let mut at = 0;
        for &n in sizes.iter().cycle() {
            if at >= body.len() {
                break;
            }
            let mut end = (at + n).min(body.len());
            while !body.is_char_boundary(end) {
                end += 1;
            }
            pieces.push(&body[at..end]);
            at = end;
        }
        let whole = read_pieces(cfg(), &[&body]);
        let cut = read_pieces(cfg(), &pieces);
        prop_assert_eq!(&cut, &whole);
        prop_assert_eq!(&whole.2, &End::Done(body.len()));
        let v: Value = serde_json::from_str(&whole.0).unwrap();
        prop_assert_eq!(v, Value::Object(obj));
    }
}

#[test]
fn an_error_says_where_reading_stopped() {
    let mut r = Reader::new(cfg(), 0);
    let mut out = Collect::default();
    match r.feed("a:1,b:}<tool_call|>", &mut out) {
        Err(Stop::Error(e, at)) => {
            assert_eq!((e.kind, at), (ErrorKind::Syntax, 6));
        }
        other => panic!("{other:?}"),
    }
    let mut r = Reader::new(cfg(), 0);
    assert!(matches!(r.feed("a:1,", &mut out), Ok(Step::More)));
    match r.feed("b:]x", &mut out) {
        Err(Stop::Error(_, at)) => assert_eq!(at, 2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn discarding_finds_the_end_and_says_nothing() {
    let body = format!("a:{Q}x}}{Q},b:[1,{{c:unquoted}}],k:None}}<tool_call|>");
    for cut in 0..=body.len() {
        if !body.is_char_boundary(cut) {
            continue;
        }
        let mut r = Reader::new(cfg(), 0);
        let mut out = Collect::default();
        assert!(matches!(r.feed(&body[..2], &mut out), Ok(Step::More)));
        r.discard();
        let rest = &body[2..];
        let cut = cut.saturating_sub(2).min(rest.len());
        let mut end = None;
        for (off, piece) in [(0, &rest[..cut]), (cut, &rest[cut..])] {
            if end.is_some() {
                break;
            }
            match r.feed(piece, &mut out) {
                Ok(Step::Done(n)) => end = Some(off + n),
                Ok(Step::More) => {}
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(end, Some(rest.len() - "<tool_call|>".len()));
        assert_eq!(out.json, "{\"a\":");
        assert!(out.notes.is_empty());
    }
}
