use super::*;
use proptest::prelude::*;

/// An owned, normalised token: adjacent text pieces (and section pieces) merged.
#[derive(Debug, Clone, PartialEq, Eq)]
enum T {
    Text(String),
    Start(String, Vec<(String, String)>, bool),
    End(String),
    Sec(Section, String),
    Err(XmlErrorKind, String),
    RawEnd,
    Eof(usize),
}

fn run_with(
    chunks: &[&str],
    cfg: XmlConfig,
    mut ctl: impl FnMut(&Token<'_>) -> Ctl,
) -> Vec<(T, u64)> {
    let mut tok = XmlTokenizer::new(cfg);
    let mut out: Vec<(T, u64)> = Vec::new();
    let mut open: Option<(Section, String, u64)> = None;
    let mut sink = |t: Token<'_>, off: u64| -> Ctl {
        let c = ctl(&t);
        let item = match t {
            Token::Text(s) => T::Text(s.to_string()),
            Token::Start {
                name,
                attrs,
                self_closing,
                ..
            } => T::Start(
                name.to_string(),
                attrs
                    .iter()
                    .map(|a| (a.name.clone(), a.value.clone()))
                    .collect(),
                self_closing,
            ),
            Token::End { name, .. } => T::End(name.to_string()),
            Token::SectionStart(s) => {
                open = Some((s, String::new(), off));
                return c;
            }
            Token::SectionText(_, p) => {
                if let Some(o) = open.as_mut() {
                    o.1.push_str(p);
                }
                return c;
            }
            Token::SectionEnd(Section::Raw) => T::RawEnd,
            Token::SectionEnd(_) => match open.take() {
                Some((s, body, at)) => {
                    out.push((T::Sec(s, body), at));
                    return c;
                }
                None => T::Err(XmlErrorKind::StrayLt, "bad section end".into()),
            },
            Token::Error { kind, raw } => {
                if let (XmlErrorKind::Unclosed(_), Some((s, body, at))) = (kind, open.take()) {
                    out.push((T::Sec(s, body), at));
                }
                T::Err(kind, raw.to_string())
            }
            Token::Eof { depth } => T::Eof(depth),
        };
        match (out.last_mut(), &item) {
            (Some((T::Text(a), _)), T::Text(b)) => a.push_str(b),
            _ => out.push((item, off)),
        }
        c
    };
    for c in chunks {
        let used = tok.feed(c, &mut sink);
        assert_eq!(used, c.len());
    }
    tok.finish(&mut sink);
    out
}

/// Checks that every single cut and a byte-by-byte feed give the whole-input tokens.
fn split_invariant(s: &str) -> Vec<T> {
    let w = run_with(&[s], XmlConfig::default(), |_| Ctl::go());
    for cut in 1..s.len() {
        if s.is_char_boundary(cut) {
            let got = run_with(&[&s[..cut], &s[cut..]], XmlConfig::default(), |_| Ctl::go());
            assert_eq!(got, w, "cut at {cut} of {s:?}");
        }
    }
    let chars: Vec<String> = s.chars().map(|c| c.to_string()).collect();
    let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(
        run_with(&refs, XmlConfig::default(), |_| Ctl::go()),
        w,
        "char by char {s:?}"
    );
    w.into_iter().map(|p| p.0).collect()
}

fn text(s: &str) -> T {
    T::Text(s.into())
}
fn start(n: &str) -> T {
    T::Start(n.into(), vec![], false)
}
fn end(n: &str) -> T {
    T::End(n.into())
}

#[test]
fn each_section_is_read_between_its_own_open_and_close_literals() {
    for (sec, body) in [
        (Section::CData, "x<y"),
        (Section::Comment, " c "),
        (Section::Pi, "t x"),
        (Section::Decl, "DOCTYPE x"),
    ] {
        let s = format!("a{}{body}{}b", sec.open(), sec.close());
        assert_eq!(
            split_invariant(&s),
            vec![text("a"), T::Sec(sec, body.into()), text("b"), T::Eof(0)],
            "{s}"
        );
    }
    assert_eq!((Section::Raw.open(), Section::Raw.close()), ("", ""));
}

