use super::*;
use crate::formats::REGISTRY;
use serde_json::json;

#[test]
fn json_escaping_round_trips() {
    for s in ["", "plain", "q\"b\\s", "\n\r\t\u{1}\u{1f}", "é😀</x>&"] {
        let mut out = String::from("\"");
        escape_json_into(&mut out, s);
        out.push('"');
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), json!(s));
    }
}

#[test]
fn tag_ends_respect_quotes_and_newlines() {
    let mut q = None;
    assert_eq!(
        tag_end("\"a>b\" string=\"true\">x", &mut q, false),
        Some((19, false))
    );
    let mut q = None;
    assert_eq!(tag_end("\"a", &mut q, false), None);
    assert_eq!(q, Some('"'));
    assert_eq!(tag_end(">\">", &mut q, false), Some((2, false)));
    let mut q = None;
    assert_eq!(tag_end("city\nParis>", &mut q, true), Some((4, true)));
    let mut single = false;
    assert_eq!(quoted("'f' x", &mut single), Some(("f".into(), " x")));
    assert!(single);
    assert_eq!(quoted("f", &mut single), None);
}

/// The scanner holds a partial delimiter only from a `<`; a delimiter with a second `<` or
/// one that is a prefix of another of its grammar would make roles ambiguous.
#[test]
fn every_grammar_delimiter_starts_with_lt_and_no_role_is_ambiguous() {
    for f in REGISTRY {
        let Some(_) = f.typing.as_ref().and_then(|t| t.schema_tool) else {
            continue;
        };
        let ms = (f.markers)(&Tools::default());
        assert!(!ms.is_empty(), "{}", f.id);
        for m in &ms {
            assert!(m.starts_with('<'), "{}: {m}", f.id);
            for n in &ms {
                assert!(m == n || !n.starts_with(m.as_str()), "{}: {m} / {n}", f.id);
            }
        }
    }
}
