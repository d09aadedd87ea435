#!/usr/bin/env python3
"""Writes corpus/<id>/ for the tagged-parameter formats (qwen3_coder, seed_oss, glm45, glm47,
minimax_m2, deepseek_v32, deepseek_v4, deepseek_v41, minimax_m3): tools.json, the labelled
cases (in subfolders with their conform.toml where a case needs other options), and
transcripts.jsonl.

Every case is written from the specs (specs/<id>.md, specs/typing.md) by hand: a case gives
its wire pieces (raw parameter text exactly as the model writes it) and its expectation
explicitly; this script only spells the pieces in each format's tags. The typing cases are the
rows of specs/typing.json, one parameter of the tool `typing` per row.

Run from the repository root: python3 scripts/gen_tagged_corpus.py
"""

import json
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = ["qwen3_coder", "seed_oss", "glm45", "glm47", "minimax_m2", "deepseek_v32",
           "deepseek_v4", "deepseek_v41", "minimax_m3"]
# The DSML formats: block, invoke and parameter tag names after the sentinel.
DSML = {"deepseek_v32": ("function_calls", "invoke", "parameter"),
        "deepseek_v4": ("tool_calls", "invoke", "parameter"),
        "deepseek_v41": (" calls", " invoke", " parameter")}
V4 = ("deepseek_v4", "deepseek_v41")
ROWS = json.load(open(os.path.join(ROOT, "specs", "typing.json")))

# ---------------------------------------------------------------- tools

def tool(name, props, defs=None, desc=""):
    params = {"type": "object", "properties": props}
    if defs:
        params["$defs"] = defs
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": params}}

TYPING_DEFS = {}
for r in ROWS:
    TYPING_DEFS.update(r.get("defs", {}))

TOOLS = [
    tool("get_weather", {
        "city": {"type": "string", "description": "City name"},
        "days": {"type": "integer"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "metric": {"type": "boolean"},
    }, desc="Weather forecast"),
    tool("get_time", {}, desc="Current time"),
    tool("write_file", {
        "path": {"type": "string"},
        "content": {"type": "string"},
        "mode": {"type": "integer"},
    }),
    tool("run_command", {
        "command": {"type": "string"},
        "timeout": {"type": "number"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}},
        "background": {"type": "boolean"},
    }),
    tool("search", {
        "query": {"type": "string"},
        "limit": {"type": ["integer", "null"]},
        "filters": {"anyOf": [{"type": "object"}, {"type": "null"}]},
        "tags": {"type": "array"},
    }),
    tool("update_record", {
        "id": {"type": "integer"},
        "ratio": {"type": "number"},
        "fields": {"type": "object"},
        "note": {"type": "string", "nullable": True},
        "level": {"$ref": "#/$defs/level"},
    }, defs={"level": {"type": "integer", "minimum": 0}}),
    tool("legacy_tool", {
        # Valid JSON Schema (tools.json must compile) that the typing cannot type: `false`
        # accepts no value at all, so no type can be chosen for it.
        "count": False,
        "name": {"type": "string"},
        # Valid JSON Schema whose keywords have no kind in common (specs/typing.md §1).
        "size": {"type": "string", "anyOf": [{"type": "integer"}]},
    }, desc="Its schema for count is `false`: valid JSON Schema that accepts no value; size's keywords contradict"),
    tool("typing", {r["rule"]: r["schema"] for r in ROWS}, defs=TYPING_DEFS,
         desc="One parameter per row of specs/typing.json"),
]
# DeepSeek-V4.1 names tools `namespace::tool`; the V4 corpora declare one such tool.
V4_TOOLS = TOOLS + [tool("fs::read_file", {"path": {"type": "string"}, "limit": {"type": "integer"}},
                         desc="A namespaced tool")]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in V4_TOOLS}

def is_string_schema(tool_name, key):
    s = SCHEMAS.get(tool_name, {}).get("properties", {}).get(key)
    return s is None or (s.get("type") == "string" and not s.get("nullable"))

# ---------------------------------------------------------------- wire spelling

DS = "｜DSML｜"
# MiniMax-M3's namespace token: every structural tag starts with it (specs/minimax_m3.md).
NS = "]<]minimax[>["

def param_wire(fmt, tool_name, key, raw, attr="auto"):
    if fmt == "qwen3_coder":
        return f"<parameter={key}>\n{raw}\n</parameter>\n"
    if fmt == "seed_oss":
        return f"<parameter={key}>{raw}</parameter>\n"
    if fmt == "glm45":
        return f"<arg_key>{key}</arg_key>\n<arg_value>{raw}</arg_value>\n"
    if fmt == "glm47":
        return f"<arg_key>{key}</arg_key><arg_value>{raw}</arg_value>"
    if fmt == "minimax_m2":
        return f'<parameter name="{key}">{raw}</parameter>\n'
    if fmt in DSML:
        if attr == "auto":
            # As the template writes it: string="true" for a string value. Raw text that is
            # not JSON can only have been a string value.
            attr = "true"
            if not is_string_schema(tool_name, key):
                try:
                    json.loads(raw)
                    attr = "false"
                except ValueError:
                    pass
        a = f' string="{attr}"' if attr else ""
        p = DSML[fmt][2]
        return f'<{DS}{p} name="{key}"{a}>{raw}</{DS}{p}>'
    if fmt == "minimax_m3":
        # The template's to_xml: no whitespace between a call's parameters.
        return f"{NS}<{key}>{raw}{NS}</{key}>"
    raise ValueError(fmt)

def call_wire(fmt, name, params):
    """params: list of (key, raw) or (key, raw, deepseek_attr)."""
    ps = [param_wire(fmt, name, p[0], p[1], *(p[2:] or ["auto"])) for p in params]
    if fmt == "qwen3_coder":
        return f"<tool_call>\n<function={name}>\n" + "".join(ps) + "</function>\n</tool_call>"
    if fmt == "seed_oss":
        return f"<seed:tool_call>\n<function={name}>\n" + "".join(ps) + "</function>\n</seed:tool_call>"
    if fmt == "glm45":
        return f"<tool_call>{name}\n" + "".join(ps) + "</tool_call>"
    if fmt == "glm47":
        return f"<tool_call>{name}" + "".join(ps) + "</tool_call>"
    if fmt == "minimax_m2":
        return f'<invoke name="{name}">\n' + "".join(ps) + "</invoke>\n"
    if fmt == "deepseek_v32":
        return f'\n<{DS}invoke name="{name}">\n' + "\n".join(ps) + f"\n</{DS}invoke>"
    if fmt == "minimax_m3":
        return f'{NS}<invoke name="{name}">' + "".join(ps) + f"{NS}</invoke>"
    if fmt in V4:
        # As DeepSeek's encoding script writes it: a no-argument invoke has an empty line.
        i = DSML[fmt][1]
        return f'<{DS}{i} name="{name}">\n' + "\n".join(ps) + f"\n</{DS}{i}>"
    raise ValueError(fmt)

def block_wire(fmt, calls):
    """One group of calls as the template writes them one after another."""
    cs = [call_wire(fmt, c[0], c[1]) for c in calls]
    if fmt == "minimax_m2":
        return "<minimax:tool_call>\n" + "".join(cs) + "</minimax:tool_call>"
    if fmt == "deepseek_v32":
        return f"<{DS}function_calls>" + "".join(cs) + f"\n</{DS}function_calls>"
    if fmt in V4:
        b = DSML[fmt][0]
        return f"<{DS}{b}>\n" + "\n".join(cs) + f"\n</{DS}{b}>"
    if fmt == "glm47":
        return "".join(cs)
    if fmt == "minimax_m3":
        return f"{NS}<tool_call>\n" + "\n".join(cs) + f"\n{NS}</tool_call>"
    return "\n".join(cs)

def wire(fmt, segments):
    """segments: strings (text) and lists of calls (name, params)."""
    out = ""
    for s in segments:
        out += s if isinstance(s, str) else block_wire(fmt, s)
    return out

# The closing tags of each format, for look-alike cases.
VALUE_CLOSE = {
    "qwen3_coder": "</parameter>", "seed_oss": "</parameter>", "glm45": "</arg_value>",
    "glm47": "</arg_value>", "minimax_m2": "</parameter>", "deepseek_v32": f"</{DS}parameter>",
    "deepseek_v4": f"</{DS}parameter>", "deepseek_v41": f"</{DS} parameter>",
}
OUTER = {
    "qwen3_coder": ["</function>", "</tool_call>", "<tool_call>", "<function=x>"],
    "seed_oss": ["</function>", "</seed:tool_call>", "<seed:tool_call>", "<function=x>"],
    "glm45": ["</tool_call>", "<tool_call>get_time", "<arg_key>k</arg_key>", "</arg_key>"],
    "glm47": ["</tool_call>", "<tool_call>get_time</tool_call>", "<arg_key>k</arg_key>", "<arg_value>"],
    "minimax_m2": ["</invoke>", "</minimax:tool_call>", '<invoke name="x">', "<minimax:tool_call>"],
    "deepseek_v32": [f"</{DS}invoke>", f"</{DS}function_calls>", "</parameter>", "<invoke name=\"x\">"],
    "deepseek_v4": [f"</{DS}invoke>", f"</{DS}tool_calls>", f'<{DS}invoke name="x">', f"<{DS}tool_calls>"],
    "deepseek_v41": [f"</{DS} invoke>", f"</{DS} calls>", f'<{DS} invoke name="x">', f"<{DS} calls>"],
    # Without the namespace token a tag is data: the format's escape mechanism.
    "minimax_m3": ["</invoke>", "</tool_call>", '<invoke name="x">', "<tool_call>", "</content>", "<item>"],
}
STRUCTURAL = {"qwen3_coder", "seed_oss", "minimax_m2", "deepseek_v32", "deepseek_v4", "deepseek_v41"}

