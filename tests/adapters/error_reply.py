"""Reports a structured error for a transcript containing ERR."""
from common import echo, serve, text_of


def on_parse(msg, n):
    if "ERR" in text_of(msg):
        return {"type": "error", "id": msg["id"], "message": "parser raised KeyError"}
    return echo(msg)


serve(on_parse)
