//! Choosing the one chunking `conform parse` replays: given cuts, a case's recorded deltas, or
//! one chunking of a strategy made exactly as `conform run` makes it.

use super::chunking::{
    ChunkingParams, Cuts, Strategy, TokenCuts, TurnSources, turn_chunkings, turn_salt,
};
use super::corpus::Case;
use super::tokens::Tokenizer;
use crate::formats::Format;
use std::sync::Arc;

/// Which chunking to replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// These cuts, one list per turn (a missing list: the turn whole).
    Cuts(Vec<Vec<usize>>),
    /// The case's recorded deltas (its `.deltas.json` sidecar).
    Recorded,
    /// Chunking number `index` (from 0) of a strategy, as `conform run` makes it.
    Strategy {
        /// The strategy.
        strategy: Strategy,
        /// Which of its chunkings.
        index: usize,
    },
}

/// A choice and what it needs.
#[derive(Debug, Clone)]
pub struct Selection {
    /// Which chunking.
    pub choice: Choice,
    /// Seed and sizes, as given to `conform run`.
    pub params: ChunkingParams,
    /// The tokenizer (`None`: the built-in o200k_base).
    pub tokenizer: Option<Arc<Tokenizer>>,
    /// Attach token ids to given or recorded cuts: every cut must then be a token boundary.
    pub token_ids: bool,
}

