"""What the Python engine adapters share beyond conform's adapter kit (`python/conform_adapter`:
the protocol, a server's deltas, the OpenAI client's assembly of tool-call deltas): a minimal
tokenizer over each format's special tokens, what a request asks of the engine (thinking on or
off, the prompt's open reasoning), and the command line of the engine.json variants.

Python 3.11, standard library only (the engines bring their own dependencies).
"""

import argparse
import base64
import json
import os
import sys
from collections import Counter

# The adapter kit, from the repository (it is also what `pip install conform` ships).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
import conform_adapter as kit  # noqa: E402

# Each format's special tokens, as conform declares them (`special_tokens` in
# src/formats/<id>.rs: text and, where the tokenizer is public, its id). conform's token-aligned
# replays send these ids for these texts; tokens declared without an id get one of our own
# (SYNTHETIC_BASE + k), which the tokenizer below reports in its vocabulary all the same.
_DEEPSEEK = [
    ("<｜end▁of▁sentence｜>", 1),
    ("<think>", 128798),
    ("</think>", 128799),
    ("<｜tool▁calls▁begin｜>", 128806),
    ("<｜tool▁calls▁end｜>", 128807),
    ("<｜tool▁call▁begin｜>", 128808),
    ("<｜tool▁call▁end｜>", 128809),
    ("<｜tool▁sep｜>", 128814),
]
# DeepSeek-V4's sentinel `｜DSML｜` (128825) is an added token that is not special: left out,
# since every token here is special to the parsers (skip_special_tokens would drop it).
_DEEPSEEK_V4 = [
    ("<｜end▁of▁sentence｜>", 1),
    ("<think>", 128821),
    ("</think>", 128822),
]
_GLM = [
    ("<tool_call>", 151352),
    ("</tool_call>", 151353),
    ("<arg_key>", 151356),
    ("</arg_key>", 151357),
    ("<arg_value>", 151358),
    ("</arg_value>", 151359),
    ("<think>", None),
    ("</think>", None),
    ("<|user|>", None),
    ("<|observation|>", None),
]
SPECIAL_TOKENS = {
    "kimi_k3": [
        ("<|end_of_msg|>", 163586),
        ("<|open|>", 163587),
        ("<|close|>", 163588),
        ("<|sep|>", 163589),
    ],
    "kimi_k2": [
        ("[EOS]", 163585),
        ("<|im_end|>", 163586),
        ("<|im_user|>", 163587),
        ("<|im_assistant|>", 163588),
        ("[EOT]", 163593),
        ("<|im_system|>", 163594),
        ("<|tool_calls_section_begin|>", 163595),
        ("<|tool_calls_section_end|>", 163596),
        ("<|tool_call_begin|>", 163597),
        ("<|tool_call_argument_begin|>", 163598),
        ("<|tool_call_end|>", 163599),
        ("<|im_middle|>", 163601),
    ],
    "hermes": [
        ("<|endoftext|>", 151643),
        ("<|im_start|>", 151644),
        ("<|im_end|>", 151645),
        ("<tool_call>", 151657),
        ("</tool_call>", 151658),
        ("<think>", 151667),
        ("</think>", 151668),
    ],
    "qwen3_coder": [
        ("<|im_end|>", 151645),
        ("<tool_call>", 151657),
        ("</tool_call>", 151658),
        ("<think>", 151667),
        ("</think>", 151668),
    ],
    "deepseek_v3": _DEEPSEEK,
    "deepseek_v31": _DEEPSEEK,
    "deepseek_v32": [("<｜end▁of▁sentence｜>", 1)],
    "deepseek_v4": _DEEPSEEK_V4,
    "deepseek_v41": _DEEPSEEK_V4,
    "glm45": _GLM,
    "glm47": _GLM,
    "llama3_json": [
        ("<|begin_of_text|>", 128000),
        ("<|end_of_text|>", 128001),
        ("<|start_header_id|>", 128006),
        ("<|end_header_id|>", 128007),
        ("<|eom_id|>", 128008),
        ("<|eot_id|>", 128009),
        ("<|python_tag|>", 128010),
    ],
    "mistral": [("</s>", 2), ("[TOOL_CALLS]", 5)],
    "mistral_v11": [
        ("</s>", 2),
        ("[TOOL_CALLS]", 9),
        ("[ARGS]", 32),
        ("[CALL_ID]", 33),
        ("[THINK]", None),
        ("[/THINK]", None),
    ],
    "pythonic": [
        ("<|eom|>", 200007),
        ("<|eot|>", 200008),
        ("<|python_start|>", 200016),
        ("<|python_end|>", 200017),
        ("<|eom_id|>", 128008),
        ("<|eot_id|>", 128009),
    ],
    "minimax_m2": [
        ("<minimax:tool_call>", None),
        ("</minimax:tool_call>", None),
        ("<think>", None),
        ("</think>", None),
        ("[e~[", None),
    ],
    "seed_oss": [
        ("<seed:eos>", None),
        ("<seed:tool_call>", None),
        ("</seed:tool_call>", None),
        ("<seed:think>", None),
        ("</seed:think>", None),
        ("<seed:cot_budget_reflect>", None),
    ],
    "gemma4": [
        ("<eos>", None),
        ("<|tool>", 46),
        ("<tool|>", 47),
        ("<|tool_call>", 48),
        ("<tool_call|>", 49),
        ("<|tool_response>", 50),
        ("<tool_response|>", 51),
        ('<|"|>', 52),
        ("<|think|>", 98),
        ("<|channel>", 100),
        ("<channel|>", 101),
        ("<|turn>", 105),
        ("<turn|>", 106),
    ],
    "minimax_m3": [
        ("]<]minimax[>[", 200058),
        ("<mm:think>", None),
        ("</mm:think>", None),
        ("[e~[", None),
    ],
    "step3": [
        ("<｜tool_calls_begin｜>", None),
        ("<｜tool_calls_end｜>", None),
        ("<｜tool_call_begin｜>", None),
        ("<｜tool_sep｜>", None),
        ("<｜tool_call_end｜>", None),
        ("<think>", None),
        ("</think>", None),
    ],
    "xlam": [("<|end_of_text|>", 128001), ("<|eot_id|>", 128009)],
}

