#!/usr/bin/env python3
"""Writes corpus/muse_glimmer/ (specs/muse_glimmer.md names each case's rule).

    python3 scripts/gen_muse_corpus.py      # from the repository root
"""
import json
import os

OUT = "corpus/muse_glimmer"
S, M, EOM, EOT = "<|start|>", "<|message|>", "<|eom|>", "<|eot|>"


def hdr(r=None, first=False):
    to = f" to={r}" if r is not None else ""
    return (to if first else f"{S}assistant{to}") + M


def msg(r, body, end=EOM, first=False):
    return hdr(r, first) + body + end


def P(k, v):
    return f'<atem:parameter name="{k}">{v}</atem:parameter>\n'


def inv(name, *params):
    return f'<atem:invoke name="{name}">\n' + "".join(params) + "</atem:invoke>\n"


def blk(*invokes):
    return "<atem:function_calls>\n" + "".join(invokes) + "</atem:function_calls>"


def call(name, **args):
    return {"name": name, "arguments": args}


cases = {}


def add(name, txt, expect, folder=""):
    cases[os.path.join(folder, name)] = (txt, expect)


def y(text="", calls=(), warnings=(), reasoning=None):
    e = {"text": text, "calls": list(calls), "error": None, "warnings": list(warnings)}
    if reasoning is not None:
        e["reasoning"] = reasoning
    return e


def n(kind, calls=None, **extra):
    e = {"error": {"kind": kind}}
    if calls is not None:
        e["calls"] = calls
    e.update(extra)
    return e


W = call("get_weather", city="Paris", days=3)
WB = blk(inv("get_weather", P("city", "Paris"), P("days", "3")))
T = call("get_time")
TB = blk(inv("get_time"))

# Framing and routing (M1–M6).
add("y_simple_call", msg("get_weather", WB, first=True), y(calls=[W]))
add("y_reasoning_call_answer",
    msg("self", "Need the weather.", first=True) + msg("get_weather", WB) + msg("user", "It is sunny.", EOT),
    y("It is sunny.", [W], reasoning="Need the weather."))
add("y_text_only", msg("user", "Hello there!", EOT, first=True), y("Hello there!"))
add("y_header_without_recipient_is_text", f"{S}assistant{M}Plain answer.{EOT}", y("Plain answer."))
add("y_first_message_with_start", msg("user", "ok", EOT), y("ok"))
add("y_answer_without_eot", msg("user", "Done.", "", first=True), y("Done."))
add("y_empty_reasoning_then_call", msg("self", "", first=True) + msg("get_time", TB), y(calls=[T], reasoning=""))
add("y_reasoning_interleaved_with_calls",
    msg("self", "First the time.", first=True) + msg("get_time", TB) + msg("self", "Now the weather.")
    + msg("get_weather", WB) + msg("user", "Both fetched.", EOT),
    y("Both fetched.", [T, W], reasoning="First the time.Now the weather."))
add("i_reasoning_unterminated_at_end", msg("self", "Still thinking about", "", first=True),
    y(reasoning="Still thinking about", warnings=["unterminated_reasoning"]))
add("i_header_without_start", msg("self", "a", first=True) + f" to=user{M}b{EOT}",
    y("b", reasoning="a", warnings=["missing_start"]))
add("n_text_outside_message", msg("user", "a", first=True) + "stray" + msg("user", "b", EOT),
    n("malformed_markup", text="ab"))
add("n_role_is_not_assistant", f"{S}user{M}hi{EOT}", n("malformed_markup"))
add("n_header_too_long", f" to={'x' * 1100}{M}{TB}{EOM}", n("limit_exceeded", calls=[]))
add("n_message_token_inside_reasoning", msg("self", f"a{M}b", first=True) + msg("user", "ok", EOT),
    n("malformed_markup", reasoning="ab", text="ok"))
add("n_stream_ends_in_header", " to=get_wea", n("malformed_markup", calls=[]))

# Message ends (M7–M9).
add("i_missing_eom_before_tool_header",
    hdr("self", True) + "Let me call it." + msg("get_weather", WB),
    y(calls=[W], reasoning="Let me call it.", warnings=["missing_message_end"]))
add("i_tool_message_without_eom_at_end", hdr("get_time", True) + TB,
    y(calls=[T], warnings=["missing_message_end"]))
add("y_eot_after_tool_message", msg("get_time", TB, EOT, first=True), y(calls=[T]))
add("n_channel_close_mid_invoke",
    msg("get_weather", '<atem:function_calls>\n<atem:invoke name="get_weather">\n<atem:parameter name="city">Par', first=True)
    + msg("get_time", TB),
    n("unterminated", calls=[T]))

# ATEM in tool messages (A1–A6).
add("y_parallel_invokes_one_block",
    msg("get_weather", blk(inv("get_weather", P("city", "Paris"), P("days", "3")), inv("get_weather", P("city", "Rome"))), first=True),
    y(calls=[W, call("get_weather", city="Rome")]))
