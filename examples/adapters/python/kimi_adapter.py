#!/usr/bin/env python3
"""A conform adapter (specs/adapter.md, protocol 1) around a small streaming kimi_k2 parser.

Python 3.11, standard library only. Run it as
    conform run corpus/kimi_k2 --parser 'cmd:python3 examples/adapters/python/kimi_adapter.py'

The parser is deliberately naive in the ways real ones are (see ../README.md); conform is
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


def chunk_bytes(chunk):
    """A request chunk: a JSON string, or {"b64": …} when it is not UTF-8 on its own."""
    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    return base64.b64decode(chunk["b64"])


def handle(msg):
    if msg.get("type") == "hello":
        return {"type": "hello", "protocol": 1, "name": "kimi-example-python", "formats": ["kimi_k2"]}
    rid = msg.get("id")
    try:
        if msg.get("type") != "parse" or msg.get("format") != "kimi_k2":
            raise ValueError(f"cannot handle {msg.get('type')!r} for {msg.get('format')!r}")
        parser = Parser()  # one parser per request: the turns are one session
        turns = []
        for turn in msg["turns"]:
            for chunk in turn["chunks"]:
                parser.feed(chunk_bytes(chunk))
            turns.append(parser.finish())
        return {"type": "events", "id": rid, "turns": turns}
    except Exception as e:  # an adapter reports its own failures instead of dying
        return {"type": "error", "id": rid, "message": f"{type(e).__name__}: {e}"}


def main():
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        reply = handle(json.loads(line))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
