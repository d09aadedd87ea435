#!/usr/bin/env python3
"""A conform adapter (specs/adapter.md, protocol 2) around a small streaming kimi_k2 parser,
or around vLLM's own tool parser.

Python 3.11, standard library only. Run it as
    conform run corpus/kimi_k2 --parser 'cmd:python3 examples/adapters/python/kimi_adapter.py'

With `--vllm` it wraps a real engine's parser instead: vLLM (0.33's `vllm.tool_parsers` API,
see VllmTurn below and ../README.md), which must be installed with the model's tokenizer:
    conform run corpus/kimi_k2 --start-timeout 300 --parser \
      'cmd:python3 examples/adapters/python/kimi_adapter.py --vllm --tokenizer moonshotai/Kimi-K2-Instruct'

The built-in parser is deliberately naive in the ways real ones are (see ../README.md); conform is
expected to catch exactly the failures listed in expected_failures.txt:

1. Markers are searched for in each chunk on its own. A marker cut across two chunks is never
   recognised: it leaks into the text, or into a header or the arguments.
2. The arguments run from the argument marker to the next literal <|tool_call_end|>: the parser
   is not JSON-aware, so a marker inside a JSON string ends the arguments early.
3. Only the five canonical tokens are markup: no singular/plural variants, no arguments given as
   a JSON string, no size or depth limits.
4. No reasoning: <think>…</think> stays text (it sends no reasoning, so conform does not judge
   its reasoning, but the tags leak into its text).
"""

import base64
import codecs
import json
import re
import sys

SB = "<|tool_calls_section_begin|>"
SE = "<|tool_calls_section_end|>"
CB = "<|tool_call_begin|>"
AB = "<|tool_call_argument_begin|>"
CE = "<|tool_call_end|>"
MARKER = re.compile("|".join(re.escape(m) for m in (SB, SE, CB, AB, CE)))


class Parser:
    """One turn (or session) of kimi_k2 output, fed chunk by chunk; events go to `out`."""

    def __init__(self):
        self.out = []
        self.invalid_utf8 = False
        codecs.register_error("kimi_adapter_mark", self._on_bad_utf8)
        self._start_turn()

    def _on_bad_utf8(self, err):
        self.invalid_utf8 = True
        return ("\ufffd", err.end)

    def _start_turn(self):
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="kimi_adapter_mark")
        self.mode = "text"  # text | section | header | args | skip
        self.explicit = False  # inside <|tool_calls_section_begin|> … (not an implicit section)
        self.container = "text"  # where a skipped call returns to
        self.header = ""
        self.args = ""
        self.index = 0
        self.pending_ws = ""
        self.in_noise = False

    # -- events ---------------------------------------------------------------------------
    def emit(self, **ev):
        self.out.append(ev)

    def text(self, s):
        if s:
            self.emit(type="text", text=s)

    def error(self, kind, message):
        self.emit(type="error", kind=kind, message=message)

    def warning(self, kind):
        self.emit(type="warning", kind=kind, message=kind)

    # -- feeding --------------------------------------------------------------------------
    def feed(self, data: bytes):
        s = self.decoder.decode(data)
        self._scan(s)

    def _scan(self, s):
        # Weakness 1: only whole markers inside this one chunk are found.
        pos = 0
        for m in MARKER.finditer(s):
            self._content(s[pos : m.start()])
            self._marker(m.group())
            pos = m.end()
        self._content(s[pos:])
        if self.invalid_utf8:
            self.invalid_utf8 = False
            self.error("invalid_utf8", "invalid UTF-8")

    def _content(self, s):
        if not s:
            return
        if self.mode == "text":
            self.text(s)
        elif self.mode == "section":
            if not s.strip() and not self.in_noise:
                self.pending_ws += s
            elif self.explicit:
                if not self.in_noise:
                    self.warning("text_in_section")
                    self.in_noise = True
                self.text(self.pending_ws + s)
                self.pending_ws = ""
            else:
                # Text after an implicit section ends it.
                self.mode = self.container = "text"
                self.text(self.pending_ws + s)
                self.pending_ws = ""
        elif self.mode == "header":
            self.header += s
        elif self.mode == "args":
            self.args += s
            self.emit(type="args_delta", index=self.index, json=s)

    def _enter_section(self):
        self.mode = self.container = "section"
        self.pending_ws = ""
        self.in_noise = False

    def _marker(self, m):
        mode = self.mode
        if mode == "skip":
            if m == CE:
                self._enter_section() if self.container == "section" else self._to_text()
            return
        if mode == "args":
            if m == CE:
                self._close_args(via_call_end=True)
            elif m in (CB, SE):
                self._close_args(via_call_end=False)
                self._marker(m)
            else:
                self._content(m)
            return
        if mode == "header":
            if m == AB:
                self._start_call()
            elif m in (CE, CB, SE):
                self.error("malformed_markup", "call header without argument marker")
                self.header = ""
                self._enter_section()
                if m != CE:
                    self._marker(m)
            else:
                self.header += m
            return
        # text or section
        if m == SB:
            if mode == "section" and self.explicit:
                self.error("malformed_markup", "section begin inside a section")
                return
            self.explicit = True
            self._enter_section()
        elif m == SE:
            if mode == "text":
                self.warning("stray_section_end")
            self._to_text()
        elif m == CB:
            if mode == "text":
                self.warning("missing_section_begin")
                self.explicit = False
                self.container = "section"
            self.mode = "header"
            self.header = ""
        elif m == AB:
            self.error("malformed_markup", "argument marker outside a call")
            self.container = mode
            self.mode = "skip"
        elif m == CE:
            self.error("malformed_markup", "call end outside a call")

    def _to_text(self):
        self.mode = self.container = "text"
        self.explicit = False
        self.pending_ws = ""

    def _start_call(self):
        raw = self.header
        self.header = ""
        ws = raw.strip() != raw
        body = raw.strip()
        ident = None
        if ":" in body:
            body, _, ident = body.rpartition(":")
            ws = ws or ident.strip() != ident
            ident = ident.strip() or None
        name = body.rsplit(".", 1)[-1]
        ws = ws or name.strip() != name
        name = name.strip()
        if not name:
            self.error("missing_name", "empty function name")
            self.container = "section"
            self.mode = "skip"
            return
        if ws:
            self.warning("header_whitespace")
        ev = {"type": "call_start", "index": self.index, "name": name}
        if ident is not None:
            ev["id"] = ident
        self.out.append(ev)
        self.args = ""
        self.mode = "args"

    def _close_args(self, via_call_end):
        # Weakness 2: the arguments are whatever came before the first literal call end.
        raw = self.args.strip()
        self.args = ""
        index = self.index
        self.index += 1
        self._enter_section()
        if not raw:
            self.error("empty_arguments", "empty arguments")
            return
        try:
            value = json.loads(raw)
        except ValueError as e:
            self.error("invalid_json", f"invalid JSON: {e}")
            return
        if not isinstance(value, dict):
            self.error("invalid_json", "arguments must be a JSON object")
            return
        if not via_call_end:
            self.warning("missing_call_end")
        self.emit(type="call_end", index=index)

    def finish(self):
        rest = self.decoder.decode(b"", final=True)
        if rest:
            self._scan(rest)
        if self.mode == "header":
            self.error("unterminated", "stream ended inside a call header")
        elif self.mode == "args":
            raw = self.args.strip()
            try:
                ok = raw and isinstance(json.loads(raw), dict)
            except ValueError:
                ok = False
            if ok:
                self.warning("missing_call_end")
                self.emit(type="call_end", index=self.index)
                if self.explicit:
                    self.warning("missing_section_end")
            else:
                self.error("unterminated", "stream ended inside the arguments")
        elif self.mode == "section" and self.explicit:
            self.warning("missing_section_end")
        events, self.out = self.out, []
        self._start_turn()
        return events