#[test]
fn tags_text_and_offsets() {
    let w = run_with(&["a<b>c</b >"], XmlConfig::default(), |_| Ctl::go());
    assert_eq!(
        w,
        vec![
            (text("a"), 0),
            (start("b"), 1),
            (text("c"), 4),
            (end("b"), 5),
            (T::Eof(0), 10)
        ]
    );
    split_invariant("a<b>c</b >");
}

#[test]
fn attributes_and_self_closing() {
    let t = split_invariant(r#"<a x="1" y = 'a&amp;b>'/><c:d-e/>"#);
    assert_eq!(
        t[0],
        T::Start(
            "a".into(),
            vec![("x".into(), "1".into()), ("y".into(), "a&b>".into())],
            true
        )
    );
    assert_eq!(t[1], T::Start("c:d-e".into(), vec![], true));
}

#[test]
fn cdata_streams_and_splits_at_the_first_close() {
    let t = split_invariant("<v><![CDATA[a]]]]><![CDATA[>b<x>&amp;]]></v>");
    assert_eq!(
        t,
        vec![
            start("v"),
            T::Sec(Section::CData, "a]]".into()),
            T::Sec(Section::CData, ">b<x>&amp;".into()),
            end("v"),
            T::Eof(0)
        ]
    );
    assert_eq!(
        split_invariant("<![CDATA[]]]]]>"),
        vec![T::Sec(Section::CData, "]]]".into()), T::Eof(0)]
    );
}

#[test]
fn large_cdata_is_emitted_in_pieces_not_buffered() {
    let body = "x]".repeat(50_000);
    let doc = format!("<![CDATA[{body}]]>");
    let mut tok = XmlTokenizer::new(XmlConfig::default());
    let mut got = String::new();
    let mut pieces = 0;
    for (k, ch) in doc.as_bytes().chunks(7).enumerate() {
        let s = std::str::from_utf8(ch).unwrap();
        tok.feed(s, &mut |t, _| {
            if let Token::SectionText(_, p) = t {
                got.push_str(p);
                pieces += 1;
            }
            Ctl::go()
        });
        assert!(k < 2 || tok.held.len() < 3);
    }
    assert_eq!(got, body);
    assert!(pieces > 1000);
}

#[test]
fn entities_decoded_and_reported() {
    assert_eq!(
        split_invariant("a&lt;&#65;&#x1F600;&amp;&quot;&apos;&gt;"),
        vec![text("a<A😀&\"'>"), T::Eof(0)]
    );
    assert_eq!(
        split_invariant("&nbsp;x"),
        vec![
            T::Err(XmlErrorKind::UnknownEntity, "&nbsp;".into()),
            text("x"),
            T::Eof(0)
        ]
    );
    for bad in ["&#0;", "&#xD800;", "&#x110000;", "&#1;", "&#99999999999;"] {
        assert_eq!(
            split_invariant(bad),
            vec![T::Err(XmlErrorKind::InvalidCharRef, bad.into()), T::Eof(0)],
            "{bad}"
        );
    }
    assert_eq!(
        split_invariant("a & b"),
        vec![
            text("a "),
            T::Err(XmlErrorKind::BareAmp, "&".into()),
            text(" b"),
            T::Eof(0)
        ]
    );
    assert_eq!(
        split_invariant("AT&T!"),
        vec![
            text("AT"),
            T::Err(XmlErrorKind::BareAmp, "&".into()),
            text("T!"),
            T::Eof(0)
        ]
    );
    assert_eq!(
        split_invariant("&#xZZ;"),
        vec![
            T::Err(XmlErrorKind::BareAmp, "&".into()),
            text("#xZZ;"),
            T::Eof(0)
        ]
    );
}

#[test]
fn raw_entity_mode_keeps_references() {
    let cfg = XmlConfig {
        entities: EntityMode::Raw,
        ..XmlConfig::default()
    };
    let t = run_with(&["2&gt;/dev/null & &nbsp;"], cfg, |_| Ctl::go());
    assert_eq!(t[0].0, text("2&gt;/dev/null & &nbsp;"));
}

#[test]
fn stray_lt_is_text_with_a_flag() {
    assert_eq!(
        split_invariant("if a < b and x<3"),
        vec![
            text("if a "),
            T::Err(XmlErrorKind::StrayLt, "<".into()),
            text(" b and x"),
            T::Err(XmlErrorKind::StrayLt, "<".into()),
            text("3"),
            T::Eof(0)
        ]
    );
    // A candidate that fails late is rescanned: the inner `<c>` is still a tag.
    assert_eq!(
        split_invariant("<a b c<c>"),
        vec![
            T::Err(XmlErrorKind::StrayLt, "<".into()),
            text("a b c"),
            start("c"),
            T::Eof(1)
        ]
    );
    assert_eq!(
        split_invariant("x <tool"),
        vec![
            text("x "),
            T::Err(XmlErrorKind::Truncated, "<".into()),
            text("tool"),
            T::Eof(0)
        ]
    );
}

#[test]
fn truncated_constructs_at_the_end_are_text() {
    assert_eq!(
        split_invariant("AT&T"),
        vec![
            text("AT"),
            T::Err(XmlErrorKind::Truncated, "&".into()),
            text("T"),
            T::Eof(0)
        ]
    );
    assert_eq!(
        split_invariant("<a b='x"),
        vec![
            T::Err(XmlErrorKind::Truncated, "<".into()),
            text("a b='x"),
            T::Eof(0)
        ]
    );
}

#[test]
fn stray_cdata_end_in_text() {
    assert_eq!(
        split_invariant("a]]]>b]"),
        vec![
            text("a]"),
            T::Err(XmlErrorKind::StrayCDataEnd, "]]>".into()),
            text("b]"),
            T::Eof(0)
        ]
    );
}

#[test]
fn comments_pis_and_declarations_are_sections() {
    assert_eq!(
        split_invariant("<?xml version=\"1.0\"?><!DOCTYPE x><a><!-- c -- d --></a>"),
        vec![
            T::Sec(Section::Pi, "xml version=\"1.0\"".into()),
            T::Sec(Section::Decl, "DOCTYPE x".into()),
            start("a"),
            T::Sec(Section::Comment, " c -- d ".into()),
            end("a"),
            T::Eof(0)
        ]
    );
    assert_eq!(
        split_invariant("<!-x<? y"),
        vec![
            T::Err(XmlErrorKind::StrayLt, "<".into()),
            text("!-x"),
            T::Err(XmlErrorKind::StrayLt, "<".into()),
            text("? y"),
            T::Eof(0)
        ]
    );
}

#[test]
fn unclosed_sections_at_eof() {
    assert_eq!(
        split_invariant("<![CDATA[ab]"),
        vec![
            T::Sec(Section::CData, "ab]".into()),
            T::Err(XmlErrorKind::Unclosed(Section::CData), "".into()),
            T::Eof(0)
        ]
    );
}

#[test]
fn depth_limit() {
    let cfg = XmlConfig {
        max_depth: 2,
        ..XmlConfig::default()
    };
    let t: Vec<T> = run_with(&["<a><b><c>x</c></b></a>"], cfg, |_| Ctl::go())
        .into_iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(t[2], T::Err(XmlErrorKind::DepthLimit, "<c>".into()));
}

#[test]
fn tag_length_limit() {
    let cfg = XmlConfig {
        max_tag_bytes: 8,
        ..XmlConfig::default()
    };
    let t: Vec<T> = run_with(&["<a b=\"0123456789\">"], cfg, |_| Ctl::go())
        .into_iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(t[0], T::Err(XmlErrorKind::TagTooLong, "<".into()));
    assert_eq!(t[1], text("a b=\"0123456789\">"));
}

#[test]
fn raw_until_end_tag_split_anywhere() {
    let doc = "<p>a <b>&amp; </p <![CDATA[</p></q>";
    let ctl = |t: &Token<'_>| match t {
        Token::Start { name: "p", .. } => Ctl {
            raw_until: Some(RawUntil::EndTag("p".into())),
            ..Ctl::go()
        },
        _ => Ctl::go(),
    };
    let w = run_with(&[doc], XmlConfig::default(), ctl);
    assert_eq!(
        w.iter().map(|p| p.0.clone()).collect::<Vec<_>>(),
        vec![
            start("p"),
            text("a <b>&amp; </p <![CDATA["),
            end("p"),
            end("q"),
            T::Eof(0)
        ]
    );
    for cut in 1..doc.len() {
        assert_eq!(
            run_with(&[&doc[..cut], &doc[cut..]], XmlConfig::default(), ctl),
            w,
            "cut {cut}"
        );
    }
}

