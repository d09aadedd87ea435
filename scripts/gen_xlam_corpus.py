#!/usr/bin/env python3
"""Writes corpus/xlam/: the labelled cases of specs/xlam.md, each with its expectation
written here by hand (rule numbers X1-X12 in the notes), and transcripts.jsonl.

Run from the repository root: python3 scripts/gen_xlam_corpus.py"""
import json, os, shutil

ROOT = "corpus/xlam"
J = lambda o: json.dumps(o, ensure_ascii=False)


def call(name, args):
    return {"name": name, "arguments": args}


def lst(*calls):
    return "[" + ", ".join(J(c) for c in calls) + "]"


W = call("get_weather", {"city": "Paris"})
T = call("get_time", {})
cases = []


def case(name, txt, text="", calls=(), errors=None, warnings=(), note="", reasoning=None,
         order=None, sub=None):
    exp = {}
    if errors:
        exp["error"] = {"kind": errors[0]}
        exp["errors"] = list(errors)
    else:
        exp["error"] = None
        exp["warnings"] = list(warnings)
    exp["text"] = text
    exp["calls"] = list(calls)
    if reasoning is not None:
        exp["reasoning"] = reasoning
    if order is not None:
        exp["order"] = order
    exp["note"] = note
    cases.append((sub, name, txt, exp))


# X1: the bare list at the start of the output is the calls.
case("y_sheet_example_parallel", lst(W, T), calls=[W, T], note="X1: the fact sheet's example, two calls in one list", order=["call", "call"])
case("y_single_call", lst(W), calls=[W], note="X1")
case("y_no_argument_call", lst(T), calls=[T], note="X1: arguments {}")
case("y_leading_whitespace_dropped", " \n\n" + lst(W), calls=[W], note="X1: whitespace before the list is next to calls, dropped (F1)")
case("y_trailing_whitespace_dropped", lst(W) + "\n\n", calls=[W], note="X1, F1")
case("y_pretty_printed_list", '[\n  {\n    "name": "get_weather",\n    "arguments": {\n      "city": "Paris"\n    }\n  }\n]', calls=[W], note="X1: JSON whitespace anywhere")
case("y_key_order_free", '[{"arguments": {"city": "Paris"}, "name": "get_weather"}]', calls=[W], note="X3: key order is free; arguments held until the name is read")
case("y_extra_keys_ignored", '[{"type": "function", "name": "get_weather", "arguments": {"city": "Paris"}, "id": "x1"}]', calls=[W], note="X3: other keys (type, id) are ignored; xlam carries no ids")
case("y_undeclared_tool_is_still_a_call", lst(call("book_flight", {"to": "Oslo"})), calls=[call("book_flight", {"to": "Oslo"})], note="X3, F5: names are not checked")
case("y_numbers_and_literals", lst(call("search", {"n": -1.5e3, "exact": True, "page": None, "tags": [1, "a", {"b": False}]})), calls=[call("search", {"n": -1.5e3, "exact": True, "page": None, "tags": [1, "a", {"b": False}]})], note="X1: any JSON in arguments")
case("y_cjk_emoji_arguments", lst(call("get_weather", {"city": "東京", "note": "晴れ☀️🌧 — ok"})), calls=[call("get_weather", {"city": "東京", "note": "晴れ☀️🌧 — ok"})], note="X1: CJK and emoji in values, split across chunks")
case("y_unicode_escapes_in_values", '[{"name": "get_weather", "arguments": {"city": "Z\\u00fcrich \\ud83c\\udf27"}}]', calls=[call("get_weather", {"city": "Zürich 🌧"})], note="X1: escapes decoded, surrogate pairs too")
inner = {"q": "```json\n[TOOL_CALLS]<tool_call>]}</tool_call>```</think>", "r": "[{\"name\": \"x\"}]"}
case("y_markup_inside_strings", lst(call("search", inner)), calls=[call("search", inner)], note="X9: fences, wrappers, brackets and think tags inside JSON strings are content")
big = "fn main() {\n    println!(\"{}\", 42);\n}\n" * 700
case("y_large_write_20kb", lst(call("write_to_file", {"path": "src/main.rs", "content": big})), calls=[call("write_to_file", {"path": "src/main.rs", "content": big})], note="X11: a value over 20 KB")
deep = {"a": 1}
for _ in range(99):
    deep = {"a": deep}
