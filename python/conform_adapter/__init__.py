"""Judge your tool-call parser with conform: the adapter kit.

conform (https://github.com/…/conform, `pip install conform`) replays model transcripts under
every chunking a server produces and checks what a parser makes of them. It talks to a parser
that is not its own through an *adapter*: a process speaking JSON lines on stdin/stdout
(`specs/adapter.md`, protocol 2). This package is that process's plumbing, so an engine team
writes one method:

    from conform_adapter import Adapter

    class MyAdapter(Adapter):
        name = "my-engine 1.2 hermes"
        formats = ["hermes"]

        def parse(self, request):
            for turn in request.turns:            # a session has several turns, one parser
                parser = MyToolParser(request.tools)
                for delta in turn.deltas():       # what a server's detokenizer hands a parser
                    for d in parser.stream(delta.text):
                        turn.out.openai_delta(d)  # {"content": …} or {"tool_calls": [...]}
                turn.out.finish()

    if __name__ == "__main__":
        MyAdapter().serve()

and runs `conform run corpus/hermes --parser 'cmd:python3 my_adapter.py'`.

What the kit does for you:
- the protocol: hello, one `parse` request per replay, `events` (or `error` when the parser
  raised: that replay is a crash, the process goes on), `engine_ns` timing of your calls;
- chunks as a server would give them: `turn.deltas()` decodes the chunks incrementally (a
  character cut between chunks waits for the next one) and carries each delta's token ids when
  conform sent them (`delta.token_ids`, the model vocabulary's ids of a token-aligned replay);
- tool-call deltas assembled as the OpenAI client assembles them (`Events.openai_delta`): by
  `index`, strings concatenated, the name and id whenever they first come, arguments possibly
  before the name; a call that never gets a name is a `missing_name` error, arguments that are
  not a JSON object at the end of the stream an `invalid_json` (or `empty_arguments`) error;
- the request's options: `request.tools`, `request.mode` (the request modes the case was
  served under: `starting_state`, `tool_choice`, `finish_reason` always, `thinking` when set);
- an engine output no server could send (a lone surrogate, e.g. half of a pair split across
  deltas, which no UTF-8 JSON encoder takes) answered as that replay's crash, naming it,
  rather than as a line conform cannot read;
- serving paths: set `paths = ("batch", "stream")` when your server has a non-streaming entry
  point besides the streaming one; conform then sends the whole output with
  `request.path == "batch"` (answer with `turn.result(...)`, what `stream=false` returns) and
  token-aligned deltas with `request.path == "stream"`.

Python 3.9 or later, standard library only.
"""

import base64
import codecs
import json
import sys
import time
import traceback

__all__ = ["Adapter", "Delta", "Events", "Request", "Turn", "UnencodableOutput", "PROTOCOL"]

#: The protocol version this kit speaks (specs/adapter.md §6).
PROTOCOL = 2

#: conform's shared error kinds (specs/adapter.md §2.3); any other kind is a protocol error.
ERROR_KINDS = frozenset(
    "invalid_json empty_arguments missing_name unknown_tool schema_violation malformed_markup "
    "unterminated invalid_utf8 invalid_stream limit_exceeded no_tool_blocks max_mistakes".split()
)


def chunk_bytes(chunk):
    """A request chunk's bytes: a JSON string, or {"b64": …} when it is not UTF-8 on its own."""
    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    return base64.b64decode(chunk["b64"])


class Delta:
    """One delta of text as a server's detokenizer hands it to its parser."""

    __slots__ = ("text", "token_ids")

    def __init__(self, text, token_ids=None):
        #: The delta's text (a character cut across chunks arrives whole, with the later one).
        self.text = text
        #: The model vocabulary's ids of the delta's tokens, or None when conform cut in bytes.
        self.token_ids = token_ids

    def __repr__(self):
        return f"Delta({self.text!r}, {self.token_ids!r})"


