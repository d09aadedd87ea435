use super::*;
use proptest::prelude::*;

const EOM: &str = "<|end_of_msg|>";

fn cfg() -> XtmlConfig {
    XtmlConfig {
        specials: &[EOM],
        max_header_bytes: 64,
    }
}

/// A token as compared across chunkings: text merged, elements by their fields.
#[derive(Debug, Clone, PartialEq, Eq)]
enum T {
    Text(String),
    Open(String, Vec<(String, String)>, bool, String, u64),
    Close(String, bool, String, u64),
    Special(usize, u64),
    Bad(String, Malformed, u64),
}

/// Lexes `pieces` as a host would: `argument` bodies raw, `json` bodies raw JSON, the rest
/// markup. Adjacent text is merged.
fn lex(pieces: &[&str], cfg: XtmlConfig) -> Vec<T> {
    let mut l = XtmlLexer::new(cfg);
    let mut out: Vec<T> = Vec::new();
    let mut take = |t: Token<'_>, l: &mut XtmlLexer| {
        let t = match t {
            Token::Text(s) => {
                if let Some(T::Text(prev)) = out.last_mut() {
                    prev.push_str(&s);
                    return;
                }
                if s.is_empty() {
                    return;
                }
                T::Text(s.into_owned())
            }
            Token::Open(e) => {
                match e.tag.as_str() {
                    "argument" => l.set_mode(Mode::Raw {
                        tag: "argument",
                        json: false,
                    }),
                    "json" => l.set_mode(Mode::Raw {
                        tag: "json",
                        json: true,
                    }),
                    _ => {}
                }
                T::Open(e.tag, e.attrs, e.spaced, e.raw, e.at)
            }
            Token::Close(e) => {
                l.set_mode(Mode::Markup);
                T::Close(e.tag, e.spaced, e.raw, e.at)
            }
            Token::Special(k, at) => T::Special(k, at),
            Token::Malformed { raw, why, at } => T::Bad(raw, why, at),
        };
        out.push(t);
    };
    for p in pieces {
        let mut s = *p;
        while let Some(t) = l.next(&mut s) {
            take(t, &mut l);
        }
        assert!(s.is_empty());
    }
    while let Some(t) = l.finish() {
        take(t, &mut l);
    }
    out
}

fn whole(s: &str) -> Vec<T> {
    lex(&[s], cfg())
}

/// Every chunking with one or two cuts (at character boundaries) and every byte-sized one.
fn check_splits(s: &str) -> Vec<T> {
    let w = whole(s);
    let bounds: Vec<usize> = (1..s.len()).filter(|&i| s.is_char_boundary(i)).collect();
    for &a in &bounds {
        assert_eq!(lex(&[&s[..a], &s[a..]], cfg()), w, "cut at {a} of {s:?}");
        for &b in bounds.iter().filter(|&&b| b > a).take(40) {
            let got = lex(&[&s[..a], &s[a..b], &s[b..]], cfg());
            assert_eq!(got, w, "cuts at {a},{b} of {s:?}");
        }
    }
    let chars: Vec<&str> = s
        .char_indices()
        .map(|(i, c)| &s[i..i + c.len_utf8()])
        .collect();
    assert_eq!(lex(&chars, cfg()), w, "char by char: {s:?}");
    w
}

fn text(s: &str) -> T {
    T::Text(s.into())
}

#[test]
fn a_k3_message_lexes_into_elements_and_text_under_every_cut() {
    let s = "Need the weather.<|close|>think<|sep|><|open|>response<|sep|>Let me check.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";
    let t = check_splits(s);
    let tags: Vec<String> = t
        .iter()
        .map(|t| match t {
            T::Text(s) => format!("T:{s}"),
            T::Open(tag, ..) => format!("+{tag}"),
            T::Close(tag, ..) => format!("-{tag}"),
            T::Special(k, _) => format!("!{k}"),
            T::Bad(r, ..) => format!("?{r}"),
        })
        .collect();
    assert_eq!(
        tags,
        [
            "T:Need the weather.",
            "-think",
            "+response",
            "T:Let me check.",
            "-response",
            "+tools",
            "+call",
            "+argument",
            "T:Paris",
            "-argument",
            "-call",
            "-tools",
            "-message",
            "!0"
        ]
    );
    let T::Open(_, attrs, spaced, raw, at) = &t[6] else {
        panic!("{:?}", t[6]);
    };
    assert_eq!(
        attrs,
        &[
            ("tool".to_string(), "get_weather".to_string()),
            ("index".to_string(), "1".to_string())
        ]
    );
    assert!(!spaced);
    assert_eq!(raw, "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|>");
    assert_eq!(&s[*at as usize..][..raw.len()], raw);
}