# ---------------------------------------------------------------- cases

def code_file(n):
    line = 'fn main() { let s = "a < b && c > d"; println!("{s} 😀 中文 &amp; \'q\'"); }\n'
    s = ""
    while len(s.encode()) < n:
        s += line
    return s

BIG = code_file(24 * 1024)

def call(fname, **kw):
    return {"name": fname, "arguments": kw}

def shared_cases(fmt):
    """(name, segments or raw str, expectation) for every format."""
    c = []
    add = lambda name, seg, exp: c.append((name, seg, exp))
    add("y_simple_call", ["Let me check the weather.\n", [("get_weather", [("city", "Paris")])]],
        {"text": "Let me check the weather.\n", "calls": [call("get_weather", city="Paris")], "error": None})
    add("y_typed_values", [[("get_weather", [("city", "Berlin"), ("days", "3"), ("unit", "celsius"), ("metric", "true")])]],
        {"text": "", "calls": [call("get_weather", city="Berlin", days=3, unit="celsius", metric=True)], "error": None, "warnings": []})
    add("y_no_arguments", [[("get_time", [])]],
        {"text": "", "calls": [call("get_time")], "error": None})
    add("y_parallel_calls", ["Checking both.\n", [("get_weather", [("city", "Oslo")]), ("get_time", []), ("search", [("query", "rust parsers"), ("limit", "5")])]],
        {"text": "Checking both.\n", "calls": [call("get_weather", city="Oslo"), call("get_time"), call("search", query="rust parsers", limit=5)], "error": None})
    # DeepSeek-V4: vLLM, SGLang and tool-parser drop text after the calls, Dynamo keeps it.
    add(("i_" if fmt in V4 else "y_") + "text_before_between_after", ["First I look.\n", [("get_time", [])], "\nThen I search.\n", [("search", [("query", "x")])], "\nDone."],
        {"text": "First I look.\n\nThen I search.\n\nDone.", "calls": [call("get_time"), call("search", query="x")], "error": None,
         "warnings": ["text_after_calls"]})
    add("y_whitespace_next_to_calls_dropped", ["\n\n", [("get_time", [])], "\n \n"],
        {"text": "", "calls": [call("get_time")], "error": None, "warnings": []})
    add("y_text_only", ["I can answer that without tools: 2 + 2 = 4.\n"],
        {"text": "I can answer that without tools: 2 + 2 = 4.\n", "calls": [], "error": None})
    code = 'if (a < b && c > d) { s = "&amp; &lt;x&gt;" + \'q\' + `t`; }'
    add("y_markup_characters_no_entity_decoding", [[("write_file", [("path", "src/a.js"), ("content", code)])]],
        {"calls": [call("write_file", path="src/a.js", content=code)], "error": None})
    add("y_cjk_and_emoji", ["好的，我来查一下。😀\n", [("get_weather", [("city", "杭州 🌧️"), ("unit", "celsius")])]],
        {"text": "好的，我来查一下。😀\n", "calls": [call("get_weather", city="杭州 🌧️", unit="celsius")], "error": None})
    add("y_large_value_24kb", ["Writing the file.\n", [("write_file", [("path", "src/main.rs"), ("content", BIG)])]],
        {"text": "Writing the file.\n", "calls": [call("write_file", path="src/main.rs", content=BIG)], "error": None})
    add("y_strings_that_look_typed_stay_strings", [[("write_file", [("path", "null"), ("content", "123")])], [("get_weather", [("city", "true")])]],
        {"calls": [call("write_file", path="null", content="123"), call("get_weather", city="true")], "error": None, "warnings": []})
    add("y_values_failing_their_type_stay_strings", [[("get_weather", [("city", "Rome"), ("days", "next week"), ("metric", "yes")])]],
        {"calls": [call("get_weather", city="Rome", days="next week", metric="yes")], "error": None,
         "warnings": ["type_mismatch", "type_mismatch"]})
    add("y_structured_values_json", [[("run_command", [("command", "cargo test"), ("timeout", "30.5"), ("env", '{"RUST_LOG": "debug", "CI": "1"}'), ("args", '["--lib", "tagged"]'), ("background", "false")])]],
        {"calls": [call("run_command", command="cargo test", timeout=30.5, env={"RUST_LOG": "debug", "CI": "1"}, args=["--lib", "tagged"], background=False)], "error": None, "warnings": []})
    add("y_nullable_and_union_values", [[("search", [("query", "q"), ("limit", "null"), ("filters", "null")]), ("search", [("query", "q"), ("limit", "10"), ("filters", '{"lang": "rust"}')])]],
        {"calls": [call("search", query="q", limit=None, filters=None), call("search", query="q", limit=10, filters={"lang": "rust"})], "error": None})
    add("y_number_identity", [[("update_record", [("id", "12345678901234567890"), ("ratio", "5.0"), ("level", "007", None)])]],
        {"calls": [call("update_record", id=12345678901234567890, ratio=5.0, level=7)], "error": None})
    add("y_nullable_string", [[("update_record", [("id", "1"), ("note", "null")])], [("update_record", [("id", "2"), ("note", "null value")])]],
        {"calls": [call("update_record", id=1, note=None), call("update_record", id=2, note="null value")], "error": None})
    add("y_unknown_tool_kept_raw", [[("launch_rocket", [("count", "5"), ("target", "moon")])]],
        {"calls": [call("launch_rocket", count="5", target="moon")], "error": None, "warnings": ["unknown_tool"]})
    add("y_unknown_parameter_kept_raw", [[("get_weather", [("city", "Lima"), ("zoom", "5")])]],
        {"calls": [call("get_weather", city="Lima", zoom="5")], "error": None, "warnings": ["unknown_parameter"]})
    add("y_unreadable_schema_named", [[("legacy_tool", [("count", "5", "true"), ("name", "x")])]],
        {"calls": [call("legacy_tool", count="5", name="x")], "error": None, "warnings": ["unreadable_schema"]})
    add("y_unreadable_schema_contradicting_siblings", [[("legacy_tool", [("size", "5", "true"), ("name", "x")])]],
        {"calls": [call("legacy_tool", size="5", name="x")], "error": None, "warnings": ["unreadable_schema"],
         "note": "a sibling type and anyOf with no kind in common allow no value: unreadable, the raw string kept (specs/typing.md §1)"})
    add("y_empty_string_value", [[("write_file", [("path", "empty.txt"), ("content", "")])]],
        {"calls": [call("write_file", path="empty.txt", content="")], "error": None})
    # Closing-tag look-alikes inside code.
    outer = OUTER[fmt]
    body = "x = 1\n" + "".join(f"s{i} = '{o}'\n" for i, o in enumerate(outer)) + "y = 2"
    add("y_outer_tags_inside_code_are_content", [[("write_file", [("path", "t.py"), ("content", body)])]],
        {"calls": [call("write_file", path="t.py", content=body)], "error": None, "warnings": []})
    if fmt in STRUCTURAL:
        vc = VALUE_CLOSE[fmt]
        body2 = f"html = '{vc}' + tail\nprint(\"{vc}\")"
        add("y_value_close_inside_code_is_content", [[("write_file", [("path", "t.py"), ("content", body2)])]],
            {"calls": [call("write_file", path="t.py", content=body2)], "error": None,
             "warnings": ["close_tag_in_value", "close_tag_in_value"]})
    # Truncations and malformed names.
    full = wire(fmt, [[("write_file", [("path", "a.txt"), ("content", "half of a file that")])]])
    cut = full.index("half of a file") + len("half of a")
    add("n_unterminated_inside_value", full[:cut], {"calls": [], "error": {"kind": "unterminated"}})
    opener = {"qwen3_coder": "<tool_call>\n<function=get_wea", "seed_oss": "<seed:tool_call>\n<function=get_wea",
              "glm45": "<tool_call>get_wea", "glm47": "<tool_call>get_wea",
              "minimax_m2": '<minimax:tool_call>\n<invoke name="get_wea',
              "deepseek_v32": f'<{DS}function_calls>\n<{DS}invoke name="get_wea',
              "deepseek_v4": f'<{DS}tool_calls>\n<{DS}invoke name="get_wea',
              "deepseek_v41": f'<{DS} calls>\n<{DS} invoke name="get_wea',
              "minimax_m3": f'{NS}<tool_call>\n{NS}<invoke name="get_wea'}[fmt]
    add("n_unterminated_inside_name", "Calling now.\n" + opener, {"text": "Calling now.\n", "calls": [], "error": {"kind": "unterminated"}})
    add("n_empty_name_then_good_call", [[("", [("city", "x")]), ("get_time", [])]] if fmt in ("minimax_m2", "minimax_m3") + tuple(DSML)
        else [[("", [("city", "x")])], [("get_time", [])]],
        {"calls": [call("get_time")], "error": {"kind": "missing_name"}, "errors": ["missing_name"]})
    add("n_name_with_space", [[("get weather", [("city", "x")])]],
        {"calls": [], "error": {"kind": "malformed_markup"}})
    add("y_duplicate_parameter_last_wins", [[("get_weather", [("city", "Paris"), ("city", "Lyon")])]],
        {"calls": [call("get_weather", city="Lyon")], "error": None, "warnings": ["duplicate_parameter"]})
    if fmt not in ("glm45", "glm47"):
        # A block holding text between its calls (GLM blocks are calls: no such place).
        blk = wire(fmt, [[("get_time", [])]])
        inner = {"qwen3_coder": "<tool_call>\n", "seed_oss": "<seed:tool_call>\n",
                 "minimax_m2": "<minimax:tool_call>\n", "deepseek_v32": f"<{DS}function_calls>",
                 "deepseek_v4": f"<{DS}tool_calls>\n", "deepseek_v41": f"<{DS} calls>\n",
                 "minimax_m3": f"{NS}<tool_call>\n"}[fmt]
        add("y_text_inside_block_kept", blk.replace(inner, inner + "(one moment)\n", 1),
            {"text": "(one moment)\n\n" if fmt == "deepseek_v32" else "\n(one moment)\n",
             "calls": [call("get_time")], "error": None, "warnings": ["text_in_block"]})
    return c

