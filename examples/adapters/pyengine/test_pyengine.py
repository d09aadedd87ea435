"""Unit tests of the shared engine-adapter pieces: `python3 -m unittest discover -s examples/adapters/pyengine`
(tests/adapters.rs runs them within `cargo test`)."""

import base64
import io
import json
import sys
import unittest

import engine_kit as ca
import stubs


class MiniTokenizerTest(unittest.TestCase):
    def test_special_tokens_keep_conform_ids_and_text_is_one_token_per_character(self):
        tok = ca.MiniTokenizer("kimi_k2")
        ids = tok.encode("a<|tool_call_end|>é")
        self.assertEqual(ids, [ca.CHAR_BASE + ord("a"), 163599, ca.CHAR_BASE + ord("é")])
        self.assertEqual(tok.decode(ids), "a<|tool_call_end|>é")
        self.assertEqual(tok.decode(ids, skip_special_tokens=True), "aé")
        self.assertEqual(tok.get_vocab()["<|tool_calls_section_begin|>"], 163595)
        self.assertIn(163586, tok.all_special_ids)

    def test_tokens_without_a_declared_id_get_a_synthetic_one(self):
        tok = ca.MiniTokenizer("seed_oss")
        tid = tok.convert_tokens_to_ids("<seed:tool_call>")
        self.assertGreaterEqual(tid, ca.SYNTHETIC_BASE)
        self.assertLess(tid, ca.CHAR_BASE)
        self.assertEqual(tok.decode([tid]), "<seed:tool_call>")

    def test_the_longest_special_token_wins(self):
        tok = ca.MiniTokenizer("hermes")
        self.assertEqual(tok.encode("</tool_call>"), [151658])


class ModelTokenizerTest(unittest.TestCase):
    def vocab_file(self, d):
        import os
        lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
        lines.append(f"{base64.b64encode(b'He').decode()} 256")
        lines.append(f"{base64.b64encode(b'llo').decode()} 257")
        path = os.path.join(d, "tiny.tiktoken")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def test_the_ids_conform_sends_are_the_engines_and_decode_to_the_text(self):
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            info = {"name": "tiny", "file": self.vocab_file(d), "special": [["<tool_call>", 900]]}
            e = "é".encode()
            turn = ca.kit.Turn(
                {
                    "chunks": ["He", "llo", "<tool_call>", {"b64": base64.b64encode(e[:1]).decode()}, {"b64": base64.b64encode(e[1:]).decode()}],
                    "token_ids": [[256], [257], [900], [195], [169]],
                    "tokenizer": info,
                }
            )
            tok = ca.tokenizer_for("hermes", turn)
            self.assertIsInstance(tok, ca.ModelTokenizer)
            got = [(d.text, ca.delta_ids(d, tok)) for d in turn.deltas()]
            # Not re-encoded: the ids as sent, a cut character's ids with the delta completing it.
            self.assertEqual(got, [("He", [256]), ("llo", [257]), ("<tool_call>", [900]), ("é", [195, 169])])
            self.assertEqual(tok.decode([256, 257, 900]), "Hello<tool_call>")
            self.assertEqual(tok.get_vocab()["<tool_call>"], 900)
            self.assertEqual(tok.convert_tokens_to_ids("<tool_call>"), 900)
            self.assertEqual(tok.decode(tok.encode("Hello<tool_call>é")), "Hello<tool_call>é")
            self.assertEqual(tok.encode("Hello")[:1], [256])
            # A turn without ids keeps the mini tokenizer.
            plain = ca.tokenizer_for("hermes", ca.kit.Turn({"chunks": ["a"]}))
            self.assertIsInstance(plain, ca.MiniTokenizer)
            self.assertNotIsInstance(plain, ca.ModelTokenizer)

    def test_tokenizer_json_and_tekken_vocabularies_load(self):
        import os
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            chars = ca._byte_chars()
            vocab = {c: i for i, c in enumerate(chars)}
            vocab["Ġw"] = 256
            doc = {"model": {"type": "BPE", "vocab": vocab, "merges": ["Ġ w"]},
                   "added_tokens": [{"id": 300, "content": "<｜tool▁sep｜>"}]}
            p = os.path.join(d, "tokenizer.json")
            with open(p, "w") as f:
                json.dump(doc, f)
            v = ca.ModelVocabulary({"name": "t", "file": p})
            self.assertEqual(v.pieces[256], b" w")
            self.assertEqual(v.special["<｜tool▁sep｜>"], 300)
            tekken = {"config": {"default_num_special_tokens": 3, "default_vocab_size": 5, "pattern": "."},
                      "vocab": [{"rank": 0, "token_bytes": base64.b64encode(b"a").decode()},
                                {"rank": 1, "token_bytes": base64.b64encode(b"b").decode()},
                                {"rank": 2, "token_bytes": base64.b64encode(b"c").decode()}]}
            p = os.path.join(d, "tekken.json")
            with open(p, "w") as f:
                json.dump(tekken, f)
            v = ca.ModelVocabulary({"name": "tekken", "file": p, "special": [["[TOOL_CALLS]", 2]]})
            self.assertEqual(v.pieces, {3: b"a", 4: b"b"})
            self.assertEqual(v.special, {"[TOOL_CALLS]": 2})


