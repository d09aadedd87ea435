"""A fake hermes engine for tests/engines.rs: right on plain calls, with deliberate faults the
matrix must class: text after the calls is dropped (a policy), a transcript holding CRASH makes
the adapter fail (crash), and with --drop-second-call a second call is lost (call_lost). Every
response carries engine_ns."""
import base64
import json
import re
import sys
import time

DROP = "--drop-second-call" in sys.argv[1:]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def parse(text):
    calls = []
    first = text.find("<tool_call>")
    for m in re.finditer(r"<tool_call>(.*?)</tool_call>", text, re.S):
        body = json.loads(m.group(1))
        calls.append({"name": body["name"], "arguments": body.get("arguments", {})})
    if DROP:
        calls = calls[:1]
    return {"text": text if first < 0 else text[:first], "calls": calls, "errors": []}


for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "hello":
        send({"type": "hello", "protocol": 2, "name": "fake 0.0.1", "formats": ["hermes"]})
        continue
    start = time.perf_counter_ns()
    turns = []
    for t in msg["turns"]:
        data = b"".join(c.encode() if isinstance(c, str) else base64.b64decode(c["b64"]) for c in t["chunks"])
        turns.append(data.decode("utf-8", "replace"))
    if any("CRASH" in t for t in turns):
        send({"type": "error", "id": msg["id"], "message": "RuntimeError: the fake engine crashed"})
        continue
    results = [parse(t) for t in turns]
    send({"type": "result", "id": msg["id"], "engine_ns": time.perf_counter_ns() - start, "turns": results})