add("y_parallel_messages", msg("get_weather", WB, first=True) + msg("get_time", TB), y(calls=[W, T]))
add("y_no_arguments", msg("get_time", TB, first=True), y(calls=[T]))
add("y_invokes_without_block",
    msg("get_time", '<atem:invoke name="get_time">\n</atem:invoke>', first=True),
    y(calls=[T], warnings=["missing_wrapper"]))
add("i_missing_block_end", msg("get_time", '<atem:function_calls>\n<atem:invoke name="get_time">\n</atem:invoke>\n', first=True),
    y(calls=[T], warnings=["missing_section_end"]))
add("y_atem_in_reasoning_is_data", msg("self", WB, first=True) + msg("user", "No call.", EOT),
    y("No call.", [], reasoning=WB))
add("y_atem_in_user_text_is_data", msg("user", "Example: " + WB, EOT, first=True), y("Example: " + WB))
add("i_commentary_is_a_tool_recipient", msg("commentary", WB, first=True),
    y(calls=[W], warnings=["recipient_mismatch"]))
add("i_recipient_mismatch_invoke_name_wins", msg("search", WB, first=True),
    y(calls=[W], warnings=["recipient_mismatch"]))
add("y_recipient_namespace_wildcard", msg("get_weather.*", WB, first=True), y(calls=[W]))
add("y_doubled_name_collapses",
    msg("get_weather.get_weather", blk(inv("get_weather.get_weather", P("city", "Paris"), P("days", "3"))), first=True),
    y(calls=[W], warnings=["name_normalised"]))
add("i_unknown_tool_kept", msg("lookup", blk(inv("lookup", P("q", "cats"))), first=True),
    y(calls=[call("lookup", q="cats")], warnings=["unknown_tool"]))
add("n_name_glued_to_parameter",
    msg("read", '<atem:function_calls>\n<atem:invoke name="read.filePath">/tmp/x</atem:parameter>\n</atem:invoke>\n</atem:function_calls>', first=True)
    + msg("get_time", TB),
    n("malformed_markup", calls=[T]))
add("n_empty_invoke_name", msg("get_time", blk(inv("")) , first=True) + msg("get_time", TB), n("missing_name", calls=[T]))
add("n_unterminated_invoke", msg("get_weather", '<atem:function_calls>\n<atem:invoke name="get_weather">\n<atem:parameter name="city">Par', "", first=True),
    n("unterminated", calls=[]))
add("n_unterminated_inside_name", msg("get_weather", '<atem:function_calls>\n<atem:invoke name="get_wea', "", first=True),
    n("unterminated", calls=[]))
add("i_partial_block_open_at_end", hdr("get_weather", True) + "<atem:function_calls>\n<atem:inv",
    y(warnings=["missing_section_end"]))
add("n_special_token_inside_value",
    msg("write_file", blk(inv("write_file", P("path", "a.txt"), P("content", f"x{EOM}y"))), first=True),
    n("unterminated"))

# Values (V1–V6).
add("y_string_value_json_looking_stays_string",
    msg("write_file", blk(inv("write_file", P("path", "conf.json"), P("content", '{"debug": true, "level": 3}'))), first=True),
    y(calls=[call("write_file", path="conf.json", content='{"debug": true, "level": 3}')]))
add("y_string_spaces_kept", msg("get_weather", blk(inv("get_weather", P("city", "  New York \n"))), first=True),
    y(calls=[call("get_weather", city="  New York \n")]))
add("y_typed_values",
    msg("run_command", blk(inv("run_command", P("command", "ls"), P("timeout", "2.5"), P("args", '["-l", "-a"]'),
                               P("env", '{"LANG": "C"}'), P("background", "false"))), first=True),
    y(calls=[call("run_command", command="ls", timeout=2.5, args=["-l", "-a"], env={"LANG": "C"}, background=False)]))
add("y_number_string_stays_string", msg("get_weather", blk(inv("get_weather", P("city", "42"), P("days", "7"))), first=True),
    y(calls=[call("get_weather", city="42", days=7)]))
add("y_outer_tags_inside_value_are_content",
    msg("write_file", blk(inv("write_file", P("path", "t.xml"), P("content", "<a></atem:invoke></atem:function_calls><atem:invoke name=\"x\"></a>"))), first=True),
    y(calls=[call("write_file", path="t.xml", content="<a></atem:invoke></atem:function_calls><atem:invoke name=\"x\"></a>")]))
add("i_value_close_inside_value",
    msg("write_file", blk(inv("write_file", P("content", "a</atem:parameter> b"), P("path", "p"))), first=True),
    y(calls=[call("write_file", content="a</atem:parameter> b", path="p")], warnings=["close_tag_in_value"]))
