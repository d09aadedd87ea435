"""Shared loop of the test adapters: a correct echo parser that each script bends one way."""

import base64
import json
import sys


def text_of(msg):
    """The transcript of the first turn, chunks joined and decoded."""
    data = b"".join(
        c.encode() if isinstance(c, str) else base64.b64decode(c["b64"]) for c in msg["turns"][0]["chunks"]
    )
    return data.decode("utf-8", errors="replace")


def echo(msg):
    """The right answer for a transcript without markup: all of it is text."""
    turns = [{"text": text_of({"turns": [t]}), "calls": [], "errors": []} for t in msg["turns"]]
    return {"type": "result", "id": msg["id"], "turns": turns}


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve(on_parse=lambda msg, n: echo(msg), name="test-adapter", hello=None):
    """Answers the hello (its fields replaced by `hello`'s), then calls `on_parse(msg, n)` for
    the n-th parse request (from 1)."""
    n = 0
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        if msg["type"] == "hello":
            send({"type": "hello", "protocol": 1, "name": name, "formats": ["kimi_k2"], **(hello or {})})
            continue
        n += 1
        reply = on_parse(msg, n)
        if reply is not None:
            send(reply)