# Each format's reasoning tags (its `REASONING` syntax; the shared layer splits them).
THINK = {f: ("<think>", "</think>") for f in FORMATS}
THINK["seed_oss"] = ("<seed:think>", "</seed:think>")
THINK["minimax_m3"] = ("<mm:think>", "</mm:think>")

def reasoning_cases(fmt):
    """The reasoning layer's rules (specs/streaming.md "Reasoning") in each format's tags.
    Kept apart from the shared cases: their warnings are pinned for every format."""
    c = []
    add = lambda name, seg, exp: c.append((name, seg, exp))
    o, e = THINK[fmt]
    # What is left after the block is the format's text: here whitespace before a call, dropped.
    add("y_reasoning_then_call", [f"{o}The user wants the time; call get_time.{e}\n\n", [("get_time", [])]],
        {"text": "", "reasoning": "The user wants the time; call get_time.", "calls": [call("get_time")],
         "error": None, "warnings": [], "order": ["reasoning", "call"]})
    # The ordered stream (specs/streaming.md): text, reasoning, text and a call, in that order
    # under every cut.
    add("y_order_text_reasoning_text_call", [f"Let me see.{o}Weather, then answer.{e}Checking Paris.", [("get_weather", [("city", "Paris")])]],
        {"text": "Let me see.Checking Paris.", "reasoning": "Weather, then answer.",
         "calls": [call("get_weather", city="Paris")], "error": None, "warnings": [],
         "order": ["text", "reasoning", "text", "call"]})
    # A call written inside reasoning was only considered: it stays reasoning and never runs
    # (minimax_m3 ends its reasoning there instead: its own case, y_reasoning_call_ends_reasoning).
    blk = wire(fmt, [[("get_time", [])]])
    if fmt in V4:
        # DeepSeek-V4's calls block ends reasoning (V4: option reasoning.implicit_reasoning_end,
        # V4.1: natively); the call runs, the later close is stray, what follows it is text.
        add("y_reasoning_calls_block_ends_reasoning", f"{o}Maybe {blk} no: I know it.{e}\nIt is noon.",
            {"text": " no: I know it.\nIt is noon.", "reasoning": "Maybe ", "calls": [call("get_time")],
             "error": None, "warnings": (["implicit_reasoning_end"] if fmt == "deepseek_v4" else [])
             + ["stray_reasoning_end", "text_after_calls"], "order": ["reasoning", "call", "text"]})
    elif fmt != "minimax_m3":
        add("y_reasoning_call_inside_reasoning", f"{o}Maybe {blk} no: I know it.{e}\nIt is noon.",
            {"text": "\nIt is noon.", "reasoning": f"Maybe {blk} no: I know it.", "calls": [],
             "error": None, "warnings": ["call_in_reasoning"], "order": ["reasoning", "text"]})
    add("y_reasoning_unterminated_at_end", f"Hmm.\n{o}Still weighing the options",
        {"text": "Hmm.\n", "reasoning": "Still weighing the options", "calls": [],
         "error": None, "warnings": ["unterminated_reasoning"], "order": ["text", "reasoning"]})
    # The template put the open tag in the prompt; `starts_inside` is off by default (a server
    # that knows its template turns it on), so the close tag is stray and the reasoning text.
    add("y_reasoning_open_tag_in_prompt_close_is_stray", [f"Weather first.{e}\n\n", [("get_weather", [("city", "Paris")])]],
        {"text": "Weather first.\n\n", "reasoning": "", "calls": [call("get_weather", city="Paris")],
         "error": None, "warnings": ["stray_reasoning_end"], "order": ["text", "call"]})
    # Inside a value a tag is content.
    add("y_reasoning_tags_inside_value_are_content", [[("write_file", [("path", "t.md"), ("content", f"say {o}hi{e}")])]],
        {"text": "", "calls": [call("write_file", path="t.md", content=f"say {o}hi{e}")], "error": None,
         "order": ["call"]})
    return c

def typing_cases(fmt):
    groups = {}
    for r in ROWS:
        n = r["rule"]
        g = ("y_typing_strings" if n.startswith("string") else "y_typing_integers" if n.startswith("integer")
             else "y_typing_numbers" if n.startswith("number")
             else "y_typing_booleans_null" if n.startswith(("boolean", "null"))
             else "y_typing_structured" if n.startswith(("object", "array"))
             else "y_typing_siblings" if n.startswith("sibling_") else "y_typing_unions")
        groups.setdefault(g, []).append(r)
    out = []
    for g, rows in groups.items():
        # deepseek_v32: no string attribute, so the schema types every value (warning each).
        params = [(r["rule"], r["raw"], None) for r in rows]
        args = {r["rule"]: r["json"] for r in rows}
        out.append((g, [[("typing", params)]], {"text": "", "calls": [{"name": "typing", "arguments": args}], "error": None}))
    return out