/// The tokens of `doc` with `<name>` read raw until its close, whole; fed in pieces of every
/// size up to `max` they must be the same (tokens and offsets).
fn raw_element_in_pieces(doc: &str, name: &'static str, max: usize) -> Vec<(T, u64)> {
    let ctl = |t: &Token<'_>| match t {
        Token::Start { name: n, .. } if *n == name => Ctl {
            raw_until: Some(RawUntil::EndTag(name.into())),
            ..Ctl::go()
        },
        _ => Ctl::go(),
    };
    let whole = run_with(&[doc], XmlConfig::default(), ctl);
    for size in 1..=max {
        let pieces: Vec<&str> = doc
            .as_bytes()
            .chunks(size)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let got = run_with(&pieces, XmlConfig::default(), ctl);
        assert_eq!(got, whole, "pieces of {size}");
    }
    whole
}

#[test]
fn raw_and_section_content_streamed_in_small_pieces() {
    // Pieces without the close's first byte take the content fast path, the others the state
    // machine; tokens and offsets must not tell them apart.
    let doc = "<p>x <b>y</b> ]] z</p><![CDATA[a ] b ]] c]]>tail</p>";
    let whole = raw_element_in_pieces(doc, "p", 6);
    assert!(whole.contains(&(text("x <b>y</b> ]] z"), 3)), "{whole:?}");
}

