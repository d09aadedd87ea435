#!/usr/bin/env python3
"""Writes corpus/kimi_k3/ from the rules of specs/kimi_k3.md: edit this script, not the files.

    python3 scripts/gen_kimi_k3_corpus.py          # from the repository root

Each case is the exact bytes a Kimi K3 server hands its parser (the generation prompt ends
with `<|open|>message role="assistant"<|sep|><|open|>think<|sep|>`, so the output starts
inside the think channel unless a folder's conform.toml says otherwise), and its
expectation. `.txt` files are written without a trailing newline.
"""
import json
import os
import shutil

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "kimi_k3")

OPEN, CLOSE, SEP, EOM = "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"
THINK_END = CLOSE + "think" + SEP
R_OPEN, R_CLOSE = OPEN + "response" + SEP, CLOSE + "response" + SEP
T_OPEN, T_CLOSE = OPEN + "tools" + SEP, CLOSE + "tools" + SEP
MSG_END = CLOSE + "message" + SEP
A_CLOSE = CLOSE + "argument" + SEP


def esc(v):
    return v.replace("&", "&amp;").replace('"', "&quot;")


def pyjson(v):
    """json.dumps(v, ensure_ascii=False), the template's writing of non-string values."""
    return json.dumps(v, ensure_ascii=False)


def arg(key, value, ty=None):
    """An argument written as the template writes `value` (type from the value)."""
    if ty is None:
        ty = {bool: "boolean", type(None): "null", int: "number", float: "number",
              str: "string", dict: "object", list: "array"}[type(value)]
    raw = value if isinstance(value, str) else pyjson(value)
    return f'{OPEN}argument key="{esc(key)}" type="{ty}"{SEP}{raw}{A_CLOSE}'


def raw_arg(key, ty, raw):
    return f'{OPEN}argument key="{esc(key)}" type="{ty}"{SEP}{raw}{A_CLOSE}'


def call(name, index, *args):
    return f'{OPEN}call tool="{esc(name)}" index="{index}"{SEP}{"".join(args)}{CLOSE}call{SEP}'


def message(reasoning, text, calls=(), end=MSG_END):
    out = reasoning + THINK_END + R_OPEN + text + R_CLOSE
    if calls:
        out += T_OPEN + "".join(calls) + T_CLOSE
    return out + end


def c(name, index, args=None):
    """An expected call (kimi_k3 calls carry no id: specs/kimi_k3.md §4.6)."""
    return {"name": name, "arguments": args or {}}


CASES = {}


def case(path, transcript, expect=None):
    assert path not in CASES, path
    CASES[path] = (transcript, expect)


def ok(reasoning="", text="", calls=(), warnings=()):
    return {"reasoning": reasoning, "text": text, "calls": list(calls), "error": None,
            "warnings": list(warnings)}


def err(kind, calls=None, text=None, warnings=None):
    e = {"error": {"kind": kind}}
    if calls is not None:
        e["calls"] = calls
    if text is not None:
        e["text"] = text
    return e


CODE = (
    "fn main() {\n"
    "    let v = vec![\"<tag>\", \"&amp;\", \"a < b && c > d\"];\n"
    "    println!(\"{:?} — ok ✓ 😀\", v); // <|close|>call stays code\n"
    "}\n"
)

# ---- y_: must parse --------------------------------------------------------------------------

case("y_fact_sheet_example",
     message("Need the weather.", "Let me check.", [
         call("get_weather", 1, arg("city", "Paris"), arg("days", 3)),
         call("get_time", 2)], end=MSG_END + EOM),
     ok("Need the weather.", "Let me check.",
        [c("get_weather", 1, {"city": "Paris", "days": 3}), c("get_time", 2)]))

case("y_text_only",
     message("The user greets me.", "Hello! How can I help you today?"),
     ok("The user greets me.", "Hello! How can I help you today?"))

case("y_empty_reasoning_and_response_then_call",
     message("", "", [call("get_time", 1, arg("timezone", "Asia/Tokyo"))]),
     ok("", "", [c("get_time", 1, {"timezone": "Asia/Tokyo"})]))

case("y_no_argument_call",
     message("Just the time.", "", [call("get_time", 1)]),
     ok("Just the time.", "", [c("get_time", 1)]))

