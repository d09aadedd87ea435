"""A correct adapter whose hello lists only a format the test corpus does not hold."""

import json
import sys

from common import echo, send

for line in sys.stdin.buffer:
    msg = json.loads(line)
    if msg["type"] == "hello":
        send({"type": "hello", "protocol": 1, "name": "roo-only", "formats": ["roo_xml"]})
    else:
        send(echo(msg))