#: Declared tokens that the model's tokenizer has as added but not special tokens: decoding with
#: special tokens skipped (the serving default) keeps them. MiniMax-M3's markers are such tokens
#: (vLLM's `MinimaxM3Parser.adjust_request` relies on it).
NOT_SPECIAL = {
    "minimax_m3": {"]<]minimax[>[", "<mm:think>", "</mm:think>"},
}

#: Ids given to special tokens conform declares without one.
SYNTHETIC_BASE = 1_000_000
#: Ordinary text is one token per character, id CHAR_BASE + code point (see MiniTokenizer).
CHAR_BASE = 2_000_000


class MiniTokenizer:
    """A tokenizer with just what a server's tool parser asks of one.

    Its vocabulary is the format's special tokens, with the ids conform declares for them (so the
    ids of conform's token-aligned replays are this tokenizer's ids for those tokens); ordinary
    text is one token per character. conform encodes ordinary text with o200k_base, whose ids no
    tokenizer here can decode and which may even equal a special id of the model's own
    vocabulary (o200k's token 151657 is ordinary text; Qwen's is `<tool_call>`): parsers decode
    ids to find where a special token sits in the text, so the adapter encodes every delta with
    this tokenizer (same cuts, same special ids) rather than pass o200k ids it cannot decode.
    """

    def __init__(self, fmt):
        self.special = {}
        for k, (text, tid) in enumerate(SPECIAL_TOKENS.get(fmt, [])):
            self.special[text] = tid if tid is not None else SYNTHETIC_BASE + k
        self.by_id = {tid: text for text, tid in self.special.items()}
        self.kept = NOT_SPECIAL.get(fmt, set())
        # Longest first, so a token that is a prefix of another never wins.
        self.order = sorted(self.special, key=len, reverse=True)
        self.name_or_path = f"conform-mini-{fmt}"

    # -- encoding -------------------------------------------------------------------------
    def encode(self, text, add_special_tokens=False, **kwargs):
        ids = []
        i = 0
        while i < len(text):
            for tok in self.order:
                if text.startswith(tok, i):
                    ids.append(self.special[tok])
                    i += len(tok)
                    break
            else:
                ids.append(CHAR_BASE + ord(text[i]))
                i += 1
        return ids

    def __call__(self, text, add_special_tokens=False, **kwargs):
        return {"input_ids": self.encode(text)}

    def tokenize(self, text, **kwargs):
        return self.convert_ids_to_tokens(self.encode(text))

    def decode(self, ids, skip_special_tokens=False, **kwargs):
        if isinstance(ids, int):
            ids = [ids]
        out = []
        for i in ids:
            if i in self.by_id:
                if not skip_special_tokens or self.by_id[i] in self.kept:
                    out.append(self.by_id[i])
            elif i >= CHAR_BASE:
                out.append(chr(i - CHAR_BASE))
        return "".join(out)

    def convert_ids_to_tokens(self, ids, skip_special_tokens=False):
        if isinstance(ids, int):
            return self.decode([ids])
        return [self.decode([i]) for i in ids]

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._token_id(tokens)
        return [self._token_id(t) for t in tokens]

    def _token_id(self, token):
        if token in self.special:
            return self.special[token]
        if len(token) == 1:
            return CHAR_BASE + ord(token)
        return None

    def convert_tokens_to_string(self, tokens):
        return "".join(tokens)

    # -- vocabulary ------------------------------------------------------------------------
    def get_vocab(self):
        return dict(self.special)

    @property
    def vocab(self):
        return self.get_vocab()

    @property
    def all_special_tokens(self):
        return [t for t in self.special if t not in self.kept]

    @property
    def all_special_ids(self):
        return [i for t, i in self.special.items() if t not in self.kept]

    @property
    def additional_special_tokens(self):
        return self.all_special_tokens

    @property
    def vocab_size(self):
        return CHAR_BASE + 0x110000

    def __len__(self):
        return self.vocab_size

    @property
    def max_token_id(self):
        return self.vocab_size - 1

    eos_token = None
    eos_token_id = None
    bos_token = None
    bos_token_id = None
    pad_token_id = None
    unk_token_id = None