#[test]
fn attribute_values_unescape_only_quot_and_amp() {
    let s = r#"<|open|>call tool="a&quot;b&amp;c&lt;d&amp;quot;&" index="&amp;amp;"<|sep|>"#;
    let t = check_splits(s);
    let T::Open(_, attrs, ..) = &t[0] else {
        panic!("{t:?}")
    };
    assert_eq!(attrs[0].1, "a\"b&c&lt;d&quot;&");
    assert_eq!(attrs[1].1, "&amp;");
    for v in ["plain", "a\"b", "&quot;", "&&amp;\"\"", "<|sep|>x"] {
        assert_eq!(unescape_attr(&escape_attr(v)), v);
    }
}

#[test]
fn spaced_markers_are_elements_that_say_so() {
    let s = "<|open|> tools <|sep|> <|open|> call tool=\"f\" index=\"1\" <|sep|><|close|> call <|sep|><|close|>tools<|sep|>";
    let t = check_splits(s);
    let spaced: Vec<(String, bool)> = t
        .iter()
        .filter_map(|t| match t {
            T::Open(tag, _, sp, ..) => Some((format!("+{tag}"), *sp)),
            T::Close(tag, sp, ..) => Some((format!("-{tag}"), *sp)),
            _ => None,
        })
        .collect();
    assert_eq!(
        spaced,
        [
            ("+tools".to_string(), true),
            ("+call".to_string(), true),
            ("-call".to_string(), true),
            ("-tools".to_string(), false)
        ]
    );
    // The space between two elements is text: the host decides what it is.
    assert_eq!(t[1], text(" "));
}

#[test]
fn malformed_markup_is_reported_with_its_exact_text() {
    let t = check_splits("a<|sep|>b");
    assert_eq!(
        t,
        [
            text("a"),
            T::Bad("<|sep|>".into(), Malformed::StraySep, 1),
            text("b")
        ]
    );
    // A header cut by another token: the token is read on its own.
    let t = check_splits("<|open|>call tool=\"x<|close|>call<|sep|>");
    assert_eq!(
        t[0],
        T::Bad("<|open|>call tool=\"x".into(), Malformed::Cut, 0)
    );
    assert!(matches!(&t[1], T::Close(tag, ..) if tag == "call"));
    // Unreadable headers.
    for h in [
        "<|open|><|sep|>",
        "<|open|>a b<|sep|>",
        "<|open|>a b=c<|sep|>",
        "<|open|>a b=\"c<|sep|>",
        "<|open|>a b=\"1\" b=\"2\"<|sep|>",
        "<|open|>a b=\"1\"c=\"2\"<|sep|>",
        "<|close|>a b=\"1\"<|sep|>",
        "<|close|>a b<|sep|>",
        "<|open|>ä<|sep|>",
    ] {
        let t = check_splits(h);
        assert_eq!(t, [T::Bad(h.into(), Malformed::BadHeader, 0)], "{h}");
    }
    // Cut by the end of the input.
    assert_eq!(
        whole("x<|open|>call tool=\"f\""),
        [
            text("x"),
            T::Bad("<|open|>call tool=\"f\"".into(), Malformed::Cut, 1)
        ]
    );
    assert_eq!(
        whole("x<|open|>call<|se"),
        [
            text("x"),
            T::Bad("<|open|>call<|se".into(), Malformed::Cut, 1)
        ]
    );
    // A token's prefix at the end is text.
    assert_eq!(whole("x<|ope"), [text("x<|ope")]);
    assert_eq!(whole("<|<|open|>a<|sep|>")[0], text("<|"));
}

#[test]
fn a_header_over_the_limit_is_malformed_and_the_rest_is_read_afresh() {
    let long = format!("<|open|>call tool=\"{}\"<|sep|>after", "x".repeat(100));
    let t = check_splits(&long);
    assert!(matches!(&t[0], T::Bad(r, Malformed::TooLong, 0) if r.len() <= 64 + 8 + 8));
    assert_eq!(t.last(), Some(&text("after")));
    assert!(
        t.iter()
            .any(|x| matches!(x, T::Bad(_, Malformed::StraySep, _)))
    );
}

