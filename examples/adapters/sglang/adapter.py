#!/usr/bin/env python3
"""conform adapter (specs/adapter.md, protocol 2) around SGLang 0.5.23's tool-call detectors
(`sglang/srt/function_call/`), on both of its chat server's paths.

- `batch` (`stream=false`, `OpenAIServingChat._build_chat_response`): the reasoning parser
  first when one is configured (`ReasoningParser.parse_non_stream`), then
  `_process_tool_calls`: `FunctionCallParser(tools, NAME)`, `has_tool_call(text)`, then
  `parse_non_stream(text)`; no call parsed, or the detector raising, leaves the text as content
  (the server logs the exception; the adapter notes it as a warning, which conform does not
  judge).
- `stream` (`_process_tool_call_stream`): one `FunctionCallParser` per response; per delta the
  reasoning parser's `parse_stream_chunk` (when configured), then `parse_stream_chunk(delta)`,
  and on the last delta, the one that carries the finish reason, also `parse_stream_end()`;
  the normal text is streamed before the delta's tool calls; a call item with a name starts a
  call (id from `_process_tool_call_id`'s rule), one without continues the arguments of its
  `tool_index`; finally the server's check for unstreamed arguments
  (`_check_for_unstreamed_tool_args`). The deltas are assembled as the OpenAI client does.

Those serving-layer steps are re-stated here (SGLang's serving module imports its whole
runtime); everything that parses is SGLang's own. The reasoning parser is forced into
reasoning only when the case's template opened it in the prompt (`starting_state`), and the
request's `chat_template_kwargs` carry the case's thinking switch. Run `setup` first.
"""

import json
import os
import sys
import uuid

import orjson

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "cache", "src")
VERSION = "0.5.23"
sys.path.insert(0, os.path.join(HERE, "..", "pyengine"))
sys.path.append(SRC)

import engine_kit  # noqa: E402
import stubs  # noqa: E402
from engine_kit import kit  # noqa: E402

#: conform format id -> SGLang `--tool-call-parser` name, for every format whose wire format is
#: the one that detector reads (README.md says why the others are left out).
PARSERS = {
    "kimi_k2": "kimi_k2",
    "hermes": "hermes",
    "llama3_json": "llama3",
    "mistral": "mistral",
    "mistral_v11": "mistral",
    "deepseek_v3": "deepseekv3",
    "deepseek_v31": "deepseekv31",
    "deepseek_v32": "deepseekv32",
    "deepseek_v4": "deepseekv4",
    "deepseek_v41": "deepseekv41",
    "pythonic": "pythonic",
    "qwen3_coder": "qwen3_coder",
    "glm45": "glm45",
    "glm47": "glm47",
    "minimax_m2": "minimax-m2",
    "gemma4": "gemma4",
    "minimax_m3": "minimax-m3",
    "kimi_k3": "kimi_k3",
    "muse_glimmer": "muse",
    "apertus": "apertus2509",
    "step3": "step3",
}

#: conform format id -> SGLang `--reasoning-parser` name, for the `--reasoning` variant: the
#: reasoning parser of the format's own model family (DeepSeek V3's for V3 transcripts, never
#: R1's, which takes every output to start inside reasoning).
REASONING = {
    "kimi_k2": "kimi_k2",
    "hermes": "qwen3",
    "qwen3_coder": "qwen3",
    "deepseek_v3": "deepseek-v3",
    "deepseek_v31": "deepseek-v3",
    "deepseek_v32": "deepseek-v3",
    "glm45": "glm45",
    "glm47": "glm45",
    "minimax_m2": "minimax-append-think",
    "mistral_v11": "mistral",
    "deepseek_v4": "deepseek-v4",
    "deepseek_v41": "deepseek-v41",
    "gemma4": "gemma4",
    "minimax_m3": "minimax-m3",
    "kimi_k3": "kimi_k3",
    "muse_glimmer": "muse",
    "apertus": "apertus2509",
    "step3": "step3",
}

#: Packages the detectors' modules import but never use to parse text.
STUBBED = [
    "torch", "transformers", "numpy", "pybase64", "requests", "IPython", "tqdm",
    "xgrammar",
]  # fmt: skip


