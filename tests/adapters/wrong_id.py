"""Answers a transcript containing WRONGID with the id of another request."""
from common import echo, serve, text_of


def on_parse(msg, n):
    reply = echo(msg)
    if "WRONGID" in text_of(msg):
        reply["id"] = msg["id"] + 1000
    return reply


serve(on_parse)