case("y_deep_nesting_100", lst(call("search", deep)), calls=[call("search", deep)], note="X11: 100 levels parse")

# X2: text unless named.
case("y_plain_text_answer", "The weather in Paris is sunny, 22 °C.", text="The weather in Paris is sunny, 22 °C.", note="X2: prose is text", order=["text"])
case("y_json_answer_without_name_is_text", '{"answer": 42, "unit": "km"}', text='{"answer": 42, "unit": "km"}', note="X2: an object without a name key is an answer written in JSON")
case("y_array_of_numbers_is_text", "[1, 2, 3]", text="[1, 2, 3]", note="X2: a list whose first element is no object is text")
case("y_first_element_unnamed_is_text", '[{"city": "Paris", "temp": 22}, {"name": "get_time", "arguments": {}}]', text='[{"city": "Paris", "temp": 22}, {"name": "get_time", "arguments": {}}]', note="X2: the first element decides: no name key, the whole list is text")
case("y_list_later_in_prose_is_text", "I would call " + lst(W) + " but I need a city.", text="I would call " + lst(W) + " but I need a city.", note="X2: a bare list is calls only at the start of the output")
case("y_broken_json_before_name_is_text", '[{"city": "Par', text='[{"city": "Par', note="X2: a list cut before its first name key is text, no error")
case("y_empty_list_is_text", "[]", text="[]", note="X2: the empty list names no call: text (vLLM's server: the raw output as content)")
case("y_fenced_empty_list_is_text", "Nothing to call:\n```json\n[]\n```", text="Nothing to call:\n```json\n[]\n```", note="X2, X8")
case("y_whitespace_only_output", " \n ", text=" \n ", note="X2, F1: whitespace-only output is text")
case("y_text_after_list_verbatim", lst(T) + "\n\nI asked for the time.", text="\n\nI asked for the time.", calls=[T], note="X5: text after the list is text, byte-exact (calls streamed already)", order=["call", "text"])
case("y_delimiter_prefixes_are_text", "Use `` or [TOOL_ or <tool_ here", text="Use `` or [TOOL_ or <tool_ here", note="X2: delimiter prefixes that never complete are text")

# X3 options on the call object.
case("y_parameters_key", '[{"name": "get_weather", "parameters": {"city": "Paris"}}]', calls=[W], warnings=["parameters_key"], note="X3: parameters in place of arguments (option parameters_key)")
case("y_single_object_not_array", J(W), calls=[W], warnings=["object_not_array"], note="X6: one call object in place of the list (option object_not_array; vLLM: text)")

