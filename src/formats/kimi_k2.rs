//! kimi_k2: placeholder until the parser lands.
use super::{Format, StreamParser};
use crate::event::Event;
use crate::tools::Tools;

struct P;
impl StreamParser for P {
    fn feed(&mut self, _c: &[u8], _o: &mut Vec<Event>) {}
    fn finish(&mut self, _o: &mut Vec<Event>) {}
}
fn new_parser(_t: &Tools) -> Box<dyn StreamParser> {
    Box::new(P)
}
fn markers(_t: &Tools) -> Vec<String> {
    Vec::new()
}
/// The kimi_k2 format.
pub static FORMAT: Format = Format {
    id: "kimi_k2",
    summary: "Kimi K2 special-token tool calls",
    new_parser,
    render: None,
    markers,
};