#[test]
fn short_pieces_with_a_lt_that_begins_no_close_are_content() {
    // `<` in code, streamed in pieces shorter than the close: all content unless a piece ends
    // with the close's beginning, which is held and then given back or completed.
    assert!(is_short_content(b"a < ", b"</content>"));
    assert!(is_short_content(b"<div", b"</content>"));
    assert!(is_short_content(b"</di", b"</content>"));
    assert!(!is_short_content(b"ab <", b"</content>"));
    assert!(!is_short_content(b"a </", b"</content>"));
    assert!(!is_short_content(b"</co", b"</content>"));
    let close = b"</content>";
    assert!(!is_short_content(close, close), "as long as the close");
    assert!(!is_short_content(b"", b""));
    let code = "if a < b && c > d { x[1] = 2; }\n\t<div class=\"x\">&amp;</div></cont";
    let whole = raw_element_in_pieces(&format!("<content>{code}</content>"), "content", 12);
    let tokens: Vec<T> = whole.into_iter().map(|p| p.0).collect();
    let want = vec![start("content"), text(code), end("content"), T::Eof(0)];
    assert_eq!(tokens, want);
}

#[test]
fn raw_mode_entered_on_a_stray_lt_keeps_the_held_construct() {
    // The host switches to raw mode at the stray `<` of a tag that began in an earlier chunk;
    // the held `r\né\n` must be rescanned as raw text, not dropped.
    let doc = "<t><r\né\né</t>";
    let ctl = |t: &Token<'_>| match t {
        Token::Error { .. } => Ctl {
            raw_until: Some(RawUntil::EndTag("t".into())),
            ..Ctl::go()
        },
        _ => Ctl::go(),
    };
    let w = run_with(&[doc], XmlConfig::default(), ctl);
    assert_eq!(w[2].0, text("r\né\né"));
    for cut in (1..doc.len()).filter(|&c| doc.is_char_boundary(c)) {
        assert_eq!(
            run_with(&[&doc[..cut], &doc[cut..]], XmlConfig::default(), ctl),
            w,
            "cut {cut}"
        );
    }
}