# X7: wrappers (option json_wrapper).
case("y_fence_json_wrapper", "Here you go:\n```json\n" + lst(W) + "\n```", text="Here you go:\n", calls=[W], warnings=["json_wrapper"], note="X7: a ```json fence anywhere; the text before it byte-exact", order=["text", "call"])
case("y_fence_untagged_wrapper", "```\n" + lst(W, T) + "\n```", calls=[W, T], warnings=["json_wrapper"], note="X7: an untagged fence")
case("y_fence_then_text_after", "```json\n" + lst(T) + "\n```\nI asked for the time.", text="\nI asked for the time.", calls=[T], warnings=["json_wrapper"], note="X7: text after the fence's close is text")
case("y_tool_calls_wrapper", "[TOOL_CALLS]" + lst(W), calls=[W], warnings=["json_wrapper"], note="X7: after [TOOL_CALLS]")
case("y_tool_calls_wrapper_pretty", "[TOOL_CALLS][\n  " + J(W) + "\n]", calls=[W], warnings=["json_wrapper"], note="X7: the list after [TOOL_CALLS] runs to its ] (vLLM's regex stops at the first newline: text)")
case("y_tool_call_tag_wrapper", "<tool_call>\n" + lst(W) + "\n</tool_call>", calls=[W], warnings=["json_wrapper"], note="X7: inside <tool_call>…</tool_call>")
case("y_tool_call_tags_twice", "<tool_call>" + lst(W) + "</tool_call><tool_call>" + lst(T) + "</tool_call>", calls=[W, T], warnings=["json_wrapper", "json_wrapper"], note="X7: every wrapper is read (two delimiters in one delta; vLLM reads the first)")
case("y_tool_call_tag_single_object", "<tool_call>\n" + J(W) + "\n</tool_call>", calls=[W], warnings=["object_not_array", "json_wrapper"], note="X6, X7: the Hermes form, one object in a tag (vLLM: no call, the tag stripped)")
case("y_fence_python_is_text", "Run this:\n```python\nprint([{\"name\": 1}])\n```\nDone.", text="Run this:\n```python\nprint([{\"name\": 1}])\n```\nDone.", note="X8: a fence with another tag is text up to its close")
case("y_fence_json_not_calls_is_text", "The result:\n```json\n{\"temp\": 22, \"city\": \"Paris\"}\n```", text="The result:\n```json\n{\"temp\": 22, \"city\": \"Paris\"}\n```", note="X8: a fenced JSON that names no call is text, fence and all (vLLM strips the fence from content)")
case("y_fence_uppercase_tag_is_text", "```JSON\n" + lst(W) + "\n```", text="```JSON\n" + lst(W) + "\n```", note="X8: only `json` or no tag (vLLM's (?:json)?)")
case("y_tool_calls_then_prose_is_text", "[TOOL_CALLS] none of the tools fits.", text="[TOOL_CALLS] none of the tools fits.", note="X8: a wrapper not followed by a list is text")
case("y_fence_missing_close", "```json\n" + lst(W) + "\n", calls=[W], warnings=["json_wrapper", "missing_section_end"], note="X10: the list's ] closed the calls; the fence's close is missing (option missing_section_end)")
case("y_tag_missing_close_then_text", "<tool_call>" + lst(T) + " Done.", text=" Done.", calls=[T], warnings=["json_wrapper", "missing_section_end"], note="X10: text where </tool_call> belongs")

# X12: reasoning.
case("y_reasoning_then_list", "<think>The user wants the weather in Paris.</think>\n\n" + lst(W), calls=[W], reasoning="The user wants the weather in Paris.", order=["reasoning", "call"], note="X12: the list after </think> (vLLM's thinking_tag_pattern)")
case("y_reasoning_then_fenced_list", "<think>Use the fence.</think>Sure.\n```json\n" + lst(T) + "\n```", text="Sure.\n", calls=[T], warnings=["json_wrapper"], reasoning="Use the fence.", order=["reasoning", "text", "call"], note="X12, X7: reasoning, text and calls in order")
case("y_reasoning_then_text", "<think>No tool needed.</think>Hello!", text="Hello!", reasoning="No tool needed.", order=["reasoning", "text"], note="X12")
case("y_reasoning_unterminated", "<think>still thinking", reasoning="still thinking", warnings=["unterminated_reasoning"], note="X12: reasoning cut by the end of the output")