class Sglang(kit.Adapter):
    paths = ("batch", "stream")

    def __init__(self, overrides, reasoning=False):
        if not os.path.isdir(os.path.join(SRC, "sglang")):
            sys.exit(f"SGLang {VERSION} is not unpacked in {SRC}: run {HERE}/setup")
        self.parsers = dict(PARSERS, **overrides)
        stubs.install(STUBBED)
        stubs.bare_package("sglang", os.path.join(SRC, "sglang"))
        stubs.bare_package("sglang.srt", os.path.join(SRC, "sglang", "srt"))
        from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest, Tool, ToolChoice
        from sglang.srt.function_call.function_call_parser import FunctionCallParser
        from sglang.srt.function_call.json_array_parser import JsonArrayParser
        from sglang.srt.parser.reasoning_parser import ReasoningParser

        self.Tool, self.FunctionCallParser = Tool, FunctionCallParser
        self.ToolChoice, self.JsonArrayParser = ToolChoice, JsonArrayParser
        self.ChatRequest = ChatCompletionRequest
        self.ReasoningParser = ReasoningParser
        self.reasoning = dict(REASONING) if reasoning else {}
        for name in self.parsers.values():
            if name not in FunctionCallParser.ToolCallParserEnum:
                raise SystemExit(f"SGLang {VERSION} has no tool-call parser {name!r}")
        import importlib.metadata

        version = importlib.metadata.version("sglang")
        self.name = engine_kit.variant_name(
            f"sglang {version} function_call detectors", reasoning, overrides
        )
        self.formats = list(self.parsers)

    def chat_request(self, fmt, mode, text, tools):
        fields = {
            "messages": [{"role": "user", "content": "conform"}],
            "model": "conform",
            "chat_template_kwargs": engine_kit.chat_template_kwargs(fmt, mode, text),
        }
        if tools:
            fields["tools"] = tools
            if "tool_choice" in mode:
                fields["tool_choice"] = engine_kit.openai_tool_choice(mode["tool_choice"])
        return self.ChatRequest.model_validate(fields)

    def thinker(self, fmt, mode, req, stream):
        model = self.reasoning.get(fmt)
        if not model:
            return None
        # As the server builds it: forced into reasoning when the template opened it.
        return self.ReasoningParser(
            model,
            stream_reasoning=stream,
            force_reasoning=engine_kit.opens_reasoning(mode),
            request=req,
            tool_call_parser_active=True,
        )

    def parse(self, request):
        fmt = request.format
        tools = [self.Tool.model_validate(t) for t in request.tools]
        name = self.parsers[fmt]
        history = 0
        for turn in request.turns:
            text = turn.text
            req = self.chat_request(fmt, request.mode, text, request.tools)
            # The validated request's choice: a named tool is a ToolChoice, as the server has it.
            tool_choice = req.tool_choice if tools and "tool_choice" in request.mode else None
            if request.path == "batch":
                history += self.batch(request, turn, fmt, name, req, tools, tool_choice, history)
            else:
                history += self.stream(request, turn, fmt, name, req, tools, tool_choice, history)

    def required(self, tool_choice):
        """Whether the request forces a call (`required` or a named tool): the server then
        constrains the output and, unless the detector owns the format, parses it as the JSON
        array its schema makes."""
        return tool_choice == "required" or isinstance(tool_choice, self.ToolChoice)

    def batch(self, request, turn, fmt, name, req, tools, tool_choice, history):
        text = turn.text
        reasoning = None
        thinker = self.thinker(fmt, request.mode, req, stream=False)
        if thinker is not None:
            reasoning, text = request.timed(thinker.parse_non_stream, text)
            text = text or ""
        parser = self.FunctionCallParser(tools, name, tool_choice=tool_choice)
        calls, warnings = [], []
        if tool_choice == "none":
            pass  # `_parses_tool_calls`: a request that allows no calls is not tool-parsed
        elif self.required(tool_choice) and not parser.owns_tool_format():
            text = self.json_array(request, text, name, calls, warnings, history)
        elif request.timed(parser.has_tool_call, text):
            try:
                normal, infos = request.timed(parser.parse_non_stream, text)
                # No call parsed: the server answers the detector's text as content.
                text = normal
                for info in infos:
                    calls.append(
                        {
                            "id": self.call_id(name, info.name, history + len(calls)),
                            "function": {"name": info.name, "arguments": info.parameters},
                        }
                    )
            except Exception as e:  # the server logs it and answers the text as content
                warnings.append(
                    {"kind": "engine_error", "message": f"parse_non_stream raised {type(e).__name__}: {e}"}
                )
        turn.result(text=text, calls=calls, reasoning=reasoning, warnings=warnings)
        return len(calls)

    def json_array(self, request, text, name, calls, warnings, history):
        """`_process_tool_calls`' branch for a forced call the detector does not own: the
        output is the schema's JSON array (or one object) of `{name, parameters}`; anything
        else is answered as content. Returns the content."""
        try:
            data = request.timed(orjson.loads, text)
            if isinstance(data, dict):
                data = [data]
            if not isinstance(data, list):
                raise ValueError(f"expected a JSON array of tool calls, got {type(data).__name__}")
            if not all(isinstance(t, dict) and "name" in t for t in data):
                raise ValueError("every tool call must be a JSON object with a 'name'")
            for t in data:
                args = json.dumps(t.get("parameters", {}), ensure_ascii=False)
                calls.append(
                    {
                        "id": self.call_id(name, t["name"], history + len(calls)),
                        "function": {"name": t["name"], "arguments": args},
                    }
                )
            return ""
        except Exception as e:  # the server logs it and answers the text as content
            calls.clear()
            warnings.append({"kind": "engine_error", "message": f"{type(e).__name__}: {e}"})
            return text

    def stream(self, request, turn, fmt, name, req, tools, tool_choice, history):
        # `_process_tool_call_stream`: a forced call the detector does not own is read by
        # SGLang's JsonArrayParser, anything else by the detector.
        json_array = None
        if self.required(tool_choice):
            parser = self.FunctionCallParser(tools=tools, tool_call_parser=name, tool_choice=tool_choice)
            if not parser.owns_tool_format():
                json_array = self.JsonArrayParser()
        else:
            parser = self.FunctionCallParser(tools=tools, tool_call_parser=name)
        thinker = self.thinker(fmt, request.mode, req, stream=True)
        detector = json_array or parser.detector
        out = turn.out
        texts = [d.text for d in turn.deltas()] or [""]
        named = 0
        for k, delta in enumerate(texts):
            last = k == len(texts) - 1
            if thinker is not None:
                # The reasoning parser runs first; the tool parser gets its normal text.
                thought, delta = request.timed(thinker.parse_stream_chunk, delta)
                if last:
                    end_thought, end_text = request.timed(thinker.parse_stream_end)
                    thought = (thought or "") + (end_thought or "")
                    delta = (delta or "") + (end_text or "")
                out.reasoning(thought)
            if tool_choice == "none":
                text, calls = delta or "", []
            elif json_array is not None:
                result = request.timed(json_array.parse_streaming_increment, delta or "", tools)
                text, calls = result.normal_text, result.calls
                if last:
                    end = request.timed(json_array.finish, tools)
                    text = (text or "") + end.normal_text
                    calls = list(calls) + end.calls
            else:
                text, calls = request.timed(parser.parse_stream_chunk, delta or "")
                if last:
                    end_text, end_calls = request.timed(parser.parse_stream_end)
                    text = (text or "") + end_text
                    calls = list(calls) + end_calls
            out.text(text)
            for item in calls:
                call_id = None
                if item.name:
                    call_id = self.call_id(name, item.name, history + item.tool_index)
                    named += 1
                out.tool_call(item.tool_index, call_id, item.name, item.parameters)
        rest = None if tool_choice == "none" else self.unstreamed_arguments(detector)
        if rest is not None:
            out.tool_call(rest[0], None, None, rest[1])
        return named

    @staticmethod
    def call_id(parser_name, name, index):
        # SGLang's rule (_process_tool_call_id): kimi_k2 ids are rebuilt from the name and the
        # call's index in the conversation, the others are random.
        if parser_name == "kimi_k2":
            return f"functions.{name}:{index}"
        return f"call_{uuid.uuid4().hex[:24]}"

    @staticmethod
    def unstreamed_arguments(detector):
        """What the server streams when the generation finishes: the part of the last call's
        parsed arguments the detector has not streamed yet, when what it streamed is a prefix."""
        parsed = getattr(detector, "prev_tool_call_arr", None)
        streamed = getattr(detector, "streamed_args_for_tool", None)
        if not parsed or not streamed:
            return None
        index = len(parsed) - 1
        if index >= len(streamed):
            return None
        args = parsed[index].get("arguments", {})
        expected = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        actual = streamed[index]
        if expected.startswith(actual) and len(expected) > len(actual):
            return (index, expected[len(actual) :])
        return None


def main():
    overrides, reasoning = engine_kit.command_line(
        __doc__.split("\n")[0],
        "use SGLang's parser NAME for the conform format FORMAT (e.g. hermes=qwen25)",
        "run each format's reasoning parser (REASONING) before its tool-call parser",
    )
    Sglang(overrides, reasoning).serve()


if __name__ == "__main__":
    main()
