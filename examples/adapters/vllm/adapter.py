#!/usr/bin/env python3
"""conform adapter (specs/adapter.md, protocol 2) around vLLM 0.33.0's tool parsers, on both of
its chat server's paths.

The server composes one parser class for `--tool-call-parser NAME --enable-auto-tool-choice`
(and `--reasoning-parser` in the reasoning variant: `ParserManager.get_parser`) and builds one
instance per response from the tokenizer, the request's tools and its `chat_template_kwargs`
(`OpenAIServingChat._make_parser`), then `adjust_request` on the request.

- `batch` (`stream=false`, `chat_completion_full_generator`): `parser.parse(text, request,
  enable_auto_tools=True, model_output_token_ids=ids)` once on the whole output, then
  `assemble_chat_message_fields` (tool_choice, ids) as the server does; a result.
- `stream`: `ChatStreamProcessor.step` (the serving layer's per-choice loop: `Parser.parse_delta`
  plus its tool-call filtering) once per delta, the last one with `finish_reason="stop"`, which
  runs the server's end of stream (`finalize_generation`); the deltas assembled as the OpenAI
  client assembles them (conform's adapter kit).

The request is a real request: tools as the case carries them, `tool_choice` and the thinking
switch from the case's request mode (thinking off for a transcript without a think block), the
prompt's ids ending in the think tag when the template opened reasoning. Run `setup` first.
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

import engine_kit  # noqa: E402
import stubs  # noqa: E402
from engine_kit import kit  # noqa: E402

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
    "functiongemma": "functiongemma",
    "muse_glimmer": "muse_glimmer",
    "granite4": "granite4",
    "apertus": "apertus",
    "step3": "step3",
    "olmo3": "olmo3",
    "xlam": "xlam",
}

#: conform format id -> vLLM `--reasoning-parser` name, for the `--reasoning` variant: the
#: reasoning parser of the format's own model family (DeepSeek V3's, which reasons only when
#: the request switches thinking on, never R1's, which assumes every output starts inside it).
REASONING = {
    "kimi_k2": "kimi_k2",
    "hermes": "qwen3",
    "qwen3_coder": "qwen3",
    "deepseek_v3": "deepseek_v3",
    "deepseek_v31": "deepseek_v3",
    "deepseek_v32": "deepseek_v3",
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
    "muse_glimmer": "muse_glimmer",
    "step3": "step3",
}

#: Packages the tool parsers' modules import but never use to parse text, and vLLM's own
#: subpackages that register GPU kernels at import time.
STUBBED = [
    "torch", "transformers", "numpy", "cbor2", "psutil", "zmq", "urllib3", "fastapi", "PIL",
    "pybase64", "aiohttp", "requests", "huggingface_hub", "safetensors", "prometheus_client",
    "openai_harmony", "cloudpickle", "uvloop", "cpuinfo", "xgrammar",
    "jsonschema", "pydantic_extra_types", "vllm.config", "vllm.model_executor", "vllm.distributed",
]  # fmt: skip


class Vllm(kit.Adapter):
    paths = ("batch", "stream")

    def __init__(self, overrides, reasoning=False):
        if not os.path.isdir(os.path.join(SRC, "vllm")):
            sys.exit(f"vLLM {VERSION} is not unpacked in {SRC}: run {HERE}/setup")
        stubs.install(STUBBED, {"torch": "2.14.0", "transformers": "5.16.1"})
        stubs.bare_package("vllm", os.path.join(SRC, "vllm"))
        from vllm.entrypoints.openai.chat_completion.message_assembly import (
            assemble_chat_message_fields,
        )
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
        self.assemble = assemble_chat_message_fields
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
        self.name = engine_kit.variant_name(f"vllm {version} tool parsers", reasoning, overrides)
        self.formats = list(self.parsers)

    def parse(self, request):
        fmt = request.format
        tools = [self.ToolParam.model_validate(t) for t in request.tools]
        for turn in request.turns:
            # The model's own vocabulary when conform cut the turn with it: the engine gets its ids.
            tokenizer = engine_kit.tokenizer_for(fmt, turn)
            engine_kit.check_token_ids(engine_kit.TurnView(turn), tokenizer)
            text = turn.text
            chat_kwargs = engine_kit.chat_template_kwargs(fmt, request.mode, text)
            # The rendered prompt's ids: what matters is whether it ended inside reasoning.
            open_tag = engine_kit.THINK_OPEN.get(fmt, "")
            prompt = tokenizer.encode(open_tag) if engine_kit.opens_reasoning(request.mode) else []
            # The server validates the request's JSON, not parsed models (its named tool_choice
            # check indexes the tools as dicts).
            fields = {"messages": [], "model": "conform", "tools": list(request.tools) or None}
            fields["chat_template_kwargs"] = chat_kwargs
            if "tool_choice" in request.mode and tools:
                fields["tool_choice"] = engine_kit.openai_tool_choice(request.mode["tool_choice"])
            req = self.Request(**fields)
            # One parser per response, as the server builds it (construction is not timed).
            cls = self.classes[fmt]
            parser = cls(tokenizer, req.tools, chat_template_kwargs=chat_kwargs, model_config=None)
            req = parser.adjust_request(req)
            if request.path == "batch":
                self.batch(request, turn, cls, parser, req, tokenizer, prompt)
            else:
                self.stream(request, turn, cls, parser, req, tokenizer, prompt)

    def batch(self, request, turn, cls, parser, req, tokenizer, prompt):
        text = turn.text
        parser.set_prompt_token_ids(prompt)
        reasoning, content, calls = request.timed(
            parser.parse,
            text,
            req,
            enable_auto_tools=True,
            model_output_token_ids=tokenizer.encode(text),
        )
        f = self.assemble(req, reasoning, content, calls, enable_auto_tools=True, parser_cls=cls)
        turn.result(
            text=f.content or "",
            reasoning=f.reasoning,
            calls=[
                {"id": tc.id, "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
                for tc in f.tool_calls or []
            ],
        )

    def stream(self, request, turn, cls, parser, req, tokenizer, prompt):
        processor = self.Processor(req, parser, enable_auto_tools=True, parser_cls=cls)
        steps = [(d.text, engine_kit.delta_ids(d, tokenizer)) for d in turn.deltas()] or [("", [])]
        for k, (text, ids) in enumerate(steps):
            last = k == len(steps) - 1
            step = request.timed(processor.step, text, ids, "stop" if last else None, prompt)
            delta = step.delta
            if delta is None:
                continue
            turn.out.reasoning(delta.reasoning)
            turn.out.text(delta.content)
            for tc in delta.tool_calls or []:
                fn = tc.function
                turn.out.tool_call(
                    tc.index,
                    tc.id,
                    fn.name if fn is not None else None,
                    fn.arguments if fn is not None else None,
                )


def main():
    overrides, reasoning = engine_kit.command_line(
        __doc__.split("\n")[0],
        "use vLLM's tool parser NAME for the conform format FORMAT (e.g. pythonic=pythonic)",
        "pair each tool parser with its family's reasoning parser (REASONING)",
    )
    Vllm(overrides, reasoning).serve()


if __name__ == "__main__":
    main()
