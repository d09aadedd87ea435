#!/usr/bin/env python3
"""Writes corpus/gemma4/ and corpus/functiongemma/ from the cases below (specs/gemma4.md and
specs/functiongemma.md name each rule's cases): one list of cases, written in each dialect's
markup (functiongemma without the reasoning cases).

    python3 scripts/gen_gemma_corpus.py        # from the repository root; edit this file, not the corpus

Every expectation is written out by hand here, not computed by conform: the corpus judges the
parser. Transcripts are written without a trailing newline.
"""
import json
import os
import shutil

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus")

def build(O, C, Q, TR, TE, EOS, RE, thinks):
    """The cases of a dialect: its call open and end, quote, stop tokens (tool response, turn
    end, end of sequence), the response end, and whether its models think."""
    TH, CH, CC = "<|channel>thought\n", "<|channel>", "<channel|>"

    def s(v):
        """A string value in the notation."""
        return Q + v + Q


    def call(name, body, close=C):
        return f"{O}call:{name}{{{body}}}{close}"


    def c(name, args):
        """An expected call."""
        return {"name": name, "arguments": args}


    TOOLS = [
        {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast for a city.",
         "parameters": {"type": "object", "properties": {
             "city": {"type": "string"}, "days": {"type": "integer"},
             "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "description": "The current time.",
         "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"name": "write_file", "description": "Write a file.",
         "parameters": {"type": "object", "properties": {
             "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}}},
        {"type": "function", "function": {"name": "search", "description": "Search the web.",
         "parameters": {"type": "object", "properties": {
             "query": {"type": "string"}, "limit": {"type": "integer"},
             "filters": {"type": "object", "properties": {"lang": {"type": "string"}, "after": {"type": "string"}}},
             "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["query"]}}},
        {"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm.",
         "parameters": {"type": "object", "properties": {
             "time": {"type": "string"}, "enabled": {"type": "boolean"}, "snooze": {"type": ["integer", "null"]},
             "repeat": {"type": "array", "items": {"type": "string"}}}, "required": ["time"]}}},
        {"type": "function", "function": {"name": "calculate", "description": "Evaluate an expression.",
         "parameters": {"type": "object", "properties": {
             "expression": {"type": "string"}, "precision": {"type": "integer"}, "ratio": {"type": "number"}},
             "required": ["expression"]}}},
    ]

    WEATHER = call("get_weather", f"city:{s('Paris')},days:3")
    WEATHER_C = c("get_weather", {"city": "Paris", "days": 3})
    TIME = call("get_time", "")
    TIME_C = c("get_time", {})

    CODE = 'fn main() {\n\tlet s = "quote \\"inner\\" C:\\\\dir"; // <tool_call|> {a:1}, [x]\n\tprintln!("{s}");\n}\n'
    BIG = ("    let s = \"héllo → ✓ 😀\"; if a < b && c > d { x[1] = 2; } // <|tool_call>call:x{} <|\"|\n" * 300)
    assert len(BIG.encode()) >= 20000

    # (name, transcript, expectation) — y_ expectations get "error": null.
    CASES = [
        # §2 calls
        ("y_call_single", WEATHER + TR,
         {"text": "", "calls": [WEATHER_C], "warnings": []}),
        ("y_call_after_text", "Let me check the forecast." + WEATHER + TR,
         {"text": "Let me check the forecast.", "calls": [WEATHER_C], "warnings": []}),
        ("y_call_without_arguments", TIME + TR,
         {"text": "", "calls": [TIME_C], "warnings": []}),
        ("y_calls_parallel_back_to_back", WEATHER + TIME + call("get_weather", f"city:{s('Tokyo')}") + TR,
         {"text": "", "calls": [WEATHER_C, TIME_C, c("get_weather", {"city": "Tokyo"})], "warnings": []}),
        ("y_calls_undeclared_tool_kept", call("send_email", f"to:{s('a@b.c')}") + TR,
         {"text": "", "calls": [c("send_email", {"to": "a@b.c"})], "warnings": ["unknown_tool"]}),
        ("y_call_name_with_dots_and_dashes", call("fs.read-file_v2", f"path:{s('/etc/hosts')}") + TR,
         {"calls": [c("fs.read-file_v2", {"path": "/etc/hosts"})], "warnings": ["unknown_tool"]}),
        # §3 values
        ("y_values_typed_by_syntax",
         call("search", f"filters:{{after:{s('2026-01-01')},lang:{s('fr')}}},limit:10,query:{s('météo')},"
              f"tags:[{s('a')},{s('b')}]") + TR,
         {"calls": [c("search", {"query": "météo", "limit": 10, "filters": {"lang": "fr", "after": "2026-01-01"},
                                 "tags": ["a", "b"]})], "warnings": []}),
        ("y_values_literals_and_numbers",
         call("set_alarm", f"enabled:false,repeat:[],snooze:null,time:{s('07:30')}") +
         call("calculate", f"expression:{s('2**10')},precision:-3,ratio:1.5e-3") + TR,
         {"calls": [c("set_alarm", {"time": "07:30", "enabled": False, "snooze": None, "repeat": []}),
                    c("calculate", {"expression": "2**10", "precision": -3, "ratio": 0.0015})], "warnings": []}),
        ("y_values_big_integer_keeps_digits", call("calculate", f"expression:{s('x')},precision:18446744073709551615") + TR,
         {"calls": [c("calculate", {"expression": "x", "precision": 18446744073709551615})], "warnings": []}),
        ("y_values_nested_containers",
         call("f", f"a:[[1,[2,[]]],{{}},{{k:[{{z:{s('deep')}}}]}}],o:{{p:{{q:{{r:true}}}}}}") + TR,
         {"calls": [c("f", {"a": [[1, [2, []]], {}, {"k": [{"z": "deep"}]}], "o": {"p": {"q": {"r": True}}}})]}),
        ("y_values_empty_string_and_containers", call("f", f"a:{s('')},b:[],c:{{}}") + TR,
         {"calls": [c("f", {"a": "", "b": [], "c": {}})]}),
        ("y_values_quoted_number_for_string_key", call("calculate", f"expression:{s('42')}") + TR,
         {"calls": [c("calculate", {"expression": "42"})], "warnings": []}),
        ("y_values_whitespace_between_tokens", call("get_weather", f" city : {s('Paris')} ,\n days : 3 \n") + TR,
         {"calls": [WEATHER_C], "warnings": []}),
        ("y_values_deep_nesting_100", call("f", "a:" + "[" * 99 + "1" + "]" * 99) + TR,
         {"calls": [c("f", {"a": json.loads("[" * 99 + "1" + "]" * 99)})]}),
        # §3 strings: byte-exact, nothing inside is structure
        ("y_string_json_characters", call("write_file", f"content:{s(CODE)},path:{s('src/main.rs')}") + TR,
         {"calls": [c("write_file", {"path": "src/main.rs", "content": CODE})], "warnings": []}),
        ("y_string_markers_inside",
         call("write_file", f"content:{s(C + O + 'call:x{}' + TR + TE + CC + TH + EOS + '}')},path:{s('m.txt')}") + TR,
         {"text": "", "reasoning": "", "calls": [c("write_file", {"path": "m.txt", "content": C + O + "call:x{}" + TR + TE + CC + TH + EOS + "}"})],
          "warnings": []}),
        ("y_string_quote_prefixes_inside", call("f", f"a:{s(Q[:-1] + ' and ' + Q[:2] + ' and <')}") + TR,
         {"calls": [c("f", {"a": Q[:-1] + " and " + Q[:2] + " and <"})]}),
        ("y_string_cjk_and_emoji", "好的，我来查一下。" + call("get_weather", f"city:{s('東京 🗼')},unit:{s('celsius')}") + TR,
         {"text": "好的，我来查一下。", "calls": [c("get_weather", {"city": "東京 🗼", "unit": "celsius"})], "warnings": []}),
        ("y_string_large_value_24kb", call("write_file", f"content:{s(BIG)},path:{s('big.rs')}") + TR,
         {"calls": [c("write_file", {"path": "big.rs", "content": BIG})], "warnings": []}),
        # §3 keys
        ("y_keys_quoted_and_unusual",
         call("f", f"{s('a:b')}:1,{s(' spaced ')}:2,my key:3,x-y.z_0:4,名前:{s('値')}") + TR,
         {"calls": [c("f", {"a:b": 1, " spaced ": 2, "my key": 3, "x-y.z_0": 4, "名前": "値"})]}),
        ("y_keys_in_model_order", call("get_weather", f"days:2,city:{s('Oslo')}") + TR,
         {"calls": [c("get_weather", {"days": 2, "city": "Oslo"})], "warnings": []}),
        ("y_keys_duplicate_last_wins", call("get_weather", f"city:{s('Rome')},city:{s('Paris')},days:3") + TR,
         {"calls": [WEATHER_C], "warnings": ["duplicate_parameter"]}),
        # §4 typing deviations
        ("y_bare_word_is_a_string", call("get_weather", f"city:{s('Paris')},unit:celsius") + TR,
         {"calls": [c("get_weather", {"city": "Paris", "unit": "celsius"})], "warnings": ["unquoted_string"]}),
        ("y_bare_word_with_spaces_and_colons", call("set_alarm", "time: 7:30 am ,enabled:true") + TR,
         {"calls": [c("set_alarm", {"time": "7:30 am", "enabled": True})], "warnings": ["unquoted_string"]}),
        ("y_python_literals", call("set_alarm", f"enabled:True,snooze:None,time:{s('6:00')}") + TR,
         {"calls": [c("set_alarm", {"time": "6:00", "enabled": True, "snooze": None})],
          "warnings": ["python_literal", "python_literal"]}),
        ("y_number_like_words_stay_strings", call("f", "a:007,b:+1,c:.5,d:1e,e:NaN,f:0x1F") + TR,
         {"calls": [c("f", {"a": "007", "b": "+1", "c": ".5", "d": "1e", "e": "NaN", "f": "0x1F"})],
          "warnings": ["unknown_tool"] + ["unquoted_string"] * 6}),
        # §5 call end and stop tokens
        ("y_missing_call_end_at_eof", call("get_weather", f"city:{s('Paris')},days:3", close=""),
         {"calls": [WEATHER_C], "warnings": ["missing_call_end"]}),
        ("y_missing_call_end_before_tool_response", call("get_weather", f"city:{s('Paris')},days:3", close="") + TR,
         {"calls": [WEATHER_C], "warnings": ["missing_call_end"]}),
        ("y_missing_call_end_before_next_call", call("get_weather", f"city:{s('Paris')},days:3", close="") + TIME + TR,
         {"calls": [WEATHER_C, TIME_C], "warnings": ["missing_call_end"]}),
        ("y_missing_call_end_before_text", call("get_time", "", close="") + " Checking.",
         {"text": " Checking.", "calls": [TIME_C], "warnings": ["missing_call_end"]}),
        ("y_eos_after_call", WEATHER + EOS, {"calls": [WEATHER_C], "warnings": []}),
        ("y_turn_end_after_answer", "It is sunny in Paris." + TE, {"text": "It is sunny in Paris.", "calls": [], "warnings": []}),
        ("y_plain_answer", "Paris is the capital of France.", {"text": "Paris is the capital of France.", "calls": []}),
        ("y_whitespace_only_answer", " \n", {"text": " \n", "calls": []}),
        ("y_text_after_stop_dropped", WEATHER + TR + "response:get_weather{temperature:15}" + RE,
         {"text": "", "calls": [WEATHER_C], "warnings": ["text_after_stop"]}),
        # §6 text
        ("y_text_byte_exact_whitespace_beside_calls_dropped", "  Checking both.\n" + WEATHER + "\n\n" + TIME + "\n Done. \n",
         {"text": "  Checking both.\n\n Done. \n", "calls": [WEATHER_C, TIME_C], "warnings": []}),
        ("y_text_after_calls", WEATHER + "I asked for the forecast." + TR,
         {"text": "I asked for the forecast.", "calls": [WEATHER_C], "warnings": []}),
        ("y_text_looks_like_markup", f"Use {O[:-3]} or call:f{{x}} or {C[:-1]} in prose; a <b> tag.",
         {"text": f"Use {O[:-3]} or call:f{{x}} or {C[:-1]} in prose; a <b> tag.", "calls": []}),
        ("y_stray_call_end_dropped", "Done." + C + " Bye.", {"text": "Done. Bye.", "warnings": ["stray_marker"]}),
        ("y_stray_quote_dropped", "The " + Q + "word" + Q + ".", {"text": "The word.", "warnings": ["stray_marker", "stray_marker"]}),
        # §7 header variants
        ("y_paren_call", f"{O}call:get_weather(city:{s('Paris')},days:3){C}" + TR,
         {"calls": [WEATHER_C], "warnings": ["paren_call"]}),
        ("y_missing_call_prefix", f"{O}:get_weather{{city:{s('Paris')},days:3}}{C}" + TR,
         {"calls": [WEATHER_C], "warnings": ["missing_call_prefix"]}),
        # §8 reasoning
        ("y_reasoning_then_call", f"{TH}The user wants the weather in Paris.{CC}Let me check.{WEATHER}{TR}",
         {"reasoning": "The user wants the weather in Paris.", "text": "Let me check.", "calls": [WEATHER_C], "warnings": []}),
        ("y_reasoning_multiline_then_parallel_calls", f"{TH}Two things:\n1. weather\n2. time\n{CC}{WEATHER}{TIME}{TR}",
         {"reasoning": "Two things:\n1. weather\n2. time\n", "text": "", "calls": [WEATHER_C, TIME_C], "warnings": []}),
        ("y_reasoning_empty_thought", f"{TH}{CC}Paris.", {"reasoning": "", "text": "Paris.", "warnings": []}),
        ("y_reasoning_bare_channel", f"{CH}plan{CC}Answer.", {"reasoning": "plan", "text": "Answer.", "warnings": []}),
        ("y_reasoning_label_is_only_the_template_label", f"{CH}thoughtful remark{CC}Hi", {"reasoning": "thoughtful remark", "text": "Hi"}),
        ("y_reasoning_stray_empty_channel_after_answer", f"Answer.{CH}{CC}", {"reasoning": "", "text": "Answer.", "warnings": []}),
        ("y_reasoning_stray_close_dropped", f"Answer.{CC} More.", {"text": "Answer. More.", "warnings": ["stray_reasoning_end"]}),
        ("y_reasoning_markers_inside", f"{TH}Maybe {Q}x{Q} or {C}?{CC}No.", {"reasoning": f"Maybe {Q}x{Q} or {C}?", "text": "No.", "warnings": []}),
        ("y_reasoning_between_calls", f"{WEATHER}{TH}Now the time.{CC}{TIME}{TR}",
         {"reasoning": "Now the time.", "text": "", "calls": [WEATHER_C, TIME_C], "warnings": []}),
        ("y_reasoning_call_inside_thought_ends_it", f"{TH}I need the weather.{WEATHER}{TR}",
         {"reasoning": "I need the weather.", "text": "", "calls": [WEATHER_C], "warnings": ["implicit_reasoning_end"]}),
        ("y_reasoning_unterminated_at_eof", f"{TH}Still thinking about", {"reasoning": "Still thinking about", "text": "", "warnings": ["unterminated_reasoning"]}),
        # errors
        ("n_unterminated_string_at_eof", call("write_file", f"path:{s('a')},content:{Q}half a fi", close="")[:-1],
         {"calls": [], "errors": ["unterminated"]}),
        ("n_unterminated_header_at_eof", f"Checking.{O}call:get_wea", {"text": "Checking.", "calls": [], "errors": ["unterminated"]}),
        ("n_empty_name", f"{O}call:{{city:{s('Paris')}}}{C}" + WEATHER + TR, {"calls": [WEATHER_C], "errors": ["missing_name"]}),
        ("n_name_with_space", f"{O}call:get weather{{city:{s('Paris')}}}{C}" + TR, {"calls": [], "errors": ["malformed_markup"]}),
        ("n_header_without_call_word", f"{O}get_weather{{city:{s('Paris')}}}{C}" + TR, {"calls": [], "errors": ["malformed_markup"]}),
        ("n_call_without_arguments_body", f"{O}call:get_time{C}" + TR, {"calls": [], "errors": ["malformed_markup"]}),
        ("n_trailing_comma", call("get_weather", f"city:{s('Paris')},") + WEATHER + TR, {"calls": [WEATHER_C], "errors": ["malformed_markup"]}),
        ("n_member_without_value", call("get_weather", "city:,days:3") + TR, {"calls": [], "errors": ["malformed_markup"]}),
        ("n_end_marker_inside_arguments", f"{O}call:get_weather{{city:{s('Paris')},days:3{C}" + TIME + TR,
         {"calls": [TIME_C], "errors": ["malformed_markup"]}),
        ("n_missing_close_brace", f"{O}call:get_weather{{city:{s('Paris')}{C}" + TR, {"calls": [], "errors": ["malformed_markup"]}),
        ("n_key_equals_value", f"{O}call:get_weather{{city={s('Paris')}}}{C}" + TR, {"calls": [], "errors": ["malformed_markup"]}),
        ("n_json_arguments", f'{O}call:get_weather{{"city": "Paris"}}{C}' + TR, {"calls": [], "errors": ["malformed_markup"]}),
        ("n_mismatched_bracket", call("search", f"query:{s('x')},tags:[{s('a')}}}") + TR, {"calls": [], "errors": ["malformed_markup"]}),
        ("n_nesting_over_the_limit", call("f", "a:" + "[" * 130 + "]" * 130) + "ok" + TR,
         {"text": "ok", "calls": [], "errors": ["limit_exceeded"]}),
    ]

    # Implementation-defined: engines disagree and conform's rule is pinned by its unit tests.
    I_CASES = [
        # vLLM emits the half call at the end of the stream; conform reports it unterminated.
        ("i_unterminated_inside_arguments", f"{O}call:get_weather{{city:{s('Paris')},days:3"),
        # vLLM coerces a quoted string to the schema's integer; conform keeps the string, noted.
        ("i_quoted_number_for_integer_key", call("get_weather", f"city:{s('Paris')},days:{s('3')}") + TR),
        # Dynamo drops the whole arguments for a bare word; the others keep the word.
        ("i_bare_word_beside_typed_values", call("get_weather", f"city:Paris,days:3") + TR),
        # SGLang's non-streaming path needs the end marker; tool-parser and Dynamo recover.
        ("i_missing_call_end_then_eos", call("get_time", "", close="") + EOS),
    ]

    # Request modes (a folder each, its conform.toml).
    MODES = {
        # The template opened the thought channel in the prompt (after a tool response with thinking on).
        "starting_reasoning": ('# The template opened reasoning in the prompt: the output starts inside it (specs/corpus.md §1.2).\n[request]\nstarting_state = "reasoning"\n', [
            ("y_prefilled_thought_then_call", f"The user wants Paris.{CC}{WEATHER}{TR}",
             {"reasoning": "The user wants Paris.", "text": "", "calls": [WEATHER_C], "warnings": []}),
            ("y_prefilled_thought_then_answer", f"Done thinking.\n{CC}It is sunny.",
             {"reasoning": "Done thinking.\n", "text": "It is sunny.", "warnings": []}),
            ("y_prefilled_thought_call_without_close", f"Call it now.\n{WEATHER}{TR}",
             {"reasoning": "Call it now.\n", "text": "", "calls": [WEATHER_C], "warnings": ["implicit_reasoning_end"]}),
            ("y_prefilled_thought_unterminated", "Only thinking",
             {"reasoning": "Only thinking", "text": "", "warnings": ["unterminated_reasoning"]}),
        ]),
        # Thinking off: the template prefilled an empty thought (or no channel); the output is the answer.
        "thinking_off": ("# thinking off: the output starts in the response (an empty thought may be prefilled)\n[request]\nthinking = false\n", [
            ("y_answer_without_channel", f"Let me check.{WEATHER}{TR}",
             {"reasoning": "", "text": "Let me check.", "calls": [WEATHER_C], "warnings": []}),
            ("y_channel_anyway_is_reasoning", f"{CH}{CC}{TIME}{TR}",
             {"reasoning": "", "text": "", "calls": [TIME_C], "warnings": []}),
            ("y_plain_answer_thinking_off", "It is 12:00.", {"reasoning": "", "text": "It is 12:00.", "calls": []}),
        ]),
    }

    TRANSCRIPTS = [
        ("weather_agent", f"{TH}The user asks for the weather in Tokyo for the next two days. Use get_weather.\n{CC}"
         f"{call('get_weather', f'city:{s(chr(26481) + chr(20140))},days:2,unit:{s(chr(99) + chr(101) + chr(108) + chr(115) + chr(105) + chr(117) + chr(115))}')}{TR}",
         {"reasoning": "The user asks for the weather in Tokyo for the next two days. Use get_weather.\n", "text": "",
          "calls": [c("get_weather", {"city": "東京", "days": 2, "unit": "celsius"})], "error": None}),
        ("coding_agent", "I'll create the file now." +
         call("write_file", f"content:{s('import os' + chr(10) + 'print(os.getcwd())' + chr(10))},path:{s('main.py')}") + TR,
         {"text": "I'll create the file now.",
          "calls": [c("write_file", {"path": "main.py", "content": "import os\nprint(os.getcwd())\n"})], "error": None}),
        ("final_answer", f"{TH}The tool said 15 degrees and sunny.\n{CC}It is 15 °C and sunny in Paris today.", None),
        ("search_then_time", f"{TH}Search first, then the time.{CC}" + call("search", f"limit:5,query:{s('gemma 4 release')}") + TIME + TR, None),
        ("no_thinking_answer", "Bonjour ! Comment puis-je vous aider ?", None),
    ]


    if not thinks:
        CASES = [k for k in CASES if not k[0].startswith("y_reasoning")]
        MODES = {}
        TRANSCRIPTS = [t for t in TRANSCRIPTS if TH not in t[1] and CC not in t[1]]
        # vLLM's functiongemma parser json.loads every escaped value: 007 would become 7.
        I_CASES.append(("i_escaped_digits_stay_a_string", call("calculate", f"expression:{s('007')}") + TR))
        # Gemma 4's markup is no markup here: its reasoning channel and call tokens are text.
        CASES.append(("y_gemma4_markup_is_text", f"{TH}x{CC}<|tool_call>call:get_time{{}}<tool_call|>",
                      {"text": f"{TH}x{CC}<|tool_call>call:get_time{{}}<tool_call|>", "reasoning": "", "calls": [],
                       "warnings": []}))
        TRANSCRIPTS += [
            # Google's guide: strings escaped, numbers bare.
            ("guide_temperature", call("get_weather", f"city:{s('London')},unit:{s('celsius')}") + TR,
             {"text": "", "calls": [c("get_weather", {"city": "London", "unit": "celsius"})], "error": None}),
            ("alarm_then_answer", call("set_alarm", f"enabled:true,time:{s('07:00')}") + TR, None),
            ("answer_after_response", "It is 15 degrees and sunny in London.", None),
        ]
    return TOOLS, CASES, I_CASES, MODES, TRANSCRIPTS


DIALECTS = {
    "gemma4": ("<|tool_call>", "<tool_call|>", '<|"|>', "<|tool_response>", "<turn|>", "<eos>",
               "<tool_response|>", True),
    "functiongemma": ("<start_function_call>", "<end_function_call>", "<escape>",
                      "<start_function_response>", "<end_of_turn>", "<eos>", "<end_function_response>",
                      False),
}


def write(path, data):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(data)


def expect_file(path, e, label):
    e = dict(e)
    if label == "y":
        e.setdefault("error", None)
    write(path, json.dumps(e, ensure_ascii=False, indent=1) + "\n")


def emit(folder, cases):
    os.makedirs(folder, exist_ok=True)
    for name, t, e in cases:
        write(os.path.join(folder, name + ".txt"), t)
        expect_file(os.path.join(folder, name + ".expect.json"), e, name[0])


def main():
    for fmt, markup in DIALECTS.items():
        write_format(fmt, *build(*markup))


def write_format(fmt, TOOLS, CASES, I_CASES, MODES, TRANSCRIPTS):
    d = os.path.join(ROOT, fmt)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    write(os.path.join(d, "tools.json"), json.dumps(TOOLS, ensure_ascii=False, indent=1) + "\n")
    emit(d, CASES)
    for name, t in I_CASES:
        write(os.path.join(d, name + ".txt"), t)
    for folder, (toml, cases) in MODES.items():
        f = os.path.join(d, folder)
        emit(f, cases)
        write(os.path.join(f, "conform.toml"), toml)
    lines = []
    for id_, t, e in TRANSCRIPTS:
        line = {"id": id_, "transcript": t}
        if e is not None:
            line["expect"] = e
        lines.append(json.dumps(line, ensure_ascii=False))
    write(os.path.join(d, "transcripts.jsonl"), "\n".join(lines) + "\n")
    n = sum(1 for _ in CASES) + len(I_CASES) + sum(len(v[1]) for v in MODES.values())
    print(f"corpus/{fmt}: {n} labelled cases, {len(TRANSCRIPTS)} transcripts")


if __name__ == "__main__":
    main()