add("y_markup_characters_no_entity_decoding",
    msg("write_file", blk(inv("write_file", P("path", "a&b.html"), P("content", "<p>&amp; &lt;</p>"))), first=True),
    y(calls=[call("write_file", path="a&b.html", content="<p>&amp; &lt;</p>")]))
add("y_cjk_and_emoji",
    msg("self", "用户想知道天气。🤔", first=True) + msg("get_weather", blk(inv("get_weather", P("city", "杭州 🌧️")))) + msg("user", "好的 👍", EOT),
    y("好的 👍", [call("get_weather", city="杭州 🌧️")], reasoning="用户想知道天气。🤔"))
big = "".join(f"line {i:05d}: the quick brown fox <b>jumps</b> & \"quotes\" 😀\n" for i in range(420))
add("y_large_value_24kb", msg("write_file", blk(inv("write_file", P("path", "big.txt"), P("content", big))), first=True),
    y(calls=[call("write_file", path="big.txt", content=big)]))
add("y_empty_string_value", msg("write_file", blk(inv("write_file", P("path", "e"), P("content", ""))), first=True),
    y(calls=[call("write_file", path="e", content="")]))
add("n_invalid_utf8_in_value", None, n("invalid_utf8", calls=[T]))
add("y_duplicate_parameter_last_wins",
    msg("get_weather", blk(inv("get_weather", P("city", "Oslo"), P("city", "Bergen"))), first=True),
    y(calls=[call("get_weather", city="Bergen")], warnings=["duplicate_parameter"]))

# Muse Spark's channel policy (option muse_spark_channels).
add("y_commentary_is_text", msg("commentary", "Looking it up.", first=True) + msg("get_weather", WB),
    y("Looking it up.", [W]), "spark")
add("y_developer_is_dropped", msg("developer", "internal", first=True) + msg("user", "hi", EOT), y("hi"), "spark")

# Two messages: ATEM in reasoning then a real call.
add("y_reasoning_drafts_atem_then_calls", msg("self", "I will write " + TB, first=True) + msg("get_time", TB),
    y(calls=[T], reasoning="I will write " + TB))

os.makedirs(OUT, exist_ok=True)
os.makedirs(os.path.join(OUT, "spark"), exist_ok=True)
with open(os.path.join(OUT, "spark", "conform.toml"), "w") as f:
    f.write('[options]\n"muse_glimmer.muse_spark_channels" = true\n')
for name, (txt, expect) in cases.items():
    path = os.path.join(OUT, name)
    if txt is None:  # invalid UTF-8 in a value, then a good call
        data = (" to=get_weather" + M + '<atem:function_calls>\n<atem:invoke name="get_weather">\n<atem:parameter name="city">Par').encode() \
            + b"\xff\xfe" + ("is</atem:parameter>\n</atem:invoke>\n</atem:function_calls>" + EOM + hdr("get_time") + TB + EOM).encode()
    else:
        data = txt.encode()
    with open(path + ".txt", "wb") as f:
        f.write(data)
    with open(path + ".expect.json", "w") as f:
        json.dump(expect, f, ensure_ascii=False)
        f.write("\n")

transcripts = [
    ("agent_read_then_write",
     msg("self", "I should look at the manifest before editing.", first=True)
     + msg("run_command", blk(inv("run_command", P("command", "cat Cargo.toml"), P("timeout", "10")))),
     {"calls": [call("run_command", command="cat Cargo.toml", timeout=10)], "error": None}),
    ("agent_patch_with_code",
     msg("self", "Patch the function.", first=True)
     + msg("write_file", blk(inv("write_file", P("path", "src/lib.rs"), P("content", "fn f() -> Vec<u8> {\n    vec![1, 2]\n}\n")))),
     {"calls": [call("write_file", path="src/lib.rs", content="fn f() -> Vec<u8> {\n    vec![1, 2]\n}\n")], "error": None}),
    ("weather_two_cities",
     msg("get_weather", blk(inv("get_weather", P("city", "Lyon")), inv("get_weather", P("city", "Nice"), P("unit", "celsius"))), first=True),
     {"calls": [call("get_weather", city="Lyon"), call("get_weather", city="Nice", unit="celsius")], "error": None}),
    ("answer_after_thinking",
     msg("self", "Simple arithmetic: 2+2=4.", first=True) + msg("user", "The answer is **4**.", EOT),
     {"text": "The answer is **4**.", "calls": [], "error": None}),
    ("search_with_filters",
     msg("search", blk(inv("search", P("query", "rust async"), P("limit", "5"), P("filters", '{"lang": "en"}'))), first=True),
     None),
]
with open(os.path.join(OUT, "transcripts.jsonl"), "w") as f:
    for id_, t, e in transcripts:
        line = {"id": id_, "transcript": t}
        if e is not None:
            line["expect"] = e
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
print(len(cases), "cases")
