"""Prompts of exactly N input tokens, with the served model's tokenizer.

The count that matters is what the server sees: ``encode(text,
add_special_tokens=True)``, BOS included, so the content is built to N minus
the special tokens the tokenizer adds, then checked. Sources: random tokens,
the bundled instruction data, a ShareGPT-format JSON file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

PromptSource = Literal["random", "instructions", "sharegpt"]
PROMPT_SOURCES: tuple[str, ...] = ("random", "instructions", "sharegpt")


class PromptLengthError(ValueError):
    """A prompt could not be built to the exact token count."""


class TokenizerUnavailableError(RuntimeError):
    """No tokenizer could be loaded for building prompts."""


class UnknownPromptSourceError(KeyError):
    def __init__(self, name: str):
        super().__init__(f"unknown prompt source {name!r}; valid sources: {', '.join(PROMPT_SOURCES)}")

    def __str__(self) -> str:
        return self.args[0]


class PromptTokenizer(Protocol):
    name: str

    def encode(self, text: str, add_special_tokens: bool) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def content_ids(self) -> list[int]: ...

    def chat_count(self, text: str) -> int | None:
        """Tokens the server sees for ``text`` as one user message (None: no chat template known)."""
        ...

    def conversation_count(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        """Tokens the server sees for a conversation through the chat template (None: no template known)."""
        ...


class HfTokenizer:
    """A ``tokenizers`` tokenizer.json (fast to load); AutoTokenizer only when there is none."""

    def __init__(self, path: str | Path):
        path = Path(path)
        self.name = str(path)
        self._content: list[int] | None = None
        self._path = path
        self._chat: object | None = None
        file = path / "tokenizer.json" if path.is_dir() else path
        if file.name == "tokenizer.json" and file.exists():
            from tokenizers import Tokenizer

            self._tok = Tokenizer.from_file(str(file))
            self._fast = True
        else:
            try:
                from transformers import AutoTokenizer

                self._tok = AutoTokenizer.from_pretrained(str(path))
            except (OSError, ValueError) as exc:
                raise TokenizerUnavailableError(f"cannot load a tokenizer from {path}: {exc}") from exc
            self._fast = False

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        if self._fast:
            return self._tok.encode(text, add_special_tokens=add_special_tokens).ids
        return self._tok(text, add_special_tokens=add_special_tokens)["input_ids"]

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)

    def content_ids(self) -> list[int]:
        """Non-special ids that decode to whole characters (no partial UTF-8 byte tokens)."""
        if self._content is None:
            self._content = [i for i in self._vocab_ids() if "\ufffd" not in self.decode([i]) and self.decode([i])]
        return self._content

    def chat_count(self, text: str) -> int | None:
        return self.conversation_count([{"role": "user", "content": text}])

    def conversation_count(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        """Tokens the server sees for ``messages`` through the model's chat template, the generation prompt
        included (None: no chat template known)."""
        if self._chat is None:
            try:
                from transformers import AutoTokenizer

                tok = AutoTokenizer.from_pretrained(str(self._path))
                self._chat = tok if getattr(tok, "chat_template", None) else False
            except (OSError, ValueError, ImportError):
                self._chat = False
        if self._chat is False:
            return None
        out = self._chat.apply_chat_template(
            [dict(m) for m in messages],
            tokenize=True,
            add_generation_prompt=True,
        )
        ids = out["input_ids"] if isinstance(out, Mapping) or hasattr(out, "keys") else out
        return len(ids)

    def _vocab_ids(self) -> list[int]:
        if self._fast:
            vocab = self._tok.get_vocab(with_added_tokens=True)
            special = {t.content for t in self._tok.get_added_tokens_decoder().values() if t.special}
        else:
            vocab = self._tok.get_vocab()
            special = set(self._tok.all_special_tokens)
        return sorted(i for tok, i in vocab.items() if tok not in special)


class WhitespaceTokenizer:
    """The synthetic server's tokenizer: one token per whitespace-separated word, no special tokens."""

    name = "whitespace"

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return [int(w[1:]) if w[:1] == "t" and w[1:].isdigit() else 0 for w in text.split()]

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(f"t{i}" for i in ids)

    def content_ids(self) -> list[int]:
        return list(range(1000))

    def chat_count(self, text: str) -> int | None:
        return len(text.split())  # the synthetic server counts the message's words

    def conversation_count(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        return sum(len(str(m.get("content") or "").split()) for m in messages)  # the synthetic server's count


def load_tokenizer(spec: str | Path | None, server_kind: str, cache_dir: Path | None = None) -> PromptTokenizer:
    """``spec`` (a tokenizer directory or file, or ``whitespace``); by default the synthetic server's own
    tokenizer for the synthetic server, else the bundled tiny tokenizer."""
    if spec is not None and str(spec) != "":
        return WhitespaceTokenizer() if str(spec) == "whitespace" else HfTokenizer(spec)
    if server_kind == "synthetic":
        return WhitespaceTokenizer()
    try:
        from agents.context import default_cache_dir
        from agents.training.tiny_models import ensure_tokenizer
    except ImportError as exc:
        raise TokenizerUnavailableError(
            f"no --tokenizer given and the bundled tiny tokenizer is unavailable: {exc}"
        ) from exc
    return HfTokenizer(ensure_tokenizer(cache_dir or default_cache_dir()))


def exact_text(
    tok: PromptTokenizer, ids: Sequence[int], n: int, filler: Iterator[int], add_special_tokens: bool = True
) -> str:
    """Text of exactly ``n`` tokens as the server counts them (special tokens included unless told not to)."""
    special = len(tok.encode("", True)) if add_special_tokens else 0
    target = n - special
    if target < 1:
        raise PromptLengthError(f"input length {n} leaves no room after {special} special token(s)")
    work = list(ids[:target])
    for _ in range(64):
        while len(work) < target:
            work.append(next(filler))
        text = tok.decode(work[:target])
        got = tok.encode(text, False)
        if len(got) == target and len(tok.encode(text, add_special_tokens)) == n:
            return text
        work = got[:target] if len(got) > target else got
    raise PromptLengthError(f"could not build a prompt of exactly {n} tokens with {tok.name}")


@dataclass(frozen=True)
class BuiltPrompt:
    text: str
    tokens: int  # as the server should count them (special tokens included)


def _filler(tok: PromptTokenizer, rng: np.random.Generator) -> Iterator[int]:
    ids = np.asarray(tok.content_ids())
    while True:
        yield from ids[rng.integers(0, len(ids), size=256)].tolist()


def _instruction_texts() -> list[str]:
    from agents.training.data import load_instructions, user_message

    return [user_message(r) for r in load_instructions().records]


def _sharegpt_texts(path: str | Path) -> list[str]:
    data = json.loads(Path(path).read_text())
    out = []
    for conv in data:
        turns = conv.get("conversations") or conv.get("conversation") or []
        for turn in turns:
            if turn.get("from") in ("human", "user") and turn.get("value"):
                out.append(turn["value"])
                break
    if not out:
        raise PromptLengthError(f"{path}: no human turn found (expected ShareGPT format)")
    return out


def build_prompts(
    tok: PromptTokenizer,
    n_prompts: int,
    input_len: int,
    source: str = "random",
    seed: int = 0,
    sharegpt_path: str | Path | None = None,
    chat: bool = False,
) -> list[BuiltPrompt]:
    """``n_prompts`` distinct prompts of exactly ``input_len`` tokens (for ``chat``: once the server has applied
    the chat template, when the tokenizer has one; else the content alone is exact and the server's count is
    checked against the request)."""
    if source not in PROMPT_SOURCES:
        raise UnknownPromptSourceError(source)
    rng = np.random.default_rng(seed)
    filler = _filler(tok, rng)
    texts: list[str] = []
    if source == "instructions":
        texts = _instruction_texts()
    elif source == "sharegpt":
        if not sharegpt_path:
            raise PromptLengthError("prompt source sharegpt needs a file (sharegpt_path)")
        texts = _sharegpt_texts(sharegpt_path)
    out = []
    for i in range(n_prompts):
        if texts:
            ids: list[int] = []
            j = (i + int(rng.integers(0, len(texts)))) % len(texts)
            while len(ids) < input_len:  # concatenate texts until long enough, then cut
                ids += tok.encode(texts[j % len(texts)] + "\n", False)
                j += 1
        else:
            ids = [next(filler) for _ in range(input_len)]
        out.append(
            BuiltPrompt(
                _chat_text(tok, ids, input_len, filler) if chat else exact_text(tok, ids, input_len, filler), input_len
            )
        )
    return out


def _chat_text(tok: PromptTokenizer, ids: Sequence[int], n: int, filler: Iterator[int]) -> str:
    """Content whose templated message is exactly ``n`` tokens: adjust the content length by the miss."""
    content_n = n
    for _ in range(8):
        text = exact_text(tok, ids, content_n, filler, add_special_tokens=False)
        got = tok.chat_count(text)
        if got is None or got == n:
            return text
        content_n += n - got
        if content_n < 1:
            break
    raise PromptLengthError(
        f"could not build a chat prompt of exactly {n} tokens with {tok.name} "
        "(the chat template leaves no room or does not tokenize stably)"
    )