def specific_cases(fmt):
    c = []
    add = lambda name, seg, exp: c.append((name, seg, exp))
    if fmt == "qwen3_coder":
        add("y_value_padding_one_newline_each_side", "<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n<parameter=content>\n\n    indented()\n\n\n</parameter>\n</function>\n</tool_call>",
            {"calls": [call("write_file", path="a.py", content="\n    indented()\n\n")], "error": None})
        add("y_unpadded_values_accepted", "<tool_call><function=get_weather><parameter=city>Paris</parameter><parameter=days>2</parameter></function></tool_call>",
            {"calls": [call("get_weather", city="Paris", days=2)], "error": None, "warnings": []})
        add("y_missing_gt_after_parameter_name", "<tool_call>\n<function=get_weather>\n<parameter=city\nParis\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
            {"calls": [call("get_weather", city="Paris"), call("get_time")], "error": None, "warnings": ["missing_gt"]})
        add("y_missing_wrapper", "Let me check.\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>",
            {"text": "Let me check.\n", "calls": [call("get_weather", city="Paris")], "error": None, "warnings": ["missing_wrapper"]})
        add("y_function_tag_of_unknown_name_in_prose", "Use <function=foo> tags to call tools.",
            {"text": "Use <function=foo> tags to call tools.", "calls": [], "error": None})
        add("y_several_functions_in_one_block", "<tool_call>\n<function=get_time>\n</function>\n<function=get_weather>\n<parameter=city>\nNice\n</parameter>\n</function>\n</tool_call>",
            {"calls": [call("get_time"), call("get_weather", city="Nice")], "error": None})
        add("y_python_repr_object", "<tool_call>\n<function=run_command>\n<parameter=command>\nls\n</parameter>\n<parameter=env>\n{'A': '1', 'B': None}\n</parameter>\n</function>\n</tool_call>",
            {"calls": [call("run_command", command="ls", env={"A": "1", "B": None})], "error": None, "warnings": ["python_literal"]})
        add("i_missing_block_end_after_complete_call", "<tool_call>\n<function=get_time>\n</function>\n",
            {"calls": [call("get_time")], "error": None, "warnings": ["missing_call_end"]})
        add("i_missing_function_end", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call>",
            {"calls": [call("get_weather", city="Paris")], "error": None, "warnings": ["missing_call_close"]})
        add("n_unterminated_after_value_close", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
            {"calls": [], "error": {"kind": "unterminated"}})
        add("n_parameter_tag_without_gt_or_newline", "<tool_call>\n<function=get_weather>\n<parameter=city<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
            {"calls": [], "error": {"kind": "malformed_markup"}})
    if fmt == "seed_oss":
        add("y_seed_eos_is_not_text", "I'll check.\n<seed:tool_call>\n<function=get_time>\n</function>\n</seed:tool_call><seed:eos>",
            {"text": "I'll check.\n", "calls": [call("get_time")], "error": None})
        add("y_python_repr_values", "<seed:tool_call>\n<function=run_command>\n<parameter=command>ls</parameter>\n<parameter=args>['-l', 'src']</parameter>\n<parameter=background>True</parameter>\n<parameter=env>{'A': '1'}</parameter>\n</function>\n</seed:tool_call>",
            {"calls": [call("run_command", command="ls", args=["-l", "src"], background=True, env={"A": "1"})], "error": None,
             "warnings": ["python_literal", "python_literal"]})
        add("y_seed_think_is_reasoning", "<seed:think>Need the time.</seed:think>\n<seed:tool_call>\n<function=get_time>\n</function>\n</seed:tool_call>",
            {"text": "", "reasoning": "Need the time.", "calls": [call("get_time")], "error": None, "warnings": []})
        add("y_plain_think_tags_are_text", "<think>Need the time.</think>\n<seed:tool_call>\n<function=get_time>\n</function>\n</seed:tool_call>",
            {"text": "<think>Need the time.</think>\n", "reasoning": "", "calls": [call("get_time")], "error": None})
        add("y_missing_gt_after_parameter_name", "<seed:tool_call>\n<function=get_weather>\n<parameter=city\nParis</parameter>\n</function>\n</seed:tool_call>",
            {"calls": [call("get_weather", city="Paris")], "error": None, "warnings": ["missing_gt"]})
        add("i_value_edge_newlines_kept", "<seed:tool_call>\n<function=write_file>\n<parameter=path>a.txt</parameter>\n<parameter=content>\nline\n</parameter>\n</function>\n</seed:tool_call>",
            {"calls": [call("write_file", path="a.txt", content="\nline\n")], "error": None})
        add("i_missing_block_end_then_eos", "<seed:tool_call>\n<function=get_time>\n</function>\n<seed:eos>",
            {"text": "", "calls": [call("get_time")], "error": None, "warnings": ["missing_call_end"]})
        add("i_missing_block_end_after_complete_call", "<seed:tool_call>\n<function=get_time>\n</function>\n",
            {"calls": [call("get_time")], "error": None, "warnings": ["missing_call_end"]})
        add("n_function_without_wrapper_is_text_then_cut", "<function=get_time>\n</function>\n<seed:tool_call>\n<function=get_time>\n",
            {"text": "<function=get_time>\n</function>\n", "calls": [], "error": {"kind": "unterminated"}})
    if fmt in ("glm45", "glm47"):
        add("y_escaped_newlines_between_tags", "<tool_call>get_weather\\n<arg_key>city</arg_key>\\n<arg_value>Paris</arg_value>\\n</tool_call>",
            {"calls": [call("get_weather", city="Paris")], "error": None, "warnings": ["escaped_newline", "escaped_newline", "escaped_newline"]})
        add("y_name_spacing_trimmed", "<tool_call> get_time \n</tool_call>",
            {"calls": [call("get_time")], "error": None})
        add("y_typed_values_trimmed_strings_not", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>  New York  </arg_value>\n<arg_key>days</arg_key>\n<arg_value> 4\n</arg_value>\n</tool_call>",
            {"calls": [call("get_weather", city="  New York  ", days=4)], "error": None})
        add("y_quoted_string_not_unquoted", '<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>"quoted.txt"</arg_value>\n<arg_key>content</arg_key>\n<arg_value>[1, 2]</arg_value>\n</tool_call>',
            {"calls": [call("write_file", path='"quoted.txt"', content="[1, 2]")], "error": None})
        add("n_missing_arg_value", "<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>\n<tool_call>get_time\n</tool_call>",
            {"calls": [call("get_time")], "error": {"kind": "malformed_markup"}})
        add("n_value_without_key", "<tool_call>get_weather\n<arg_value>Paris</arg_value>\n</tool_call>",
            {"calls": [], "error": {"kind": "malformed_markup"}})
        add("n_text_instead_of_pairs", "<tool_call>get_weather\ncity: Paris\n</tool_call>",
            {"calls": [], "error": {"kind": "malformed_markup"}})
        add("i_missing_call_end_at_eof", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n",
            {"calls": [], "error": {"kind": "unterminated"}})
        add("i_value_edge_newlines_kept", "<tool_call>write_file\n<arg_key>content</arg_key>\n<arg_value>\nbody\n</arg_value>\n</tool_call>",
            {"calls": [call("write_file", content="\nbody\n")], "error": None})
    if fmt == "glm47":
        add("y_calls_back_to_back_with_text", "see <tool_call>get_time</tool_call> and <tool_call>get_time</tool_call><tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call> end",
            {"text": "see  and  end", "calls": [call("get_time"), call("get_time"), call("get_weather", city="Oslo")], "error": None})
        add("y_glm45_newlines_accepted", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>",
            {"calls": [call("get_weather", city="Oslo")], "error": None, "warnings": []})
    if fmt == "glm45":
        add("y_glm47_compact_form_accepted", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>",
            {"calls": [call("get_weather", city="Oslo")], "error": None, "warnings": []})
    if fmt == "minimax_m2":
        add("y_single_quoted_name", "<minimax:tool_call>\n<invoke name='get_weather'>\n<parameter name='city'>Paris</parameter>\n</invoke>\n</minimax:tool_call>",
            {"calls": [call("get_weather", city="Paris")], "error": None, "warnings": ["single_quotes", "single_quotes"]})
        add("y_nil_and_none_read_as_null_where_allowed", "<minimax:tool_call>\n<invoke name=\"search\">\n<parameter name=\"query\">none</parameter>\n<parameter name=\"limit\">nil</parameter>\n<parameter name=\"filters\">None</parameter>\n</invoke>\n</minimax:tool_call>",
            {"calls": [call("search", query="none", limit=None, filters=None)], "error": None, "warnings": ["null_alias", "null_alias"]})
        add("y_boolean_words_are_not_booleans", "<minimax:tool_call>\n<invoke name=\"run_command\">\n<parameter name=\"command\">ls</parameter>\n<parameter name=\"background\">on</parameter>\n</invoke>\n</minimax:tool_call>",
            {"calls": [call("run_command", command="ls", background="on")], "error": None, "warnings": ["type_mismatch"]})
        add("y_think_then_calls", "<think>\nWeather first.\n</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>",
            {"text": "", "reasoning": "\nWeather first.\n", "calls": [call("get_weather", city="Paris")], "error": None})
        add("i_missing_section_end", "<minimax:tool_call>\n<invoke name=\"get_time\">\n</invoke>\n",
            {"calls": [call("get_time")], "error": None, "warnings": ["missing_section_end"]})
        add("i_value_edge_whitespace_kept", "<minimax:tool_call>\n<invoke name=\"write_file\">\n<parameter name=\"content\">\n  body\n</parameter>\n</invoke>\n</minimax:tool_call>",
            {"calls": [call("write_file", content="\n  body\n")], "error": None})
        add("n_unquoted_name", "<minimax:tool_call>\n<invoke name=get_time>\n</invoke>\n</minimax:tool_call>",
            {"calls": [], "error": {"kind": "malformed_markup"}})
        add("n_missing_gt_in_parameter", "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\"Paris</parameter>\n</invoke>\n</minimax:tool_call>",
            {"calls": [], "error": {"kind": "malformed_markup"}})
        add("n_unterminated_invoke", "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n",
            {"calls": [], "error": {"kind": "unterminated"}})
    if fmt == "minimax_m3":
        c += m3_cases()
    if fmt == "deepseek_v32":
        inv = lambda name, body: f'\n<{DS}invoke name="{name}">\n{body}\n</{DS}invoke>'
        blk = lambda *invs: f"<{DS}function_calls>" + "".join(invs) + f"\n</{DS}function_calls>"
        P = lambda k, v, s=None: f'<{DS}parameter name="{k}"' + (f' string="{s}"' if s else "") + f">{v}</{DS}parameter>"
        add("y_string_attribute_decides", blk(inv("get_weather", P("city", " 杭州 ", "true") + "\n" + P("days", "3", "false") + "\n" + P("metric", "true", "false"))),
            {"calls": [call("get_weather", city=" 杭州 ", days=3, metric=True)], "error": None, "warnings": []})
        add("y_string_false_json_values", blk(inv("run_command", P("command", "ls", "true") + "\n" + P("env", '{"A": "1"}', "false") + "\n" + P("args", '["-a"]', "false") + "\n" + P("timeout", "2.5", "false"))),
            {"calls": [call("run_command", command="ls", env={"A": "1"}, args=["-a"], timeout=2.5)], "error": None, "warnings": []})
        add("y_attribute_disagreeing_with_schema_wins", blk(inv("get_weather", P("city", "42", "false") + "\n" + P("days", "3", "true"))),
            {"calls": [call("get_weather", city=42, days="3")], "error": None, "warnings": ["schema_type_mismatch", "schema_type_mismatch"]})
        add("y_string_false_not_json_stays_string", blk(inv("run_command", P("command", "ls", "true") + "\n" + P("env", "{A: 1}", "false"))),
            {"calls": [call("run_command", command="ls", env="{A: 1}")], "error": None, "warnings": ["type_mismatch"]})
        add("y_missing_string_attribute_typed_by_schema", blk(inv("get_weather", P("city", "Oslo") + "\n" + P("days", "5"))),
            {"calls": [call("get_weather", city="Oslo", days=5)], "error": None, "warnings": ["missing_string_attribute", "missing_string_attribute"]})
        add("y_several_blocks_all_parsed", blk(inv("get_time", "")) + "\nand\n" + blk(inv("get_time", "")),
            {"text": "\nand\n", "calls": [call("get_time"), call("get_time")], "error": None})
        add("y_ascii_dialect_inside_value_is_content", blk(inv("write_file", P("content", "<function_calls><invoke name=\"x\"><parameter name=\"y\">z</parameter></invoke>", "true"))),
            {"calls": [call("write_file", content="<function_calls><invoke name=\"x\"><parameter name=\"y\">z</parameter></invoke>")], "error": None, "warnings": []})
        add("i_missing_section_end", f"<{DS}function_calls>" + inv("get_time", ""),
            {"calls": [call("get_time")], "error": None, "warnings": ["missing_section_end"]})
        add("i_ascii_dialect_is_text", '<function_calls>\n<invoke name="get_time">\n</invoke>\n</function_calls>',
            {"text": '<function_calls>\n<invoke name="get_time">\n</invoke>\n</function_calls>', "calls": [], "error": None})
        add("n_bad_string_attribute", blk(inv("get_weather", P("city", "x", "yes"))),
            {"calls": [], "error": {"kind": "malformed_markup"}})
        add("n_unterminated_inside_marker", f"<{DS}function_calls>" + inv("get_time", "")[:-6],
            {"calls": [], "error": {"kind": "unterminated"}})
    if fmt in V4:
        c += deepseek_v4_cases(fmt)
    return c

# Subfolders of a corpus with the request or options their cases run under (their conform.toml;
# `{fmt}` is the format's id).
SUBFOLDERS = {
    # The request had thinking on: the prompt ends `<｜Assistant｜><think>`, the output starts
    # inside reasoning. A request mode, so engines are served it too.
    "thinking": '# The template opened reasoning in the prompt: the output starts inside it (specs/corpus.md §1.2).\n[request]\nstarting_state = "reasoning"\n',
    # Other spellings of the delimiters read as markup.
    "marker_variants": '[options]\n"{fmt}.marker_variants" = true\n',
}

