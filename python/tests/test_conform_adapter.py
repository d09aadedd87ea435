"""Tests of the adapter kit (python/conform_adapter): the protocol loop, the deltas a server
hands its parser, and the OpenAI client's assembly of tool-call deltas.

    python3 -m pytest python/tests        # from the repository root
"""

import base64
import io
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from conform_adapter import Adapter, Events, Request, Turn  # noqa: E402


def parse_request(turns, fmt="hermes", **extra):
    msg = {"type": "parse", "id": 7, "format": fmt, "tools": [], "turns": turns}
    msg.update(extra)
    return msg


class Echo(Adapter):
    name = "echo"
    formats = ["hermes"]

    def parse(self, request):
        for turn in request.turns:
            for delta in turn.deltas():
                turn.out.text(delta.text)


class Raises(Adapter):
    name = "raises"
    formats = ["hermes"]

    def parse(self, request):
        raise KeyError("arguments")


def test_hello_names_the_protocol_the_parser_and_its_formats():
    assert Echo().handle({"type": "hello", "protocol": 2}) == {
        "type": "hello",
        "protocol": 2,
        "name": "echo",
        "formats": ["hermes"],
    }


def test_a_request_is_answered_with_each_turns_events_and_the_engine_time():
    reply = Echo().handle(parse_request([{"chunks": ["ab", "c"]}, {"chunks": ["d"]}]))
    assert reply["type"] == "events" and reply["id"] == 7
    assert reply["turns"] == [
        [{"type": "text", "text": "ab"}, {"type": "text", "text": "c"}],
        [{"type": "text", "text": "d"}],
    ]
    assert isinstance(reply["engine_ns"], int)


def test_an_exception_is_a_crash_of_that_replay_only():
    a = Raises()
    reply = a.handle(parse_request([{"chunks": ["x"]}]))
    assert reply == {"type": "error", "id": 7, "message": "KeyError: 'arguments'"}
    assert a.handle({"type": "hello"})["type"] == "hello"


class Surrogate(Adapter):
    name = "surrogate"
    formats = ["hermes"]

    def parse(self, request):
        # An engine that decodes `\\ud83c` alone (a surrogate pair split across deltas).
        for turn in request.turns:
            turn.out.text(json.loads('"Z\\u00fcrich \\ud83c"'))


def test_a_lone_surrogate_in_the_engines_output_is_that_replays_crash_not_a_protocol_breach():
    reply = Surrogate().handle(parse_request([{"chunks": ["x"]}]))
    assert reply["type"] == "error" and reply["id"] == 7
    assert "lone surrogate U+D83C" in reply["message"] and "Zürich" in reply["message"]
    # The error reply itself is valid UTF-8 JSON.
    json.dumps(reply, ensure_ascii=False).encode("utf-8")
    # A surrogate pair is a character like any other.
    class Pair(Surrogate):
        def parse(self, request):
            for turn in request.turns:
                turn.out.text(json.loads('"\\ud83c\\udf27"'))

    assert Pair().handle(parse_request([{"chunks": ["x"]}]))["type"] == "events"


def test_a_format_not_in_the_hello_is_refused_as_an_error_reply():
    reply = Echo().handle(parse_request([{"chunks": ["x"]}], fmt="kimi_k2"))
    assert reply["type"] == "error" and "kimi_k2" in reply["message"]


def test_serve_answers_line_by_line_and_skips_blank_lines():
    lines = [json.dumps({"type": "hello", "protocol": 2}), "", json.dumps(parse_request([{"chunks": ["hi"]}]))]
    stdin = io.BytesIO(("\n".join(lines) + "\n").encode())
    stdout = io.StringIO()
    Echo().serve(stdin, stdout)
    replies = [json.loads(l) for l in stdout.getvalue().splitlines()]
    assert [r["type"] for r in replies] == ["hello", "events"]


def test_deltas_decode_a_character_cut_between_chunks_whole_with_the_later_chunk():
    e_acute = "é".encode()
    chunks = [
        {"b64": base64.b64encode(b"caf" + e_acute[:1]).decode()},
        {"b64": base64.b64encode(e_acute[1:]).decode()},
        "!",
    ]
    got = [d.text for d in Turn({"chunks": chunks}).deltas()]
    assert got == ["caf", "é", "!"]


def test_deltas_carry_token_ids_and_those_of_a_chunk_that_completes_no_character():
    e = "日".encode()
    turn = Turn(
        {
            "chunks": [{"b64": base64.b64encode(e[:2]).decode()}, {"b64": base64.b64encode(e[2:]).decode()}, "x"],
            "token_ids": [[10], [11], [12]],
        }
    )
    assert [(d.text, d.token_ids) for d in turn.deltas()] == [("日", [10, 11]), ("x", [12])]
    assert turn.tokenizer is None


def test_a_token_aligned_turn_names_the_vocabulary_of_its_ids():
    info = {"name": "qwen2", "file": "/cache/qwen2/qwen.tiktoken", "special": [["<tool_call>", 151657]]}
    turn = Turn({"chunks": ["<tool_call>"], "token_ids": [[151657]], "tokenizer": info})
    assert turn.tokenizer == info


def test_invalid_utf8_becomes_the_replacement_character():
    turn = Turn({"chunks": [{"b64": base64.b64encode(b"a\xffb").decode()}]})
    assert "".join(d.text for d in turn.deltas()) == "a\ufffdb"


def test_the_request_mode_and_tools_are_exposed():
    r = Request(parse_request([{"chunks": ["x"]}], request={"starting_state": "reasoning"}, tools=[{"type": "function"}]))
    assert r.mode == {"starting_state": "reasoning"}
    assert r.tools == [{"type": "function"}]
    assert Request(parse_request([])).mode == {}


