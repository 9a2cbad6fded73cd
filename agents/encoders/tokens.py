"""The word-hash tokenizer of the tiny text families: no vocabulary file, nothing downloaded.

A word (``\\w+``, lower-cased) maps to a stable id (CRC-32 modulo the vocabulary, past the special ids), so the
same text gives the same ids on every machine and two texts that share words share ids. Sequences are padded
to a static length (what a traced graph needs) with an attention mask.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PAD, CLS, SEP = 0, 1, 2
FIRST_WORD_ID = 3
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class WordHashTokenizer:
    vocab_size: int
    max_len: int

    def word_ids(self, text: str) -> list[int]:
        span = self.vocab_size - FIRST_WORD_ID
        return [FIRST_WORD_ID + zlib.crc32(w.lower().encode()) % span for w in _WORD.findall(text)]

    def encode(self, text: str) -> list[int]:
        """``[CLS] words [SEP]``, cut to ``max_len``."""
        ids = [CLS, *self.word_ids(text)][: self.max_len - 1]
        return [*ids, SEP]

    def encode_pair(self, first: str, second: str) -> tuple[list[int], int]:
        """``[CLS] first [SEP] second [SEP]`` cut to ``max_len``, and where ``second`` starts. ``first`` keeps at
        most half the length so a long query never pushes the passage out."""
        head = [CLS, *self.word_ids(first)][: self.max_len // 2 - 1] + [SEP]
        tail = self.word_ids(second)[: self.max_len - len(head) - 1] + [SEP]
        return head + tail, len(head)

    def pad(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, mask)`` of shape ``(len(rows), max_len)``, int64, right-padded."""
        ids = np.full((len(rows), self.max_len), PAD, dtype=np.int64)
        mask = np.zeros((len(rows), self.max_len), dtype=np.int64)
        for i, row in enumerate(rows):
            n = min(len(row), self.max_len)
            ids[i, :n] = row[:n]
            mask[i, :n] = 1
        return ids, mask