def _byte_chars():
    """The byte-level alphabet of tokenizer.json BPE vocabularies: each byte's character."""
    out, shifted = [], 0
    for b in range(256):
        if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF:
            out.append(chr(b))
        else:
            shifted += 1
            out.append(chr(255 + shifted))
    return out


class ModelVocabulary:
    """A model vocabulary as conform names it in a token-aligned turn (`tokenizer`: its name,
    its file in conform's cache, and special tokens the file does not carry; specs/adapter.md
    §2.2): every id's bytes and the special tokens, read from the same file conform cut the
    replay with (a tiktoken ranks file, a tokenizer.json or a tekken JSON)."""

    _loaded = {}

    @classmethod
    def of(cls, info):
        key = (info.get("file"), json.dumps(info.get("special") or []))
        if key not in cls._loaded:
            cls._loaded[key] = cls(info)
        return cls._loaded[key]

    def __init__(self, info):
        self.name = info.get("name", "")
        self.pieces = {}  # id -> bytes of every ordinary token
        self.special = {}  # text -> id of every special or added token
        path = info["file"]
        with open(path, "rb") as f:
            data = f.read()
        if data.lstrip()[:1] != b"{":
            for line in data.splitlines():
                if line.strip():
                    tok, rank = line.split()
                    self.pieces[int(rank)] = base64.b64decode(tok)
        else:
            doc = json.loads(data)
            if "vocab" in doc and "config" in doc:  # tekken: control tokens first
                n = doc["config"]["default_num_special_tokens"]
                inner = doc["config"]["default_vocab_size"] - n
                for i, v in enumerate(doc["vocab"][:inner]):
                    self.pieces[i + n] = base64.b64decode(v["token_bytes"])
                for t in doc.get("special_tokens") or []:
                    self.special[t["token_str"]] = t["rank"]
            else:
                unchar = {c: b for b, c in enumerate(_byte_chars())}
                for tok, i in doc["model"]["vocab"].items():
                    if all(c in unchar for c in tok):
                        self.pieces[i] = bytes(unchar[c] for c in tok)
                for t in doc.get("added_tokens") or []:
                    self.special[t["content"]] = t["id"]
        for text, i in info.get("special") or []:
            self.special = {t: j for t, j in self.special.items() if j != i}
            self.special[text] = i
        for i in self.special.values():
            self.pieces.pop(i, None)


