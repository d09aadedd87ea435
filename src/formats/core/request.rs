//! Request modes: what the request a server received says about the output it parses
//! (`specs/corpus.md` §1.2). A server sets them per request — the chat template's starting
//! state, the thinking switch, the tool choice, and whether `max_tokens` cut the output — and
//! its parser must read the output accordingly; a corpus case carries them the same way.
//!
//! This module holds the vocabulary (keys, values, their wire spelling and checks) and what a
//! format declares about its template's thinking switch. How a mode changes conform's own parser
//! is `formats::modes`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// Where the output starts, as the chat template left it in the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartingState {
    /// The output writes any reasoning opener itself (the format's default reading).
    None,
    /// The template opened reasoning in the prompt (`…<think>`): the output begins inside it.
    Reasoning,
    /// The template closed reasoning in the prompt (`<think></think>`) or has none: the output
    /// begins in the response.
    Response,
}

impl StartingState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StartingState::None => "none",
            StartingState::Reasoning => "reasoning",
            StartingState::Response => "response",
        }
    }

    fn parse(s: &str) -> Option<StartingState> {
        [
            StartingState::None,
            StartingState::Reasoning,
            StartingState::Response,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

/// The request's tool choice.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolChoice {
    /// The model may call tools or not: the format's own markup (the default).
    Auto,
    /// The model must call at least one tool: servers constrain the output to a JSON array of
    /// call objects (guided decoding).
    Required,
    /// No tools: servers do not parse calls, the output is text.
    None,
    /// The model must call this tool: servers constrain the output to its argument object.
    Named(String),
}

impl ToolChoice {
    /// The wire value: a word, or `{"name": NAME}`.
    pub fn to_json(&self) -> Value {
        match self {
            ToolChoice::Auto => Value::from("auto"),
            ToolChoice::Required => Value::from("required"),
            ToolChoice::None => Value::from("none"),
            ToolChoice::Named(n) => serde_json::json!({ "name": n }),
        }
    }

    /// Whether the output is a guided JSON payload rather than the format's markup.
    pub fn is_guided(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Named(_))
    }
}

/// Why the server stopped generating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model ended its turn (a stop token): what is open at the end was left open by it.
    Stop,
    /// `max_tokens` cut the output: what is open at the end was cut, not finished.
    Length,
}

impl FinishReason {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }

    fn parse(s: &str) -> Option<FinishReason> {
        [FinishReason::Stop, FinishReason::Length]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// The request modes of a case; an absent key is the default (`starting_state = "none"`,
/// `tool_choice = "auto"`, `finish_reason = "stop"`, the template's own thinking default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Request {
    /// Where the output starts.
    pub starting_state: Option<StartingState>,
    /// The request's thinking switch (`chat_template_kwargs.enable_thinking`, `thinking`).
    pub thinking: Option<bool>,
    /// The tool choice.
    pub tool_choice: Option<ToolChoice>,
    /// Why generation stopped.
    pub finish_reason: Option<FinishReason>,
}

/// The keys a request may hold, in their canonical order.
pub const KEYS: [&str; 4] = ["starting_state", "thinking", "tool_choice", "finish_reason"];

impl Request {
    /// Reads a request object (`{"starting_state": "reasoning", …}`, the `[request]` table of a
    /// `conform.toml` as JSON); an unknown key or value is an error naming it and the known ones.
    pub fn from_json(v: &Value) -> Result<Request, String> {
        let Value::Object(m) = v else {
            return Err(format!(
                "a request is a table of keys ({}), not {v}",
                KEYS.join(", ")
            ));
        };
        let mut r = Request::default();
        for (k, v) in m {
            r.set_json(k, v)?;
        }
        Ok(r)
    }

