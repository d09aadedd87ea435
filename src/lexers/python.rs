//! A streaming reader of a Python call list, `[get_weather(city="Paris"), get_time()]`, whose
//! keyword arguments are mapped to JSON objects.
//!
//! Values follow Python's literal rules: strings with either quote, triple quotes, prefixes
//! and escapes; ints of any length (decimal, hex, octal, binary; `_` separators); finite
//! floats; `True`/`False`/`None`; lists, tuples (→ arrays) and dicts with string keys; a sign
//! on a number. Anything else that is still Python (a name, a call, an f-string, a positional
//! argument…) makes only its call bad; a syntax error (an unbalanced bracket or quote) makes
//! the whole list bad. The list is a call list once `[NAME(` is read; before that it may
//! still be prose (`[Note] …`, `[]`), and its raw text is kept to be shown as text.
//!
//! Input arrives in pieces cut anywhere (at character boundaries); every character is looked
//! at once, memory is bounded by the limits.

/// One call of the list: its (possibly dotted) name and its arguments as JSON object text,
/// or why they cannot be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyCall {
    /// The called name as written (`get_weather`, `tools.search`).
    pub name: String,
    /// The keyword arguments as a JSON object, or why the call is not a literal call.
    pub arguments: Result<String, String>,
    /// In a [`PyDialect::json_literals`] reader: a Python `True`, `False` or `None` was read
    /// where the dialect writes JSON's (the format decides whether that is a leniency).
    pub python_literals: bool,
}

/// What a reader accepts beyond a bracketed Python call list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PyDialect {
    /// Calls without brackets, one after another, each after a line break or a comma (Olmo 3's
    /// `<function_calls>f(a=1)⏎g()</function_calls>`): the list ends at a `<` where a call
    /// could start (the caller's closing delimiter, handed back unread) or at the end of the
    /// input after a complete call. `#` is no comment here (a comment would hide the close).
    pub bare: bool,
    /// `true`, `false` and `null` are the literals (Olmo 3); Python's `True`, `False` and
    /// `None` are still read, and flagged on the call ([`PyCall::python_literals`]).
    pub json_literals: bool,
}

/// What a [`PyListReader::feed`] call found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PyStep {
    /// All input taken; the list goes on.
    NeedMore,
    /// The list closed after `consumed` bytes of this piece.
    Done {
        /// Bytes of the piece that belong to the list.
        consumed: usize,
        /// Its calls, in order.
        calls: Vec<PyCall>,
        /// The first place the list is laid out as Python allows but a call template never
        /// writes `[f(a=1, b=2), g()]` (whitespace after `[` or `(`, before `(` or `=`, a comma
        /// after the last call, a comment), described; never set in the bare dialect.
        layout: Option<&'static str>,
    },
    /// What was read is not a call list; `raw` is its text, and the piece's bytes from
    /// `consumed` on were not taken.
    NotAList {
        /// Bytes of the piece taken into `raw`.
        consumed: usize,
        /// The text read so far (this piece's part included).
        raw: String,
    },
    /// A syntax error (or a limit, with `limit`) after `consumed` bytes of this piece.
    Error {
        /// Bytes of the piece taken before the error.
        consumed: usize,
        /// What is wrong and where.
        message: String,
        /// The error is a size or nesting limit.
        limit: bool,
    },
}

/// Limits of one list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyLimits {
    /// Longest list in bytes.
    pub max_bytes: usize,
    /// Deepest nesting of brackets inside one argument.
    pub max_depth: usize,
}

