#!/usr/bin/env python3
"""conform adapter (specs/adapter.md, protocol 2) around vLLM 0.33.0's streaming tool parsers.

Each replay goes through the server's own streaming path: the parser class the server composes
for `--tool-call-parser NAME --enable-auto-tool-choice` (`ParserManager.get_parser`), built per
response from the tokenizer and the request's tools, `adjust_request` on a ChatCompletionRequest
carrying those tools, then `ChatStreamProcessor.step` (the serving layer's per-choice loop:
`Parser.parse_delta` plus its tool-call filtering) once per delta, the last one with
`finish_reason="stop"`, which runs the server's end of stream (`finalize_generation`: the
unstreamed rest of the arguments, and `finish_streaming` of engine parsers). Run `setup` first.
"""

import os

# Structural tags (constrained decoding of the calls) need xgrammar, which is not installed: a
# decoding feature, not a parsing one. The server has this switch for turning them off.
os.environ.setdefault("VLLM_ENFORCE_STRICT_TOOL_CALLING", "0")
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "cache", "src")
VERSION = "0.33.0"
sys.path.insert(0, os.path.join(HERE, "..", "pyengine"))
sys.path.append(SRC)

import conform_adapter  # noqa: E402
import stubs  # noqa: E402

#: conform format id -> vLLM `--tool-call-parser` name, for every format whose wire format is
#: the one that parser reads (README.md says why the others are left out).
PARSERS = {
    "kimi_k2": "kimi_k2",
    "hermes": "hermes",
    "llama3_json": "llama3_json",
    "mistral": "mistral",
    "mistral_v11": "mistral",
    "deepseek_v3": "deepseek_v3",
    "deepseek_v31": "deepseek_v31",
    "deepseek_v32": "deepseek_v32",
    "deepseek_v4": "deepseek_v4",
    "deepseek_v41": "deepseek_v41",
    "pythonic": "llama4_pythonic",
    "qwen3_coder": "qwen3_coder",
    "glm45": "glm45",
    "glm47": "glm47",
    "minimax_m2": "minimax_m2",
    "seed_oss": "seed_oss",
    "gemma4": "gemma4",
    "minimax_m3": "minimax_m3",
    "kimi_k3": "kimi_k3",
}

#: conform format id -> vLLM `--reasoning-parser` name, for the `--reasoning` variant: the
#: reasoning parser a deployment of that model family pairs with the tool parser.
REASONING = {
    "kimi_k2": "kimi_k2",
    "hermes": "qwen3",
    "qwen3_coder": "qwen3",
    "deepseek_v3": "deepseek_r1",
    "deepseek_v31": "deepseek_v3",
    "glm45": "glm45",
    "glm47": "glm47",
    "minimax_m2": "minimax_m2",
    "seed_oss": "seed_oss",
    "mistral_v11": "mistral",
    "deepseek_v4": "deepseek_v4",
    "deepseek_v41": "deepseek_v41",
    "gemma4": "gemma4",
    "minimax_m3": "minimax_m3",
    "kimi_k3": "kimi_k3",
}

#: Packages the tool parsers' modules import but never use to parse text, and vLLM's own
#: subpackages that register GPU kernels at import time.
STUBBED = [
    "torch", "transformers", "numpy", "cbor2", "psutil", "zmq", "urllib3", "fastapi", "PIL",
    "pybase64", "aiohttp", "requests", "huggingface_hub", "safetensors", "prometheus_client",
    "openai_harmony", "cloudpickle", "uvloop", "cpuinfo", "xgrammar",
    "jsonschema", "pydantic_extra_types", "vllm.config", "vllm.model_executor", "vllm.distributed",
]  # fmt: skip


class Vllm:
    def __init__(self, overrides, reasoning=False):
        if not os.path.isdir(os.path.join(SRC, "vllm")):
            sys.exit(f"vLLM {VERSION} is not unpacked in {SRC}: run {HERE}/setup")
        stubs.install(STUBBED, {"torch": "2.14.0", "transformers": "5.16.1"})
        stubs.bare_package("vllm", os.path.join(SRC, "vllm"))
        from vllm.entrypoints.openai.chat_completion.protocol import (
            ChatCompletionRequest,
            ChatCompletionToolsParam,
        )
        from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor
        from vllm.parser import ParserManager

        self.Request, self.ToolParam, self.Processor = (
            ChatCompletionRequest,
            ChatCompletionToolsParam,
            ChatStreamProcessor,
        )
        self.parsers = dict(PARSERS, **overrides)
        self.classes = {
            fmt: ParserManager.get_parser(
                tool_parser_name=name,
                reasoning_parser_name=REASONING.get(fmt) if reasoning else None,
                enable_auto_tools=True,
            )
            for fmt, name in self.parsers.items()
        }
        import importlib.metadata

        version = importlib.metadata.version("vllm")
        self.name = conform_adapter.variant_name(
            f"vllm {version} tool parsers", reasoning, overrides
        )

    def run(self, fmt, tools, turns, clock):
        tools = [self.ToolParam.model_validate(t) for t in tools]
        parser_cls = self.classes[fmt]
        # The model's own vocabulary when conform cut the turn with it: the engine gets its ids.
        return [
            self.turn(parser_cls, conform_adapter.tokenizer_for(fmt, chunks), tools, chunks, clock)
            for chunks in turns
        ]

    def turn(self, parser_cls, tokenizer, tools, chunks, clock):
        # One parser per response, as the server builds it (construction is not timed).
        request = self.Request(messages=[], model="conform", tools=tools or None)
        parser = parser_cls(tokenizer, request.tools, chat_template_kwargs=None, model_config=None)
        request = parser.adjust_request(request)
        processor = self.Processor(request, parser, enable_auto_tools=True, parser_cls=parser_cls)
        out = conform_adapter.ToolCallEvents()
        steps = conform_adapter.deltas(chunks, tokenizer) or [("", [])]
        for k, (text, ids) in enumerate(steps):
            last = k == len(steps) - 1
            # The prompt's ids: none here; a list (not None) tells the parser the prompt left
            # no reasoning open, as a real prompt without a reasoning parser does.
            step = clock(processor.step, text, ids, "stop" if last else None, [])
            self.emit(step.delta, out)
        return out.finish()

    @staticmethod
    def emit(delta, out):
        if delta is None:
            return
        out.reasoning(delta.reasoning)
        out.text(delta.content)
        for tc in delta.tool_calls or []:
            fn = tc.function
            out.call(
                tc.index,
                fn.name if fn is not None else None,
                tc.id,
                fn.arguments if fn is not None else None,
            )


def main():
    overrides, reasoning = conform_adapter.command_line(
        __doc__.split("\n")[0],
        "use vLLM's tool parser NAME for the conform format FORMAT (e.g. pythonic=pythonic)",
        "pair each tool parser with its family's reasoning parser (REASONING)",
    )
    engine = Vllm(overrides, reasoning)
    conform_adapter.serve(engine.name, list(engine.parsers), engine.run)


if __name__ == "__main__":
    main()