class ModelTokenizer(MiniTokenizer):
    """The stub tokenizer over a model's own vocabulary: the ids conform sent are this
    vocabulary's, so decoding them gives the text the server's detokenizer would, special
    tokens included. Encoding (parsers rarely do) splits special tokens whole and writes
    ordinary text with the longest vocabulary tokens, so ids and text stay consistent (a real
    BPE may choose other tokens for the same text)."""

    def __init__(self, fmt, vocabulary):
        self.vocabulary = vocabulary
        self.special = dict(vocabulary.special)
        # The format's special tokens the vocabulary does not hold keep conform's ids.
        for k, (text, tid) in enumerate(SPECIAL_TOKENS.get(fmt, [])):
            self.special.setdefault(text, tid if tid is not None else SYNTHETIC_BASE + k)
        self.by_id = {tid: text for text, tid in self.special.items()}
        self.order = sorted(self.special, key=len, reverse=True)
        self.name_or_path = f"conform-{vocabulary.name}"
        self.by_bytes = {b: i for i, b in vocabulary.pieces.items()}
        self.longest = max((len(b) for b in self.by_bytes), default=1)

    def encode(self, text, add_special_tokens=False, **kwargs):
        ids, i = [], 0
        while i < len(text):
            for tok in self.order:
                if text.startswith(tok, i):
                    ids.append(self.special[tok])
                    i += len(tok)
                    break
            else:
                j = i + 1
                while j < len(text) and not any(text.startswith(t, j) for t in self.order):
                    j += 1
                ids.extend(self._ordinary(text[i:j].encode("utf-8")))
                i = j
        return ids

    def _ordinary(self, data):
        out, i = [], 0
        while i < len(data):
            for n in range(min(self.longest, len(data) - i), 0, -1):
                tid = self.by_bytes.get(data[i : i + n])
                if tid is not None:
                    out.append(tid)
                    i += n
                    break
            else:
                raise ValueError(f"byte {data[i]:#x} has no token in {self.vocabulary.name}")
        return out

    def decode(self, ids, skip_special_tokens=False, **kwargs):
        if isinstance(ids, int):
            ids = [ids]
        out = bytearray()
        for i in ids:
            if i in self.by_id:
                if not skip_special_tokens:
                    out += self.by_id[i].encode("utf-8")
            else:
                out += self.vocabulary.pieces.get(i, b"")
        return out.decode("utf-8", errors="replace")

    def _token_id(self, token):
        if token in self.special:
            return self.special[token]
        return self.by_bytes.get(token.encode("utf-8"))

    @property
    def vocab_size(self):
        return max(list(self.vocabulary.pieces) + list(self.by_id), default=0) + 1


def tokenizer_for(fmt, turn):
    """The stub tokenizer an engine is built with for this turn: the model's own vocabulary when
    conform cut the turn with it (its ids are then the model's: `turn.tokenizer` names the
    file), else the format's MiniTokenizer."""
    info = getattr(turn, "tokenizer", None)
    if info and info.get("file") and getattr(turn, "token_ids", None):
        return ModelTokenizer(fmt, ModelVocabulary.of(info))
    return MiniTokenizer(fmt)


def check_token_ids(turn, tokenizer):
    """Checks the special-token table against the ids conform sent with a token-aligned turn:
    every special token this tokenizer finds in the turn must be among conform's ids (conform's
    list may hold more: its ordinary o200k ids can equal a special id). A mismatch means
    SPECIAL_TOKENS no longer matches conform's `special_tokens`; it is an adapter error rather
    than a silently different tokenization."""
    ids = turn.get("token_ids")
    if not ids or isinstance(tokenizer, ModelTokenizer):
        return
    sent = Counter(i for chunk in ids for i in chunk if i in tokenizer.by_id)
    text = b"".join(turn["chunks"]).decode("utf-8", errors="replace")
    found = Counter(i for i in tokenizer.encode(text) if i in tokenizer.by_id)
    missing = found - sent
    if missing:
        shown = ", ".join(repr(tokenizer.by_id[i]) for i in missing)
        raise ValueError(f"special tokens {shown} do not have the ids conform sent: SPECIAL_TOKENS is out of date")


def _override(arg):
    fmt, sep, name = arg.partition("=")
    if not (fmt and sep and name):
        raise argparse.ArgumentTypeError(f"{arg!r} is not FORMAT=NAME")
    return fmt, name


