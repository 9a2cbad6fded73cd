"""A text embedder and a reranker of the encoders' text API, built here from a tiny random-weight BERT (no hub):
what the rag lane runs where :mod:`agents.encoders.text` is not installed.

``TextEmbedder.embed``: mean pooling of the last hidden states over the attention mask, L2-normalised rows.
``Reranker.score``: one forward of ``query [SEP] passage`` per pair, left-padded to the batch's longest; the score
is the cosine of the query tokens' and the passage tokens' mean hidden states. ``honour_mask=False`` is the static
trace's fault the predecessor measured: every pair padded to ``static_len``, the mask ignored (all ones), so the
pads are attended to and pooled with the passage.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

TINY_EMBEDDERS = ("tiny-bert-embedding", "tiny-qwen3-embedding")
TINY_RERANKERS = ("tiny-bert-reranker", "tiny-qwen3-reranker")
HIDDEN = 64


def _tiny_bert(workdir: Path, seed: int) -> tuple[Any, Any]:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from agents.training.tiny_models import ensure_tokenizer

    tok = AutoTokenizer.from_pretrained(ensure_tokenizer(Path(workdir)))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=512,
    )
    model = BertModel(cfg, add_pooling_layer=False).eval()
    return tok, model


@dataclass
class TextEmbedder:
    model: str
    dim: int
    _tok: Any = None
    _net: Any = None

    def embed(self, texts: list[str], *, batch_size: int = 8) -> np.ndarray:
        import torch

        out = []
        for i in range(0, len(texts), batch_size):
            enc = self._tok(texts[i : i + batch_size], padding=True, truncation=True, max_length=256, return_tensors="pt")
            with torch.no_grad():
                h = self._net(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
            out.append(((h * m).sum(1) / m.sum(1).clamp(min=1)).numpy())
        v = np.concatenate(out, axis=0).astype(np.float32) if out else np.zeros((0, self.dim), np.float32)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


@dataclass
class Reranker:
    model: str
    honour_mask: bool = True
    static_len: int = 128
    _tok: Any = None
    _net: Any = None

    def score(self, query: str, passages: list[str], *, batch_size: int = 8) -> np.ndarray:
        import torch

        q_ids = self._tok(query, add_special_tokens=False)["input_ids"][:48]
        sep = self._tok.sep_token_id if self._tok.sep_token_id is not None else self._tok.eos_token_id
        pad = self._tok.pad_token_id
        scores: list[float] = []
        for i in range(0, len(passages), batch_size):
            seqs = []
            for p in passages[i : i + batch_size]:
                p_ids = self._tok(p, add_special_tokens=False)["input_ids"][: self.static_len - len(q_ids) - 1]
                seqs.append((q_ids, p_ids))
            width = self.static_len if not self.honour_mask else max(len(q) + 1 + len(p) for q, p in seqs)
            ids, mask, q_sel, p_sel = [], [], [], []
            for q, p in seqs:
                n_pad = width - (len(q) + 1 + len(p))  # left padding, as the traced reranker's batches were
                ids.append([pad] * n_pad + q + [sep] + p)
                mask.append([0 if self.honour_mask else 1] * n_pad + [1] * (len(q) + 1 + len(p)))
                q_sel.append([0] * n_pad + [1] * len(q) + [0] * (1 + len(p)))
                # the passage's tokens; with the mask ignored, the pads are pooled with it
                p_sel.append([0 if self.honour_mask else 1] * n_pad + [0] * (len(q) + 1) + [1] * len(p))
            t = torch.tensor
            with torch.no_grad():
                h = self._net(input_ids=t(ids), attention_mask=t(mask)).last_hidden_state
            qm, pm = t(q_sel).unsqueeze(-1).float(), t(p_sel).unsqueeze(-1).float()
            qv = (h * qm).sum(1) / qm.sum(1).clamp(min=1)
            pv = (h * pm).sum(1) / pm.sum(1).clamp(min=1)
            scores += torch.nn.functional.cosine_similarity(qv, pv, dim=-1).tolist()
        return np.asarray(scores, dtype=np.float32)


def load_text_embedder(model: str, *, backend: str, workdir: Path, seed: int = 0) -> TextEmbedder:
    if model not in TINY_EMBEDDERS:
        raise ValueError(f"model: {model!r} is not a tiny embedder here ({', '.join(TINY_EMBEDDERS)})")
    tok, net = _tiny_bert(workdir, seed)
    return TextEmbedder(model, HIDDEN, tok, net)


def load_reranker(model: str, *, backend: str, workdir: Path, seed: int = 0, honour_mask: bool = True) -> Reranker:
    if model not in TINY_RERANKERS:
        raise ValueError(f"model: {model!r} is not a tiny reranker here ({', '.join(TINY_RERANKERS)})")
    tok, net = _tiny_bert(workdir, seed + 1)
    return Reranker(model, honour_mask, _tok=tok, _net=net)