# n_: errors.
case("n_invalid_json_in_call", '[{"name": "get_weather", "arguments": {"city": Paris}}]', errors=["invalid_json"], note="X9: invalid JSON after the name: no call, no repair (F3)")
case("n_truncated_list_not_repaired", '[{"name": "get_weather", "arguments": {"city": "Par', errors=["unterminated"], note="X9: a list cut inside its first call is no call (vLLM's streaming emits the partial arguments)")
case("n_truncated_after_complete_element", lst(T)[:-1] + ', {"name": "get_weather", "arguments": {"ci', calls=[T], errors=["unterminated"], note="X9: the complete element stands (it streamed), the cut one is no call")
case("n_cut_after_comma", lst(T)[:-1] + ", ", calls=[T], errors=["unterminated"], note="X9: the list open at the end of the output")
case("n_trailing_comma", lst(T)[:-1] + ",]", calls=[T], errors=["invalid_json"], note="X9: strict JSON")
case("n_arguments_not_object", '[{"name": "get_weather", "arguments": ["Paris"]}, ' + J(T) + "]", calls=[T], errors=["invalid_json"], note="X3: arguments must be an object; the list goes on")
case("n_arguments_string", '[{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}]', errors=["invalid_json"], note="X3: a JSON string is not arguments (vLLM passes it through as the arguments)")
case("n_missing_arguments", '[{"name": "get_time"}]', errors=["invalid_json"], note="X3: arguments required (vLLM skips the element)")
case("n_empty_name", '[{"name": "", "arguments": {}}]', errors=["missing_name"], note="X3")
case("n_name_not_string", '[{"name": 7, "arguments": {}}]', errors=["missing_name"], note="X3")
case("n_later_element_unnamed", lst(T)[:-1] + ', {"city": "Paris"}]', calls=[T], errors=["missing_name"], note="X2, X3: after a named first element every element must be a call")
case("n_depth_200_limit", '[{"name": "search", "arguments": {"a": ' + "[" * 200 + "]" * 200 + "}}]", errors=["limit_exceeded"], note="X11")
case("n_name_over_header_limit", '[{"name": "' + "n" * 1025 + '", "arguments": {}}]', errors=["limit_exceeded"], note="X11: a name over 1024 bytes")
case("n_invalid_utf8_in_arguments", None, errors=["invalid_utf8"], calls=[T], note="F7: the call holding invalid UTF-8 is dropped; the list goes on")
case("n_broken_fenced_list_then_text", "```json\n" + '[{"name": "get_weather", "arguments": {"city": }}]' + "\n```\nSorry.", text="\nSorry.", errors=["invalid_json"], note="X9: a broken wrapped list is skipped to the fence's close; text after it is read")

# i_: implementation-defined.
case("i_two_bare_lists", lst(W) + "\n" + lst(T), text="\n" + lst(T), calls=[W], note="conform: the second bare list is text (calls only at the start); vLLM: the whole output is not one JSON value, all text")
case("i_bare_list_then_fence", lst(W) + "\n```json\n" + lst(T) + "\n```", calls=[W, T], warnings=["json_wrapper"], note="conform reads both; vLLM takes the first fence's list only")

# Request modes.
case("y_starts_inside_reasoning", "The template opened the reasoning.</think>" + lst(W), calls=[W], reasoning="The template opened the reasoning.", order=["reasoning", "call"], note="starting_state=reasoning: vLLM's </think> without an opener", sub="request_reasoning")
case("n_length_cut_inside_list", lst(T)[:-1] + ', {"name": "get_weather", "arguments": {"city": "Pa', calls=[T], errors=["unterminated"], note="finish_reason=length: the cut element is no call", sub="request_length")
case("y_length_complete_list", lst(W, T), calls=[W, T], note="finish_reason=length: a complete list stands", sub="request_length")
case("y_none_list_is_text", lst(W), text=lst(W), note="tool_choice=none: the list is text", sub="request_tool_choice_none")
case("y_none_reasoning_still_split", "<think>plan</think>" + lst(W), text=lst(W), reasoning="plan", note="tool_choice=none: reasoning still split", sub="request_tool_choice_none")
case("y_guided_array_of_calls", '[{"name": "get_weather", "parameters": {"city": "Paris"}}]', calls=[W], note="required: guided decoding writes a JSON list of calls, by the servers' schema with parameters", sub="request_required")
case("y_named_bare_arguments", '{"city": "Paris"}', calls=[W], note="named tool choice: the payload is the arguments", sub="request_named")
case("y_wrapper_is_text_when_off", "```json\n" + lst(W) + "\n```", text="```json\n" + lst(W) + "\n```", note="json_wrapper=false: wrappers are text", sub="options_strict")
case("y_single_object_is_text_when_off", J(W), text=J(W), note="object_not_array=false: one object is text", sub="options_strict")
case("n_parameters_key_off", '[{"name": "get_weather", "parameters": {"city": "Paris"}}]', errors=["invalid_json"], note="parameters_key=false: no arguments key", sub="options_strict")
case("n_missing_close_off", "<tool_call>" + lst(W), calls=[W], errors=["malformed_markup"], note="missing_section_end=false: a missing close is markup broken", sub="options_no_missing_close")