#[test]
fn text_with_angle_brackets_and_near_tokens_is_text() {
    let s = "if a < b && c <| d <|x|> <|opens|> <|clos <|end_of_msg| é → 😀";
    assert_eq!(check_splits(s), [text(s)]);
}

#[test]
fn a_raw_body_ends_only_at_its_own_close() {
    let s = "<|open|>argument key=\"k\"<|sep|>a<|open|>x<|sep|>b<|close|>call<|sep|><|sep|><|end_of_msg|><|close|>argument c<|sep|><|close|> argument <|sep|>tail";
    let t = check_splits(s);
    assert_eq!(
        t[1],
        text(
            "a<|open|>x<|sep|>b<|close|>call<|sep|><|sep|><|end_of_msg|><|close|>argument c<|sep|>"
        )
    );
    assert!(matches!(&t[2], T::Close(tag, true, ..) if tag == "argument"));
    assert_eq!(t[3], text("tail"));
    // A close cut off by another close: the first is text, the second counts.
    let s = "<|open|>argument<|sep|>v<|close|>argu<|close|>argument<|sep|>";
    let t = check_splits(s);
    assert_eq!(t[1], text("v<|close|>argu"));
    assert!(matches!(&t[2], T::Close(..)));
}

#[test]
fn a_raw_json_body_ignores_its_close_inside_strings() {
    let s = r#"<|open|>json type="object"<|sep|>{"a":"x<|close|>json<|sep|>\"<|close|>json<|sep|>\\","b":[1]}<|close|>json<|sep|><|close|>call<|sep|>"#;
    let t = check_splits(s);
    assert_eq!(
        t[1],
        text(r#"{"a":"x<|close|>json<|sep|>\"<|close|>json<|sep|>\\","b":[1]}"#)
    );
    assert!(matches!(&t[2], T::Close(tag, ..) if tag == "json"));
    assert!(matches!(&t[3], T::Close(tag, ..) if tag == "call"));
    // A header given back as text counts for the string state.
    let s = r#"<|open|>json<|sep|>{"a":1}<|close|>x"<|close|>json<|sep|>"<|close|>json<|sep|>"#;
    let t = check_splits(s);
    assert_eq!(t[1], text(r#"{"a":1}<|close|>x"<|close|>json<|sep|>""#));
    assert!(matches!(&t[2], T::Close(..)));
}

#[test]
fn offsets_and_reset() {
    let mut l = XtmlLexer::new(cfg());
    let mut s = "ab<|open|>x<|sep|>";
    assert_eq!(l.next(&mut s), Some(Token::Text("ab".into())));
    let Some(Token::Open(e)) = l.next(&mut s) else {
        panic!()
    };
    assert_eq!((e.at, l.offset()), (2, 18));
    let mut s = "<|clo";
    assert_eq!(l.next(&mut s), None);
    assert!(!l.is_clean());
    l.reset();
    assert!(l.is_clean());
    assert_eq!(l.offset(), 0);
}

/// Pieces XTML input is made of, for generated inputs.
fn piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "<|open|>",
        "<|close|>",
        "<|sep|>",
        "<|end_of_msg|>",
        "argument",
        "json",
        "call",
        "tools",
        " key=\"k\"",
        " type=\"string\"",
        " tool=\"a&quot;b\"",
        "\"",
        "\\",
        " ",
        "{\"a\":",
        "}",
        "<",
        "<|",
        "|>",
        "text",
        "é😀",
        "&amp;",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn tokens_do_not_depend_on_the_cuts(
        parts in prop::collection::vec(piece(), 0..40),
        sizes in prop::collection::vec(1usize..9, 1..8),
    ) {
        let s: String = parts.concat();
        let w = whole(&s);
        // Cut at cycling sizes, moved to character boundaries.
        let mut pieces = Vec::new();
        let mut at = 0;
        for &n in sizes.iter().cycle() {
            if at >= s.len() {
                break;
            }
            let mut end = (at + n).min(s.len());
            while !s.is_char_boundary(end) {
                end += 1;
            }
            pieces.push(&s[at..end]);
            at = end;
        }
        prop_assert_eq!(lex(&pieces, cfg()), w.clone());
        // Nothing is lost: the tokens' text is the input.
        let back: String = w
            .iter()
            .map(|t| match t {
                T::Text(s) => s.clone(),
                T::Open(_, _, _, raw, _) | T::Close(_, _, raw, _) | T::Bad(raw, _, _) => raw.clone(),
                T::Special(..) => EOM.to_string(),
            })
            .collect();
        prop_assert_eq!(back, s);
    }
}