class VllmTurn:
    """One turn fed through a vLLM tool parser the way vLLM's server drives it (vLLM 0.33).

    What the parser classes of vLLM 0.33 need, and what changed since the 0.x parsers the
    README's first version described:
    - they live in `vllm.tool_parsers` (`ToolParserManager.get_tool_parser(name)`), no longer
      in `vllm.entrypoints.openai.tool_parsers`;
    - a parser is built per request from the tokenizer AND the request's tools
      (`cls(tokenizer, tools)`; tools drive schema-aware type coercion), and may adjust the
      request (`adjust_request`: kimi_k2 turns `skip_special_tokens` off);
    - `extract_tool_calls_streaming(previous_text, current_text, delta_text,
      previous_token_ids, current_token_ids, delta_token_ids, request)` as before, but kimi_k2
      is now an engine parser (`engine_based_streaming`) that recognises special tokens by id
      in `delta_token_ids` and lexes the text only when it never got any ids;
    - engine parsers hold text back and must be flushed: `finish_streaming()` at the end of
      the turn returns the last `DeltaMessage`.
    Token ids come from the request's `token_ids` (protocol 2, token-aligned replays); a byte
    replay has none, and the parser gets `[]`, as a text-only stream would give it.
    """

    def __init__(self, parser_cls, tokenizer, tools):
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        self.parser = parser_cls(tokenizer, tools or None)
        request = ChatCompletionRequest(messages=[], model="conform", tools=tools or None)
        self.request = self.parser.adjust_request(request)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.ids = []
        self.pending_ids = []
        self.out = []
        self.calls = {}  # vLLM's tool-call index -> [conform index, argument text]

    def feed(self, data: bytes, ids):
        delta = self.decoder.decode(data)
        self.pending_ids += ids
        if not delta:
            return  # a server's detokenizer holds a partial character back the same way
        ids, self.pending_ids = self.pending_ids, []
        previous_text, previous_ids = self.text, self.ids
        self.text, self.ids = previous_text + delta, previous_ids + ids
        self._emit(
            self.parser.extract_tool_calls_streaming(
                previous_text, self.text, delta, previous_ids, self.ids, ids, self.request
            )
        )

    def finish(self):
        rest = self.decoder.decode(b"", final=True)
        if rest or self.pending_ids:
            self.feed(rest.encode("utf-8"), [])
        if hasattr(self.parser, "finish_streaming"):
            self._emit(self.parser.finish_streaming())
        # vLLM has no end of a call: a client ends every call when the stream ends. Its
        # parsers report no errors either; arguments that are not a JSON object are one.
        for index, args in sorted(self.calls.values()):
            try:
                ok = isinstance(json.loads(args), dict)
            except ValueError:
                ok = False
            if ok:
                self.out.append({"type": "call_end", "index": index})
            elif not args.strip():
                self.out.append({"type": "error", "kind": "empty_arguments", "message": "no arguments"})
            else:
                self.out.append({"type": "error", "kind": "invalid_json", "message": "arguments are not a JSON object"})
        return self.out

    def _emit(self, msg):
        if msg is None:
            return
        if msg.content:
            self.out.append({"type": "text", "text": msg.content})
        for tc in msg.tool_calls or []:
            fn = tc.function
            call = self.calls.get(tc.index)
            if call is None:
                if fn is None or not fn.name:
                    raise ValueError(f"tool call {tc.index} streamed arguments before its name")
                call = self.calls[tc.index] = [len(self.calls), ""]
                ev = {"type": "call_start", "index": call[0], "name": fn.name}
                if tc.id:
                    ev["id"] = tc.id
                self.out.append(ev)
            if fn is not None and fn.arguments:
                call[1] += fn.arguments
                self.out.append({"type": "args_delta", "index": call[0], "json": fn.arguments})