class CheckTokenIdsTest(unittest.TestCase):
    def test_ids_conform_sends_must_cover_the_tables_special_tokens(self):
        tok = ca.MiniTokenizer("hermes")
        ok = {"chunks": [b"a", b"<tool_call>"], "token_ids": [[64], [151657]]}
        ca.check_token_ids(ok, tok)
        ca.check_token_ids({"chunks": [b"<tool_call>"]}, tok)  # a byte-cut turn: nothing to check
        # An ordinary o200k id that equals a special id is no mismatch.
        ca.check_token_ids({"chunks": [b"ab"], "token_ids": [[151657]]}, tok)
        with self.assertRaises(ValueError):
            ca.check_token_ids({"chunks": [b"<tool_call>"], "token_ids": [[99]]}, tok)


class RequestTest(unittest.TestCase):
    def test_thinking_follows_the_case_else_the_transcript_and_the_prompt(self):
        self.assertTrue(ca.thinking("hermes", {"thinking": True}, "no block"))
        self.assertFalse(ca.thinking("hermes", {"thinking": False}, "<think>x</think>"))
        # A transcript without a think block is what a non-thinking request produces.
        self.assertFalse(ca.thinking("hermes", {}, "Hi."))
        self.assertTrue(ca.thinking("hermes", {}, "<think>x</think>Hi."))
        self.assertTrue(ca.thinking("seed_oss", {}, "<seed:think>x</seed:think>"))
        self.assertTrue(ca.thinking("hermes", {"starting_state": "reasoning"}, "x</think>Hi."))
        self.assertFalse(ca.thinking("llama3_json", {}, "<think>"))
        # A think tag inside a call's argument is its text, not a think block.
        inside = "<tool_call>write_file<arg_key>c</arg_key><arg_value>say <think>hi</think></arg_value></tool_call>"
        self.assertFalse(ca.thinking("glm47", {}, inside))
        self.assertTrue(ca.thinking("glm47", {}, inside + "<think>next</think>"))
        between = "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|><think>x</think>"
        self.assertTrue(ca.thinking("kimi_k2", {}, between))
        self.assertFalse(ca.thinking("mistral_v11", {}, '[TOOL_CALLS]f[ARGS]{"a": "[THINK]"}'))
        # Kimi K3's template thinks unless the request turns it off.
        self.assertTrue(ca.thinking("kimi_k3", {}, "Need the weather.<|close|>think<|sep|>"))
        self.assertFalse(ca.thinking("kimi_k3", {"thinking": False}, "Hi."))
        self.assertEqual(
            ca.chat_template_kwargs("glm47", {}, "Hi."), {"enable_thinking": False, "thinking": False}
        )
        self.assertTrue(ca.opens_reasoning({"starting_state": "reasoning"}))
        self.assertFalse(ca.opens_reasoning({"starting_state": "none"}))

    def test_a_delta_is_encoded_with_the_formats_tokenizer(self):
        tok = ca.MiniTokenizer("hermes")
        d = ca.kit.Delta("a<tool_call>", [64, 999])
        self.assertEqual(ca.delta_ids(d, tok), [ca.CHAR_BASE + ord("a"), 151657])


class CommandLineTest(unittest.TestCase):
    def parse(self, argv):
        return ca.command_line("an engine", "parser help", "reasoning help", argv)

    def test_overrides_and_the_reasoning_switch(self):
        self.assertEqual(self.parse([]), ({}, False))
        got = self.parse(["--parser", "hermes=qwen25", "--reasoning", "--parser=a=b=c"])
        self.assertEqual(got, ({"hermes": "qwen25", "a": "b=c"}, True))
        # The last override of a format wins, as the command line reads.
        self.assertEqual(self.parse(["--parser", "x=1", "--parser", "x=2"]), ({"x": "2"}, False))

    def test_an_override_that_is_not_format_eq_name_is_a_usage_error(self):
        stderr = sys.stderr
        for bad in ["hermes", "=qwen25", "hermes="]:
            sys.stderr = io.StringIO()
            try:
                with self.assertRaises(SystemExit) as exit:
                    self.parse(["--parser", bad])
                self.assertEqual(exit.exception.code, 2, bad)
                self.assertIn("is not FORMAT=NAME", sys.stderr.getvalue())
            finally:
                sys.stderr = stderr

    def test_the_variant_name_says_what_the_command_line_changed(self):
        self.assertEqual(ca.variant_name("e 1", False, {}), "e 1")
        self.assertEqual(
            ca.variant_name("e 1", True, {"z": "n", "a": "m"}), "e 1 + reasoning parsers (a=m, z=n)"
        )


class StubsTest(unittest.TestCase):
    def test_a_stubbed_package_imports_and_is_anything(self):
        stubs.install(["conform_test_heavy"], {"conform_test_heavy": "9.9"})
        import importlib.metadata

        from conform_test_heavy.sub import Thing  # noqa: F401 (imports through the stub)

        class Derived(Thing):
            pass

        Derived(1, x=2)
        self.assertEqual(type(Thing.attr.call(3)).__name__, "_Stub")
        self.assertEqual(importlib.metadata.version("conform-test-heavy"), "9.9")
        self.assertFalse(Thing)


if __name__ == "__main__":
    unittest.main()