class Events:
    """The events of one turn, in conform's form (specs/adapter.md §2.3).

    Write text, reasoning and calls as your parser yields them; `openai_delta` takes an OpenAI
    chat-completion `delta` (or a whole chunk) and does the client's assembly. Call `finish()`
    when the turn's stream ends.
    """

    def __init__(self):
        #: The events so far.
        self.events = []
        # Per tool-call index of the OpenAI deltas: its assembly state.
        self._calls = {}
        self._finished = False

    # -- plain events ---------------------------------------------------------------------
    def text(self, s):
        """Visible text."""
        if s:
            self.events.append({"type": "text", "text": s})

    def reasoning(self, s):
        """The model's reasoning, apart from the text (only if your parser splits it)."""
        if s:
            self.events.append({"type": "reasoning", "text": s})

    def error(self, kind, message=""):
        """The parser rejected its input (one of conform's shared kinds, ERROR_KINDS)."""
        if kind not in ERROR_KINDS:
            raise ValueError(f"{kind!r} is not one of conform's error kinds: {sorted(ERROR_KINDS)}")
        self.events.append({"type": "error", "kind": kind, "message": message})

    def warning(self, kind, message=""):
        """The parser recovered a deviation (free text; not compared by default)."""
        self.events.append({"type": "warning", "kind": kind, "message": message})

    # -- OpenAI-style deltas ----------------------------------------------------------------
    def openai_delta(self, delta):
        """Takes a chat-completion `delta` ({"content", "reasoning_content", "tool_calls"}),
        or a whole chunk ({"choices": [{"delta": …}]}), and assembles it as the OpenAI client
        does."""
        if delta is None:
            return
        if "choices" in delta:
            for choice in delta.get("choices") or []:
                self.openai_delta(choice.get("delta"))
            return
        self.reasoning(delta.get("reasoning_content") or delta.get("reasoning") or "")
        self.text(delta.get("content") or "")
        for call in delta.get("tool_calls") or []:
            fn = call.get("function") or {}
            self.tool_call(call.get("index", 0), call.get("id"), fn.get("name"), fn.get("arguments"))

    def tool_call(self, index, call_id=None, name=None, arguments=None):
        """One tool-call delta: the call at `index` (the engine's numbering), and any of its id,
        name and the next fragment of its arguments.

        As the OpenAI client assembles them, pieces of each string field are concatenated, and a
        call is only known by its name once the name has come: the call starts (conform's
        `call_start`) at its first arguments fragment after a name, or at the end of the stream,
        and arguments that came before the name are held until then.
        """
        c = self._calls.get(index)
        if c is None:
            c = self._calls[index] = {"id": "", "name": "", "held": [], "index": None, "args": ""}
        if call_id:
            if c["index"] is not None:
                # The client would append it to the id; the call already started with its id.
                self.warning("id_after_start", f"tool call {index}: id piece {call_id!r} after its start")
            else:
                c["id"] += call_id
        if name:
            if c["index"] is not None:
                # The client would show a longer name than the one the call started with.
                self.error(
                    "malformed_markup",
                    f"tool call {index}: name piece {name!r} after its arguments began",
                )
                return
            c["name"] += name
        if arguments:
            c["held"].append(arguments)
            c["args"] += arguments
            if c["name"]:
                self._start(c)

    def _start(self, c):
        if c["index"] is None:
            c["index"] = sum(1 for x in self._calls.values() if x["index"] is not None)
            ev = {"type": "call_start", "index": c["index"], "name": c["name"]}
            if c["id"]:
                ev["id"] = c["id"]
            self.events.append(ev)
        for piece in c["held"]:
            self.events.append({"type": "args_delta", "index": c["index"], "json": piece})
        c["held"] = []

    def finish(self):
        """The turn's stream ended: every call assembled from OpenAI deltas is ended as a client
        ends it. A call without a name is `missing_name`; arguments that are not a JSON object
        are `invalid_json` (`empty_arguments` when none came), and that call is not ended."""
        if self._finished:
            return self.events
        self._finished = True
        for key in sorted(self._calls, key=lambda k: (str(type(k)), k)):
            c = self._calls[key]
            if not c["name"]:
                self.error("missing_name", f"tool call {key} never got a name")
                continue
            self._start(c)
            try:
                ok = isinstance(json.loads(c["args"]), dict)
            except ValueError:
                ok = False
            if ok:
                self.events.append({"type": "call_end", "index": c["index"]})
            elif not c["args"].strip():
                self.error("empty_arguments", f"tool call {key}: no arguments streamed")
            else:
                self.error("invalid_json", f"tool call {key}: the arguments are not a JSON object")
        return self.events