case("y_parallel_calls",
     message("Three cities at once.", "Checking all three.", [
         call("get_weather", 1, arg("city", "Paris")),
         call("get_weather", 2, arg("city", "Berlin")),
         call("get_weather", 3, arg("city", "Rome"), arg("days", 2))]),
     ok("Three cities at once.", "Checking all three.", [
         c("get_weather", 1, {"city": "Paris"}), c("get_weather", 2, {"city": "Berlin"}),
         c("get_weather", 3, {"city": "Rome", "days": 2})]))

TYPED = {"query": "rust streaming parser", "limit": 10, "score": 0.75, "exact": False,
         "cursor": None, "filters": {"lang": ["rust", "go"], "stars": {"min": 100}},
         "tags": ["parser", {"k": "v"}, 3]}
case("y_typed_values",
     message("Search with filters.", "", [call("search", 1, *[arg(k, v) for k, v in TYPED.items()])]),
     ok("Search with filters.", "", [c("search", 1, TYPED)]))

case("y_numbers_are_json_numbers",
     message("", "", [call("search", 1, raw_arg("limit", "number", "007"), raw_arg("score", "number", "1e3"))]),
     ok("", "", [c("search", 1, {"limit": "007", "score": 1000.0})], ["type_mismatch"]))

case("y_cjk_and_emoji",
     message("用户想知道东京的天气。", "好的，我来查一下 🌤️", [
         call("get_weather", 1, arg("city", "東京都 🗼"), arg("units", "摄氏"))]),
     ok("用户想知道东京的天气。", "好的，我来查一下 🌤️", [c("get_weather", 1, {"city": "東京都 🗼", "units": "摄氏"})]))

BIG = (CODE * 200)[:24000]
case("y_large_value_24kb",
     message("Write the file.", "Writing it now.", [
         call("write_file", 1, arg("path", "src/main.rs"), arg("content", BIG))]),
     ok("Write the file.", "Writing it now.", [c("write_file", 1, {"path": "src/main.rs", "content": BIG})]))

MARKUP = '<tool_call>{"name": "x"}</tool_call> <think>no</think> [TOOL_CALLS] &amp; &quot; <|im_end|> <|open|'
case("y_markup_inside_string_value",
     message("Save the notes.", "", [call("write_file", 1, arg("path", "notes.md"), arg("content", MARKUP))]),
     ok("Save the notes.", "", [c("write_file", 1, {"path": "notes.md", "content": MARKUP})]))

case("y_special_tokens_inside_value_are_content",
     message("", "", [call("write_file", 1, arg("path", "x.txt"),
                           raw_arg("content", "string", f"a{OPEN}tools{SEP}b{CLOSE}call{SEP}c{EOM}d{SEP}e"))]),
     ok("", "", [c("write_file", 1, {"path": "x.txt",
                                     "content": f"a{OPEN}tools{SEP}b{CLOSE}call{SEP}c{EOM}d{SEP}e"})]))

VALUE_WS = "\n  indented\tline\r\ntrailing spaces   \n"
case("y_string_value_byte_exact",
     message("", "", [call("write_file", 1, arg("path", " spaced name.txt "), arg("content", VALUE_WS))]),
     ok("", "", [c("write_file", 1, {"path": " spaced name.txt ", "content": VALUE_WS})]))

case("y_strings_that_look_typed_stay_strings",
     message("", "", [call("search", 1, arg("query", "42"), raw_arg("filters", "string", '{"a": 1}'))]),
     ok("", "", [c("search", 1, {"query": "42", "filters": '{"a": 1}'})], ["schema_type_mismatch"]))

case("y_missing_type_is_string",
     message("", "", [call("run_command", 1, f'{OPEN}argument key="command"{SEP}true{A_CLOSE}')]),
     ok("", "", [c("run_command", 1, {"command": "true"})]))

case("y_type_mismatch_kept_as_string",
     message("", "", [call("run_command", 1, arg("command", "ls"), raw_arg("timeout", "number", "ten"))]),
     ok("", "", [c("run_command", 1, {"command": "ls", "timeout": "ten"})], ["type_mismatch"]))

case("y_attribute_entities",
     message("", "", [f'{OPEN}call tool="say&quot;hi&amp;bye" index="1"{SEP}'
                      f'{OPEN}argument key="a&quot;b" type="string"{SEP}&quot; stays{A_CLOSE}{CLOSE}call{SEP}']),
     ok("", "", [{"name": 'say"hi&bye', "arguments": {'a"b': "&quot; stays"}}],
        ["unknown_tool"]))