/// The cuts of each turn of `case` that `sel` chooses; the error says why there are none.
pub fn select_cuts(case: &Case, format: &Format, sel: &Selection) -> Result<Vec<Cuts>, String> {
    let markers = (format.markers)(&case.tools);
    let sources = TurnSources::of_case(case, format, sel.tokenizer.as_deref());
    let lists: Vec<Vec<usize>> = match &sel.choice {
        Choice::Strategy { strategy, index } => {
            let per_turn: Vec<Vec<Cuts>> = sources
                .iter()
                .enumerate()
                .map(|(t, s)| {
                    turn_chunkings(*strategy, &markers, &sel.params, turn_salt(&case.id, t), s)
                })
                .collect();
            let made = per_turn.iter().map(Vec::len).max().unwrap_or(0);
            if *strategy == Strategy::Whole {
                return Ok(case.turns.iter().map(|_| Cuts::At(Vec::new())).collect());
            }
            if *index >= made {
                return Err(format!(
                    "strategy {strategy} makes {made} chunking(s) of {}; chunking {index} does not exist",
                    case.id
                ));
            }
            return Ok(per_turn
                .into_iter()
                .map(|mut c| {
                    if *index < c.len() {
                        c.swap_remove(*index)
                    } else {
                        Cuts::At(Vec::new())
                    }
                })
                .collect());
        }
        Choice::Recorded => match &case.recorded {
            Some(r) => vec![r.cuts.clone()],
            None => {
                return Err(format!(
                    "{} has no recorded deltas (no .deltas.json sidecar beside it)",
                    case.id
                ));
            }
        },
        Choice::Cuts(lists) => {
            if lists.len() > case.turns.len() {
                return Err(format!(
                    "{} cut lists for {} turn(s)",
                    lists.len(),
                    case.turns.len()
                ));
            }
            for (t, (c, data)) in lists.iter().zip(&case.turns).enumerate() {
                if let Some(bad) = c.iter().find(|&&o| o == 0 || o >= data.len()) {
                    return Err(format!(
                        "cut offset {bad} is outside 1..{} of turn {}",
                        data.len(),
                        t + 1
                    ));
                }
            }
            lists.clone()
        }
    };
    sources
        .iter()
        .enumerate()
        .map(|(t, s)| {
            let cuts = lists.get(t).cloned().unwrap_or_default();
            if !sel.token_ids {
                return Ok(Cuts::At(cuts));
            }
            let tokens = s.tokens();
            let bad = cuts.iter().find(|&&c| !tokens.is_boundary(c)).copied();
            match (bad, TokenCuts::aligned(&tokens, cuts)) {
                (None, Some(aligned)) => Ok(aligned),
                (bad, _) => Err(format!(
                    "cut {} of turn {} is not a token boundary of {} (token ids need token-aligned cuts)",
                    bad.unwrap_or_default(),
                    t + 1,
                    sel.tokenizer.as_deref().map_or_else(
                        || super::vocab::tokenizer_for(format).name().to_string(),
                        |t| t.name().to_string()
                    )
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::corpus::{Label, Recorded};
    use crate::tools::Tools;
    use std::path::PathBuf;

    fn case(text: &str, recorded: Option<Vec<usize>>) -> Case {
        Case {
            id: "corpus/kimi_k2/y_x.txt".into(),
            format: "kimi_k2",
            label: Label::Accept,
            turns: vec![text.as_bytes().to_vec()],
            expects: vec![None],
            tools: Arc::new(Tools::default()),
            path: PathBuf::from("corpus/kimi_k2/y_x.txt"),
            line_id: None,
            recorded: recorded.map(|cuts| {
                Arc::new(Recorded {
                    cuts,
                    tokens: None,
                    tokenizer: None,
                    source: None,
                    engine: None,
                    model: None,
                    note: None,
                })
            }),
            options: Arc::default(),
        }
    }

    fn sel(choice: Choice, token_ids: bool) -> Selection {
        Selection {
            choice,
            params: ChunkingParams::default(),
            tokenizer: None,
            token_ids,
        }
    }

    #[test]
    fn each_choice_gives_the_cuts_run_would_replay() {
        let f = crate::formats::by_id("kimi_k2").unwrap();
        let text = "hello world<|im_end|>";
        let c = case(text, Some(vec![5, 11]));
        let rec = select_cuts(&c, f, &sel(Choice::Recorded, false)).unwrap();
        assert_eq!(rec, vec![Cuts::At(vec![5, 11])]);
        let with_ids = select_cuts(&c, f, &sel(Choice::Recorded, true)).unwrap();
        let ids = with_ids[0].chunk_token_ids().unwrap();
        assert_eq!(ids[2], &[Some(163586)], "<|im_end|>'s declared id");

        let tokens = Choice::Strategy {
            strategy: Strategy::Tokens,
            index: 0,
        };
        let t = select_cuts(&c, f, &sel(tokens, false)).unwrap();
        assert_eq!(t[0].to_vec(text.as_bytes()), vec![5, 11]);
        let bursts = |index| Choice::Strategy {
            strategy: Strategy::Bursts,
            index,
        };
        let b3 = select_cuts(&c, f, &sel(bursts(3), false)).unwrap();
        let sources = TurnSources::new(text.as_bytes(), None, f.special_tokens, c.recorded_cuts(0))
            .with_format(f);
        let made = turn_chunkings(
            Strategy::Bursts,
            &[],
            &ChunkingParams::default(),
            turn_salt(&c.id, 0),
            &sources,
        );
        assert_eq!(b3[0], made[3], "the same chunking conform run replays");
        let e = select_cuts(&c, f, &sel(bursts(4), false)).unwrap_err();
        assert!(e.contains("makes 4 chunking(s)"), "{e}");
    }

    #[test]
    fn bad_choices_are_errors() {
        let f = crate::formats::by_id("kimi_k2").unwrap();
        let c = case("hello world", None);
        let e = select_cuts(&c, f, &sel(Choice::Recorded, false)).unwrap_err();
        assert!(e.contains("no recorded deltas"), "{e}");
        let e = select_cuts(&c, f, &sel(Choice::Cuts(vec![vec![4]]), true)).unwrap_err();
        let name = crate::harness::vocab::tokenizer_for(f).name().to_string();
        assert!(
            e.contains(&format!(
                "cut 4 of turn 1 is not a token boundary of {name}"
            )),
            "{e}"
        );
        let e = select_cuts(&c, f, &sel(Choice::Cuts(vec![vec![11]]), false)).unwrap_err();
        assert!(e.contains("outside 1..11"), "{e}");
        let e = select_cuts(&c, f, &sel(Choice::Cuts(vec![vec![], vec![]]), false)).unwrap_err();
        assert!(e.contains("2 cut lists for 1 turn"), "{e}");
        let ok = select_cuts(&c, f, &sel(Choice::Cuts(vec![vec![5]]), true)).unwrap();
        assert_eq!(ok[0].chunk_token_ids().unwrap().len(), 2);
    }
}