class Vllm:
    """vLLM's tool parser `name`, with the tokenizer of the model it belongs to."""

    def __init__(self, name, tokenizer):
        import vllm
        from vllm.tokenizers import get_tokenizer
        from vllm.tool_parsers import ToolParserManager

        self.parser_cls = ToolParserManager.get_tool_parser(name)
        self.tokenizer = get_tokenizer(tokenizer, trust_remote_code=True)
        self.name = f"vllm {vllm.__version__} {name} ({self.parser_cls.__name__})"

    def session(self, tools):
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionToolsParam

        tools = [ChatCompletionToolsParam.model_validate(t) for t in tools]
        return VllmSession(self, tools)


class VllmSession:
    """A request's turns: vLLM builds one parser per response, so each turn gets its own."""

    def __init__(self, vllm, tools):
        self.vllm, self.tools, self.turn = vllm, tools, None

    def feed(self, data, ids):
        if self.turn is None:
            self.turn = VllmTurn(self.vllm.parser_cls, self.vllm.tokenizer, self.tools)
        self.turn.feed(data, ids)

    def finish(self):
        if self.turn is None:
            self.turn = VllmTurn(self.vllm.parser_cls, self.vllm.tokenizer, self.tools)
        events, self.turn = self.turn.finish(), None
        return events


class Naive:
    """The built-in parser above, behind the same interface as `Vllm`."""

    name = "kimi-example-python"

    def session(self, tools):
        return NaiveSession()


class NaiveSession(Parser):
    def feed(self, data, ids):
        # Markers are searched as text, so token ids add nothing here.
        super().feed(data)


def chunk_bytes(chunk):
    """A request chunk: a JSON string, or {"b64": …} when it is not UTF-8 on its own."""
    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    return base64.b64decode(chunk["b64"])


def handle(msg, backend):
    if msg.get("type") == "hello":
        # Protocol 2: requests of token-aligned replays carry each chunk's token ids.
        return {"type": "hello", "protocol": 2, "name": backend.name, "formats": ["kimi_k2"]}
    rid = msg.get("id")
    try:
        if msg.get("type") != "parse" or msg.get("format") != "kimi_k2":
            raise ValueError(f"cannot handle {msg.get('type')!r} for {msg.get('format')!r}")
        session = backend.session(msg.get("tools", []))  # one per request: the turns are one session
        turns = []
        for turn in msg["turns"]:
            ids = turn.get("token_ids") or [[] for _ in turn["chunks"]]
            for chunk, chunk_ids in zip(turn["chunks"], ids, strict=True):
                session.feed(chunk_bytes(chunk), chunk_ids)
            turns.append(session.finish())
        return {"type": "events", "id": rid, "turns": turns}
    except Exception as e:  # an adapter reports its own failures instead of dying
        return {"type": "error", "id": rid, "message": f"{type(e).__name__}: {e}"}


def main():
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm", action="store_true", help="wrap vLLM's tool parser instead")
    ap.add_argument("--parser", default="kimi_k2", help="the vLLM tool parser name")
    ap.add_argument("--tokenizer", default="moonshotai/Kimi-K2-Instruct", help="for --vllm")
    args = ap.parse_args()
    # Slow imports happen before the hello, within conform's --start-timeout.
    backend = Vllm(args.parser, args.tokenizer) if args.vllm else Naive()
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        reply = handle(json.loads(line), backend)
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