case("y_attribute_order_free",
     message("", "", [f'{OPEN}call index="1" tool="get_time"{SEP}'
                      f'{OPEN}argument type="string" key="timezone" note="x"{SEP}UTC{A_CLOSE}{CLOSE}call{SEP}']),
     ok("", "", [c("get_time", 1, {"timezone": "UTC"})]))

case("y_json_block",
     message("Arguments as one object.", "", [
         call("search", 1, f'{OPEN}json type="object"{SEP}{{"query": "x", "limit": 5}}{CLOSE}json{SEP}')]),
     ok("Arguments as one object.", "", [c("search", 1, {"query": "x", "limit": 5})]))

case("y_json_block_close_inside_string",
     message("", "", [call("write_file", 1,
                           f'{OPEN}json type="object"{SEP}{{"path": "a", "content": "x{CLOSE}json{SEP}\\" y"}}{CLOSE}json{SEP}')]),
     ok("", "", [c("write_file", 1, {"path": "a", "content": f'x{CLOSE}json{SEP}" y'})]))

case("y_spaced_markers",
     f"<|close|> think <|sep|> <|open|> response <|sep|> Sure. <|close|> response <|sep|> <|open|> tools <|sep|>"
     f' <|open|> call tool="get_weather" index="1" <|sep|> <|open|> argument key="days" type="number" <|sep|> 4 '
     f"<|close|> argument <|sep|> <|close|> call <|sep|> <|close|> tools <|sep|> <|close|> message <|sep|>",
     ok("", " Sure. ", [c("get_weather", 1, {"days": 4})], ["spaced_marker"]))

case("y_whitespace_between_elements_dropped",
     THINK_END + "\n" + R_OPEN + "Done." + R_CLOSE + "\n" + T_OPEN + "\n  "
     + f'{OPEN}call tool="get_time" index="1"{SEP}\n    ' + arg("timezone", "UTC") + f"\n  {CLOSE}call{SEP}\n"
     + T_CLOSE + "\n" + MSG_END,
     ok("", "Done.", [c("get_time", 1, {"timezone": "UTC"})]))

case("y_end_of_msg_after_message_close",
     message("r", "t", end=MSG_END + EOM),
     ok("r", "t"))

case("y_duplicate_key_last_wins",
     message("", "", [call("get_weather", 1, arg("city", "Paris"), arg("city", "Lyon"))]),
     ok("", "", [c("get_weather", 1, {"city": "Lyon"})], ["duplicate_parameter"]))

case("y_unknown_tool_kept",
     message("", "", [call("launch_rocket", 1, arg("target", "moon"))]),
     ok("", "", [c("launch_rocket", 1, {"target": "moon"})], ["unknown_tool"]))

case("y_multiline_markdown_response",
     message("Explain.", "## Plan\n\n1. Read `Cargo.toml`\n2. Run:\n\n```sh\ncargo test\n```\n"),
     ok("Explain.", "## Plan\n\n1. Read `Cargo.toml`\n2. Run:\n\n```sh\ncargo test\n```\n"))

case("y_reasoning_with_markup_characters",
     message("if a < b and <think> is text here, then <|im_end|> too", "ok"),
     ok("if a < b and <think> is text here, then <|im_end|> too", "ok"))

# Recovered deviations (each a leniency option with its warning).
case("y_implicit_reasoning_end_at_tools",
     "I'll call it." + T_OPEN + call("get_time", 1) + T_CLOSE + MSG_END,
     ok("I'll call it.", "", [c("get_time", 1)], ["implicit_reasoning_end"]))

case("y_implicit_reasoning_end_at_response",
     "Thinking done." + R_OPEN + "Answer." + R_CLOSE + MSG_END,
     ok("Thinking done.", "Answer.", [], ["implicit_reasoning_end"]))

CONSIDERED = call("run_command", 1, arg("command", "rm -rf /"))
case("y_call_in_reasoning_is_not_a_call",
     message(f"Maybe {CONSIDERED} — no, too dangerous.", "I won't run that."),
     {**ok(f"Maybe {CONSIDERED} — no, too dangerous.", "I won't run that.", [], ["call_in_reasoning"])})

case("y_missing_section_end_after_complete_call",
     THINK_END + R_OPEN + R_CLOSE + T_OPEN + call("get_time", 1, arg("timezone", "UTC")),
     ok("", "", [c("get_time", 1, {"timezone": "UTC"})], ["missing_section_end"]))