def command_line(description, parser_help, reasoning_help, argv=None):
    """The engine adapters' command line (the `args` of their engine.json variants):
    `--parser FORMAT=NAME`, repeated, judges the engine's parser NAME on the conform format
    FORMAT instead of the one its table names; `--reasoning` runs the engine's reasoning parsers
    too. Returns (the overrides as a dict, the reasoning switch)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument(
        "--parser",
        action="append",
        default=[],
        type=_override,
        metavar="FORMAT=NAME",
        help=parser_help,
    )
    ap.add_argument("--reasoning", action="store_true", help=reasoning_help)
    args = ap.parse_args(argv)
    return dict(args.parser), args.reasoning


def variant_name(title, reasoning, overrides):
    """The hello's name of a variant: the engine's title, then what the command line changed."""
    shown = ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    name = title + (" + reasoning parsers" if reasoning else "")
    return name + (f" ({shown})" if shown else "")


def delta_ids(delta, tokenizer):
    """The ids a server's parser gets with a delta, in the model's vocabulary: conform's own
    (`delta.token_ids`) when the turn was cut with the model's vocabulary and the engine's
    tokenizer is that vocabulary (a ModelTokenizer); otherwise the delta's text encoded with the
    format's minimal tokenizer (same cuts, the model's special ids)."""
    if isinstance(tokenizer, ModelTokenizer) and delta.token_ids is not None:
        return list(delta.token_ids)
    return tokenizer.encode(delta.text)


#: The tag that opens reasoning, per format, where its models think in the text.
THINK_OPEN = {
    "hermes": "<think>",
    "qwen3_coder": "<think>",
    "kimi_k2": "<think>",
    "deepseek_v3": "<think>",
    "deepseek_v31": "<think>",
    "deepseek_v32": "<think>",
    "deepseek_v4": "<think>",
    "deepseek_v41": "<think>",
    "glm45": "<think>",
    "glm47": "<think>",
    "minimax_m2": "<think>",
    "seed_oss": "<seed:think>",
    "mistral_v11": "[THINK]",
    "step3": "<think>",
    "olmo3": "<think>",
    "xlam": "<think>",
}


#: Where a call opens and closes, per format with a think tag: a think tag between them is an
#: argument's content, not a think block (a call with no closer runs to the end of the output).
CALL_SPAN = {
    "hermes": ("<tool_call>", "</tool_call>"),
    "qwen3_coder": ("<tool_call>", "</tool_call>"),
    "kimi_k2": ("<|tool_call_begin|>", "<|tool_call_end|>"),
    "deepseek_v3": ("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"),
    "deepseek_v31": ("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"),
    "deepseek_v32": ("<｜DSML｜invoke", "</｜DSML｜invoke>"),
    "deepseek_v4": ("<｜DSML｜invoke", "</｜DSML｜invoke>"),
    "deepseek_v41": ("<｜DSML｜ invoke", "</｜DSML｜ invoke>"),
    "glm45": ("<tool_call>", "</tool_call>"),
    "glm47": ("<tool_call>", "</tool_call>"),
    "minimax_m2": ("<invoke", "</invoke>"),
    "seed_oss": ("<seed:tool_call>", "</seed:tool_call>"),
    "mistral_v11": ("[TOOL_CALLS]", None),
    "step3": ("<｜tool_call_begin｜>", "<｜tool_call_end｜>"),
    "olmo3": ("<function_calls>", "</function_calls>"),
}


def holds_think_block(fmt, text):
    """Whether `text` opens a think block outside every call (a think tag inside an
    argument, `content="say <think>hi</think>"`, is the argument's text)."""
    tag = THINK_OPEN.get(fmt)
    if not tag:
        return False
    open_, close = CALL_SPAN.get(fmt, (None, None))
    at = 0
    while True:
        k = text.find(tag, at)
        if k < 0:
            return False
        if open_ is None:
            return True
        start = text.rfind(open_, 0, k)
        inside = start >= 0 and (close is None or text.find(close, start, k) < 0)
        if not inside:
            return True
        at = k + len(tag)


#: Formats whose chat template thinks unless the request turns it off: the prompt opens the
#: think channel, so the output starts inside it with no opening tag (Kimi K3: `thinking`
#: defaults to on, and its reasoning parser's default is on too).
THINKS_BY_DEFAULT = {"kimi_k3"}


def thinking(fmt, mode, text):
    """Whether the request switched thinking on: the case's `thinking` when it sets one; else
    on when the template opened reasoning in the prompt (`starting_state: reasoning`), the
    format's template thinks by default, or the transcript holds a think block outside its
    calls; off otherwise (a transcript without one is what a non-thinking request produces)."""
    if "thinking" in mode:
        return bool(mode["thinking"])
    if mode.get("starting_state") == "reasoning" or fmt in THINKS_BY_DEFAULT:
        return True
    return holds_think_block(fmt, text)


def chat_template_kwargs(fmt, mode, text):
    """The request's `chat_template_kwargs` as a client sets them for this case."""
    on = thinking(fmt, mode, text)
    return {"enable_thinking": on, "thinking": on}


def openai_tool_choice(choice):
    """The request's tool_choice in the OpenAI shape servers validate: conform's named choice
    `{"name": N}` is `{"type": "function", "function": {"name": N}}` on the wire."""
    if isinstance(choice, dict) and "name" in choice and "function" not in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def opens_reasoning(mode):
    """Whether the prompt ended inside reasoning (the template opened the think block)."""
    return mode.get("starting_state") == "reasoning"


class TurnView:
    """What `check_token_ids` reads of a kit turn."""

    def __init__(self, turn):
        self.turn = turn

    def get(self, key, default=None):
        if key == "token_ids":
            return self.turn.token_ids
        if key == "chunks":
            return self.turn.chunks
        return default

    __getitem__ = get
