//! `deepseek_v3`: DeepSeek V3 / V3-0324 / R1 calls with a type and a fenced JSON body
//! (`specs/deepseek_v3.md`):
//!
//! ```text
//! <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//! ```json
//! {…}
//! ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//! ```
//!
//! The section grammar, markers and options are `deepseek_v31`'s; only the call body differs.

use crate::formats::core::entry;
use crate::formats::deepseek_v31::{Deepseek, MARKERS, Shape, Shaped};
use crate::formats::delimited::Driver;
use crate::formats::{Format, StreamParser};

/// The options: the same leniencies as `deepseek_v31` (`specs/deepseek_v3.md` §Options).
pub use crate::formats::deepseek_v31::Config;

/// A deepseek_v3 parser with the given options.
pub fn parser(cfg: Config) -> impl StreamParser {
    Driver::new(Deepseek::new(Shape::V3, cfg), &MARKERS, cfg.limits)
}

/// What sets deepseek_v3 apart: its call body, `function<｜tool▁sep｜>NAME⏎```json⏎{…}⏎````
/// between the call markers, in the renderer too.
struct V3;

impl Shaped for V3 {
    const ID: &'static str = "deepseek_v3";
    const SUMMARY: &'static str = "DeepSeek V3 / R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME⏎```json⏎{json}⏎```<｜tool▁call▁end｜>…";
    const SHAPE: Shape = Shape::V3;
}

/// The deepseek_v3 format.
pub static FORMAT: Format = entry::format::<V3>();

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorKind, ParseResult};
    use crate::formats::core::testkit::every_cut;
    use crate::formats::deepseek_v31::reasoned;
    use serde_json::json;

    fn all_ways(s: &str) -> ParseResult {
        every_cut(&|| Box::new(parser(Config::default())), s.as_bytes()).0
    }

    #[test]
    fn think_blocks_are_reasoning_before_the_section() {
        let mk = || reasoned(Shape::V3, Config::default());
        let r = every_cut(
            &mk,
            "<think>plan</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": \"</think>\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>".as_bytes(),
        )
        .0;
        assert_eq!(r.reasoning_text(), "plan");
        assert_eq!(r.text, "");
        assert_eq!(r.calls[0].arguments, json!({"a": "</think>"}));
    }

    #[test]
    fn template_form_with_pretty_json_and_fences_in_strings() {
        let r = all_ways(
            "Let me look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\n  \"city\": \"Tokyo ```\\n｜\"\n}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        );
        assert_eq!(r.text, "Let me look.");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].arguments, json!({"city": "Tokyo ```\n｜"}));
        assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
    }

    #[test]
    fn wrong_type_fence_or_shape_drop_the_call() {
        let ok =
            "<｜tool▁call▁begin｜>function<｜tool▁sep｜>ok\n```json\n{}\n```<｜tool▁call▁end｜>";
        for (bad, kind) in [
            (
                "<｜tool▁call▁begin｜>get<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜>",
                ErrorKind::MalformedMarkup,
            ),
            (
                "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n{\"a\": 1}\n```<｜tool▁call▁end｜>",
                ErrorKind::MalformedMarkup,
            ),
            (
                "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}<｜tool▁call▁end｜>",
                ErrorKind::MalformedMarkup,
            ),
            (
                "<｜tool▁call▁begin｜>function<｜tool▁sep｜>\n```json\n{}\n```<｜tool▁call▁end｜>",
                ErrorKind::MissingName,
            ),
            (
                "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n\n```<｜tool▁call▁end｜>",
                ErrorKind::EmptyArguments,
            ),
            (
                "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": tru}\n```<｜tool▁call▁end｜>",
                ErrorKind::InvalidJson,
            ),
        ] {
            let r = all_ways(&format!(
                "<｜tool▁calls▁begin｜>{bad}{ok}<｜tool▁calls▁end｜>"
            ));
            assert_eq!(r.error_kinds(), vec![kind], "{bad}");
            assert_eq!(r.calls.len(), 1, "{bad}");
            assert_eq!(r.calls[0].name, "ok");
        }
    }

    #[test]
    fn cut_after_the_json_keeps_the_call() {
        let r = all_ways(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}\n``",
        );
        assert_eq!(r.calls.len(), 1);
        let w: Vec<&str> = r.warnings.iter().map(|w| w.kind.as_str()).collect();
        assert_eq!(w, ["missing_call_end", "missing_section_end"]);
    }
}