case("y_missing_message_close",
     THINK_END + R_OPEN + "Hi" + R_CLOSE,
     ok("", "Hi", [], ["missing_section_end"]))

case("y_response_not_closed_before_tools",
     THINK_END + R_OPEN + "Checking." + T_OPEN + call("get_time", 1) + T_CLOSE + MSG_END,
     ok("", "Checking.", [c("get_time", 1)], ["missing_section_end"]))

case("y_missing_call_close",
     THINK_END + R_OPEN + R_CLOSE + T_OPEN + f'{OPEN}call tool="get_time" index="1"{SEP}'
     + arg("timezone", "UTC") + T_CLOSE + MSG_END,
     ok("", "", [c("get_time", 1, {"timezone": "UTC"})], ["missing_call_close"]))

case("y_call_outside_tools_section",
     THINK_END + R_OPEN + "Now." + R_CLOSE + call("get_time", 1) + MSG_END,
     ok("", "Now.", [c("get_time", 1)], ["missing_wrapper"]))

case("y_text_between_calls_in_section",
     message("", "", [call("get_time", 1), "and then ", call("get_time", 2)]),
     ok("", "and then ", [c("get_time", 1), c("get_time", 2)], ["text_in_section"]))

case("y_text_outside_channels",
     THINK_END + "stray words" + R_OPEN + "Hi" + R_CLOSE + MSG_END + "after",
     ok("", "stray wordsHiafter", [], ["text_outside_channel", "text_outside_channel"]))

case("y_explicit_message_and_think_openers",
     f'{OPEN}message role="assistant"{SEP}{OPEN}think{SEP}plan' + THINK_END + R_OPEN + "Hi" + R_CLOSE + MSG_END,
     ok("plan", "Hi"))

# ---- n_: must be rejected --------------------------------------------------------------------

case("n_call_without_tool",
     message("", "", [f'{OPEN}call index="1"{SEP}{arg("city", "Paris")}{CLOSE}call{SEP}', call("get_time", 2)]),
     err("missing_name", [c("get_time", 2)]))

case("n_call_with_empty_tool",
     message("", "", [call("", 1, arg("city", "Paris"))]),
     err("missing_name", []))

case("n_unterminated_call_at_eof",
     THINK_END + R_OPEN + R_CLOSE + T_OPEN + call("get_time", 1) + f'{OPEN}call tool="get_weather" index="2"{SEP}'
     + arg("city", "Paris"),
     err("unterminated", [c("get_time", 1)]))

case("n_unterminated_value_at_eof",
     THINK_END + R_OPEN + R_CLOSE + T_OPEN + f'{OPEN}call tool="write_file" index="1"{SEP}'
     + f'{OPEN}argument key="content" type="string"{SEP}half a fi',
     err("unterminated", []))

case("n_unterminated_header_at_eof",
     THINK_END + R_OPEN + "Hi" + R_CLOSE + T_OPEN + f'{OPEN}call tool="get_ti',
     err("malformed_markup", [], "Hi"))

case("n_json_block_not_an_object",
     message("", "", [call("search", 1, f'{OPEN}json type="object"{SEP}["x"]{CLOSE}json{SEP}'), call("get_time", 2)]),
     err("invalid_json", [c("get_time", 2)]))

case("n_json_block_invalid",
     message("", "", [call("search", 1, f'{OPEN}json type="object"{SEP}{{"query": x}}{CLOSE}json{SEP}')]),
     err("invalid_json", []))

case("n_json_block_incomplete",
     message("", "", [call("search", 1, f'{OPEN}json type="object"{SEP}{{"query": "x"{CLOSE}json{SEP}')]),
     err("invalid_json", []))

case("n_json_block_empty",
     message("", "", [call("search", 1, f'{OPEN}json type="object"{SEP}  {CLOSE}json{SEP}')]),
     err("empty_arguments", []))

case("n_json_block_after_arguments",
     message("", "", [call("search", 1, arg("query", "x"), f'{OPEN}json type="object"{SEP}{{}}{CLOSE}json{SEP}')]),
     err("malformed_markup", []))

case("n_json_block_depth_200",
     message("", "", [call("search", 1, f'{OPEN}json type="object"{SEP}{{"a":{"[" * 200}{"]" * 200}}}{CLOSE}json{SEP}')]),
     err("limit_exceeded", []))

case("n_object_value_depth_200",
     message("", "", [call("search", 1, raw_arg("filters", "object", '{"a":' + "[" * 200 + "]" * 200 + "}"))]),
     err("limit_exceeded", []))