TOMLS = {
    "request_reasoning": '# The template opened the reasoning in the prompt (specs/corpus.md §1.2).\n[request]\nstarting_state = "reasoning"\n',
    "request_length": '# finish_reason = "length": max_tokens cut the output (specs/corpus.md §1.2).\n[request]\nfinish_reason = "length"\n',
    "request_tool_choice_none": '# tool_choice = "none": servers do not parse calls (specs/corpus.md §1.2).\n[request]\ntool_choice = "none"\n',
    "request_required": '# tool_choice = "required" (specs/corpus.md §1.2).\n[request]\ntool_choice = "required"\n',
    "request_named": '# A named tool choice (specs/corpus.md §1.2).\n[request]\ntool_choice = { name = "get_weather" }\n',
    "options_no_missing_close": '# The missing close of a wrapper is an error (specs/xlam.md §4).\n[options]\n"xlam.missing_section_end" = false\n',
    "options_strict": '# Every leniency of xlam off (specs/xlam.md §4).\n[options]\n"xlam.json_wrapper" = false\n"xlam.object_not_array" = false\n"xlam.parameters_key" = false\n"xlam.missing_section_end" = false\n',
}

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "The current time.", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "search", "description": "Web search.", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "write_to_file", "description": "Writes a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}}},
]

TRANSCRIPTS = [
    {"id": "xlam_weather_two_cities", "transcript": lst(call("get_weather", {"city": "San Francisco", "unit": "fahrenheit"}), call("get_weather", {"city": "New York", "unit": "fahrenheit"}))},
    {"id": "xlam_answer_without_tools", "transcript": "xLAM is a family of Large Action Models from Salesforce AI Research.", "expect": {"text": "xLAM is a family of Large Action Models from Salesforce AI Research.", "calls": [], "error": None}},
    {"id": "xlam_time_no_arguments", "transcript": lst(T), "expect": {"text": "", "calls": [T], "error": None}},
    {"id": "xlam_fenced_after_text", "transcript": "I'll search for that.\n```json\n" + lst(call("search", {"q": "xLAM-2 BFCL leaderboard"})) + "\n```"},
    {"id": "xlam_search_then_summary", "transcript": lst(call("search", {"q": "vLLM xlam tool parser"})) + "\n"},
    {"id": "xlam_json_answer", "transcript": '{"temperature": 18, "conditions": "cloudy"}'},
    {"id": "xlam_reasoned_call", "transcript": "<think>The user asked for the time; get_time takes no arguments.</think>\n" + lst(T)},
    {"id": "xlam_empty_list", "transcript": "[]", "expect": {"text": "[]", "calls": [], "error": None}},
    {"id": "xlam_write_file", "transcript": lst(call("write_to_file", {"path": "README.md", "content": "# Title\n\nSome `code` and ```fences```.\n"}))},
]


def main():
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    os.makedirs(ROOT)
    with open(f"{ROOT}/tools.json", "w") as f:
        json.dump(TOOLS, f, indent=1, ensure_ascii=False)
    for sub, toml in TOMLS.items():
        os.makedirs(f"{ROOT}/{sub}", exist_ok=True)
        with open(f"{ROOT}/{sub}/conform.toml", "w") as f:
            f.write(toml)
    for sub, name, txt, exp in cases:
        d = f"{ROOT}/{sub}" if sub else ROOT
        if txt is None:  # invalid UTF-8 inside the first call's arguments
            data = b'[{"name": "get_weather", "arguments": {"city": "Pa\xffris"}}, ' + J(T).encode() + b"]"
        else:
            data = txt.encode()
        with open(f"{d}/{name}.txt", "wb") as f:
            f.write(data)
        with open(f"{d}/{name}.expect.json", "w") as f:
            json.dump(exp, f, indent=1, ensure_ascii=False)
            f.write("\n")
    with open(f"{ROOT}/transcripts.jsonl", "w") as f:
        for t in TRANSCRIPTS:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    print(len(cases), "cases")


main()
