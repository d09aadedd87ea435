//! What a server hands its parser, and along which path (`specs/engines.md` §1): an external
//! parser that declares serving paths gets the whole input through its non-streaming entry
//! point and token-aligned deltas through its streaming one, and every parser that is not
//! conform's gets each turn only up to the token that ends it (a server's stop handling
//! consumes `<|im_end|>`, `<|eot_id|>`, `</s>`… before its parser sees the text).

use super::corpus::Case;
use crate::backends::{Paths, ServingPath};
use crate::formats::Format;
use serde::{Deserialize, Serialize};

/// Which replay of an external parser broke an invariant (absent for a parser that declares
/// no serving paths, and for conform's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayPath {
    /// The whole input through the non-streaming parser (`stream=false`).
    Batch,
    /// Token-aligned deltas through the streaming parser.
    Stream,
    /// The whole input as one streaming delta (a server coalescing deltas under load):
    /// reported apart, never a failure of the case.
    Coalesced,
}

impl ReplayPath {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayPath::Batch => "batch",
            ReplayPath::Stream => "stream",
            ReplayPath::Coalesced => "coalesced",
        }
    }

    /// The serving path the replay goes through.
    pub fn serving(self) -> ServingPath {
        match self {
            ReplayPath::Batch => ServingPath::Batch,
            ReplayPath::Stream | ReplayPath::Coalesced => ServingPath::Stream,
        }
    }
}

/// How a parser's replays are routed, from the paths it declares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Routes {
    /// The whole input's path (the baseline), if paths are declared.
    pub whole: Option<ReplayPath>,
    /// The chunkings' path, if paths are declared and one streams.
    pub chunked: Option<ReplayPath>,
    /// Whether the chunkings are replayed at all (not for a parser with only a batch path).
    pub chunkings: bool,
    /// Whether a separate coalesced replay is made (a parser with both paths).
    pub coalesced: bool,
}

impl Routes {
    /// The routes for a parser declaring `paths`.
    pub fn of(paths: Paths) -> Routes {
        match (paths.batch, paths.stream) {
            (false, false) => Routes {
                chunkings: true,
                ..Routes::default()
            },
            (true, true) => Routes {
                whole: Some(ReplayPath::Batch),
                chunked: Some(ReplayPath::Stream),
                chunkings: true,
                coalesced: true,
            },
            (true, false) => Routes {
                whole: Some(ReplayPath::Batch),
                ..Routes::default()
            },
            // Streaming only: the whole input is one streaming delta, the coalesced replay.
            (false, true) => Routes {
                whole: Some(ReplayPath::Coalesced),
                chunked: Some(ReplayPath::Stream),
                chunkings: true,
                coalesced: false,
            },
        }
    }

    /// Whether the whole input goes through the non-streaming path and the chunkings through
    /// the streaming one, so that a chunking's difference from the whole input is one of
    /// paths (`stream_batch_parity`).
    pub fn parity(self) -> bool {
        self.whole == Some(ReplayPath::Batch) && self.chunked == Some(ReplayPath::Stream)
    }

    /// Whether the whole input is the coalesced replay, so what it breaks is reported apart.
    pub fn whole_is_coalesced(self) -> bool {
        self.whole == Some(ReplayPath::Coalesced)
    }
}

/// Where a turn ends as a server's parser sees it: at the first of the format's stop tokens
/// (the server consumed it and generated nothing after it), else at its end.
pub fn served_len(format: &Format, turn: &[u8]) -> usize {
    format
        .stop_tokens
        .iter()
        .filter_map(|t| memchr::memmem::find(turn, t.as_bytes()))
        .min()
        .unwrap_or(turn.len())
}

/// The case as a server's parser receives it: each turn cut at its first stop token; `None`
/// when no turn holds one (the case is served as it is). A turn whose expected calls hold a
/// stop token's text in a name or an argument is not cut: the case says the model wrote those
/// characters inside a call (ordinary tokens, on which no server stops), and judging the
/// engine on the part before them against the whole expectation would blame it for conform's
/// cut. (A stop token the expected text keeps is cut as usual: the server consumes it there,
/// which the `stop_token` policy knows.)
pub fn served_case(case: &Case, format: &Format) -> Option<Case> {
    let lens: Vec<usize> = case
        .turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let expected = case.expects.get(i).and_then(Option::as_ref);
            if expected.is_some_and(|e| holds_stop_token(format, e)) {
                t.len()
            } else {
                served_len(format, t)
            }
        })
        .collect();
    if lens.iter().zip(&case.turns).all(|(n, t)| *n == t.len()) {
        return None;
    }
    let mut served = case.clone();
    for (t, n) in served.turns.iter_mut().zip(lens) {
        t.truncate(n);
    }
    Some(served)
}