/// Longest identifier or number token.
pub const MAX_TOKEN: usize = 1024;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// An identifier longer than [`MAX_TOKEN`] met before the list is committed: not kept,
    /// only told apart (a call name over the limit, or a long word in bracketed prose).
    LongIdent,
    /// A string literal's value, or why it is not a plain string (bytes, f-string, bad escape).
    Str(Result<String, &'static str>),
    /// A number as JSON text, or why it cannot be one.
    Num(Result<String, &'static str>),
    P(char),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    None,
    Start,
    /// Octal digits so far.
    Oct(u8, u32),
    /// Hex digits still needed.
    Hex(u8, u32),
    /// Inside `\N{…}`.
    Named,
}

#[derive(Debug)]
struct StrLex {
    q: char,
    triple: bool,
    raw: bool,
    bad: Option<&'static str>,
    buf: String,
    esc: Esc,
    /// Consecutive closing quotes seen (triple-quoted strings).
    run: u8,
}

#[derive(Debug)]
enum Lex {
    Idle,
    Comment,
    Ident(String),
    /// The rest of an identifier past [`MAX_TOKEN`], before the list is committed: counted
    /// by the list's byte limit, not stored.
    LongIdent,
    Num(String),
    /// `.`: a digit next makes it a number.
    Dot,
    /// `n` opening quotes seen, string flags from the prefix.
    Quote {
        q: char,
        n: u8,
        raw: bool,
        bad: Option<&'static str>,
    },
    Str(Box<StrLex>),
    /// A backslash outside a string: a line continuation if a newline follows.
    Backslash,
}

/// A container being built inside an argument value.
#[derive(Debug, Clone, Copy)]
enum Frame {
    List { n: usize },
    Tuple { n: usize, start: usize, comma: bool },
    Dict { n: usize, st: DictSt },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DictSt {
    Key,
    Colon,
    Value,
    After,
}

#[derive(Debug)]
enum Top {
    Open,
    /// After `[` (uncommitted) or after `,` (committed): a call or `]`.
    ListItem,
    /// A name; `true` while an identifier must follow a dot.
    Name(String, bool),
    /// A name with a part over [`MAX_TOKEN`], before the list is committed; `true` while an
    /// identifier must follow a dot. A `(` next makes it a call over the limit.
    LongName(bool),
    /// Inside the call's parentheses.
    ArgStart,
    ArgIdent(String),
    /// Reading the value of this keyword.
    Value(String),
    ArgAfter,
    /// A bad argument: skipping to its end, with the brackets opened inside it.
    SkipArg(Vec<char>),
    AfterCall,
    Done,
}

/// The push reader of one Python call list (see the module documentation).
#[derive(Debug)]
pub struct PyListReader {
    limits: PyLimits,
    dialect: PyDialect,
    /// A line break was read since the last token (the bare dialect's call separator).
    line_break: bool,
    /// The current call used a Python literal in a JSON-literal dialect.
    py_literal: bool,
    /// Whitespace or a comment was read since the last token.
    spaced: bool,
    /// The last token opened the list or a call's arguments (`[` or `(`).
    opened: bool,
    /// [`PyStep::Done::layout`] so far.
    layout: Option<&'static str>,
    lex: Lex,
    top: Top,
    committed: bool,
    raw: String,
    calls: Vec<PyCall>,
    /// The current call: name, JSON text so far, keywords seen, why it is bad.
    name: String,
    json: String,
    keys: Vec<String>,
    bad: Option<String>,
    stack: Vec<Frame>,
    sign: Option<char>,
    bytes: usize,
}

/// Why a step ended the list.
enum Stop {
    Done,
    NotAList,
    Syntax(String),
    Limit(String),
}

impl PyListReader {
    /// A reader at the `[` that may open a list.
    pub fn new(limits: PyLimits) -> PyListReader {
        PyListReader::with_dialect(limits, PyDialect::default())
    }

    /// A reader of `dialect`: at the `[` of a list, or, bare, where the first call may start.
    pub fn with_dialect(limits: PyLimits, dialect: PyDialect) -> PyListReader {
        PyListReader {
            limits,
            dialect,
            line_break: false,
            py_literal: false,
            spaced: false,
            opened: false,
            layout: None,
            lex: Lex::Idle,
            top: if dialect.bare {
                Top::ListItem
            } else {
                Top::Open
            },
            committed: false,
            raw: String::new(),
            calls: Vec::new(),
            name: String::new(),
            json: String::new(),
            keys: Vec::new(),
            bad: None,
            stack: Vec::new(),
            sign: None,
            bytes: 0,
        }
    }

    /// Whether `[NAME(` was read: the text is a call list.
    pub fn committed(&self) -> bool {
        self.committed
    }

    /// Feeds the next piece.
    pub fn feed(&mut self, s: &str) -> PyStep {
        let mut i = 0;
        while i < s.len() {
            // Fast path: plain string body.
            if let Lex::Str(st) = &mut self.lex
                && st.esc == Esc::None
                && st.run == 0
            {
                let rest = &s.as_bytes()[i..];
                let stop = memchr::memchr3(st.q as u8, b'\\', b'\n', rest).unwrap_or(rest.len());
                if stop > 0 {
                    st.buf.push_str(&s[i..i + stop]);
                    if let Some(r) = self.grow(stop, s, i) {
                        return r;
                    }
                    i += stop;
                    continue;
                }
            }
            let Some(c) = s[i..].chars().next() else {
                break;
            };
            let (stop, taken) = self.char(c);
            if taken {
                if let Some(r) = self.grow(c.len_utf8(), s, i) {
                    return r;
                }
                i += c.len_utf8();
            }
            if let Some(stop) = stop {
                return self.stop(stop, s, i);
            }
        }
        if !self.committed {
            self.raw.push_str(s);
        }
        PyStep::NeedMore
    }

    /// The input ended: a list never committed is text; a committed one was cut.
    pub fn finish(&mut self) -> PyStep {
        if self.dialect.bare
            && self.committed
            && matches!(self.top, Top::AfterCall)
            && matches!(self.lex, Lex::Idle)
        {
            return PyStep::Done {
                consumed: 0,
                calls: std::mem::take(&mut self.calls),
                layout: None,
            };
        }
        if !self.committed {
            return PyStep::NotAList {
                consumed: 0,
                raw: std::mem::take(&mut self.raw),
            };
        }
        PyStep::Error {
            consumed: 0,
            message: "the stream ended inside the call list".into(),
            limit: false,
        }
    }

    /// Counts bytes taken; past the limit, the list fails.
    fn grow(&mut self, n: usize, s: &str, i: usize) -> Option<PyStep> {
        self.bytes += n;
        (self.bytes > self.limits.max_bytes).then(|| {
            let msg = format!("a call list longer than {} bytes", self.limits.max_bytes);
            if self.committed {
                self.stop(Stop::Limit(msg), s, i + n)
            } else {
                self.stop(Stop::NotAList, s, i + n)
            }
        })
    }

    fn stop(&mut self, stop: Stop, s: &str, at: usize) -> PyStep {
        match stop {
            Stop::Done => PyStep::Done {
                consumed: at,
                calls: std::mem::take(&mut self.calls),
                layout: self.layout.take(),
            },
            Stop::NotAList => {
                let mut raw = std::mem::take(&mut self.raw);
                raw.push_str(&s[..at]);
                PyStep::NotAList { consumed: at, raw }
            }
            Stop::Syntax(message) => PyStep::Error {
                consumed: at,
                message,
                limit: false,
            },
            Stop::Limit(message) => PyStep::Error {
                consumed: at,
                message,
                limit: true,
            },
        }
    }

    /// Lexes one character: (the list ended, the character was taken).
    fn char(&mut self, c: char) -> (Option<Stop>, bool) {
        if self.dialect.bare
            && c == '<'
            && matches!(self.lex, Lex::Idle)
            && matches!(self.top, Top::AfterCall | Top::ListItem)
        {
            // The caller's delimiter: the calls so far are the list.
            return (Some(Stop::Done), false);
        }
        match &mut self.lex {
            Lex::Idle => match c {
                '\n' => {
                    self.line_break = true;
                    self.spaced = true;
                    (None, true)
                }
                ' ' | '\t' | '\r' | '\x0c' => {
                    self.spaced = true;
                    (None, true)
                }
                '#' if !self.dialect.bare => {
                    self.lex = Lex::Comment;
                    self.spaced = true;
                    self.deviate("a comment");
                    (None, true)
                }
                '"' | '\'' => {
                    self.lex = Lex::Quote {
                        q: c,
                        n: 1,
                        raw: false,
                        bad: None,
                    };
                    (None, true)
                }
                '0'..='9' => {
                    self.lex = Lex::Num(c.to_string());
                    (None, true)
                }
                '.' => {
                    self.lex = Lex::Dot;
                    (None, true)
                }
                '\\' => {
                    self.lex = Lex::Backslash;
                    (None, true)
                }
                c if c == '_' || c.is_alphabetic() => {
                    self.lex = Lex::Ident(c.to_string());
                    (None, true)
                }
                c => (self.token(Tok::P(c)), true),
            },
            Lex::Comment => {
                if c == '\n' {
                    self.lex = Lex::Idle;
                }
                (None, true)
            }
            Lex::Backslash => {
                self.lex = Lex::Idle;
                match c {
                    '\n' => (None, true),
                    '\r' => {
                        self.lex = Lex::Backslash;
                        (None, true)
                    }
                    _ => (self.token(Tok::P('\\')), false),
                }
            }
            Lex::Dot => {
                if c.is_ascii_digit() {
                    self.lex = Lex::Num(format!(".{c}"));
                    (None, true)
                } else {
                    self.lex = Lex::Idle;
                    (self.token(Tok::P('.')), false)
                }
            }
            Lex::Ident(id) => {
                if c == '_' || c.is_alphanumeric() {
                    if id.len() >= MAX_TOKEN {
                        if self.committed {
                            return (Some(self.too_long()), true);
                        }
                        // Whether it is a call's name shows only after it: keep reading.
                        self.lex = Lex::LongIdent;
                        return (None, true);
                    }
                    id.push(c);
                    return (None, true);
                }
                if c == '"' || c == '\'' {
                    let p = id.to_ascii_lowercase();
                    let flags = match p.as_str() {
                        "r" => Some((true, None)),
                        "u" => Some((false, None)),
                        "b" | "br" | "rb" => Some((p.contains('r'), Some("bytes are not JSON"))),
                        "f" | "fr" | "rf" => {
                            Some((p.contains('r'), Some("f-strings are not literals")))
                        }
                        _ => None,
                    };
                    if let Some((raw, bad)) = flags {
                        self.lex = Lex::Quote {
                            q: c,
                            n: 1,
                            raw,
                            bad,
                        };
                        return (None, true);
                    }
                }
                let id = std::mem::take(id);
                self.lex = Lex::Idle;
                (self.token(Tok::Ident(id)), false)
            }
            Lex::LongIdent => {
                if c == '_' || c.is_alphanumeric() {
                    return (None, true);
                }
                self.lex = Lex::Idle;
                (self.token(Tok::LongIdent), false)
            }
            Lex::Num(n) => {
                let prev = n.chars().last().unwrap_or('0');
                let exp_sign = (c == '+' || c == '-')
                    && (prev == 'e' || prev == 'E')
                    && !n.starts_with("0x")
                    && !n.starts_with("0X");
                if c.is_ascii_alphanumeric() || c == '_' || c == '.' || exp_sign {
                    if n.len() >= MAX_TOKEN {
                        return (Some(self.too_long()), true);
                    }
                    n.push(c);
                    return (None, true);
                }
                let n = std::mem::take(n);
                self.lex = Lex::Idle;
                match number(&n) {
                    Some(t) => (self.token(Tok::Num(t)), false),
                    None => (
                        Some(Stop::Syntax(format!(
                            "invalid number literal {n:?} in the call list"
                        ))),
                        false,
                    ),
                }
            }
            Lex::Quote { q, n, raw, bad } => {
                let (q, n, raw, bad) = (*q, *n, *raw, *bad);
                if c == q {
                    if n == 2 {
                        self.lex = Lex::Str(Box::new(StrLex {
                            q,
                            triple: true,
                            raw,
                            bad,
                            buf: String::new(),
                            esc: Esc::None,
                            run: 0,
                        }));
                    } else {
                        self.lex = Lex::Quote { q, n: 2, raw, bad };
                    }
                    return (None, true);
                }
                if n == 2 {
                    // `""`: an empty string, and `c` comes after it.
                    self.lex = Lex::Idle;
                    return (
                        self.token(Tok::Str(bad.map_or(Ok(String::new()), Err))),
                        false,
                    );
                }
                self.lex = Lex::Str(Box::new(StrLex {
                    q,
                    triple: false,
                    raw,
                    bad,
                    buf: String::new(),
                    esc: Esc::None,
                    run: 0,
                }));
                self.char(c)
            }
            Lex::Str(st) => {
                match string_char(st, c) {
                    StrStep::More => (None, true),
                    StrStep::Again => {
                        // Closing quotes that were content: `c` is read again after them.
                        (None, false)
                    }
                    StrStep::End => {
                        let st = std::mem::replace(&mut self.lex, Lex::Idle);
                        let Lex::Str(st) = st else {
                            return (None, true);
                        };
                        let v = match st.bad {
                            Some(why) => Err(why),
                            None => Ok(st.buf),
                        };
                        (self.token(Tok::Str(v)), true)
                    }
                    StrStep::Eol => (
                        Some(Stop::Syntax(
                            "a line break inside a one-line string in the call list".into(),
                        )),
                        true,
                    ),
                }
            }
        }
    }

    fn too_long(&mut self) -> Stop {
        if self.committed {
            Stop::Limit(format!(
                "a name or number longer than {MAX_TOKEN} bytes in the call list"
            ))
        } else {
            Stop::NotAList
        }
    }

    /// Notes the first place the layout is not a template's (see [`PyStep::Done::layout`]).
    fn deviate(&mut self, what: &'static str) {
        if self.layout.is_none() && !self.dialect.bare {
            self.layout = Some(what);
        }
    }

    /// Takes a complete token.
    fn token(&mut self, t: Tok) -> Option<Stop> {
        let line_break = std::mem::take(&mut self.line_break);
        let spaced = std::mem::take(&mut self.spaced);
        let opened = std::mem::replace(&mut self.opened, matches!(t, Tok::P('[' | '(')));
        match (&self.top, &t) {
            (Top::ListItem | Top::ArgStart, _) if spaced && opened => {
                self.deviate("whitespace after an opening bracket")
            }
            (Top::Name(_, false), Tok::P('(')) if spaced => {
                self.deviate("whitespace between a call's name and `(`")
            }
            (Top::ArgIdent(_), Tok::P('=')) if spaced => {
                self.deviate("whitespace before a keyword's `=`")
            }
            (Top::ListItem, Tok::P(']')) if self.committed => {
                self.deviate("a comma after the last call")
            }
            _ => {}
        }
        match std::mem::replace(&mut self.top, Top::Done) {
            Top::Open => {
                if t == Tok::P('[') {
                    self.top = Top::ListItem;
                    return None;
                }
                Some(Stop::NotAList)
            }
            Top::ListItem => match t {
                Tok::Ident(n) => {
                    self.top = Top::Name(n, false);
                    None
                }
                Tok::LongIdent => {
                    self.top = Top::LongName(false);
                    None
                }
                Tok::P(']') if self.committed && !self.dialect.bare => Some(Stop::Done),
                _ if self.committed => Some(self.syntax("a call")),
                _ => Some(Stop::NotAList),
            },
            Top::Name(mut n, dot) => match t {
                Tok::Ident(x) if dot => {
                    n.push('.');
                    n.push_str(&x);
                    self.top = Top::Name(n, false);
                    None
                }
                Tok::P('.') if !dot => {
                    self.top = Top::Name(n, true);
                    None
                }
                Tok::LongIdent if dot => {
                    self.top = Top::LongName(false);
                    None
                }
                Tok::P('(') if !dot => {
                    self.committed = true;
                    self.raw = String::new();
                    self.name = n;
                    self.json = String::from("{");
                    self.keys.clear();
                    self.bad = None;
                    self.py_literal = false;
                    self.top = Top::ArgStart;
                    None
                }
                _ if self.committed => Some(self.syntax("`(` after a call name")),
                _ => Some(Stop::NotAList),
            },
            // Only reached before the list is committed (after, a long name is a limit at once).
            Top::LongName(dot) => match t {
                Tok::Ident(_) | Tok::LongIdent if dot => {
                    self.top = Top::LongName(false);
                    None
                }
                Tok::P('.') if !dot => {
                    self.top = Top::LongName(true);
                    None
                }
                Tok::P('(') if !dot => Some(Stop::Limit(format!(
                    "a call name longer than {MAX_TOKEN} bytes in the call list"
                ))),
                _ => Some(Stop::NotAList),
            },
            Top::ArgStart => match t {
                Tok::P(')') => self.end_call(),
                Tok::Ident(k) => {
                    self.top = Top::ArgIdent(k);
                    None
                }
                t => {
                    self.spoil("a positional or star argument");
                    self.skip(Vec::new(), t)
                }
            },
            Top::ArgIdent(k) => {
                if t == Tok::P('=') {
                    if self.keys.contains(&k) {
                        self.spoil(&format!("the keyword {k:?} is repeated"));
                    }
                    self.keys.push(k.clone());
                    if self.keys.len() > 1 {
                        self.json.push(',');
                    }
                    self.json
                        .push_str(&serde_json::Value::String(k.clone()).to_string());
                    self.json.push(':');
                    self.top = Top::Value(k);
                    None
                } else {
                    self.spoil("a positional argument");
                    self.skip(Vec::new(), t)
                }
            }
            Top::Value(k) => self.value_token(k, t),
            Top::ArgAfter => match t {
                Tok::P(',') => {
                    self.top = Top::ArgStart;
                    None
                }
                Tok::P(')') => self.end_call(),
                _ => Some(self.syntax("`,` or `)` after an argument")),
            },
            Top::SkipArg(open) => self.skip(open, t),
            Top::AfterCall if self.dialect.bare => match t {
                Tok::P(',') => {
                    self.top = Top::ListItem;
                    None
                }
                Tok::Ident(n) if line_break => {
                    self.top = Top::Name(n, false);
                    None
                }
                _ => Some(self.syntax("a line break or `,` after a call")),
            },
            Top::AfterCall => match t {
                Tok::P(',') => {
                    self.top = Top::ListItem;
                    None
                }
                Tok::P(']') => Some(Stop::Done),
                _ => Some(self.syntax("`,` or `]` after a call")),
            },
            Top::Done => None,
        }
    }

    fn syntax(&self, expected: &str) -> Stop {
        Stop::Syntax(format!(
            "Python syntax error in the call list: expected {expected} (after byte {} of the list)",
            self.bytes
        ))
    }

    /// The call is not a literal call; its tokens are still read to find its end.
    fn spoil(&mut self, why: &str) {
        if self.bad.is_none() {
            self.bad = Some(format!("call {:?}: {why}", self.name));
        }
    }

    fn end_call(&mut self) -> Option<Stop> {
        self.json.push('}');
        let arguments = match self.bad.take() {
            Some(why) => Err(why),
            None => Ok(std::mem::take(&mut self.json)),
        };
        self.calls.push(PyCall {
            name: std::mem::take(&mut self.name),
            arguments,
            python_literals: std::mem::take(&mut self.py_literal),
        });
        self.json.clear();
        self.top = Top::AfterCall;
        None
    }

    /// Skips a bad argument's tokens, matching brackets, to its `,` or the call's `)`.
    fn skip(&mut self, mut open: Vec<char>, t: Tok) -> Option<Stop> {
        self.stack.clear();
        self.sign = None;
        match t {
            Tok::P(c @ ('(' | '[' | '{')) => {
                if open.len() >= self.limits.max_depth {
                    return Some(Stop::Limit(format!(
                        "brackets nested deeper than {} in the call list",
                        self.limits.max_depth
                    )));
                }
                open.push(match c {
                    '(' => ')',
                    '[' => ']',
                    _ => '}',
                });
            }
            Tok::P(c @ (')' | ']' | '}')) => match open.pop() {
                None if c == ')' => return self.end_call(),
                None => return Some(self.syntax("`)` closing the call")),
                Some(want) if want != c => {
                    return Some(self.syntax(&format!("`{want}`")));
                }
                Some(_) => {}
            },
            Tok::P(',') if open.is_empty() => {
                self.top = Top::ArgStart;
                return None;
            }
            _ => {}
        }
        self.top = Top::SkipArg(open);
        None
    }

    /// A token where (part of) a keyword's value is read.
    fn value_token(&mut self, k: String, t: Tok) -> Option<Stop> {
        // Separators and closers of the open container.
        if self.sign.is_none()
            && let Some(f) = self.stack.last().copied()
        {
            let after_comma = self.json.ends_with(',');
            match (f, &t) {
                (Frame::List { n } | Frame::Tuple { n, .. }, Tok::P(','))
                    if n > 0 && !after_comma =>
                {
                    if let Some(Frame::Tuple { comma, .. }) = self.stack.last_mut() {
                        *comma = true;
                    }
                    self.json.push(',');
                    self.top = Top::Value(k);
                    return None;
                }
                (Frame::List { .. }, Tok::P(']')) => {
                    if after_comma {
                        self.json.pop();
                    }
                    self.json.push(']');
                    self.stack.pop();
                    return self.value_done(k);
                }
                (Frame::Tuple { n, start, comma }, Tok::P(')')) => {
                    if after_comma {
                        self.json.pop();
                    }
                    if n == 1 && !comma {
                        // `(x)` is x itself, not a tuple.
                        self.json.remove(start);
                    } else {
                        self.json.push(']');
                    }
                    self.stack.pop();
                    return self.value_done(k);
                }
                (
                    Frame::Dict {
                        st: DictSt::Colon, ..
                    },
                    Tok::P(':'),
                ) => {
                    self.set_dict(DictSt::Value);
                    self.json.push(':');
                    self.top = Top::Value(k);
                    return None;
                }
                (
                    Frame::Dict {
                        st: DictSt::After, ..
                    },
                    Tok::P(','),
                ) => {
                    self.set_dict(DictSt::Key);
                    self.json.push(',');
                    self.top = Top::Value(k);
                    return None;
                }
                (
                    Frame::Dict {
                        st: DictSt::After | DictSt::Key,
                        ..
                    },
                    Tok::P('}'),
                ) => {
                    if after_comma {
                        self.json.pop();
                    }
                    self.json.push('}');
                    self.stack.pop();
                    return self.value_done(k);
                }
                _ => {}
            }
        }
        // A value (or a dict key) starts or continues here.
        let in_dict_key = matches!(
            self.stack.last(),
            Some(Frame::Dict {
                st: DictSt::Key,
                ..
            })
        );
        let after_item = match self.stack.last() {
            Some(Frame::List { n }) | Some(Frame::Tuple { n, .. }) => {
                *n > 0 && !self.json.ends_with(',')
            }
            Some(Frame::Dict { st, .. }) => matches!(st, DictSt::Colon | DictSt::After),
            None => false,
        };
        if after_item {
            return self.bad_value(k, t, "a value that is not a literal");
        }
        match t {
            Tok::P(c @ ('-' | '+')) if self.sign.is_none() && !in_dict_key => {
                self.sign = Some(c);
                self.top = Top::Value(k);
                None
            }
            Tok::Num(Ok(n)) if !in_dict_key => {
                if self.sign == Some('-') {
                    self.json.push('-');
                }
                self.sign = None;
                self.json.push_str(&n);
                self.value_done(k)
            }
            Tok::Str(Ok(s)) if self.sign.is_none() => {
                self.json
                    .push_str(&serde_json::Value::String(s).to_string());
                if in_dict_key {
                    if let Some(Frame::Dict { st, .. }) = self.stack.last_mut() {
                        *st = DictSt::Colon;
                    }
                    self.top = Top::Value(k);
                    return None;
                }
                self.value_done(k)
            }
            Tok::Ident(id) if self.sign.is_none() && !in_dict_key => {
                let json = self.dialect.json_literals;
                let lit = match id.as_str() {
                    "true" | "false" | "null" if json => {
                        self.json.push_str(&id);
                        return self.value_done(k);
                    }
                    "True" => "true",
                    "False" => "false",
                    "None" => "null",
                    _ => return self.bad_value(k, Tok::Ident(id), "a name is not a literal"),
                };
                self.py_literal |= json;
                self.json.push_str(lit);
                self.value_done(k)
            }
            Tok::P(c @ ('[' | '(' | '{')) if self.sign.is_none() && !in_dict_key => {
                if self.stack.len() >= self.limits.max_depth {
                    return Some(Stop::Limit(format!(
                        "values nested deeper than {} in the call list",
                        self.limits.max_depth
                    )));
                }
                let start = self.json.len();
                self.json.push(if c == '{' { '{' } else { '[' });
                self.stack.push(match c {
                    '[' => Frame::List { n: 0 },
                    '(' => Frame::Tuple {
                        n: 0,
                        start,
                        comma: false,
                    },
                    _ => Frame::Dict {
                        n: 0,
                        st: DictSt::Key,
                    },
                });
                self.top = Top::Value(k);
                None
            }
            Tok::Num(Err(why)) | Tok::Str(Err(why)) => self.bad_value(k, Tok::P(' '), why),
            t => self.bad_value(k, t, "a value that is not a literal"),
        }
    }

    fn set_dict(&mut self, to: DictSt) {
        if let Some(Frame::Dict { st, .. }) = self.stack.last_mut() {
            *st = to;
        }
    }

    /// A value (scalar or container) completed at the current level.
    fn value_done(&mut self, k: String) -> Option<Stop> {
        match self.stack.last_mut() {
            None => {
                self.top = Top::ArgAfter;
                return None;
            }
            Some(Frame::List { n }) | Some(Frame::Tuple { n, .. }) => *n += 1,
            Some(Frame::Dict { n, st }) => {
                *n += 1;
                *st = DictSt::After;
            }
        }
        if let Some(Frame::Tuple { comma, .. }) = self.stack.last_mut() {
            *comma = false;
        }
        self.top = Top::Value(k);
        None
    }

    /// The value is not a JSON-able literal: the call is bad; its tokens are skipped.
    fn bad_value(&mut self, _k: String, t: Tok, why: &str) -> Option<Stop> {
        self.spoil(why);
        let open: Vec<char> = self
            .stack
            .iter()
            .map(|f| match f {
                Frame::List { .. } => ']',
                Frame::Tuple { .. } => ')',
                Frame::Dict { .. } => '}',
            })
            .collect();
        self.skip(open, t)
    }
}

enum StrStep {
    More,
    /// The character must be read again (pending closing quotes were content).
    Again,
    End,
    /// A raw line break in a one-line string.
    Eol,
}

/// One character of a string body.
fn string_char(st: &mut StrLex, c: char) -> StrStep {
    match st.esc {
        Esc::Start => {
            st.esc = Esc::None;
            if st.raw {
                st.buf.push('\\');
                st.buf.push(c);
                return StrStep::More;
            }
            let v = match c {
                '\n' => return StrStep::More,
                '\\' => '\\',
                '\'' => '\'',
                '"' => '"',
                'a' => '\x07',
                'b' => '\x08',
                'f' => '\x0c',
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                'v' => '\x0b',
                '0'..='7' => {
                    st.esc = Esc::Oct(1, c as u32 - '0' as u32);
                    return StrStep::More;
                }
                'x' => {
                    st.esc = Esc::Hex(2, 0);
                    return StrStep::More;
                }
                'u' => {
                    st.esc = Esc::Hex(4, 0);
                    return StrStep::More;
                }
                'U' => {
                    st.esc = Esc::Hex(8, 0);
                    return StrStep::More;
                }
                'N' => {
                    st.bad.get_or_insert("named escapes are not supported");
                    st.esc = Esc::Named;
                    return StrStep::More;
                }
                other => {
                    st.buf.push('\\');
                    other
                }
            };
            st.buf.push(v);
            StrStep::More
        }
        Esc::Oct(n, v) => {
            if let Some(d) = c.to_digit(8)
                && n < 3
            {
                st.esc = Esc::Oct(n + 1, v * 8 + d);
                return StrStep::More;
            }
            st.esc = Esc::None;
            push_code(st, v);
            string_char(st, c)
        }
        Esc::Hex(left, v) => {
            let Some(d) = c.to_digit(16) else {
                // Python: a truncated \x, \u or \U escape is a syntax error.
                st.bad.get_or_insert("a truncated escape");
                st.esc = Esc::None;
                return string_char(st, c);
            };
            let v = v * 16 + d;
            if left == 1 {
                st.esc = Esc::None;
                push_code(st, v);
            } else {
                st.esc = Esc::Hex(left - 1, v);
            }
            StrStep::More
        }
        Esc::Named => {
            if c == '}' {
                st.esc = Esc::None;
            } else if c == st.q && !st.triple {
                return StrStep::End;
            }
            StrStep::More
        }
        Esc::None => {
            if c == st.q {
                if !st.triple {
                    return StrStep::End;
                }
                st.run += 1;
                return if st.run == 3 {
                    StrStep::End
                } else {
                    StrStep::More
                };
            }
            if st.run > 0 {
                for _ in 0..st.run {
                    st.buf.push(st.q);
                }
                st.run = 0;
                return StrStep::Again;
            }
            match c {
                '\\' => st.esc = Esc::Start,
                '\n' if !st.triple => return StrStep::Eol,
                c => st.buf.push(c),
            }
            StrStep::More
        }
    }
}

/// Appends a character given by its code; a surrogate or out-of-range code spoils the string.
fn push_code(st: &mut StrLex, v: u32) {
    match char::from_u32(v) {
        Some(ch) => st.buf.push(ch),
        None => {
            st.bad
                .get_or_insert("a lone surrogate or invalid code point");
        }
    }
}

/// A Python number literal as JSON text: `Some(Ok)`, `Some(Err)` when it is valid Python but
/// not JSON-able, `None` when it is not a valid literal.
fn number(n: &str) -> Option<Result<String, &'static str>> {
    if n.ends_with(['j', 'J']) {
        return Some(Err("complex numbers are not JSON"));
    }
    if n.starts_with('_') || n.ends_with('_') || n.contains("__") {
        return None;
    }
    let lower = n.to_ascii_lowercase();
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(d) = lower.strip_prefix(prefix) {
            let d = d.strip_prefix('_').unwrap_or(d).replace('_', "");
            if d.is_empty() || !d.chars().all(|c| c.is_digit(radix)) {
                return None;
            }
            return Some(match u128::from_str_radix(&d, radix) {
                Ok(v) => Ok(v.to_string()),
                Err(_) => Err("an integer too large to convert"),
            });
        }
    }
    let plain = n.replace('_', "");
    if plain.bytes().all(|b| b.is_ascii_digit()) {
        // Decimal ints: no leading zeros except for zero itself.
        if plain.len() > 1 && plain.starts_with('0') {
            return if plain.bytes().all(|b| b == b'0') {
                Some(Ok("0".into()))
            } else {
                None
            };
        }
        return Some(Ok(plain));
    }
    // A float: digits, at most one dot, an optional exponent.
    let (mant, exp) = match plain.find(['e', 'E']) {
        Some(k) => (&plain[..k], Some(&plain[k + 1..])),
        None => (plain.as_str(), None),
    };
    let mant_ok = mant.bytes().filter(|&b| b == b'.').count() <= 1
        && mant.bytes().any(|b| b.is_ascii_digit())
        && mant.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    if !mant_ok || !exp_ok {
        return None;
    }
    let v: f64 = plain.parse().ok()?;
    if !v.is_finite() {
        return Some(Err("a float that is not finite"));
    }
    Some(Ok(
        serde_json::Number::from_f64(v).map_or_else(|| "0".into(), |x| x.to_string())
    ))
}