#[test]
fn raw_until_literal_and_partial_close_overlaps() {
    let doc = "<j>{\"a\":\"]]]>\"}]]>";
    let ctl = |t: &Token<'_>| match t {
        Token::Start { .. } => Ctl {
            raw_until: Some(RawUntil::Literal("]]>".into())),
            ..Ctl::go()
        },
        _ => Ctl::go(),
    };
    let w = run_with(&[doc], XmlConfig::default(), ctl);
    assert_eq!(w[1].0, text("{\"a\":\"]"));
    assert_eq!(w[2].0, T::RawEnd);
    for cut in 1..doc.len() {
        assert_eq!(
            run_with(&[&doc[..cut], &doc[cut..]], XmlConfig::default(), ctl),
            w
        );
    }
}

#[test]
fn pause_hands_the_rest_to_the_host() {
    let mut tok = XmlTokenizer::new(XmlConfig::default());
    let input = "x<tool>{\"a\":1}</tool>";
    let used = tok.feed(input, &mut |t, _| Ctl {
        pause: matches!(t, Token::Start { .. }),
        ..Ctl::go()
    });
    assert_eq!(&input[used..], "{\"a\":1}</tool>");
    tok.skip(7);
    let mut ends = Vec::new();
    let used2 = tok.feed(&input[used + 7..], &mut |t, off| {
        if let Token::End { name, .. } = t {
            ends.push((name.to_string(), off));
        }
        Ctl::go()
    });
    assert_eq!(used2, 7);
    assert_eq!(ends, vec![("tool".to_string(), 14)]);
}

#[test]
fn entity_mode_switch_applies_to_following_bytes() {
    let ctl = |t: &Token<'_>| match t {
        Token::Start { name: "d", .. } => Ctl {
            entities: Some(EntityMode::Decode),
            ..Ctl::go()
        },
        Token::End { name: "d", .. } => Ctl {
            entities: Some(EntityMode::Raw),
            ..Ctl::go()
        },
        _ => Ctl::go(),
    };
    let cfg = XmlConfig {
        entities: EntityMode::Raw,
        ..XmlConfig::default()
    };
    let t: Vec<T> = run_with(&["&amp;<d>&amp;</d>&amp;"], cfg, ctl)
        .into_iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(
        t,
        vec![
            text("&amp;"),
            start("d"),
            text("&"),
            end("d"),
            text("&amp;"),
            T::Eof(0)
        ]
    );
}

#[test]
fn non_ascii_names_and_text() {
    assert_eq!(
        split_invariant("<é a='ü'>ß😀</é>"),
        vec![
            T::Start("é".into(), vec![("a".into(), "ü".into())], false),
            text("ß😀"),
            end("é"),
            T::Eof(0)
        ]
    );
}

fn cuts_of(s: &str, cuts: &[usize]) -> Vec<String> {
    let mut cs: Vec<usize> = cuts
        .iter()
        .map(|c| if s.is_empty() { 0 } else { c % (s.len() + 1) })
        .filter(|&c| s.is_char_boundary(c))
        .collect();
    cs.sort();
    cs.dedup();
    let mut out = Vec::new();
    let mut prev = 0;
    for c in cs {
        out.push(s[prev..c].to_string());
        prev = c;
    }
    out.push(s[prev..].to_string());
    out
}

// ---- quick-xml oracle --------------------------------------------------------------------

/// One document event, normalised so both sides compare.
#[derive(Debug, Clone, PartialEq, Eq)]
enum O {
    Start(String),
    Empty(String),
    End(String),
    Chars(String),
    Comment(String),
}

fn push_chars(out: &mut Vec<O>, s: &str) {
    if s.is_empty() {
        return;
    }
    if let Some(O::Chars(a)) = out.last_mut() {
        a.push_str(s);
    } else {
        out.push(O::Chars(s.to_string()));
    }
}

