"""Right about calls and text, but with ids of its own (the wire carries none), a warning of
its own vocabulary, and a different error kind: what a real engine's parser does."""

import re
import uuid

from common import serve, text_of


def on_parse(msg, n):
    text = text_of(msg)
    if "<|tool_call_begin|>" in text:
        wire = re.search(r"functions\.get:([^<]*)<", text)
        call_id = wire.group(1) if wire else "call_" + uuid.uuid4().hex
        turn = {
            "text": "",
            "calls": [{"name": "get", "id": call_id, "arguments": {"q": 1}}],
            "warnings": [{"kind": "engine_specific_leniency"}],
            "errors": [],
        }
    elif "BROKEN" in text:
        turn = {"text": "", "calls": [], "errors": [{"kind": "malformed_markup"}]}
    else:
        turn = {"text": text, "calls": [], "errors": []}
    return {"type": "result", "id": msg["id"], "turns": [turn]}


serve(on_parse)