case("n_text_before_first_argument",
     message("", "", [call("get_weather", 1, "oops", arg("city", "Paris"))]),
     err("malformed_markup", []))

case("n_text_after_json_block",
     message("", "", [call("search", 1, f'{OPEN}json type="object"{SEP}{{}}{CLOSE}json{SEP}', "oops")]),
     err("malformed_markup", []))

case("n_stray_sep",
     THINK_END + R_OPEN + "a" + SEP + "b" + R_CLOSE + MSG_END,
     err("malformed_markup", [], "ab"))

case("n_unreadable_header",
     message("", "", [f'{OPEN}call tool=get_time index="1"{SEP}{CLOSE}call{SEP}']),
     err("malformed_markup", []))

case("n_argument_outside_call",
     THINK_END + R_OPEN + "a" + R_CLOSE + arg("city", "Paris") + MSG_END,
     err("malformed_markup", [], "a"))

case("n_tool_message_in_output",
     THINK_END + R_OPEN + "a" + R_CLOSE + f'{OPEN}message role="tool" tool="get_time" index="1"{SEP}12:00' + MSG_END,
     err("malformed_markup", [], "a"))

case("n_stray_call_close",
     THINK_END + R_OPEN + "a" + R_CLOSE + T_OPEN + CLOSE + "call" + SEP + T_CLOSE + MSG_END,
     err("malformed_markup", [], "a"))

case("n_unknown_element_in_response",
     THINK_END + R_OPEN + "a" + OPEN + "image" + SEP + "b" + R_CLOSE + MSG_END,
     err("malformed_markup", [], "ab"))

case("n_argument_without_key",
     message("", "", [call("get_time", 1, f'{OPEN}argument type="string"{SEP}UTC{A_CLOSE}'), call("get_time", 2)]),
     err("malformed_markup", [c("get_time", 2)]))

case("n_header_over_limit",
     message("", "", [call("x" * 5000, 1), call("get_time", 2)]),
     err("malformed_markup", [c("get_time", 2)]))

case("n_invalid_utf8_in_value",
     message("", "ok", [call("get_weather", 1, arg("city", "Par\udcffis")), call("get_time", 2)]),
     err("invalid_utf8", [c("get_time", 2)], "ok"))

case("y_call_without_index",
     message("", "", [f'{OPEN}call tool="get_time"{SEP}{CLOSE}call{SEP}']),
     ok("", "", [c("get_time", 1)]))

# ---- i_: only the invariants -----------------------------------------------------------------

case("i_close_marker_inside_value_then_text",
     message("", "", [call("write_file", 1, arg("path", "a.txt"),
                           raw_arg("content", "string", f"see {A_CLOSE} here"))]),
     {"calls": [c("write_file", 1, {"path": "a.txt", "content": f"see {A_CLOSE} here"})],
      "warnings": ["close_tag_in_value"]})

case("i_two_think_blocks",
     "first" + THINK_END + f"{OPEN}think{SEP}second" + THINK_END + R_OPEN + "x" + R_CLOSE + MSG_END, None)

case("i_response_after_tools",
     THINK_END + T_OPEN + call("get_time", 1) + T_CLOSE + R_OPEN + "after" + R_CLOSE + MSG_END, None)

case("i_unknown_type_name",
     message("", "", [call("search", 1, raw_arg("limit", "integer", "5"), raw_arg("query", "text", "q"))]), None)

case("i_think_close_in_response",
     THINK_END + R_OPEN + "a" + THINK_END + "b" + R_CLOSE + MSG_END, None)

case("i_end_of_msg_inside_think",
     "thinking" + EOM, None)

# ---- request modes -------------------------------------------------------------------------

# Thinking off: the generation prompt ends with <|open|>response<|sep|>.
case("thinking_off/y_text", "Plain answer." + R_CLOSE + MSG_END, ok("", "Plain answer."))
case("thinking_off/y_calls",
     "Checking." + R_CLOSE + T_OPEN + call("get_weather", 1, arg("city", "Oslo")) + T_CLOSE + MSG_END,
     ok("", "Checking.", [c("get_weather", 1, {"city": "Oslo"})]))
case("thinking_off/y_think_written_anyway",
     f"{R_CLOSE}{OPEN}think{SEP}unasked{THINK_END}{MSG_END}", ok("unasked", ""))
