"""Keeps only the first chunk of each turn: wrong under every chunking but whole."""

from common import send, serve
import base64


def first_chunk(turn):
    c = turn["chunks"][0] if turn["chunks"] else ""
    return c if isinstance(c, str) else base64.b64decode(c["b64"]).decode("utf-8", errors="replace")


def on_parse(msg, n):
    turns = [{"text": first_chunk(t), "calls": [], "errors": []} for t in msg["turns"]]
    return {"type": "result", "id": msg["id"], "turns": turns}


serve(on_parse)
