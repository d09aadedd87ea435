#!/usr/bin/env python3
"""conform adapter (specs/adapter.md, protocol 2) around SGLang 0.5.23's streaming tool-call
detectors (`sglang/srt/function_call/`).

Each replay follows what SGLang's chat server does for one streamed choice
(`OpenAIServingChat._process_tool_call_stream` with `--tool-call-parser NAME`): one
`FunctionCallParser(tools, NAME)` per response; per delta `parse_stream_chunk(delta)` (the
detector's `parse_streaming_increment` with the request's tools), and on the last delta, the one
that carries the finish reason, also `parse_stream_end()` (the detector's `finish`), its text
appended to the delta's text; then the normal text is streamed before the delta's tool calls; a
call item with a name starts a call (id from `_process_tool_call_id`'s rule), one without
continues the arguments of its `tool_index`; finally the server's check for unstreamed
arguments (`_check_for_unstreamed_tool_args`: the detector's `prev_tool_call_arr` of the last
call against its `streamed_args_for_tool`). Those two serving-layer steps are re-stated here
(SGLang's serving module imports its whole runtime); everything that parses is SGLang's own.
The detectors read text only: the token ids of a request are not used. Run `setup` first.
"""

import json
import os
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "cache", "src")
VERSION = "0.5.23"
sys.path.insert(0, os.path.join(HERE, "..", "pyengine"))
sys.path.append(SRC)

import conform_adapter  # noqa: E402
import stubs  # noqa: E402

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
}

#: conform format id -> SGLang `--reasoning-parser` name, for the `--reasoning` variant: the
#: reasoning parser a deployment of that model family pairs with the tool-call parser.
REASONING = {
    "kimi_k2": "kimi_k2",
    "hermes": "qwen3",
    "qwen3_coder": "qwen3",
    "deepseek_v3": "deepseek-r1",
    "deepseek_v31": "deepseek-v3",
    "glm45": "glm45",
    "glm47": "glm45",
    "mistral_v11": "mistral",
    "deepseek_v4": "deepseek-v4",
    "deepseek_v41": "deepseek-v41",
    "gemma4": "gemma4",
    "minimax_m3": "minimax-m3",
    "kimi_k3": "kimi_k3",
}

#: Packages the detectors' modules import but never use to parse text.
STUBBED = [
    "torch", "transformers", "numpy", "pybase64", "requests", "IPython", "tqdm",
    "xgrammar",
]  # fmt: skip


class Sglang:
    def __init__(self, overrides, reasoning=False):
        if not os.path.isdir(os.path.join(SRC, "sglang")):
            sys.exit(f"SGLang {VERSION} is not unpacked in {SRC}: run {HERE}/setup")
        self.parsers = dict(PARSERS, **overrides)
        stubs.install(STUBBED)
        stubs.bare_package("sglang", os.path.join(SRC, "sglang"))
        stubs.bare_package("sglang.srt", os.path.join(SRC, "sglang", "srt"))
        from sglang.srt.entrypoints.openai.protocol import Tool
        from sglang.srt.function_call.function_call_parser import FunctionCallParser
        from sglang.srt.parser.reasoning_parser import ReasoningParser

        self.Tool, self.FunctionCallParser = Tool, FunctionCallParser
        self.ReasoningParser = ReasoningParser
        self.reasoning = dict(REASONING) if reasoning else {}
        for name in self.parsers.values():
            if name not in FunctionCallParser.ToolCallParserEnum:
                raise SystemExit(f"SGLang {VERSION} has no tool-call parser {name!r}")
        import importlib.metadata

        version = importlib.metadata.version("sglang")
        self.name = conform_adapter.variant_name(
            f"sglang {version} function_call detectors", reasoning, overrides
        )

    def run(self, fmt, tools, turns, clock):
        tools = [self.Tool.model_validate(t) for t in tools]
        name = self.parsers[fmt]
        reasoning = self.reasoning.get(fmt)
        return [self.turn(name, reasoning, tools, chunks, clock) for chunks in turns]

    def turn(self, name, reasoning, tools, chunks, clock):
        parser = self.FunctionCallParser(tools=tools, tool_call_parser=name)
        # As _process_reasoning_stream builds it (no template forcing reasoning open).
        thinker = (
            self.ReasoningParser(reasoning, stream_reasoning=True, tool_call_parser_active=True)
            if reasoning
            else None
        )
        detector = parser.detector
        out = conform_adapter.ToolCallEvents()
        texts = [t for t, _ in conform_adapter.deltas(chunks, conform_adapter.MiniTokenizer(""))]
        texts = texts or [""]
        for k, delta in enumerate(texts):
            last = k == len(texts) - 1
            if thinker is not None:
                # The reasoning parser runs first; the tool parser gets its normal text.
                thought, delta = clock(thinker.parse_stream_chunk, delta)
                if last:
                    end_thought, end_text = clock(thinker.parse_stream_end)
                    thought = (thought or "") + (end_thought or "")
                    delta = (delta or "") + (end_text or "")
                out.reasoning(thought)
            text, calls = clock(parser.parse_stream_chunk, delta or "")
            if last:
                end_text, end_calls = clock(parser.parse_stream_end)
                text = (text or "") + end_text
                calls = list(calls) + end_calls
            out.text(text)
            for item in calls:
                call_id = self.call_id(name, item) if item.name else None
                out.call(item.tool_index, item.name, call_id, item.parameters)
        rest = self.unstreamed_arguments(detector)
        if rest is not None:
            out.call(*rest)
        return out.finish()

    @staticmethod
    def call_id(name, item):
        # SGLang's rule (_process_tool_call_id): kimi_k2 ids are rebuilt from the name and the
        # call's index (no earlier calls in a conform request), the others are random.
        if name == "kimi_k2":
            return f"functions.{item.name}:{item.tool_index}"
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
            return (index, None, None, expected[len(actual) :])
        return None


def main():
    overrides, reasoning = conform_adapter.command_line(
        __doc__.split("\n")[0],
        "use SGLang's parser NAME for the conform format FORMAT (e.g. hermes=qwen25)",
        "run each format's reasoning parser (REASONING) before its tool-call parser",
    )
    engine = Sglang(overrides, reasoning)
    conform_adapter.serve(engine.name, list(engine.parsers), engine.run)


if __name__ == "__main__":
    main()