fn oracle(doc: &str) -> Vec<O> {
    use quick_xml::events::Event as E;
    let mut r = quick_xml::Reader::from_str(doc);
    let mut out = Vec::new();
    loop {
        match r.read_event().expect("oracle input is well-formed") {
            E::Start(e) => out.push(O::Start(e.name().as_ref().to_string())),
            E::Empty(e) => out.push(O::Empty(e.name().as_ref().to_string())),
            E::End(e) => out.push(O::End(e.name().as_ref().to_string())),
            E::Text(t) => push_chars(&mut out, &t.xml10_content()),
            E::CData(t) => push_chars(&mut out, &t.xml10_content()),
            E::GeneralRef(g) => {
                let s = match g.resolve_char_ref().unwrap() {
                    Some(c) => c.to_string(),
                    None => quick_xml::escape::resolve_predefined_entity(&g.into_inner())
                        .unwrap()
                        .to_string(),
                };
                push_chars(&mut out, &s);
            }
            E::Comment(c) => out.push(O::Comment(c.xml10_content().into_owned())),
            E::Eof => break,
            other => panic!("unexpected oracle event {other:?}"),
        }
    }
    out
}

fn ours(chunks: &[String]) -> Vec<O> {
    let mut tok = XmlTokenizer::new(XmlConfig::default());
    let mut out = Vec::new();
    let mut comment: Option<String> = None;
    let mut sink = |t: Token<'_>, _| {
        match t {
            Token::Text(s) | Token::SectionText(Section::CData, s) => push_chars(&mut out, s),
            Token::SectionText(Section::Comment, s) => {
                if let Some(c) = comment.as_mut() {
                    c.push_str(s)
                }
            }
            Token::SectionStart(Section::Comment) => comment = Some(String::new()),
            Token::SectionEnd(Section::Comment) => {
                out.push(O::Comment(comment.take().unwrap_or_default()))
            }
            Token::Start {
                name, self_closing, ..
            } => out.push(if self_closing {
                O::Empty(name.to_string())
            } else {
                O::Start(name.to_string())
            }),
            Token::End { name, .. } => out.push(O::End(name.to_string())),
            Token::SectionStart(_) | Token::SectionEnd(_) | Token::Eof { .. } => {}
            other => panic!("unexpected token on well-formed input: {other:?}"),
        }
        Ctl::go()
    };
    for c in chunks {
        tok.feed(c, &mut sink);
    }
    tok.finish(&mut sink);
    out
}

fn arb_text() -> impl Strategy<Value = String> {
    // Raw character data (escaped when written) from a small alphabet with the risky bytes.
    proptest::collection::vec(
        prop_oneof![
            Just("a".to_string()),
            Just(" ".to_string()),
            Just("<".to_string()),
            Just("&".to_string()),
            Just(">".to_string()),
            Just("]".to_string()),
            Just("\"".to_string()),
            Just("é".to_string()),
            Just("😀".to_string()),
            Just("\n".to_string()),
        ],
        0..8,
    )
    .prop_map(|v| v.concat())
}

fn escape_text(s: &str, hex: bool) -> String {
    let mut o = String::new();
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '&' => o.push_str("&amp;"),
            '>' => o.push_str("&gt;"),
            'é' if hex => o.push_str("&#xE9;"),
            '"' if hex => o.push_str("&#34;"),
            _ => o.push(c),
        }
    }
    o
}

fn cdata(s: &str) -> String {
    format!("<![CDATA[{}]]>", s.replace("]]>", "]]]]><![CDATA[>"))
}