def deepseek_v4_cases(fmt):
    """DeepSeek-V4 and V4.1 (specs/deepseek_v4.md, specs/deepseek_v41.md)."""
    c = []
    add = lambda name, seg, exp: c.append((name, seg, exp))
    v4 = fmt == "deepseek_v4"
    b, i, p = DSML[fmt]
    inv = lambda name, body: f'<{DS}{i} name="{name}">\n{body}\n</{DS}{i}>'
    blk = lambda *invs: f"<{DS}{b}>\n" + "\n".join(invs) + f"\n</{DS}{b}>"
    P = lambda k, v, s=None: f'<{DS}{p} name="{k}"' + (f' string="{s}"' if s else "") + f">{v}</{DS}{p}>"
    EOS = "<｜end▁of▁sentence｜>"
    # What V4 reads as a leniency, V4.1 writes natively (no warning).
    lenient = lambda kind: [kind] if v4 else []
    # The other dialect's tag names.
    ob, oi, op = DSML["deepseek_v41" if v4 else "deepseek_v4"]
    oinv = lambda name, body: f'<{DS}{oi} name="{name}">\n{body}\n</{DS}{oi}>'
    oblk = lambda *invs: f"<{DS}{ob}>\n" + "\n".join(invs) + f"\n</{DS}{ob}>"
    OP = lambda k, v, s: f'<{DS}{op} name="{k}" string="{s}">{v}</{DS}{op}>'

    # The attribute decides the typing.
    add("y_string_attribute_decides", blk(inv("get_weather", P("city", " 杭州 ", "true") + "\n" + P("days", "3", "false") + "\n" + P("metric", "true", "false"))),
        {"calls": [call("get_weather", city=" 杭州 ", days=3, metric=True)], "error": None, "warnings": []})
    add("y_string_false_json_values", blk(inv("run_command", P("command", "ls", "true") + "\n" + P("env", '{"A": "1", "B": "é"}', "false") + "\n" + P("args", '["-a", "-l"]', "false") + "\n" + P("timeout", " 2.5\n", "false"))),
        {"calls": [call("run_command", command="ls", env={"A": "1", "B": "é"}, args=["-a", "-l"], timeout=2.5)], "error": None, "warnings": []})
    add("y_attribute_disagreeing_with_schema_wins", blk(inv("get_weather", P("city", "42", "false") + "\n" + P("days", "3", "true"))),
        {"calls": [call("get_weather", city=42, days="3")], "error": None, "warnings": ["schema_type_mismatch", "schema_type_mismatch"]})
    add("y_string_false_not_json_stays_string", blk(inv("run_command", P("command", "ls", "true") + "\n" + P("env", "{A: 1}", "false"))),
        {"calls": [call("run_command", command="ls", env="{A: 1}")], "error": None, "warnings": ["type_mismatch"]})
    add("y_missing_string_attribute_typed_by_schema", blk(inv("get_weather", P("city", "Oslo") + "\n" + P("days", "5"))),
        {"calls": [call("get_weather", city="Oslo", days=5)], "error": None, "warnings": ["missing_string_attribute", "missing_string_attribute"]})
    add("n_bad_string_attribute", blk(inv("get_weather", P("city", "x", "yes"))),
        {"calls": [], "error": {"kind": "malformed_markup"}})
    add("y_json_looking_string_value_stays_string", blk(inv("write_file", P("path", "a.json", "true") + "\n" + P("content", '{"a": 1}', "true"))),
        {"calls": [call("write_file", path="a.json", content='{"a": 1}')], "error": None, "warnings": []})
    # Structure: several blocks, closers of the other levels inside a value, the end token.
    add("y_several_blocks_all_parsed", blk(inv("get_time", "")) + "\nand\n" + blk(inv("get_time", "")),
        {"text": "\nand\n", "calls": [call("get_time"), call("get_time")], "error": None, "warnings": []})
    other = f"a</{DS}{i}>b</{DS}{b}>c<{DS}{i} name=\"x\">d"
    add("y_other_closers_inside_value_are_content", blk(inv("write_file", P("path", "n.txt", "true") + "\n" + P("content", other, "true"))),
        {"calls": [call("write_file", path="n.txt", content=other)], "error": None, "warnings": []})
    add("y_template_turn_with_end_token", "Let me check.\n\n" + blk(inv("get_weather", P("city", "Paris", "true") + "\n" + P("days", "3", "false")), inv("get_time", "")) + EOS,
        {"text": "Let me check.\n\n", "calls": [call("get_weather", city="Paris", days=3), call("get_time")], "error": None, "warnings": []})
    add("y_end_token_is_not_text", "The answer is 42." + EOS,
        {"text": "The answer is 42.", "calls": [], "error": None, "warnings": []})
    add("i_missing_section_end", f"<{DS}{b}>\n" + inv("get_time", ""),
        {"calls": [call("get_time")], "error": None, "warnings": ["missing_section_end"]})
    add("n_unterminated_inside_marker", f"<{DS}{b}>\n" + inv("get_time", "")[:-6],
        {"calls": [], "error": {"kind": "unterminated"}})
    add("n_unterminated_after_value_close", f"<{DS}{b}>\n" + f'<{DS}{i} name="get_weather">\n' + P("city", "Paris", "true"),
        {"calls": [], "error": {"kind": "unterminated"}})
    # Invokes without their block: every engine reads them (V4.1 writes them).
    add("y_invokes_without_block", "Sure.\n\n" + inv("get_weather", P("city", "Oslo", "true")) + "\n" + inv("get_time", ""),
        {"text": "Sure.\n\n", "calls": [call("get_weather", city="Oslo"), call("get_time")], "error": None,
         "warnings": lenient("missing_wrapper") * 2})
    # A JSON object as the invoke's body: SGLang, tool-parser and Dynamo read it, vLLM and
    # DeepSeek's reference library give {} (i_).
    add("i_json_invoke_body", blk(inv("get_weather", '{"city": "Paris", "days": 3}')),
        {"calls": [call("get_weather", city="Paris", days=3)], "error": None, "warnings": lenient("json_invoke_body")})
    body = 'use </｜DSML｜' + i + '> to end\n"q" {x} [y]'
    add("i_json_body_closer_inside_string_is_data", blk(inv("write_file", json.dumps({"path": "a.md", "content": body}, ensure_ascii=False))),
        {"calls": [call("write_file", path="a.md", content=body)], "error": None, "warnings": lenient("json_invoke_body")})
    add("n_json_body_not_json_then_good_call", blk(inv("get_weather", "{city: Paris}"), inv("get_time", "")),
        {"calls": [call("get_time")], "error": {"kind": "malformed_markup"}})
    add("n_json_body_then_parameter", blk(inv("get_weather", '{"city": "x"}\n' + P("days", "3", "false"))),
        {"calls": [], "error": {"kind": "malformed_markup"}})
    add("n_unterminated_inside_json_body", blk(inv("get_weather", '{"city": "Par'))[:-len(f"\n</{DS}{i}>\n</{DS}{b}>")],
        {"calls": [], "error": {"kind": "unterminated"}})
    # SGLang's self-closing invoke.
    add("i_self_closing_invoke", blk(f'<{DS}{i} name="get_time"/>', inv("get_weather", P("city", "Rome", "true"))),
        {"calls": [call("get_time"), call("get_weather", city="Rome")], "error": None, "warnings": ["self_closing_invoke"]})
    # The other dialect (and V4's other spellings) is text unless the option reads it.
    if v4:
        add("i_v41_dialect_is_text", oblk(oinv("get_time", "")),
            {"text": oblk(oinv("get_time", "")), "calls": [], "error": None, "warnings": []})
        ascii = blk(inv("get_weather", P("city", "Rome", "true"))).replace("｜DSML｜", "|DSML|")
        add("i_ascii_sentinel_is_text", ascii, {"text": ascii, "calls": [], "error": None, "warnings": []})
        # The block's spelling is text, the invoke inside it a block-less call.
        add("i_toolcalls_spelling_block_is_text", f"<{DS}toolcalls>\n" + inv("get_time", "") + f"\n</{DS}toolcalls>",
            {"text": f"<{DS}toolcalls>\n\n</{DS}toolcalls>", "calls": [call("get_time")], "error": None,
             "warnings": ["missing_wrapper", "text_after_calls"]})
        add("i_v32_block_name_invokes_are_calls", f"<{DS}function_calls>\n" + inv("get_time", "") + f"\n</{DS}function_calls>",
            {"text": f"<{DS}function_calls>\n\n</{DS}function_calls>", "calls": [call("get_time")], "error": None,
             "warnings": ["missing_wrapper", "text_after_calls"]})
        add("marker_variants/y_variant_ascii_sentinel", ascii,
            {"text": "", "calls": [call("get_weather", city="Rome")], "error": None, "warnings": ["marker_variant"]})
        add("marker_variants/y_variant_toolcalls_spelling", f"<{DS}toolcalls>\n" + inv("get_time", "") + f"\n</{DS}toolcalls>",
            {"text": "", "calls": [call("get_time")], "error": None, "warnings": ["marker_variant"]})
        add("marker_variants/y_variant_v41_dialect", oblk(oinv("get_weather", OP("city", "Lima", "true"))),
            {"text": "", "calls": [call("get_weather", city="Lima")], "error": None, "warnings": ["marker_variant"]})
    else:
        add("i_v4_dialect_is_text", oblk(oinv("get_time", "")),
            {"text": oblk(oinv("get_time", "")), "calls": [], "error": None, "warnings": []})
        two = blk(inv("get_time", "")).replace("｜DSML｜ ", "｜DSML｜  ")
        add("y_two_spaces_are_not_the_dialect", two, {"text": two, "calls": [], "error": None, "warnings": []})
        add("y_namespaced_tool_name", blk(inv("fs::read_file", P("path", "src/main.rs", "true") + "\n" + P("limit", "200", "false"))),
            {"calls": [call("fs::read_file", path="src/main.rs", limit=200)], "error": None, "warnings": []})
        add("marker_variants/y_variant_v4_dialect", oblk(oinv("get_weather", OP("city", "Lima", "true"))),
            {"text": "", "calls": [call("get_weather", city="Lima")], "error": None, "warnings": ["marker_variant"]})
        add("marker_variants/y_variant_mixed_dialects_in_one_turn", blk(inv("get_time", "")) + "\n" + oblk(oinv("get_time", "")),
            {"text": "", "calls": [call("get_time"), call("get_time")], "error": None, "warnings": ["marker_variant"]})
    # Thinking on: the output starts inside reasoning.
    th = "thinking/"
    add(th + "y_reasoning_then_text_and_call", "The user wants Paris weather.</think>Checking.\n\n" + blk(inv("get_weather", P("city", "Paris", "true"))) + EOS,
        {"text": "Checking.\n\n", "reasoning": "The user wants Paris weather.", "calls": [call("get_weather", city="Paris")], "error": None, "warnings": []})
    add(th + "y_calls_block_ends_reasoning", "I need the time.\n\n" + blk(inv("get_time", "")),
        {"text": "", "reasoning": "I need the time.\n\n", "calls": [call("get_time")], "error": None,
         "warnings": lenient("implicit_reasoning_end")})
    add(th + "y_bare_invoke_ends_reasoning", "Quick one." + inv("get_time", ""),
        {"text": "", "reasoning": "Quick one.", "calls": [call("get_time")], "error": None,
         "warnings": lenient("implicit_reasoning_end") + lenient("missing_wrapper")})
    add(th + "y_calls_block_then_late_close", "Plan: weather." + blk(inv("get_weather", P("city", "Oslo", "true"))) + "</think>",
        {"text": "", "reasoning": "Plan: weather.", "calls": [call("get_weather", city="Oslo")], "error": None,
         "warnings": lenient("implicit_reasoning_end") + ["stray_reasoning_end"]})
    add(th + "y_answer_without_tools", "Easy: 6 × 7.</think>The answer is 42." + EOS,
        {"text": "The answer is 42.", "reasoning": "Easy: 6 × 7.", "calls": [], "error": None, "warnings": []})
    add(th + "y_empty_reasoning_then_call", "</think>\n\n" + blk(inv("get_time", "")),
        {"text": "", "reasoning": "", "calls": [call("get_time")], "error": None, "warnings": []})
    add(th + "y_unterminated_reasoning", "Still weighing 杭州 against 上海",
        {"text": "", "reasoning": "Still weighing 杭州 against 上海", "calls": [], "error": None, "warnings": ["unterminated_reasoning"]})
    add(th + "y_reasoning_tags_inside_value_are_content", "Write it.</think>" + blk(inv("write_file", P("path", "t.md", "true") + "\n" + P("content", "a <think>b</think> c", "true"))),
        {"text": "", "reasoning": "Write it.", "calls": [call("write_file", path="t.md", content="a <think>b</think> c")], "error": None, "warnings": []})
    add(th + "n_unterminated_call_after_reasoning", "Writing.</think>" + blk(inv("write_file", P("path", "a.txt", "true") + "\n" + P("content", "half a li", "true")))[:-len(f"</{DS}{p}>\n</{DS}{i}>\n</{DS}{b}>")],
        {"text": "", "reasoning": "Writing.", "calls": [], "error": {"kind": "unterminated"}})
    return c

