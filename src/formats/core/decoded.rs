//! The UTF-8 side of a parser that reads text: what a chunk that is not plain ASCII goes
//! through, and what an invalid sequence does (the error, the open call spoiled, U+FFFD read
//! in its place), written once for the parsers that hold their own decoder.

use crate::event::{Event, Sink};
use crate::lexers::utf8::{Utf8Decoder, Utf8Piece};

/// A parser that reads decoded text and owns the decoder it is fed through.
pub(crate) trait DecodedText {
    /// The parser's decoder.
    fn decoder(&mut self) -> &mut Utf8Decoder;
    /// Reads a piece of text.
    fn feed_str(&mut self, s: &str, out: &mut dyn Sink);
    /// An invalid sequence fell inside what is open: the open call can no longer succeed.
    fn spoil(&mut self);
}

/// Feeds bytes that are not plain ASCII with nothing pending through `p`'s decoder. Out of
/// line, so that the per-chunk path that calls it stays small.
#[inline(never)]
pub(crate) fn feed_utf8<P: DecodedText>(p: &mut P, chunk: &[u8], out: &mut dyn Sink) {
    let mut utf8 = std::mem::take(p.decoder());
    utf8.feed(chunk, &mut |piece| read(p, piece, out));
    *p.decoder() = utf8;
}

/// Ends `p`'s decoder: a character cut by the end of the stream is invalid.
pub(crate) fn finish_utf8<P: DecodedText>(p: &mut P, out: &mut dyn Sink) {
    let mut utf8 = std::mem::take(p.decoder());
    utf8.finish(&mut |piece| read(p, piece, out));
    *p.decoder() = utf8;
}

fn read<P: DecodedText>(p: &mut P, piece: Utf8Piece<'_>, out: &mut dyn Sink) {
    match piece {
        Utf8Piece::Text(s) => p.feed_str(s, out),
        Utf8Piece::Invalid { offset } => {
            out.push(Event::invalid_utf8(offset));
            p.spoil();
            p.feed_str("\u{FFFD}", out);
        }
    }
}