case("thinking_off/y_stray_think_close",
     "a" + THINK_END + "b" + R_CLOSE + MSG_END, ok("", "ab", [], ["stray_reasoning_end"]))

# Starting state none: raw transcripts with their own openers.
case("raw/y_full_message",
     f'{OPEN}message role="assistant"{SEP}{OPEN}think{SEP}plan{THINK_END}{R_OPEN}Hi{R_CLOSE}{T_OPEN}'
     + call("get_time", 1) + T_CLOSE + MSG_END + EOM,
     ok("plan", "Hi", [c("get_time", 1)]))
case("raw/y_response_opener_only", R_OPEN + "Hi" + R_CLOSE + MSG_END, ok("", "Hi"))
case("raw/y_response_mode_output_read_raw", "Hi" + R_CLOSE + MSG_END,
     ok("", "Hi", [], ["text_outside_channel", "text_outside_channel"]))
case("raw/y_stray_think_close", "a" + THINK_END + R_OPEN + "b" + R_CLOSE + MSG_END,
     ok("", "ab", [], ["text_outside_channel", "stray_reasoning_end"]))

# The spec's strict reading: every leniency off.
case("strict/n_spaced_marker", THINK_END + "<|open|> response <|sep|>Hi" + R_CLOSE + MSG_END,
     err("malformed_markup"))
case("strict/n_close_marker_inside_value",
     message("", "", [call("write_file", 1, raw_arg("content", "string", f"a{A_CLOSE}b"))]),
     err("malformed_markup", []))
case("strict/n_missing_call_close",
     THINK_END + R_OPEN + R_CLOSE + T_OPEN + f'{OPEN}call tool="get_time" index="1"{SEP}' + T_CLOSE + MSG_END,
     err("malformed_markup", []))
case("strict/n_call_outside_tools", THINK_END + R_OPEN + R_CLOSE + call("get_time", 1) + MSG_END,
     err("malformed_markup", []))
case("strict/n_text_in_section", message("", "", [call("get_time", 1), "x"]),
     err("malformed_markup", [c("get_time", 1)]))
case("strict/n_text_outside_channel", THINK_END + "x" + R_OPEN + R_CLOSE + MSG_END, err("malformed_markup", [], ""))
case("strict/n_missing_section_end", THINK_END + R_OPEN + "cut", err("unterminated", [], "cut"))
case("strict/n_unterminated_reasoning", "thinking", err("unterminated"))
case("strict/n_implicit_reasoning_end", "x" + T_OPEN + call("get_time", 1) + T_CLOSE + MSG_END,
     err("malformed_markup", []))
case("strict/y_canonical_still_parses",
     message("r", "t", [call("get_time", 1)]), ok("r", "t", [c("get_time", 1)]))

# A dialect: llama.cpp's schema typing.
case("schema_typing/y_types_from_schema",
     message("", "", [call("search", 1, raw_arg("limit", "string", "5"), raw_arg("exact", "string", "true"),
                           raw_arg("query", "number", "12"))]),
     ok("", "", [c("search", 1, {"limit": 5, "exact": True, "query": "12"})]))

OPTIONS = {
    "thinking_off": {"kimi_k3.reasoning.enabled": False},
    "raw": {"kimi_k3.reasoning.starts_inside": False},
    "strict": {f"kimi_k3.{o}": False for o in [
        "spaced_marker", "text_outside_channel", "missing_section_end", "missing_call_close",
        "missing_wrapper", "close_tag_in_value", "text_in_section", "reasoning.call_in_reasoning",
        "reasoning.unterminated_reasoning", "reasoning.stray_reasoning_end",
        "reasoning.implicit_reasoning_end"]},
    "schema_typing": {"kimi_k3.schema_typing": True},
}
COMMENTS = {
    "thinking_off": "The request turned thinking off: the prompt opened <|open|>response<|sep|>.",
    "raw": "starting_state none: the output carries its own message and channel openers.",
    "strict": "The spec's strict reading: every leniency off.",
    "schema_typing": "llama.cpp's dialect: values typed by the tool's schema, type attributes ignored.",
}


def tool(name, props, required=()):
    return {"type": "function", "function": {"name": name, "description": f"{name} (conform test tool)",
            "parameters": {"type": "object", "properties": props, "required": list(required)}}}


