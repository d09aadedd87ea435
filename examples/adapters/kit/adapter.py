#!/usr/bin/env python3
"""conform judges ToyHermes: `conform run corpus/hermes --parser 'cmd:python3 adapter.py'`."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conform_adapter import Adapter  # pip install conform (or PYTHONPATH=python)
from toy_hermes import ToyHermes


class ToyAdapter(Adapter):
    name = "toy-hermes (examples/adapters/kit)"
    formats = ["hermes"]

    def parse(self, request):
        for turn in request.turns:
            parser = ToyHermes()
            for delta in turn.deltas():
                for d in request.timed(parser.feed, delta.text):
                    turn.out.openai_delta(d)
            for d in request.timed(parser.finish):
                turn.out.openai_delta(d)


if __name__ == "__main__":
    ToyAdapter().serve()