    /// Sets one key from its JSON value; an unknown key or value is an error naming it.
    pub fn set_json(&mut self, key: &str, v: &Value) -> Result<(), String> {
        let word = |known: &str| -> Result<&str, String> {
            v.as_str()
                .ok_or_else(|| format!("request key {key:?}: the value {v} is not one of {known}"))
        };
        match key {
            "starting_state" => {
                const KNOWN: &str = "\"none\", \"reasoning\", \"response\"";
                let s = word(KNOWN)?;
                self.starting_state = Some(StartingState::parse(s).ok_or_else(|| {
                    format!("request key \"starting_state\": unknown value {s:?} (known: {KNOWN})")
                })?);
            }
            "thinking" => {
                self.thinking = Some(v.as_bool().ok_or_else(|| {
                    format!("request key \"thinking\": the value {v} is not true or false")
                })?);
            }
            "tool_choice" => self.tool_choice = Some(tool_choice(v)?),
            "finish_reason" => {
                const KNOWN: &str = "\"stop\", \"length\"";
                let s = word(KNOWN)?;
                self.finish_reason = Some(FinishReason::parse(s).ok_or_else(|| {
                    format!("request key \"finish_reason\": unknown value {s:?} (known: {KNOWN})")
                })?);
            }
            other => {
                return Err(format!(
                    "unknown request key {other:?} (known: {})",
                    KEYS.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// Reads `KEY=VALUE` (the `--request` syntax): `starting_state=reasoning`, `thinking=false`,
    /// `tool_choice=required`, `tool_choice=name:get_weather`, `finish_reason=length`.
    pub fn set_assignment(&mut self, s: &str) -> Result<(), String> {
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: expected KEY=VALUE (keys: {})", KEYS.join(", ")))?;
        let (key, value) = (key.trim(), value.trim());
        let v = match (key, value) {
            ("thinking", "true") => Value::Bool(true),
            ("thinking", "false") => Value::Bool(false),
            ("tool_choice", v) if v.starts_with("name:") => {
                serde_json::json!({ "name": &v["name:".len()..] })
            }
            (_, v) => Value::from(v),
        };
        self.set_json(key, &v)
    }

    /// `self` with every key `over` sets taken from `over` (a case's keys over its folder's).
    pub fn overlaid(&self, over: &Request) -> Request {
        Request {
            starting_state: over.starting_state.or(self.starting_state),
            thinking: over.thinking.or(self.thinking),
            tool_choice: over
                .tool_choice
                .clone()
                .or_else(|| self.tool_choice.clone()),
            finish_reason: over.finish_reason.or(self.finish_reason),
        }
    }

    /// The same request without the keys that say the default (`none`, `auto`, `stop`):
    /// what a report records and a digest hashes, so a case without a request is unchanged.
    pub fn normalized(&self) -> Request {
        Request {
            starting_state: self.starting_state.filter(|s| *s != StartingState::None),
            thinking: self.thinking,
            tool_choice: self.tool_choice.clone().filter(|t| *t != ToolChoice::Auto),
            finish_reason: self.finish_reason.filter(|f| *f != FinishReason::Stop),
        }
    }

    /// True when no key differs from the default.
    pub fn is_default(&self) -> bool {
        self.normalized() == Request::default()
    }

    /// The tool choice in force (`auto` when not set).
    pub fn tool_choice(&self) -> ToolChoice {
        self.tool_choice.clone().unwrap_or(ToolChoice::Auto)
    }

    /// The finish reason in force (`stop` when not set).
    pub fn finish_reason(&self) -> FinishReason {
        self.finish_reason.unwrap_or(FinishReason::Stop)
    }

    /// The keys set, as a JSON object in canonical key order.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(s) = self.starting_state {
            m.insert("starting_state".into(), Value::from(s.as_str()));
        }
        if let Some(t) = self.thinking {
            m.insert("thinking".into(), Value::Bool(t));
        }
        if let Some(t) = &self.tool_choice {
            m.insert("tool_choice".into(), t.to_json());
        }
        if let Some(f) = self.finish_reason {
            m.insert("finish_reason".into(), Value::from(f.as_str()));
        }
        Value::Object(m)
    }

    /// The request an adapter is sent: every key spelled out, the defaults included, and
    /// `thinking` when set (unset, the server's template uses its own default).
    pub fn wire(&self) -> Value {
        let full = Request {
            starting_state: Some(self.starting_state.unwrap_or(StartingState::None)),
            thinking: self.thinking,
            tool_choice: Some(self.tool_choice()),
            finish_reason: Some(self.finish_reason()),
        };
        full.to_json()
    }

    /// The keys set as `KEY=VALUE` words, in canonical order (`--request` arguments).
    pub fn assignments(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(s) = self.starting_state {
            out.push(format!("starting_state={}", s.as_str()));
        }
        if let Some(t) = self.thinking {
            out.push(format!("thinking={t}"));
        }
        if let Some(t) = &self.tool_choice {
            out.push(match t {
                ToolChoice::Named(n) => format!("tool_choice=name:{n}"),
                other => format!("tool_choice={}", other.to_json().as_str().unwrap_or("")),
            });
        }
        if let Some(f) = self.finish_reason {
            out.push(format!("finish_reason={}", f.as_str()));
        }
        out
    }
}

impl fmt::Display for Request {
    /// `KEY=VALUE` words separated by spaces (nothing for the default request).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.assignments().join(" "))
    }
}

impl Serialize for Request {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Request, D::Error> {
        let v = Value::deserialize(d)?;
        Request::from_json(&v).map_err(serde::de::Error::custom)
    }
}

fn tool_choice(v: &Value) -> Result<ToolChoice, String> {
    const KNOWN: &str = "\"auto\", \"required\", \"none\", {\"name\": \"NAME\"}";
    match v {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "required" => Ok(ToolChoice::Required),
            "none" => Ok(ToolChoice::None),
            other => Err(format!(
                "request key \"tool_choice\": unknown value {other:?} (known: {KNOWN})"
            )),
        },
        Value::Object(m) => {
            if let Some(k) = m.keys().find(|k| *k != "name") {
                return Err(format!(
                    "request key \"tool_choice\": unknown key {k:?} in a named choice (known: name)"
                ));
            }
            match m.get("name") {
                Some(Value::String(n)) if !n.is_empty() => Ok(ToolChoice::Named(n.clone())),
                _ => Err(format!(
                    "request key \"tool_choice\": a named choice needs a non-empty \"name\" string, not {v}"
                )),
            }
        }
        other => Err(format!(
            "request key \"tool_choice\": the value {other} is not one of {KNOWN}"
        )),
    }
}

/// What a format's chat template does with the request's thinking switch: the starting state
/// each value gives (`thinking = true` on Qwen3.5 opens `<think>` in the prompt, so the output
/// starts inside reasoning; `false` writes `<think></think>`, so it starts in the response).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thinking {
    /// The starting state with thinking on.
    pub on: StartingState,
    /// The starting state with thinking off.
    pub off: StartingState,
}

