"""Answers the hello with the fields of its JSON argument replaced, then echoes. With
`--want-protocol N`, exits unless conform's hello offers protocol N."""
import json
import sys

from common import serve

args = sys.argv[1:]
if args[:1] == ["--want-protocol"]:
    want, args = int(args[1]), args[2:]
    first = json.loads(sys.stdin.buffer.readline())
    if first.get("protocol") != want:
        sys.stderr.write(f"hello_with.py: conform offered protocol {first.get('protocol')}\n")
        sys.exit(1)
    sys.stdout.write(json.dumps({"type": "hello", "protocol": want, "name": "t", "formats": ["kimi_k2"], **json.loads(args[0])}) + "\n")
    sys.stdout.flush()
serve(hello=json.loads(args[0]))