TOOLS = [
    tool("get_weather", {"city": {"type": "string"}, "days": {"type": "integer"},
                         "units": {"type": "string"}}, ["city"]),
    tool("get_time", {"timezone": {"type": "string"}}),
    tool("write_file", {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    tool("run_command", {"command": {"type": "string"}, "timeout": {"type": "number"}}, ["command"]),
    tool("search", {"query": {"type": "string"}, "limit": {"type": "integer"}, "score": {"type": "number"},
                    "exact": {"type": "boolean"}, "cursor": {"type": ["string", "null"]},
                    "filters": {"type": "object"}, "tags": {"type": "array"}}, ["query"]),
    tool("list_directory", {"path": {"type": "string"}, "recursive": {"type": "boolean"}}, ["path"]),
]

# Realistic agent turns (unlabelled: judged by parse success and the invariants).
TRANSCRIPTS = [
    ("agent_list_then_read", message(
        "The user wants an overview of the repository. Listing the root first is cheapest.",
        "I'll start by listing the repository root.",
        [call("list_directory", 1, arg("path", "."), arg("recursive", False))])),
    ("agent_parallel_weather", message(
        "Two cities; the tool takes one city per call, so two calls in parallel.",
        "Let me check both forecasts.",
        [call("get_weather", 1, arg("city", "San Francisco"), arg("days", 3)),
         call("get_weather", 2, arg("city", "東京"), arg("days", 3), arg("units", "celsius"))])),
    ("agent_write_code", message(
        "The fix is small: write the corrected file in one go.",
        "Here is the corrected `main.rs`.",
        [call("write_file", 1, arg("path", "src/main.rs"), arg("content", CODE * 3))])),
    ("agent_run_tests", message(
        "Run the test suite with a generous timeout.", "",
        [call("run_command", 1, arg("command", "cargo test --workspace 2>&1 | tail -50"), arg("timeout", 600))])),
    ("agent_answer_after_results", message(
        "The tool said 18°C and sunny; answer plainly.",
        "It's 18 °C and sunny in Paris right now — a good day for a walk. ☀️")),
    ("agent_search_structured", message(
        "Narrow the search with filters.", "Searching.",
        [call("search", 1, arg("query", "incremental json parser"),
              arg("filters", {"lang": "rust", "license": ["MIT", "Apache-2.0"]}), arg("limit", 5))])),
    ("agent_thinking_cut_by_max_tokens",
     "Let me think about the edge cases: empty input, a marker split across deltas, and"),
    ("agent_call_cut_by_max_tokens", message("Write the long file.", "Writing.", [])[: -len(MSG_END)]
     .replace(R_CLOSE, R_CLOSE + T_OPEN + f'{OPEN}call tool="write_file" index="1"{SEP}'
              + f'{OPEN}argument key="path" type="string"{SEP}README.md{A_CLOSE}'
              + f'{OPEN}argument key="content" type="string"{SEP}# Title\n\nSome tex')),
]


def main():
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    os.makedirs(ROOT)
    with open(os.path.join(ROOT, "tools.json"), "w") as f:
        json.dump(TOOLS, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for folder, opts in OPTIONS.items():
        os.makedirs(os.path.join(ROOT, folder), exist_ok=True)
        with open(os.path.join(ROOT, folder, "conform.toml"), "w") as f:
            f.write(f"# {COMMENTS[folder]}\n[options]\n")
            for k, v in opts.items():
                f.write(f'"{k}" = {str(v).lower()}\n')
    for path, (transcript, expect) in CASES.items():
        base = os.path.join(ROOT, path)
        os.makedirs(os.path.dirname(base), exist_ok=True)
        with open(base + ".txt", "wb") as f:
            # A lone surrogate escape stands for an invalid byte (`\udcff` → 0xff).
            f.write(transcript.encode("utf-8", "surrogateescape"))
        if expect is not None:
            with open(base + ".expect.json", "w", encoding="utf-8") as f:
                json.dump(expect, f, indent=1, ensure_ascii=False)
                f.write("\n")
    with open(os.path.join(ROOT, "transcripts.jsonl"), "w", encoding="utf-8") as f:
        for id_, t in TRANSCRIPTS:
            f.write(json.dumps({"id": id_, "transcript": t}, ensure_ascii=False) + "\n")
    labelled = sum(1 for p in CASES if os.path.basename(p)[:2] in ("y_", "n_", "i_"))
    print(f"{labelled} labelled cases, {len(TRANSCRIPTS)} transcripts in {os.path.normpath(ROOT)}")


if __name__ == "__main__":
    main()