# ---------------------------------------------------------------- minimax_m3 (nested elements)

# Tools only minimax_m3's corpus has: nested objects and arrays, keys that are not identifiers.
M3_TOOLS = [
    tool("create_order", {
        "user_id": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer"}}}},
        "shipping": {"type": "object", "properties": {
            "address": {"type": "string"}, "express": {"type": "boolean"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "note": {"type": ["string", "null"]},
    }, desc="The fact sheet's example tool"),
    tool("plot", {
        "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
        "origin": {"$ref": "#/$defs/point"},
        "style": {"anyOf": [{"type": "object", "properties": {"color": {"type": "string"}, "width": {"type": "integer"}}}, {"type": "null"}]},
    }, defs={"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}}),
    tool("configure", {
        "settings": {"type": "object"},
        "values": {},
    }, desc="Schemas that do not type their members"),
    tool("grep", {
        "pattern": {"type": "string"},
        "-A": {"type": "integer"},
        "-n": {"type": "boolean"},
        "path": {"type": "string"},
    }, desc="Keys like -A and -n (vllm-project/vllm-ascend#12815)"),
]

def m3(*segments):
    """Raw minimax_m3 wire: strings as they are, `None` for the namespace token."""
    return "".join(NS if x is None else x for x in segments)

def el(key, inner):
    return f"{NS}<{key}>{inner}{NS}</{key}>"

def items(*xs):
    return "".join(el("item", x) for x in xs)

def m3_block(*invokes):
    return f"{NS}<tool_call>\n" + "\n".join(invokes) + f"\n{NS}</tool_call>"

def m3_invoke(name, *params, q='"'):
    return f"{NS}<invoke name={q}{name}{q}>" + "".join(params) + f"{NS}</invoke>"

def m3_cases():
    c = []
    add = lambda name, seg, exp: c.append((name, seg, exp))
    order = m3_invoke("create_order", el("user_id", "42"), el("items", el("item", el("sku", "book-001"))))
    add("y_template_example_nested", "I'll check." + m3_block(order),
        {"text": "I'll check.", "calls": [call("create_order", user_id=42, items=[{"sku": "book-001"}])],
         "error": None, "warnings": []})
    # vLLM's docstring and mlx-lm#1416 show a newline between parameters: whitespace between
    # elements is not data.
    spaced = (f'{NS}<invoke name="create_order">\n' + el("user_id", "7") + "\n" + el("items", "\n" + el("item", el("sku", "a") + "\n" + el("qty", "2")) + "\n") + f"\n{NS}</invoke>")
    add("y_newlines_between_elements", m3_block(spaced),
        {"text": "", "calls": [call("create_order", user_id=7, items=[{"sku": "a", "qty": 2}])], "error": None, "warnings": []})
    add("y_array_of_objects_typed_by_items", m3_block(m3_invoke("create_order", el("items", items(el("sku", "b-1") + el("qty", "3"), el("sku", "b-2") + el("qty", "010"))))),
        {"calls": [call("create_order", items=[{"sku": "b-1", "qty": 3}, {"sku": "b-2", "qty": 10}])], "error": None, "warnings": []})
    add("y_array_of_strings_edges_kept", m3_block(m3_invoke("create_order", el("tags", items("gift", " fragile ", "")))),
        {"calls": [call("create_order", tags=["gift", " fragile ", ""])], "error": None, "warnings": []})
    add("y_nested_arrays", m3_block(m3_invoke("plot", el("matrix", items(items("1", "2.5"), items("-3"))))),
        {"calls": [call("plot", matrix=[[1, 2.5], [-3]])], "error": None, "warnings": []})
    add("y_empty_elements_are_empty_containers", m3_block(m3_invoke("create_order", el("tags", ""), el("shipping", ""), el("items", "\n"))),
        {"calls": [call("create_order", tags=[], shipping={}, items=[])], "error": None, "warnings": []})
    add("y_nested_object_typed_by_properties", m3_block(m3_invoke("create_order", el("shipping", el("address", "1 Main St, 东京 🏠") + el("express", "True")))),
        {"calls": [call("create_order", shipping={"address": "1 Main St, 东京 🏠", "express": True})], "error": None, "warnings": []})
    add("y_ref_and_anyof_schemas_type_members", m3_block(m3_invoke("plot", el("origin", el("x", "1.5") + el("y", "-2")), el("style", el("color", "red") + el("width", "3")))),
        {"calls": [call("plot", origin={"x": 1.5, "y": -2}, style={"color": "red", "width": 3})], "error": None, "warnings": []})
    add("y_object_written_as_json_text", m3_block(m3_invoke("create_order", el("shipping", '{"address": "x", "express": false}'), el("tags", '["a"]'))),
        {"calls": [call("create_order", shipping={"address": "x", "express": False}, tags=["a"])], "error": None, "warnings": []})
    add("y_nested_value_failing_its_type_stays_string", m3_block(m3_invoke("create_order", el("items", el("item", el("sku", "s") + el("qty", "two"))))),
        {"calls": [call("create_order", items=[{"sku": "s", "qty": "two"}])], "error": None, "warnings": ["type_mismatch"]})
    add("y_untyped_members_stay_strings", m3_block(m3_invoke("configure", el("settings", el("retries", "3") + el("verbose", "true") + el("name", "x")))),
        {"calls": [call("configure", settings={"retries": "3", "verbose": "true", "name": "x"})], "error": None, "warnings": []})
    add("y_repeated_member_names_collect_in_order", m3_block(m3_invoke("configure", el("settings", el("host", "a") + el("port", "1") + el("host", "b") + el("host", "c")))),
        {"calls": [call("configure", settings={"host": ["a", "b", "c"], "port": "1"})], "error": None, "warnings": []})
    add("y_untyped_items_are_an_array", m3_block(m3_invoke("configure", el("values", items("x", el("k", "v"))))),
        {"calls": [call("configure", values=["x", {"k": "v"}])], "error": None, "warnings": []})
    add("y_unknown_tool_values_nest_untyped", m3_block(m3_invoke("deploy", el("target", "prod"), el("replicas", "3"), el("labels", el("team", "core") + el("tier", "1")), el("regions", items("eu", "us")))),
        {"calls": [call("deploy", target="prod", replicas="3", labels={"team": "core", "tier": "1"}, regions=["eu", "us"])], "error": None, "warnings": ["unknown_tool"]})
    add("y_mixed_content_kept_as_text_member", m3_block(m3_invoke("create_order", el("shipping", "Leave it at the door. " + el("address", "1 Main St") + "\n")), ),
        {"calls": [call("create_order", shipping={"address": "1 Main St", "$text": "Leave it at the door. \n"})], "error": None, "warnings": ["mixed_content"]})
    add("n_text_between_array_items", m3_block(m3_invoke("create_order", el("tags", el("item", "a") + " and " + el("item", "b")))),
        {"calls": [], "error": {"kind": "malformed_markup"}})
    add("y_keys_that_are_not_identifiers", m3_block(m3_invoke("grep", el("pattern", "fn main"), el("-A", "3"), el("-n", "true"), el("path", "src/"))),
        {"calls": [call("grep", **{"pattern": "fn main", "-A": 3, "-n": True, "path": "src/"})], "error": None, "warnings": []})
    look = f"a]<]minimax b]]<]minimax[x ]<]minimax[>]< x[1]] <tool_call><item>v</item></tool_call>"
    add("y_namespace_look_alikes_are_content", m3_block(m3_invoke("write_file", el("path", "n.txt"), el("content", look))),
        {"calls": [call("write_file", path="n.txt", content=look)], "error": None, "warnings": []})
    add("y_two_blocks_back_to_back", m3_block(m3_invoke("get_time")) + "\n" + m3_block(m3_invoke("get_weather", el("city", "Oslo"))),
        {"text": "", "calls": [call("get_time"), call("get_weather", city="Oslo")], "error": None, "warnings": []})
    add("y_two_blocks_with_text_between", ["Time first.", [("get_time", [])], "\nNow the weather.", [("get_weather", [("city", "Rome")])]],
        {"text": "Time first.\nNow the weather.", "calls": [call("get_time"), call("get_weather", city="Rome")], "error": None, "warnings": []})
    add("y_single_quoted_name", m3_block(m3_invoke("get_weather", el("city", "Paris"), q="'")),
        {"calls": [call("get_weather", city="Paris")], "error": None, "warnings": ["single_quotes"]})
    add("y_unquoted_name", m3_block(m3_invoke("get_weather", el("city", "Paris"), q="")),
        {"calls": [call("get_weather", city="Paris")], "error": None, "warnings": ["unquoted_attribute"]})
    add("y_spaced_namespace_markers", f"{NS} <tool_call>\n" + f'{NS}<invoke name="get_weather">{NS}\t<city>Oslo{NS}</city>{NS}\n</invoke>' + f"\n{NS}</tool_call>",
        {"calls": [call("get_weather", city="Oslo")], "error": None, "warnings": ["spaced_marker", "spaced_marker", "spaced_marker"]})
    add("y_invoke_without_block", "Sure." + m3_invoke("get_weather", el("city", "Lima")),
        {"text": "Sure.", "calls": [call("get_weather", city="Lima")], "error": None, "warnings": ["missing_wrapper"]})
    add("i_missing_section_end", f"{NS}<tool_call>\n" + m3_invoke("get_time") + "\n",
        {"calls": [call("get_time")], "error": None, "warnings": ["missing_section_end"]})
    add("y_block_close_ends_unclosed_invoke", f"{NS}<tool_call>\n" + f'{NS}<invoke name="get_weather">' + el("city", "Kyiv") + f"\n{NS}</tool_call>",
        {"calls": [call("get_weather", city="Kyiv")], "error": None, "warnings": ["missing_call_close"]})
    add("i_duplicate_parameter_last_wins", m3_block(m3_invoke("create_order", el("user_id", "1"), el("user_id", "2"))),
        {"calls": [call("create_order", user_id=2)], "error": None, "warnings": ["duplicate_parameter"]})
    add("i_elements_inside_integer_parameter", m3_block(m3_invoke("create_order", el("user_id", el("id", "5")))),
        {"calls": [call("create_order", user_id={"id": "5"})], "error": None, "warnings": ["type_mismatch"]})
    add("i_leading_whitespace_then_adaptive_close", "\n</mm:think>\n\nThe answer is 4.",
        {"text": "\n\n\nThe answer is 4.", "reasoning": "", "calls": [], "error": None, "warnings": []})
    add("n_element_inside_string_parameter", m3_block(m3_invoke("get_weather", el("city", el("name", "Paris"))), m3_invoke("get_time")),
        {"calls": [call("get_time")], "error": {"kind": "malformed_markup"}, "errors": ["malformed_markup"]})
    add("n_mismatched_close_then_good_call", m3_block(f'{NS}<invoke name="get_weather">{NS}<city>Paris{NS}</town>{NS}</invoke>', m3_invoke("get_time")),
        {"calls": [call("get_time")], "error": {"kind": "malformed_markup"}, "errors": ["malformed_markup"]})
    add("n_invoke_close_inside_value_then_good_call", m3_block(f'{NS}<invoke name="get_weather">{NS}<city>Paris{NS}</invoke>', m3_invoke("get_time")),
        {"calls": [call("get_time")], "error": {"kind": "malformed_markup"}, "errors": ["malformed_markup"]})
    add("n_text_between_parameters", m3_block(m3_invoke("get_weather", el("city", "Paris") + ", and " + el("days", "3"))),
        {"calls": [], "error": {"kind": "malformed_markup"}})
    add("n_bare_namespace_token_in_value", m3_block(m3_invoke("get_weather", el("city", f"Par{NS} is"))),
        {"calls": [], "error": {"kind": "malformed_markup"}})
    deep = el("settings", "".join(f"{NS}<d{i}>" for i in range(130)) + "x" + "".join(f"{NS}</d{i}>" for i in reversed(range(130))))
    add("n_nesting_deeper_than_the_limit_then_good_call", m3_block(m3_invoke("configure", deep), m3_invoke("get_time")),
        {"calls": [call("get_time")], "error": {"kind": "limit_exceeded"}, "errors": ["limit_exceeded"]})
    full = m3_block(order)
    add("n_unterminated_inside_nested_element", full[:full.index("book-0") + 4], {"calls": [], "error": {"kind": "unterminated"}})
    add("n_unterminated_inside_close_tag", full[:full.index("</sku") + 4], {"calls": [], "error": {"kind": "unterminated"}})
    add("n_unterminated_invoke", full[:full.index(f"{NS}</invoke>")], {"calls": [], "error": {"kind": "unterminated"}})
    # Reasoning: <mm:think> blocks, the adaptive mode's bare close, a call ending a block.
    add("y_adaptive_bare_close_first", "</mm:think>The answer is 4.",
        {"text": "The answer is 4.", "reasoning": "", "calls": [], "error": None, "warnings": []})
    add("y_adaptive_bare_close_then_call", "</mm:think>" + m3_block(m3_invoke("get_time")),
        {"text": "", "reasoning": "", "calls": [call("get_time")], "error": None, "warnings": []})
    add("y_reasoning_call_ends_reasoning", "<mm:think>The user wants Oslo's weather." + m3_block(m3_invoke("get_weather", el("city", "Oslo"))),
        {"text": "", "reasoning": "The user wants Oslo's weather.", "calls": [call("get_weather", city="Oslo")], "error": None,
         "warnings": ["implicit_reasoning_end"]})
    add("y_reasoning_interleaved_with_calls", "<mm:think>Time first.</mm:think>" + m3_block(m3_invoke("get_time")) + "<mm:think>Then the weather.</mm:think>\n" + m3_block(m3_invoke("get_weather", el("city", "Oslo"))),
        {"text": "", "reasoning": "Time first.Then the weather.", "calls": [call("get_time"), call("get_weather", city="Oslo")], "error": None, "warnings": []})
    add("y_reasoning_with_cjk_then_text", "<mm:think>用户想知道天气 🌤</mm:think>\n\n北京今天晴。",
        {"text": "\n\n北京今天晴。", "reasoning": "用户想知道天气 🌤", "calls": [], "error": None, "warnings": []})
    add("y_stray_close_after_text_is_warned", "Paris.</mm:think> Sunny.",
        {"text": "Paris. Sunny.", "reasoning": "", "calls": [], "error": None, "warnings": ["stray_reasoning_end"]})
    return c

# Request modes (thinking_mode of the chat template) and an option: a folder each, set in its
# conform.toml.
M3_FOLDERS = {
    # thinking_mode=enabled: the prompt ends with <mm:think>, the output begins inside it.
    "thinking_enabled": ('# The template opened reasoning in the prompt: the output starts inside it (specs/corpus.md §1.2).\n[request]\nstarting_state = "reasoning"', [
        ("y_enabled_reasoning_then_call", "The user wants the time.</mm:think>" + m3_block(m3_invoke("get_time")),
         {"text": "", "reasoning": "The user wants the time.", "calls": [call("get_time")], "error": None, "warnings": []}),
        ("y_enabled_call_without_close", "Need the weather in Oslo." + m3_block(m3_invoke("get_weather", el("city", "Oslo"))),
         {"text": "", "reasoning": "Need the weather in Oslo.", "calls": [call("get_weather", city="Oslo")], "error": None,
          "warnings": ["implicit_reasoning_end"]}),
        ("y_enabled_empty_reasoning", "</mm:think>Hello!",
         {"text": "Hello!", "reasoning": "", "calls": [], "error": None, "warnings": []}),
        ("y_enabled_unterminated_reasoning", "Still thinking about <item> tags",
         {"text": "", "reasoning": "Still thinking about <item> tags", "calls": [], "error": None, "warnings": ["unterminated_reasoning"]}),
    ]),
    # thinking_mode=disabled: the prompt wrote a bare </mm:think>; the output is the answer.
    "thinking_disabled": (None, [
        ("y_disabled_answer_then_call", "Let me look that up." + m3_block(m3_invoke("get_weather", el("city", "Lima"))),
         {"text": "Let me look that up.", "reasoning": "", "calls": [call("get_weather", city="Lima")], "error": None, "warnings": []}),
        ("y_disabled_plain_answer", "2 + 2 = 4.",
         {"text": "2 + 2 = 4.", "reasoning": "", "calls": [], "error": None, "warnings": []}),
    ]),
    # SGLang's reading of untyped leaves.
    "infer_untyped_scalars": ('[options]\n"minimax_m3.infer_untyped_scalars" = true', [
        ("y_untyped_literals_read_as_json", m3_block(m3_invoke("configure", el("settings", el("a", "true") + el("b", "false") + el("c", "null") + el("d", "True") + el("e", "3"))), m3_invoke("deploy", el("dry_run", "true"))),
         {"calls": [call("configure", settings={"a": True, "b": False, "c": None, "d": "True", "e": "3"}), call("deploy", dry_run=True)],
          "error": None, "warnings": ["unknown_tool"]}),
    ]),
}

def m3_transcripts():
    t = []
    def add(id_, transcript, expect=None):
        line = {"id": id_, "transcript": transcript}
        if expect is not None:
            line["expect"] = expect
        t.append(line)
    add("agent_order_with_thinking", "<mm:think>The user wants two copies of book-001 shipped express.</mm:think>\n\nPlacing the order now." + m3_block(m3_invoke("create_order", el("user_id", "1024"), el("items", el("item", el("sku", "book-001") + el("qty", "2"))), el("shipping", el("address", "221B Baker St") + el("express", "true")), el("tags", items("gift")))),
        {"text": "\n\nPlacing the order now.", "calls": [call("create_order", user_id=1024, items=[{"sku": "book-001", "qty": 2}], shipping={"address": "221B Baker St", "express": True}, tags=["gift"])], "error": None})
    add("agent_adaptive_no_thinking_parallel", "</mm:think>Checking both cities." + m3_block(m3_invoke("get_weather", el("city", "Tokyo"), el("unit", "celsius")), m3_invoke("get_weather", el("city", "東京"))))
    add("agent_grep_then_plot", "<mm:think>Search first.</mm:think>" + m3_block(m3_invoke("grep", el("pattern", "TODO|FIXME"), el("-n", "true"), el("-A", "2"), el("path", "src/"))))
    add("agent_plot_matrix", m3_block(m3_invoke("plot", el("matrix", items(items("0", "1"), items("1", "0"))), el("origin", el("x", "0") + el("y", "0")))))
    add("agent_write_html", "</mm:think>" + m3_block(m3_invoke("write_file", el("path", "index.html"), el("content", "<!doctype html>\n<html><body><p class=\"x\">Tom &amp; Jerry &lt;3</p></body></html>\n"))))
    return t

# ---------------------------------------------------------------- transcripts (.jsonl)

def transcripts(fmt):
    t = []
    def add(id_, segs, expect=None):
        line = {"id": id_, "transcript": segs if isinstance(segs, str) else wire(fmt, segs)}
        if expect is not None:
            line["expect"] = expect
        t.append(line)
    patch = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,4 @@\n+use std::fmt;\n fn main() {\n-    println!(\"hi\");\n+    println!(\"{}\", \"<b>hi</b>\");\n }\n"
    add("agent_read_then_write", ["I'll look at the manifest first.\n", [("run_command", [("command", "cat Cargo.toml"), ("timeout", "10")])]],
        {"calls": [call("run_command", command="cat Cargo.toml", timeout=10)], "error": None})
    add("agent_apply_patch", ["Applying the fix.\n", [("write_file", [("path", "fix.patch"), ("content", patch)])]],
        {"calls": [call("write_file", path="fix.patch", content=patch)], "error": None})
    add("agent_parallel_lookups", ["Two lookups at once.\n", [("get_weather", [("city", "Tokyo"), ("unit", "celsius")]), ("get_weather", [("city", "東京")])]])
    add("agent_search_with_filters", [[("search", [("query", "streaming json parser"), ("limit", "20"), ("filters", '{"language": "rust", "stars": 100}'), ("tags", '["parser", "json"]')])]])
    add("agent_html_file", [[("write_file", [("path", "index.html"), ("content", "<!doctype html>\n<html><body><p class=\"x\">Tom &amp; Jerry &lt;3</p></body></html>\n")])]])
    o, e = THINK[fmt]
    add("agent_answer_after_thinking", f"{o}No tool needed.{e}\n\nThe answer is 42.")
    if fmt in V4:
        b, i, p = DSML[fmt]
        EOS = "<｜end▁of▁sentence｜>"
        inv = lambda name, body: f'<{DS}{i} name="{name}">\n{body}\n</{DS}{i}>'
        P = lambda k, v, s: f'<{DS}{p} name="{k}" string="{s}">{v}</{DS}{p}>'
        add("agent_reasoning_then_parallel_calls", f"{o}Two cities, one call each.{e}I'll check both.\n\n<{DS}{b}>\n"
            + inv("get_weather", P("city", "北京", "true") + "\n" + P("days", "3", "false")) + "\n"
            + inv("get_weather", P("city", "Zürich", "true") + "\n" + P("unit", "celsius", "true")) + f"\n</{DS}{b}>" + EOS,
            {"text": "I'll check both.\n\n", "reasoning": "Two cities, one call each.", "calls": [
                call("get_weather", city="北京", days=3), call("get_weather", city="Zürich", unit="celsius")], "error": None})
        add("agent_write_code_with_dsml_in_it", f"<{DS}{b}>\n" + inv("write_file", P("path", "parse.py", "true") + "\n" + P("content", f'OPEN = "<{DS}{i} name="\nCLOSE = "</{DS}{p}>"\n', "true")) + f"\n</{DS}{b}>")
    return t

# ---------------------------------------------------------------- write

def write_case(d, name, text, exp):
    with open(os.path.join(d, name + ".txt"), "wb") as f:
        f.write(text.encode())
    with open(os.path.join(d, name + ".expect.json"), "w") as f:
        json.dump(exp, f, ensure_ascii=False)
        f.write("\n")

def main():
    for fmt in FORMATS:
        d = os.path.join(ROOT, "corpus", fmt)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            # Subfolders the generator writes (SUBFOLDERS, M3_FOLDERS) are rewritten; any
            # other (cases under their own conform.toml, written by hand) is kept.
            if os.path.isdir(os.path.join(d, f)):
                if f in SUBFOLDERS or f in M3_FOLDERS:
                    shutil.rmtree(os.path.join(d, f))
            else:
                os.remove(os.path.join(d, f))
        tools = V4_TOOLS if fmt in V4 else TOOLS + (M3_TOOLS if fmt == "minimax_m3" else [])
        with open(os.path.join(d, "tools.json"), "w") as f:
            json.dump(tools, f, indent=1, ensure_ascii=False)
            f.write("\n")
        shared = shared_cases(fmt)
        if fmt in DSML:
            # The string attribute adds its own warnings; its cases pin them.
            for _, _, exp in shared:
                exp.pop("warnings", None)
        cases = shared + reasoning_cases(fmt) + typing_cases(fmt) + specific_cases(fmt)
        names = set()
        for name, seg, exp in cases:
            assert name not in names, name
            names.add(name)
            text = seg if isinstance(seg, str) else wire(fmt, seg)
            if "/" in name:
                sub = name.split("/")[0]
                if not os.path.exists(os.path.join(d, sub)):
                    os.makedirs(os.path.join(d, sub))
                    with open(os.path.join(d, sub, "conform.toml"), "w") as f:
                        f.write(SUBFOLDERS[sub].replace("{fmt}", fmt))
            with open(os.path.join(d, name + ".txt"), "wb") as f:
                f.write(text.encode())
            with open(os.path.join(d, name + ".expect.json"), "w") as f:
                json.dump(exp, f, ensure_ascii=False)
                f.write("\n")
        with open(os.path.join(d, "n_invalid_utf8_in_value.txt"), "wb") as f:
            f.write(wire(fmt, [[("write_file", [("path", "a"), ("content", "XX")])]]).encode().replace(b"XX", b"a\xffb"))
        with open(os.path.join(d, "n_invalid_utf8_in_value.expect.json"), "w") as f:
            f.write('{"calls": [], "error": {"kind": "invalid_utf8"}}\n')
        lines = transcripts(fmt) + (m3_transcripts() if fmt == "minimax_m3" else [])
        with open(os.path.join(d, "transcripts.jsonl"), "w") as f:
            for line in lines:
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        labelled = len(cases) + 1
        if fmt == "minimax_m3":
            for sub, (options, sub_cases) in M3_FOLDERS.items():
                sd = os.path.join(d, sub)
                os.makedirs(sd)
                if options:
                    with open(os.path.join(sd, "conform.toml"), "w") as f:
                        f.write(options + "\n")
                for name, text, exp in sub_cases:
                    assert name not in names, name
                    names.add(name)
                    write_case(sd, name, text, exp)
                labelled += len(sub_cases)
        print(f"{fmt}: {labelled} labelled cases", file=sys.stderr)

if __name__ == "__main__":
    main()
