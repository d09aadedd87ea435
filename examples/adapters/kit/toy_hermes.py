"""A small incremental parser for the `hermes` format (`<tool_call>{"name": …, "arguments":
{…}}</tool_call>`), written the way many servers' first versions are: it holds back what may be
the start of a marker, passes other text through, and parses each call's JSON when its closing
marker arrives. It stands in for "your parser" in the adapter example beside it.

What it does not do (conform shows each, see expected_failures.txt): it knows no reasoning tags,
it reads the first `</tool_call>` as the end of a call even inside a JSON string, a call whose
JSON does not parse (or that the stream cuts off) comes back as plain text, and it writes all of
a call's arguments at once when the call closes.
"""

import json

OPEN, CLOSE = "<tool_call>", "</tool_call>"


class ToyHermes:
    """Feed text deltas; each call returns OpenAI-style `delta` dicts."""

    def __init__(self):
        self.buf = ""
        self.in_call = False
        self.calls = 0

    def feed(self, text):
        self.buf += text
        out = []
        while True:
            marker = CLOSE if self.in_call else OPEN
            at = self.buf.find(marker)
            if at < 0:
                if not self.in_call:
                    # Keep back what may be the start of the marker.
                    keep = next((k for k in range(len(marker) - 1, 0, -1) if self.buf.endswith(marker[:k])), 0)
                    if len(self.buf) > keep:
                        out.append({"content": self.buf[: len(self.buf) - keep]})
                        self.buf = self.buf[len(self.buf) - keep :]
                return out
            head, self.buf = self.buf[:at], self.buf[at + len(marker) :]
            if self.in_call:
                out.append(self._call(head))
            elif head.strip():
                out.append({"content": head})
            self.in_call = not self.in_call

    def finish(self):
        rest = OPEN + self.buf if self.in_call else self.buf
        return [{"content": rest}] if rest else []

    def _call(self, body):
        try:
            obj = json.loads(body)
            name, args = obj["name"], obj.get("arguments", {})
        except (ValueError, KeyError, TypeError):
            name = None
        if not isinstance(name, str):
            return {"content": OPEN + body + CLOSE}
        call = {"index": self.calls, "function": {"name": name, "arguments": json.dumps(args)}}
        self.calls += 1
        return {"tool_calls": [call]}