/// Whether an expectation's calls (names and arguments) hold one of the format's stop tokens.
fn holds_stop_token(format: &Format, e: &super::corpus::Expectation) -> bool {
    let mut content: Vec<String> = Vec::new();
    for c in e.calls.iter().flatten() {
        content.push(c.name.clone());
        content.push(c.arguments.to_string());
    }
    format
        .stop_tokens
        .iter()
        .any(|t| content.iter().any(|c| c.contains(t)))
}

/// What one turn of a failing replay folded to, kept in the report so that a verdict can be
/// read (and a bug told apart from a policy) without replaying: text, reasoning, calls with
/// their arguments as JSON text, error kinds and warnings (each string cut at
/// [`GOT_MAX_CHARS`] characters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Got {
    /// The text.
    pub text: String,
    /// The reasoning, when the parser reports any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// The calls.
    #[serde(default)]
    pub calls: Vec<GotCall>,
    /// The error kinds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// The warnings, `kind: message`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One call of a [`Got`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GotCall {
    /// The name.
    pub name: String,
    /// The id, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The arguments as JSON text (a string the parser could not read as JSON stays a JSON
    /// string holding it).
    pub arguments: String,
}

/// Longest string a [`Got`] keeps, in characters.
pub const GOT_MAX_CHARS: usize = 2000;

fn cut(s: &str) -> String {
    match s.char_indices().nth(GOT_MAX_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

impl Got {
    /// The summary of a folded result.
    pub fn of(r: &crate::event::ParseResult) -> Got {
        Got {
            text: cut(&r.text),
            reasoning: r.reasoning.as_deref().map(cut),
            calls: r
                .calls
                .iter()
                .map(|c| GotCall {
                    name: cut(&c.name),
                    id: c.id.as_deref().map(cut),
                    arguments: cut(&c.arguments.to_string()),
                })
                .collect(),
            errors: r
                .error_kinds()
                .iter()
                .map(|k| k.as_str().to_string())
                .collect(),
            warnings: r
                .warnings
                .iter()
                .map(|w| cut(&format!("{}: {}", w.kind.as_str(), w.message)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_served_up_to_its_first_stop_token() {
        let f = crate::formats::by_id("hermes").unwrap();
        assert_eq!(served_len(f, b"Hi.<|im_end|>"), 3);
        assert_eq!(served_len(f, b"a<|endoftext|>b<|im_end|>"), 1);
        assert_eq!(served_len(f, b"no stop"), 7);
        let none = crate::formats::by_id("roo_xml").unwrap();
        assert_eq!(served_len(none, b"x<|im_end|>"), 11);
    }

    #[test]
    fn a_stop_token_the_expectation_holds_as_content_does_not_cut_the_turn() {
        let load = |id: &str| {
            let c = crate::harness::corpus::load(
                &[format!("corpus/pythonic/{id}.txt")],
                &crate::harness::corpus::LoadOptions::default(),
            );
            c.cases.into_iter().next().unwrap()
        };
        let f = crate::formats::by_id("pythonic").unwrap();
        // `<|eot|>` inside a string argument: served whole.
        let case = load("y_unicode_arguments");
        assert!(case.turns[0].windows(7).any(|w| w == b"<|eot|>"));
        assert!(served_case(&case, f).is_none());
        // A turn that ends with the stop token is still cut there.
        let mut ends = case.clone();
        ends.turns[0].extend_from_slice(b"<|eot|>");
        ends.expects[0].as_mut().unwrap().calls = Some(Vec::new());
        ends.expects[0].as_mut().unwrap().text = Some(String::new());
        let served = served_case(&ends, f).expect("cut at the stop token");
        assert!(served.turns[0].len() < case.turns[0].len());
        // A stop token the expected text keeps is where the server stops: cut.
        let k2 = crate::formats::by_id("kimi_k2").unwrap();
        let c = crate::harness::corpus::load(
            &["corpus/kimi_k2/y_text_im_end_after_section.txt".to_string()],
            &crate::harness::corpus::LoadOptions::default(),
        );
        assert!(served_case(&c.cases[0], k2).is_some());
    }

    #[test]
    fn routes_follow_the_declared_paths() {
        let both = Routes::of(Paths {
            batch: true,
            stream: true,
        });
        assert_eq!(both.whole, Some(ReplayPath::Batch));
        assert_eq!(both.chunked, Some(ReplayPath::Stream));
        assert!(both.coalesced && both.chunkings && !both.whole_is_coalesced());
        assert!(both.parity());
        let stream = Routes::of(Paths {
            batch: false,
            stream: true,
        });
        assert!(stream.whole_is_coalesced() && !stream.coalesced && stream.chunkings);
        assert!(!stream.parity());
        let batch = Routes::of(Paths {
            batch: true,
            stream: false,
        });
        assert!(!batch.chunkings && !batch.coalesced && !batch.parity());
        let none = Routes::of(Paths::default());
        assert_eq!((none.whole, none.chunked), (None, None));
        assert!(none.chunkings && !none.coalesced);
    }
}
