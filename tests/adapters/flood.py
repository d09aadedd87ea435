"""Floods stdout for a transcript containing a flood word, and answers the rest correctly.

BLANKS: blank lines without end, never an answer. NEWLINES: 100 MB of newlines, then the
answer. ENDLESS: one line that never ends. MEGA: an answer padded to 8 MB with an unknown
field (which the protocol ignores).
"""
import sys

from common import echo, serve, text_of

out = sys.stdout.buffer


def on_parse(msg, n):
    text = text_of(msg)
    if "BLANKS" in text:
        block = b"\n" * (1 << 20)
        while True:
            out.write(block)
    if "NEWLINES" in text:
        out.write(b"\n" * (100 << 20))
    if "ENDLESS" in text:
        block = b"x" * (1 << 20)
        while True:
            out.write(block)
    if "MEGA" in text:
        return {**echo(msg), "padding": "p" * (8 << 20)}
    return echo(msg)


serve(on_parse)