impl Thinking {
    /// The starting state a request gives: its own `starting_state`, else the one its
    /// `thinking` switch gives through the template (`thinking` unset: `None`).
    pub fn starting_state(t: Option<&Thinking>, r: &Request) -> Option<StartingState> {
        r.starting_state.or_else(|| {
            let t = t?;
            r.thinking.map(|on| if on { t.on } else { t.off })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_and_values_read_and_unknown_ones_are_named() {
        let r = Request::from_json(&json!({
            "starting_state": "reasoning", "thinking": false,
            "tool_choice": {"name": "get_weather"}, "finish_reason": "length"
        }))
        .unwrap();
        assert_eq!(r.starting_state, Some(StartingState::Reasoning));
        assert_eq!(r.thinking, Some(false));
        assert_eq!(r.tool_choice, Some(ToolChoice::Named("get_weather".into())));
        assert_eq!(r.finish_reason, Some(FinishReason::Length));
        for (bad, says) in [
            (json!({"start": "none"}), "unknown request key \"start\""),
            (
                json!({"starting_state": "inside"}),
                "unknown value \"inside\"",
            ),
            (json!({"thinking": "yes"}), "not true or false"),
            (json!({"tool_choice": "any"}), "unknown value \"any\""),
            (
                json!({"tool_choice": {"function": "f"}}),
                "unknown key \"function\"",
            ),
            (json!({"tool_choice": {"name": ""}}), "non-empty"),
            (
                json!({"finish_reason": "tool_calls"}),
                "unknown value \"tool_calls\"",
            ),
            (json!(["x"]), "not [\"x\"]"),
        ] {
            let e = Request::from_json(&bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn assignments_round_trip_and_defaults_normalize_away() {
        let mut r = Request::default();
        for a in [
            "starting_state=response",
            "thinking=true",
            "tool_choice=name:f",
            "finish_reason=length",
        ] {
            r.set_assignment(a).unwrap();
        }
        let mut back = Request::default();
        for a in r.assignments() {
            back.set_assignment(&a).unwrap();
        }
        assert_eq!(back, r);
        assert_eq!(
            r.to_string(),
            "starting_state=response thinking=true tool_choice=name:f finish_reason=length"
        );
        assert!(Request::default().set_assignment("tool_choice").is_err());
        let defaults = Request::from_json(
            &json!({"starting_state": "none", "tool_choice": "auto", "finish_reason": "stop"}),
        )
        .unwrap();
        assert!(defaults.is_default());
        assert_eq!(defaults.normalized(), Request::default());
        assert_eq!(
            Request::default().wire(),
            json!({"starting_state": "none", "tool_choice": "auto", "finish_reason": "stop"})
        );
    }

    #[test]
    fn a_case_wins_over_its_folder_and_thinking_goes_through_the_template() {
        let folder =
            Request::from_json(&json!({"thinking": true, "tool_choice": "required"})).unwrap();
        let case = Request::from_json(&json!({"tool_choice": "none"})).unwrap();
        let r = folder.overlaid(&case);
        assert_eq!(
            (r.thinking, r.tool_choice()),
            (Some(true), ToolChoice::None)
        );
        let t = Thinking {
            on: StartingState::Reasoning,
            off: StartingState::Response,
        };
        assert_eq!(
            Thinking::starting_state(Some(&t), &r),
            Some(StartingState::Reasoning)
        );
        let explicit = r.overlaid(&Request::from_json(&json!({"starting_state": "none"})).unwrap());
        assert_eq!(
            Thinking::starting_state(Some(&t), &explicit),
            Some(StartingState::None)
        );
        assert_eq!(Thinking::starting_state(None, &r), None);
    }
}