class Turn:
    """One assistant turn of a request: its chunks, exactly as conform cut them."""

    def __init__(self, raw):
        #: The chunks as bytes, in order; their concatenation is the transcript's bytes.
        self.chunks = [chunk_bytes(c) for c in raw.get("chunks") or []]
        #: Per chunk, the model vocabulary's token ids (token-aligned replays), else None.
        self.token_ids = raw.get("token_ids")
        #: With token_ids, the vocabulary they belong to: {"name", "file", "special"}
        #: (specs/adapter.md §2.2; `file` is the vocabulary file conform read), else None.
        self.tokenizer = raw.get("tokenizer")
        #: Where your parser's events go.
        self.out = Events()
        #: The turn's final result, when the parser answered one (`result`) instead of events.
        self.final = None

    def result(self, text="", calls=(), reasoning=None, errors=(), warnings=()):
        """Answers the turn with a final result instead of events (a non-streaming parser):
        `calls` as OpenAI `tool_calls` entries ({"id", "function": {"name", "arguments"}}) or
        {"name", "id", "arguments"}; arguments a JSON string or an object."""
        out = []
        for c in calls:
            fn = c.get("function") or c
            call = {"name": fn.get("name") or "", "arguments": fn.get("arguments")}
            if call["arguments"] is None:
                call["arguments"] = "{}"
            if c.get("id"):
                call["id"] = c["id"]
            out.append(call)
        self.final = {
            "text": text or "",
            "calls": out,
            "errors": [e if isinstance(e, dict) else {"kind": e, "message": ""} for e in errors],
            "warnings": [w if isinstance(w, dict) else {"kind": w, "message": ""} for w in warnings],
        }
        if reasoning:
            self.final["reasoning"] = reasoning

    @property
    def text(self):
        """The whole turn as text (invalid UTF-8 replaced): for a non-streaming parser."""
        return b"".join(self.chunks).decode("utf-8", errors="replace")

    def deltas(self):
        """The deltas a server's detokenizer hands its parser for these chunks: decoded
        incrementally (a partial character waits for the next chunk; invalid bytes become
        U+FFFD), each with its chunk's token ids when conform sent them. A chunk that completes
        no character gives no delta; its ids go with the next delta."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending_ids = None
        for k, chunk in enumerate(self.chunks):
            ids = self.token_ids[k] if self.token_ids and k < len(self.token_ids) else None
            if ids is not None:
                pending_ids = (pending_ids or []) + list(ids)
            text = decoder.decode(chunk)
            if text:
                yield Delta(text, pending_ids)
                pending_ids = None
        rest = decoder.decode(b"", final=True)
        if rest or pending_ids:
            yield Delta(rest, pending_ids)


class Request:
    """One parse request: a case under one chunking."""

    def __init__(self, msg):
        #: The request id (echoed in the response).
        self.id = msg.get("id")
        #: The conform format id.
        self.format = msg.get("format")
        #: The case's tools, an OpenAI `tools` array.
        self.tools = msg.get("tools") or []
        #: The request modes of the case (specs/adapter.md §2.2), as a dict: `starting_state`
        #: ("none", "reasoning", "response"), `tool_choice` ("auto", "required", "none" or
        #: {"name": NAME}), `finish_reason` ("stop", "length"), always present (the defaults
        #: spelled out), and `thinking` (true/false) when the case sets it.
        self.mode = msg.get("request") or {}
        #: The serving path conform asks for (`batch`, `stream`), or None when the adapter
        #: declared no paths.
        self.path = msg.get("path")
        #: The turns, fed to one parser in order.
        self.turns = [Turn(t) for t in msg.get("turns") or []]
        self._ns = 0

    def timed(self, fn, *args, **kwargs):
        """Calls your parser's `fn(*args, **kwargs)` and counts its time as the engine's own
        (`engine_ns`, specs/adapter.md §2.6)."""
        t = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            self._ns += time.perf_counter_ns() - t


class UnencodableOutput(ValueError):
    """The engine's output holds a lone surrogate: a Python `str` no UTF-8 encoder takes, so
    a server fails to serialize the response that carries it (pydantic: "surrogates not
    allowed") and the client's stream ends in an error."""


def _check_encodable(value):
    """Raises `UnencodableOutput` when `value` holds a lone surrogate (a JSON escape such as
    `\\ud83c` decoded on its own, or a surrogate pair split across deltas): conform reads
    JSON as UTF-8 and rejects an unpaired escape, so the replay would otherwise end in a
    protocol error that blames the adapter rather than the engine."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            near = value[max(0, e.start - 40):e.start].encode("utf-8", "replace").decode()
            raise UnencodableOutput(
                f"the engine's output holds a lone surrogate U+{ord(value[e.start]):04X} "
                f"(after {near!r}), which no UTF-8 JSON response can carry: a server fails to "
                "encode it"
            ) from None
    elif isinstance(value, dict):
        for v in value.values():
            _check_encodable(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _check_encodable(v)


class Adapter:
    """A parser judged by conform. Subclass it, set `name` and `formats`, implement `parse`,
    and call `serve()`."""

    #: Your parser's name, for reports.
    name = "unnamed parser"
    #: The conform format ids it parses (`conform formats` lists them).
    formats = ()
    #: The serving paths it has (`"batch"`, `"stream"`), or () for one unnamed path.
    paths = ()

    def parse(self, request):
        """Feeds every turn of `request` to one fresh parser, writing each turn's events to
        `turn.out` (and calling `turn.out.finish()` when the turn ends). An exception is a
        crash of this replay only."""
        raise NotImplementedError("implement Adapter.parse")

    # -- the protocol ------------------------------------------------------------------------
    def hello(self):
        """The answer to conform's hello."""
        hello = {"type": "hello", "protocol": PROTOCOL, "name": self.name, "formats": sorted(self.formats)}
        if self.paths:
            hello["paths"] = sorted(self.paths)
        return hello

    def handle(self, msg):
        """The answer to one message."""
        if msg.get("type") == "hello":
            return self.hello()
        request = Request(msg)
        try:
            if msg.get("type") != "parse":
                raise ValueError(f"unknown message type {msg.get('type')!r}")
            if request.format not in self.formats:
                raise ValueError(f"this adapter does not parse {request.format!r}")
            self.parse(request)
            if request.turns and all(t.final is not None for t in request.turns):
                results = [t.final for t in request.turns]
                reply = {"type": "result", "id": request.id, "turns": results, "engine_ns": request._ns}
            elif any(t.final is not None for t in request.turns):
                raise ValueError("some turns answered a result and others events")
            else:
                turns = [t.out.finish() for t in request.turns]
                reply = {"type": "events", "id": request.id, "turns": turns, "engine_ns": request._ns}
            _check_encodable(reply)
        except Exception as e:  # the parser raised: a crash of this replay, the process goes on
            print(traceback.format_exc(limit=8), file=sys.stderr, flush=True)
            return {"type": "error", "id": request.id, "message": f"{type(e).__name__}: {e}"}
        return reply

    def serve(self, stdin=None, stdout=None):
        """The protocol loop: one JSON message per line until stdin closes."""
        stdin = stdin if stdin is not None else sys.stdin.buffer
        stdout = stdout if stdout is not None else sys.stdout
        for line in stdin:
            if not line.strip():
                continue
            reply = self.handle(json.loads(line))
            stdout.write(json.dumps(reply) + "\n")
            stdout.flush()
