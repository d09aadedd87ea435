//! Tracks whether streamed prose is inside markdown code (a fence or an inline code span).
//!
//! Formats that embed tool markup in prose use it to keep examples and mentions inert: a tag
//! inside code is text. The rules are a streaming subset of CommonMark, chosen so that the
//! state never depends on text that has not arrived yet:
//!
//! - at the start of a line, after at most 3 spaces, a run of at least 3 backticks or tildes
//!   opens a fence; inside it, a line starting (after at most 3 spaces) with a run of the same
//!   character at least as long closes it;
//! - outside a fence, any other run of n backticks opens an inline code span, closed by the
//!   next run of exactly n backticks **or by the end of the line**, so a stray backtick never
//!   disables markup beyond its line.
//!
//! Feed it every piece of visible text in order ([`CodeTracker::push`]), mark non-text markup
//! with [`CodeTracker::markup`], and ask [`CodeTracker::in_code`] at each tag.

/// The markdown code state of the visible text seen so far.
#[derive(Debug, Clone, Default)]
pub struct CodeTracker {
    /// Inside a fence opened by this character and run length.
    fence: Option<(char, usize)>,
    /// Inside an inline code span opened by this many backticks.
    span: Option<usize>,
    /// A run of backticks or tildes not yet ended: (char, length, began a line).
    run: Option<(char, usize, bool)>,
    /// No non-space character on the current line yet (true at the start of the text).
    line_start: bool,
    /// Spaces seen at the start of the current line.
    indent: usize,
}

impl CodeTracker {
    /// A tracker at the start of a turn (start of a line, outside code).
    pub fn new() -> Self {
        CodeTracker {
            line_start: true,
            ..Default::default()
        }
    }

    /// Takes the next piece of visible text into account.
    pub fn push(&mut self, text: &str) {
        for c in text.chars() {
            self.ch(c);
        }
    }

    /// Notes non-text markup (such as a whole tool call): it ends a run and the line start,
    /// like one ordinary character.
    pub fn markup(&mut self) {
        self.end_run();
        self.line_start = false;
    }

    /// True when a tag arriving now would be inside code.
    pub fn in_code(&mut self) -> bool {
        // A tag ends any run of backticks before it.
        self.end_run();
        self.fence.is_some() || self.span.is_some()
    }

    fn ch(&mut self, c: char) {
        if let Some((rc, n, _)) = &mut self.run {
            if *rc == c {
                *n += 1;
                return;
            }
            self.end_run();
        }
        let may_fence = self.line_start && self.indent <= 3;
        if c == '`' || (c == '~' && may_fence) {
            self.run = Some((c, 1, may_fence));
            self.line_start = false;
            return;
        }
        match c {
            '\n' => {
                self.span = None;
                self.line_start = true;
                self.indent = 0;
            }
            ' ' if self.line_start => {
                self.indent += 1;
                if self.indent > 3 {
                    self.line_start = false;
                }
            }
            _ => self.line_start = false,
        }
    }

    fn end_run(&mut self) {
        let Some((c, n, began_line)) = self.run.take() else {
            return;
        };
        if let Some((fc, fl)) = self.fence {
            if began_line && c == fc && n >= fl {
                self.fence = None;
            }
            return;
        }
        if began_line && n >= 3 {
            self.fence = Some((c, n));
            self.span = None;
            return;
        }
        if c == '`' {
            self.span = match self.span {
                Some(l) if l == n => None,
                Some(l) => Some(l),
                None => Some(n),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_after(s: &str) -> bool {
        let mut t = CodeTracker::new();
        t.push(s);
        t.in_code()
    }

    #[test]
    fn fences_open_and_close_at_line_starts() {
        assert!(code_after("Example:\n```xml\n"));
        assert!(code_after("```\n"));
        assert!(code_after("   ~~~~\nx\n~~~\n"));
        assert!(!code_after("   ~~~~\nx\n~~~~\n"));
        assert!(!code_after("```\nx\n```\n"));
        assert!(code_after("```\nx\n``\n"));
        assert!(
            !code_after("    ```\n"),
            "four spaces: a span, ended by the line end"
        );
        assert!(code_after("    ```x"));
        assert!(!code_after("a ~~~ b"));
    }

    #[test]
    fn inline_spans_close_on_same_run_or_line_end() {
        assert!(code_after("use `"));
        assert!(!code_after("use `x` then "));
        assert!(code_after("use ``a`b"));
        assert!(!code_after("use ``a`b`` "));
        assert!(!code_after("stray ` here\n"));
    }

    #[test]
    fn split_pieces_give_the_same_state() {
        let s = "a\n``` rust\nx `y` <\n```\nz ``q";
        let whole = code_after(s);
        for cut in 0..=s.len() {
            if !s.is_char_boundary(cut) {
                continue;
            }
            let mut t = CodeTracker::new();
            t.push(&s[..cut]);
            t.push(&s[cut..]);
            assert_eq!(t.in_code(), whole, "cut {cut}");
        }
    }

    #[test]
    fn markup_ends_a_line_start() {
        let mut t = CodeTracker::new();
        t.push("x\n");
        t.markup();
        t.push("```\nfoo ");
        assert!(
            !t.in_code(),
            "``` after markup is an inline span, not a fence"
        );
        assert!(code_after("x\n```\nfoo "));
    }
}
