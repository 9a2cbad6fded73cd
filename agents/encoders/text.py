"""Text embedding and reranking: the models the ``encode`` lane times and the RAG appliance embeds and reranks
with, behind two small interfaces.

* :class:`TextEmbedder` — ``embed(texts)`` → ``(n, dim)`` float32, rows L2-normalised. The family's pooling:
  BERT-style encoders mean-pool the hidden states over the attention mask; Qwen3-embedding-style decoders take
  the last real token's hidden state.
* :class:`Reranker` — ``score(query, passages)`` → ``(n,)`` float32, higher = more relevant: a cross-encoder,
  query and passage in one sequence through one forward pass.

Models: ``tiny-bert-embedding``, ``tiny-qwen3-embedding``, ``tiny-bert-reranker``, ``tiny-qwen3-reranker`` are built
from a config on the spot (seeded, nothing downloaded) with the word-hash tokenizer of
:mod:`agents.encoders.tokens`; a local directory holding a Hugging Face checkpoint and its tokenizer loads with
``transformers`` (``local_files_only``). A tiny reranker has no trained relevance head: its score is the cosine
between the mean hidden state of the query's span and of the passage's span of the joint pass, which ranks a
passage sharing the query's words above one that does not — enough for a quality A/B to mean something on
random weights.

``honour_mask=False`` runs the reranker the way a static trace without the attention mask does: every position of
the padded sequence is attended to and the passage's span runs to the end of the padding. Padded batches then
score differently from unpadded ones; that is the degradation it exists to show.

Every batch is padded to ``batch_size`` rows of ``max_len`` tokens: one static shape per model (what a traced graph
needs), the same on every backend.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from agents.encoders.placement import PlacedGraph, graph_key, place
from agents.encoders.tokens import WordHashTokenizer

Pooling = Literal["mean", "last"]
TextTask = Literal["embed", "rerank"]


class UnknownTextModelError(ValueError):
    def __init__(self, model: str, task: str):
        valid = ", ".join(n for n, s in TINY_TEXT_MODELS.items() if s.task == task)
        super().__init__(f"model: {model!r} is not a tiny {task} model ({valid}) nor a local checkpoint directory")


@dataclass(frozen=True)
class TinyTextModel:
    """A tiny text model's recipe: the transformers architecture, its size and how it pools."""

    family: Literal["bert", "qwen3"]
    task: TextTask
    pooling: Pooling
    dim: int = 64
    layers: int = 2
    heads: int = 4
    vocab: int = 8192
    max_len: int = 64

    def config(self) -> Any:
        if self.family == "bert":
            from transformers import BertConfig

            return BertConfig(
                vocab_size=self.vocab,
                hidden_size=self.dim,
                num_hidden_layers=self.layers,
                num_attention_heads=self.heads,
                intermediate_size=self.dim * 2,
                max_position_embeddings=self.max_len,
                pad_token_id=0,
            )
        from transformers import Qwen3Config

        return Qwen3Config(
            vocab_size=self.vocab,
            hidden_size=self.dim,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=max(1, self.heads // 2),
            head_dim=self.dim // self.heads,
            intermediate_size=self.dim * 2,
            max_position_embeddings=self.max_len,
            pad_token_id=0,
            tie_word_embeddings=True,
        )

    def build(self, seed: int) -> Any:
        """The backbone (``BertModel`` / ``Qwen3Model``), weights drawn from ``seed``."""
        import torch
        from transformers import AutoModel

        torch.manual_seed(seed)
        model = AutoModel.from_config(self.config(), attn_implementation="eager")
        return model.float().eval()


TINY_TEXT_MODELS: dict[str, TinyTextModel] = {
    "tiny-bert-embedding": TinyTextModel("bert", "embed", "mean"),
    "tiny-qwen3-embedding": TinyTextModel("qwen3", "embed", "last"),
    "tiny-bert-reranker": TinyTextModel("bert", "rerank", "mean"),
    "tiny-qwen3-reranker": TinyTextModel("qwen3", "rerank", "mean"),
}


def _pool(hidden: Any, weights: Any) -> Any:
    """Mean of ``hidden`` (b, t, d) over positions weighted by ``weights`` (b, t)."""
    w = weights.to(hidden.dtype).unsqueeze(-1)
    return (hidden * w).sum(1) / w.sum(1).clamp(min=1.0)


def _embedding_head(backbone: Any, pooling: Pooling) -> Any:
    import torch

    class EmbeddingHead(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = backbone

        def forward(self, ids: Any, mask: Any) -> Any:
            hidden = self.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
            if pooling == "mean":
                return _pool(hidden, mask)
            last = (mask.sum(1) - 1).clamp(min=0)
            return hidden[torch.arange(hidden.shape[0]), last]

    return EmbeddingHead()


def _span_cosine_head(backbone: Any) -> Any:
    import torch

    class SpanCosineHead(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = backbone

        def forward(self, ids: Any, mask: Any, query: Any, passage: Any) -> Any:
            hidden = self.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
            return torch.nn.functional.cosine_similarity(_pool(hidden, query), _pool(hidden, passage), dim=-1)

    return SpanCosineHead()


def _hf_tokenize(tokenizer: Any, texts: Sequence[str], max_len: int, pairs: Sequence[str] | None = None) -> Any:
    enc = tokenizer(
        list(texts),
        list(pairs) if pairs is not None else None,
        padding="max_length",
        truncation=True,
        max_length=max_len,
        return_tensors="np",
    )
    return enc["input_ids"].astype(np.int64), enc["attention_mask"].astype(np.int64)


@dataclass
class _Loaded:
    graph: PlacedGraph
    tokenizer: Any  # WordHashTokenizer | a transformers tokenizer
    max_len: int
    batch_size: int


class TextEmbedder:
    """``embed(texts)``: one L2-normalised float32 row per text."""

    def __init__(self, model: str, dim: int, runner: Any) -> None:
        self.model = model
        self.dim = dim
        self._runner = runner  # (texts, batch_size) -> (n, dim) float32, not normalised

    def embed(self, texts: Sequence[str], *, batch_size: int = 8) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        raw = np.asarray(self._runner(texts, batch_size), dtype=np.float32)
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        return (raw / np.where(norms > 0, norms, 1.0)).astype(np.float32)


class Reranker:
    """``score(query, passages)``: one float32 relevance score per passage, higher = more relevant."""

    def __init__(self, model: str, runner: Any) -> None:
        self.model = model
        self._runner = runner  # (query, passages, batch_size) -> (n,) float32

    def score(self, query: str, passages: Sequence[str], *, batch_size: int = 8) -> np.ndarray:
        passages = list(passages)
        if not passages:
            return np.zeros((0,), dtype=np.float32)
        return np.asarray(self._runner(query, passages, batch_size), dtype=np.float32).reshape(len(passages))


class _GraphCache:
    """One placed graph per batch size (each is its own static shape)."""

    def __init__(self, make: Any) -> None:
        self._make = make
        self._graphs: dict[int, PlacedGraph] = {}

    def __call__(self, batch_size: int) -> PlacedGraph:
        if batch_size < 1:
            raise ValueError(f"batch_size: {batch_size} is below 1")
        if batch_size not in self._graphs:
            self._graphs[batch_size] = self._make(batch_size)
        return self._graphs[batch_size]


def _batches(n: int, size: int) -> list[range]:
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


def _pad_rows(a: np.ndarray, rows: int) -> np.ndarray:
    if a.shape[0] == rows:
        return a
    pad = np.zeros((rows - a.shape[0], *a.shape[1:]), dtype=a.dtype)
    return np.concatenate([a, pad])


def _resolve(model: str, task: TextTask, seed: int) -> tuple[Any, Any, int, int, Pooling]:
    """(backbone, tokenizer, max_len, dim, pooling) of a tiny name or a local checkpoint directory."""
    spec = TINY_TEXT_MODELS.get(model)
    if spec is not None:
        if spec.task != task:
            raise UnknownTextModelError(model, task)
        return spec.build(seed), WordHashTokenizer(spec.vocab, spec.max_len), spec.max_len, spec.dim, spec.pooling
    path = Path(model)
    if not (path.is_dir() and (path / "config.json").is_file()):
        raise UnknownTextModelError(model, task)
    from transformers import AutoModel, AutoTokenizer

    backbone = AutoModel.from_pretrained(path, local_files_only=True).float().eval()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    cfg = backbone.config
    pooling: Pooling = "last" if cfg.model_type.startswith("qwen") and task == "embed" else "mean"
    max_len = int(min(getattr(cfg, "max_position_embeddings", 512), 512))
    return backbone, tokenizer, max_len, int(cfg.hidden_size), pooling


def load_text_embedder(model: str, *, backend: str, workdir: Path, seed: int = 0) -> TextEmbedder:
    """A text embedder on ``backend`` (``workdir``: where a neuron trace keeps its artifacts, unless the box's
    compile cache is set)."""
    backbone, tokenizer, max_len, dim, pooling = _resolve(model, "embed", seed)
    head = _embedding_head(backbone, pooling)

    def make(batch: int) -> PlacedGraph:
        ex = np.zeros((batch, max_len), dtype=np.int64)
        ex_mask = np.ones_like(ex)
        key = graph_key(f"embed-{Path(model).name}", [ex.shape, ex.shape], {"seed": seed, "pooling": pooling})
        return place(head, [ex, ex_mask], backend=backend, key=key, cache_dir=_cache_dir(backend, workdir))

    graphs = _GraphCache(make)

    def run(texts: list[str], batch_size: int) -> np.ndarray:
        if isinstance(tokenizer, WordHashTokenizer):
            ids, mask = tokenizer.pad([tokenizer.encode(t) for t in texts])
        else:
            ids, mask = _hf_tokenize(tokenizer, texts, max_len)
        graph = graphs(batch_size)
        out = []
        for rows in _batches(len(texts), batch_size):
            sl = slice(rows.start, rows.stop)
            (emb,) = graph.call(_pad_rows(ids[sl], batch_size), _pad_rows(mask[sl], batch_size))
            out.append(emb[: len(rows)])
        return np.concatenate(out)

    return TextEmbedder(model, dim, run)


def load_reranker(model: str, *, backend: str, workdir: Path, seed: int = 0, honour_mask: bool = True) -> Reranker:
    """A cross-encoder reranker on ``backend``; ``honour_mask=False``: the attention mask ignored (module doc)."""
    backbone, tokenizer, max_len, _dim, _pooling = _resolve(model, "rerank", seed)
    head = _span_cosine_head(backbone)

    def make(batch: int) -> PlacedGraph:
        ex = np.zeros((batch, max_len), dtype=np.int64)
        spans = np.ones((batch, max_len), dtype=np.float32)
        key = graph_key(f"rerank-{Path(model).name}", [ex.shape] * 4, {"seed": seed})
        return place(
            head, [ex, np.ones_like(ex), spans, spans], backend=backend, key=key, cache_dir=_cache_dir(backend, workdir)
        )

    graphs = _GraphCache(make)

    def encode_pairs(query: str, passages: list[str]) -> tuple[np.ndarray, ...]:
        if isinstance(tokenizer, WordHashTokenizer):
            pairs = [tokenizer.encode_pair(query, p) for p in passages]
            ids, mask = tokenizer.pad([ids for ids, _ in pairs])
            starts = np.array([start for _, start in pairs])
            ends = mask.sum(1) - 1  # the closing [SEP]
        else:
            ids, mask = _hf_tokenize(tokenizer, [query] * len(passages), max_len, passages)
            q_len = len(tokenizer(query, truncation=True, max_length=max_len // 2)["input_ids"])
            starts = np.full(len(passages), q_len)
            ends = mask.sum(1) - 1
        pos = np.arange(max_len)[None, :]
        # word positions only: [CLS] and the [SEP]s are in every pair and would pull every score together
        query_span = ((pos >= 1) & (pos < starts[:, None] - 1)).astype(np.float32)
        if honour_mask:
            passage_span = ((pos >= starts[:, None]) & (pos < ends[:, None])).astype(np.float32)
        else:
            mask = np.ones_like(mask)
            passage_span = (pos >= starts[:, None]).astype(np.float32)
        return ids, mask, query_span, passage_span

    def run(query: str, passages: list[str], batch_size: int) -> np.ndarray:
        arrays = encode_pairs(query, passages)
        graph = graphs(batch_size)
        out = []
        for rows in _batches(len(passages), batch_size):
            sl = slice(rows.start, rows.stop)
            (scores,) = graph.call(*(_pad_rows(a[sl], batch_size) for a in arrays))
            out.append(scores[: len(rows)])
        return np.concatenate(out)

    return Reranker(model, run)


def _cache_dir(backend: str, workdir: Path) -> Path | None:
    """neuron: the box's one compile cache when it is set, else ``workdir`` (a local trace outside a box)."""
    if backend != "neuron":
        return None
    from agents.box_env import COMPILE_CACHE_ENV, compile_cache_dir

    return compile_cache_dir() if os.environ.get(COMPILE_CACHE_ENV) else Path(workdir) / "neuron-cache"
