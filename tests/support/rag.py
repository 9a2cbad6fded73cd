"""Lexical stand-ins for the rag lane's text models (the encoders' text API): a hashed bag-of-words embedder and a
reranker with a switchable fault, so a test's retrieval outcome is fixed by the corpus alone."""

from __future__ import annotations

import re

import numpy as np

DIM = 512
STATIC_LEN = 48  # the fixed width a static trace pads every pair to


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class LexicalEmbedder:
    """Hashed bag of words, L2-normalised: what survives mean pooling of a tiny random model, without the model."""

    model, dim = "lexical", DIM

    def embed(self, texts: list[str], *, batch_size: int = 8) -> np.ndarray:
        out = np.zeros((len(texts), DIM), np.float32)
        for i, t in enumerate(texts):
            for w in _words(t):
                out[i, sum(map(ord, w)) * 2654435761 % DIM] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class LexicalReranker:
    """Scores a passage by the share of its tokens the question holds, read at the pair's last token.
    ``honour_mask=False`` is the static trace's fault: every pair padded to STATIC_LEN and the score read at the
    graph's last position, a pad for any pair shorter than that, whose value follows the padding alone."""

    model = "lexical-reranker"

    def __init__(self, honour_mask: bool) -> None:
        self.honour_mask = honour_mask

    def score(self, query: str, passages: list[str], *, batch_size: int = 8) -> np.ndarray:
        q = set(_words(query))
        scores = []
        for p in passages:
            toks = _words(p)[: STATIC_LEN - len(q) - 1]
            pads = STATIC_LEN - len(q) - 1 - len(toks)
            last_is_pad = not self.honour_mask and pads > 0
            scores.append(pads / STATIC_LEN if last_is_pad else sum(t in q for t in toks) / max(1, len(toks)))
        return np.asarray(scores, np.float32)