/// How [`write_literal`] quotes a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Quotes {
    /// Always `"…"`.
    Double,
    /// As Python's `repr` does: `'…'`, or `"…"` when the string holds a `'` and no `"`.
    Repr,
    /// Always `"…"`, with JSON's `null`, `true` and `false` (Olmo 3's calls; read back by a
    /// [`PyDialect::json_literals`] reader).
    DoubleJson,
}

/// Writes a JSON value as a Python literal (`None`, `True`, escaped strings, lists, dicts with
/// string keys): what the reader reads back as that value.
pub fn write_literal(out: &mut String, v: &serde_json::Value, quotes: Quotes) {
    use serde_json::Value;
    match v {
        Value::Null if quotes == Quotes::DoubleJson => out.push_str("null"),
        Value::Bool(b) if quotes == Quotes::DoubleJson => {
            out.push_str(if *b { "true" } else { "false" })
        }
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => {
            // `repr` takes `'…'` unless only a `'` in the string would then need escaping.
            let repr_double = s.contains('\'') && !s.contains('"');
            let q = if quotes != Quotes::Repr || repr_double {
                '"'
            } else {
                '\''
            };
            out.push(q);
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if c == q => {
                        out.push('\\');
                        out.push(c);
                    }
                    c if (c as u32) < 0x20 || c == '\u{7f}' => {
                        out.push_str(&format!("\\x{:02x}", c as u32))
                    }
                    c => out.push(c),
                }
            }
            out.push(q);
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_literal(out, x, quotes);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_literal(out, &Value::String(k.clone()), quotes);
                out.push_str(": ");
                write_literal(out, x, quotes);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn literals_are_written_with_either_quote_rule() {
        let v = serde_json::json!({"a": [null, true, 1.5, "it's"], "b": "say \"hi\"\n\u{1}"});
        let mut d = String::new();
        write_literal(&mut d, &v, Quotes::Double);
        assert_eq!(
            d,
            r#"{"a": [None, True, 1.5, "it's"], "b": "say \"hi\"\n\x01"}"#
        );
        let mut r = String::new();
        write_literal(&mut r, &v, Quotes::Repr);
        assert_eq!(
            r,
            r#"{'a': [None, True, 1.5, "it's"], 'b': 'say "hi"\n\x01'}"#
        );
    }

    const LIMITS: PyLimits = PyLimits {
        max_bytes: 1 << 20,
        max_depth: 64,
    };

    fn read(pieces: &[&str]) -> PyStep {
        let mut r = PyListReader::new(LIMITS);
        for (k, p) in pieces.iter().enumerate() {
            match r.feed(p) {
                PyStep::NeedMore => {}
                PyStep::Done {
                    consumed,
                    calls,
                    layout,
                } => {
                    // Report the consumption relative to the whole input.
                    let before: usize = pieces[..k].iter().map(|p| p.len()).sum();
                    return PyStep::Done {
                        consumed: before + consumed,
                        calls,
                        layout,
                    };
                }
                other => return other,
            }
        }
        r.finish()
    }

    fn calls(s: &str) -> Vec<(String, Result<serde_json::Value, String>)> {
        match read(&[s]) {
            PyStep::Done { calls, .. } => calls
                .into_iter()
                .map(|c| {
                    (
                        c.name,
                        c.arguments
                            .map(|j| serde_json::from_str(&j).expect("valid JSON")),
                    )
                })
                .collect(),
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn keyword_literals_map_to_json() {
        let r = calls(
            "[get_weather(city='San Francisco', metric=\"celsius\"), f(a=-5, b=+1.5, c=0x1F, d=1_000, e=True, g=None, h=[1, (2,), (3)], i={'k': [False]}, j=(), l=1e3, m=.5, n=5.)]",
        );
        assert_eq!(r[0].0, "get_weather");
        assert_eq!(
            r[0].1,
            Ok(serde_json::json!({"city": "San Francisco", "metric": "celsius"}))
        );
        assert_eq!(
            r[1].1,
            Ok(
                serde_json::json!({"a": -5, "b": 1.5, "c": 31, "d": 1000, "e": true, "g": null,
                "h": [1, [2], 3], "i": {"k": [false]}, "j": [], "l": 1000.0, "m": 0.5, "n": 5.0})
            )
        );
    }

    #[test]
    fn strings_follow_python_rules() {
        let r = calls(
            r#"[f(a='it\'s', b="q\"]),", c='\x41\u00e9\U0001F600\n\t\101', d=r'\d+\'', e="""tri"ple""", f='''x''', g='\q')]"#,
        );
        assert_eq!(
            r[0].1,
            Ok(
                serde_json::json!({"a": "it's", "b": "q\"]),", "c": "Aé😀\n\tA",
                "d": "\\d+\\'", "e": "tri\"ple", "f": "x", "g": "\\q"})
            )
        );
    }

    #[test]
    fn big_ints_keep_their_digits() {
        match read(&["[f(n=123456789012345678901234567890)]"]) {
            PyStep::Done { calls, .. } => {
                assert_eq!(
                    calls[0].arguments,
                    Ok("{\"n\":123456789012345678901234567890}".to_string())
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn non_literals_spoil_only_their_call() {
        for bad in [
            "f(x)",
            "f(a=foo)",
            "f(a=true)",
            "f(a=g(1))",
            "f(a=b'x')",
            "f(a=f'x')",
            "f(a={1, 2})",
            "f(a=1e999)",
            "f(a=1, a=2)",
            "f(**kw)",
            "f(a=[1, x.y])",
            "f(a={1: 2})",
            "f(a=1j)",
            "f(a=-'x')",
            "f(a='\\ud800')",
        ] {
            let r = calls(&format!("[ok(), {bad}, ok2(z=1)]"));
            assert_eq!(r.len(), 3, "{bad}");
            assert!(r[1].1.is_err(), "{bad}: {:?}", r[1].1);
            assert_eq!(r[2].1, Ok(serde_json::json!({"z": 1})), "{bad}");
        }
    }

    #[test]
    fn syntax_errors_fail_the_list() {
        for bad in [
            "[f(a=1) g()]",
            "[f(a=(1]]",
            "[f(a='x\ny')]",
            "[f(a=08)]",
            "[f(a=1)",
            "[f(a=1),,]",
        ] {
            let r = read(&[bad]);
            assert!(matches!(r, PyStep::Error { .. }), "{bad}: {r:?}");
        }
    }

    #[test]
    fn prose_in_brackets_is_not_a_list() {
        for (s, raw) in [
            ("[Note] hi", "[Note"),
            ("[] x", "[]"),
            ("[1, 2]", "[1"),
            ("[ see above ]", "[ see above"),
        ] {
            match read(&[s]) {
                PyStep::NotAList { raw: r, .. } => assert!(r.starts_with(raw), "{s}: {r:?}"),
                other => panic!("{s}: {other:?}"),
            }
        }
        assert!(matches!(read(&["[get_"]), PyStep::NotAList { .. }));
        assert!(matches!(read(&["[get_time("]), PyStep::Error { .. }));
    }

    #[test]
    fn the_end_of_the_list_is_found_exactly() {
        match read(&["[f(a=']'), g(b=(1, 2))] tail"]) {
            PyStep::Done {
                consumed, calls, ..
            } => {
                assert_eq!(consumed, "[f(a=']'), g(b=(1, 2))]".len());
                assert_eq!(calls.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        // A trailing comma is Python.
        assert!(matches!(read(&["[f(),]"]), PyStep::Done { .. }));
    }

    fn layout(pieces: &[&str]) -> Option<&'static str> {
        match read(pieces) {
            PyStep::Done { layout, .. } => layout,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn python_a_template_never_writes_is_noted_once_at_its_first_place() {
        // The template's own layout, and whitespace the engines' patterns allow (after a
        // comma, before a closing bracket, anywhere inside a value).
        for s in [
            "[f(a=1, b=2), g()]",
            "[f(a=1),\n  g(b=[ 1 ,2 ], c={ 'k' : ( 1, ) }) ]",
            "[f(a=1,), g()]",
            "[f(a= 1)]",
            "[f(a='# not a comment')]",
        ] {
            assert_eq!(layout(&[s]), None, "{s}");
        }
        for (s, what) in [
            ("[ f()]", "whitespace after an opening bracket"),
            (
                "[\n  f(a=1),\n  g()\n]",
                "whitespace after an opening bracket",
            ),
            ("[f( a=1)]", "whitespace after an opening bracket"),
            ("[f( )]", "whitespace after an opening bracket"),
            ("[f (a=1)]", "whitespace between a call's name and `(`"),
            ("[f(a =1)]", "whitespace before a keyword's `=`"),
            ("[f(), g(),]", "a comma after the last call"),
            ("[f(a=1),  # first\n g()]", "a comment"),
        ] {
            let got = layout(&[s]).unwrap_or_else(|| panic!("{s}: no layout noted"));
            assert!(got.starts_with(what), "{s}: {got}");
        }
        // However the list is cut.
        let s = "[f(a=1), g(),]";
        for cut in 1..s.len() {
            assert!(layout(&[&s[..cut], &s[cut..]]).is_some(), "cut at {cut}");
        }
        // The bare dialect lays calls out with line breaks: nothing to note.
        let mut r = PyListReader::with_dialect(
            LIMITS,
            PyDialect {
                bare: true,
                json_literals: false,
            },
        );
        assert!(matches!(r.feed("f( a=1)\ng ()"), PyStep::NeedMore));
        assert!(matches!(r.finish(), PyStep::Done { layout: None, .. }));
    }

    #[test]
    fn limits() {
        let mut r = PyListReader::new(PyLimits {
            max_bytes: 1 << 20,
            max_depth: 4,
        });
        let s = format!("[f(a={}1{})]", "[".repeat(10), "]".repeat(10));
        assert!(matches!(r.feed(&s), PyStep::Error { limit: true, .. }));
        let mut r = PyListReader::new(PyLimits {
            max_bytes: 10,
            max_depth: 4,
        });
        assert!(matches!(
            r.feed("[f(a='0123456789')]"),
            PyStep::Error { limit: true, .. }
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

        #[test]
        fn every_cut_reads_the_same(
            parts in proptest::collection::vec(prop_oneof![
                Just("[".to_string()), Just("]".to_string()), Just("f(".to_string()), Just(")".to_string()),
                Just("a=".to_string()), Just(", ".to_string()), Just("'x\\'y'".to_string()),
                Just("\"\"\"t\"q\"\"\"".to_string()), Just("r'\\d'".to_string()), Just("-1.5e3".to_string()),
                Just("0x1f".to_string()), Just("True".to_string()), Just("{'k': (1,)}".to_string()),
                Just("é😀".to_string()), Just("\\x41".to_string()), "[a-z0-9_'\"\\[\\](){},=:. \\\\-]{0,5}",
            ], 0..14),
            cut in any::<usize>(),
        ) {
            let s = format!("[{}", parts.concat());
            let whole = read(&[&s]);
            let mut c = cut % (s.len() + 1);
            while !s.is_char_boundary(c) { c -= 1; }
            let cut_r = read(&[&s[..c], &s[c..]]);
            // NotAList's `consumed` is relative to the piece; compare the rest.
            match (&whole, &cut_r) {
                (PyStep::NotAList { raw: a, .. }, PyStep::NotAList { raw: b, .. }) => prop_assert_eq!(a, b),
                (PyStep::Error { limit: a, .. }, PyStep::Error { limit: b, .. }) => prop_assert_eq!(a, b),
                _ => prop_assert_eq!(&whole, &cut_r),
            }
        }
    }
}