def starts(events):
    return [e for e in events if e["type"] == "call_start"]


def test_a_call_starts_at_its_first_arguments_after_the_name_and_ends_with_the_stream():
    ev = Events()
    ev.openai_delta({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get"}}]})
    assert starts(ev.events) == []  # the name may go on
    ev.openai_delta({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]})
    ev.openai_delta({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]})
    assert ev.finish() == [
        {"type": "call_start", "index": 0, "name": "get", "id": "call_1"},
        {"type": "args_delta", "index": 0, "json": '{"a":'},
        {"type": "args_delta", "index": 0, "json": "1}"},
        {"type": "call_end", "index": 0},
    ]


def test_name_pieces_are_concatenated_as_the_client_does():
    ev = Events()
    ev.tool_call(0, name="get_")
    ev.tool_call(0, name="weather")
    ev.tool_call(0, arguments="{}")
    assert starts(ev.finish())[0]["name"] == "get_weather"


def test_arguments_before_the_name_are_held_until_it_comes():
    ev = Events()
    ev.tool_call(0, arguments='{"city": ')
    ev.tool_call(0, name="weather")
    ev.tool_call(0, arguments='"Paris"}')
    out = ev.finish()
    assert [e["type"] for e in out] == ["call_start", "args_delta", "args_delta", "call_end"]
    assert "".join(e["json"] for e in out if e["type"] == "args_delta") == '{"city": "Paris"}'


def test_a_call_that_never_gets_a_name_is_missing_name_not_a_crash():
    ev = Events()
    ev.tool_call(0, arguments="{}")
    assert ev.finish() == [{"type": "error", "kind": "missing_name", "message": "tool call 0 never got a name"}]


def test_arguments_that_are_not_an_object_or_none_are_errors_and_the_call_is_not_ended():
    bad, empty = Events(), Events()
    bad.tool_call(0, name="f", arguments='{"a": ')
    empty.tool_call(0, name="f")
    assert [e.get("kind") for e in bad.finish()][-1] == "invalid_json"
    assert [e["type"] for e in bad.events] == ["call_start", "args_delta", "error"]
    assert [e.get("kind") for e in empty.finish()] == [None, "empty_arguments"]


def test_calls_keep_their_order_and_get_conform_indices_from_zero():
    ev = Events()
    ev.openai_delta({"choices": [{"delta": {"content": "Hi", "tool_calls": [{"index": 3, "function": {"name": "a", "arguments": "{}"}}]}}]})
    ev.tool_call(5, name="b", arguments="{}")
    out = ev.finish()
    assert [(e["index"], e["name"]) for e in starts(out)] == [(0, "a"), (1, "b")]
    assert out[0] == {"type": "text", "text": "Hi"}


def test_a_name_piece_after_the_arguments_began_is_reported():
    ev = Events()
    ev.tool_call(0, name="f", arguments="{}")
    ev.tool_call(0, name="g")
    assert any(e.get("kind") == "malformed_markup" for e in ev.finish())


def test_reasoning_content_is_reasoning_and_unknown_error_kinds_are_refused():
    ev = Events()
    ev.openai_delta({"reasoning_content": "think", "content": "say"})
    assert ev.events == [{"type": "reasoning", "text": "think"}, {"type": "text", "text": "say"}]
    with pytest.raises(ValueError):
        ev.error("oops")


def test_the_example_adapter_speaks_the_protocol():
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    adapter = os.path.join(root, "examples", "adapters", "kit", "adapter.py")
    transcript = 'Sure.<tool_call>\n{"name": "ls", "arguments": {"path": "/"}}\n</tool_call>'
    cut = 9
    lines = [
        {"type": "hello", "protocol": 2},
        parse_request([{"chunks": [transcript[:cut], transcript[cut:]]}]),
    ]
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "python"))
    p = subprocess.run(
        [sys.executable, adapter],
        input="".join(json.dumps(l) + "\n" for l in lines),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    hello, events = [json.loads(l) for l in p.stdout.splitlines()]
    assert hello["formats"] == ["hermes"]
    types = [e["type"] for e in events["turns"][0]]
    assert types == ["text", "call_start", "args_delta", "call_end"], events


class TwoPaths(Adapter):
    name = "two paths"
    formats = ["hermes"]
    paths = ("stream", "batch")

    def parse(self, request):
        for turn in request.turns:
            if request.path == "batch":
                turn.result(
                    text=turn.text.upper(),
                    calls=[{"id": "call_1", "function": {"name": "f", "arguments": '{"a": 1}'}}],
                )
            else:
                for delta in turn.deltas():
                    turn.out.text(delta.text)


def test_declared_paths_are_in_the_hello_and_a_batch_turn_answers_a_result():
    hello = TwoPaths().handle({"type": "hello", "protocol": 2})
    assert hello["paths"] == ["batch", "stream"]
    assert "paths" not in Echo().handle({"type": "hello", "protocol": 2})
    reply = TwoPaths().handle(parse_request([{"chunks": ["ab"]}], path="batch"))
    assert reply["type"] == "result"
    assert reply["turns"] == [
        {
            "text": "AB",
            "calls": [{"name": "f", "arguments": '{"a": 1}', "id": "call_1"}],
            "errors": [],
            "warnings": [],
        }
    ]
    streamed = TwoPaths().handle(parse_request([{"chunks": ["ab"]}], path="stream"))
    assert streamed["type"] == "events"
    assert streamed["turns"] == [[{"type": "text", "text": "ab"}]]
