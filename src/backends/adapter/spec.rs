//! What `--parser` names: the built-in parsers or an external command.

/// What `--parser` names: the built-in parsers or an external command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParserSpec {
    /// This crate's parsers, in-process.
    Builtin,
    /// `cmd:COMMAND`: the command line, split into words.
    Command(Vec<String>),
}

/// Reads a `--parser` value: `builtin` or `cmd:COMMAND` (words split as a POSIX shell would,
/// with quotes and backslashes, but no expansion: the command is not run through a shell).
pub fn parse_parser_spec(s: &str) -> Result<ParserSpec, String> {
    if s == "builtin" {
        return Ok(ParserSpec::Builtin);
    }
    let Some(cmd) = s.strip_prefix("cmd:") else {
        return Err(format!(
            "unknown parser {s:?}: expected `builtin` or `cmd:COMMAND`"
        ));
    };
    let words = shlex::split(cmd)
        .ok_or_else(|| format!("parser {s:?}: unbalanced quotes or a trailing backslash"))?;
    if words.is_empty() {
        return Err(format!("parser {s:?} names no command"));
    }
    Ok(ParserSpec::Command(words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_specs() {
        assert_eq!(parse_parser_spec("builtin"), Ok(ParserSpec::Builtin));
        assert_eq!(
            parse_parser_spec("cmd:python3 'my adapter.py' --x \"a \\\"b\\\"\" c\\ d"),
            Ok(ParserSpec::Command(vec![
                "python3".into(),
                "my adapter.py".into(),
                "--x".into(),
                "a \"b\"".into(),
                "c d".into()
            ]))
        );
        assert!(parse_parser_spec("cmd:").is_err());
        assert!(parse_parser_spec("cmd:python3 'x").is_err());
        assert!(parse_parser_spec("cmd:python3 x\\").is_err());
        assert!(parse_parser_spec("vllm").is_err());
    }
}