fn arb_node(depth: u32) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        (arb_text(), any::<bool>()).prop_map(|(t, h)| escape_text(&t, h)),
        arb_text().prop_map(|t| cdata(&t)),
        "[a-z ]{0,6}".prop_map(|t| format!("<!--{t}-->")),
        "[a-c]{1,3}".prop_map(|n| format!("<{n}/>")),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        2 => leaf,
        1 => ("[a-c][a-c0-9_]{0,3}", proptest::collection::vec(arb_node(depth - 1), 0..4))
            .prop_map(|(n, kids)| format!("<{n}>{}</{n}>", kids.concat())),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn agrees_with_quick_xml_under_random_cuts(
        kids in proptest::collection::vec(arb_node(3), 0..5),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let doc = format!("<root>{}</root>", kids.concat());
        let want = oracle(&doc);
        prop_assert_eq!(ours(std::slice::from_ref(&doc)), want.clone());
        prop_assert_eq!(ours(&cuts_of(&doc, &cuts)), want);
    }

    #[test]
    fn no_panic_and_split_invariant_on_arbitrary_input(
        s in "[<>&;!\\[\\]CDAT/?=\"'a-c#x0-9 é-]{0,40}",
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
        raw in any::<bool>(),
    ) {
        let cfg = XmlConfig {
            entities: if raw { EntityMode::Raw } else { EntityMode::Decode },
            max_depth: 3,
            max_tag_bytes: 12,
        };
        let w = run_with(&[&s], cfg.clone(), |_| Ctl::go());
        let parts = cuts_of(&s, &cuts);
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        prop_assert_eq!(run_with(&refs, cfg, |_| Ctl::go()), w);
    }

    #[test]
    fn no_panic_on_any_string(s in any::<String>(), cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
        let parts = cuts_of(&s, &cuts);
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        let _ = run_with(&refs, XmlConfig::default(), |_| Ctl::go());
    }
}

#[test]
fn held_close_prefix_is_the_longest_suffix_that_may_start_the_close() {
    let close = b"</content>";
    assert_eq!(held_close_prefix(b"abc", close), 0);
    assert_eq!(held_close_prefix(b"abc<", close), 1);
    assert_eq!(held_close_prefix(b"abc</cont", close), 6);
    // `<` followed by something the close does not continue with is not held.
    assert_eq!(held_close_prefix(b"a<b", close), 0);
    // The leftmost candidate wins: `]]` may still become `]]>`.
    assert_eq!(held_close_prefix(b"x]]", b"]]>"), 2);
    assert_eq!(held_close_prefix(b"]", b"]]>"), 1);
    // A complete close is not a proper prefix and is found by the search, not held.
    assert_eq!(held_close_prefix(b"-->", b"-->"), 0);
    assert_eq!(held_close_prefix(b"", close), 0);
    assert_eq!(held_close_prefix(b"<", b">"), 0);
}

#[test]
fn content_ahead_follows_the_close_across_held_bytes() {
    let mut tok = XmlTokenizer::new(XmlConfig::default());
    assert_eq!(tok.content_ahead(0, b"abc"), None, "not inside raw text");
    tok.feed("<p>", &mut |t, _| match t {
        Token::Start { .. } => Ctl {
            raw_until: Some(RawUntil::EndTag("p".into())),
            ..Ctl::go()
        },
        _ => Ctl::go(),
    });
    // The close is `</p>`: what the held bytes end with, or None once they would hold it.
    assert_eq!(tok.content_ahead(0, b"a < b"), Some(0));
    assert_eq!(tok.content_ahead(0, b"a <"), Some(1));
    assert_eq!(
        tok.content_ahead(0, b"<</"),
        Some(2),
        "a `<` restarts the match"
    );
    assert_eq!(tok.content_ahead(2, b"q>"), Some(0));
    assert_eq!(tok.content_ahead(2, b"p"), Some(3));
    assert_eq!(tok.content_ahead(3, b">"), None);
    assert_eq!(tok.content_ahead(1, b"/p>"), None);
    assert_eq!(tok.content_ahead(0, b"x</p>y"), None);
    assert_eq!(tok.content_ahead(0, b"<<</p>"), None);
    assert_eq!(
        tok.content_ahead(4, b"a"),
        None,
        "a `partial` past the close"
    );
    // A close that repeats its first byte is not followed: the host feeds at once.
    tok.feed("</p>", &mut |_, _| Ctl {
        raw_until: Some(RawUntil::Literal("]]>".into())),
        ..Ctl::go()
    });
    assert_eq!(tok.content_ahead(0, b"abc"), None);
}
