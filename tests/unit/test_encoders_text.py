"""The text embedding and reranking interfaces on the tiny models (CPU)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.encoders.text import UnknownTextModelError, load_reranker, load_text_embedder
from agents.encoders.tokens import WordHashTokenizer

DOCS = [
    "the cat sat on the mat",
    "paris is the capital of france",
    "python is a programming language",
    "the mitochondria is the powerhouse of the cell",
    "mount everest is the highest mountain",
]


@pytest.mark.parametrize("model", ["tiny-bert-embedding", "tiny-qwen3-embedding"])
def test_embedder_rows_are_unit_float32_and_batch_independent(tmp_path, model):
    emb = load_text_embedder(model, backend="cpu", workdir=tmp_path)
    a = emb.embed(DOCS, batch_size=2)
    b = emb.embed(DOCS, batch_size=8)
    assert a.shape == (len(DOCS), emb.dim) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(a, b, atol=1e-5)  # padding a batch changes no row
    assert emb.embed([]).shape == (0, emb.dim)
    q = emb.embed(["what is the capital of france"])
    assert int((q @ a.T).argmax()) == 1


def test_same_seed_same_vectors_other_seed_others(tmp_path):
    a = load_text_embedder("tiny-bert-embedding", backend="cpu", workdir=tmp_path, seed=0).embed(DOCS[:2])
    b = load_text_embedder("tiny-bert-embedding", backend="cpu", workdir=tmp_path, seed=0).embed(DOCS[:2])
    c = load_text_embedder("tiny-bert-embedding", backend="cpu", workdir=tmp_path, seed=1).embed(DOCS[:2])
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_reranker_ignoring_its_mask_scores_padded_batches_differently(tmp_path):
    good = load_reranker("tiny-qwen3-reranker", backend="cpu", workdir=tmp_path)
    blind = load_reranker("tiny-qwen3-reranker", backend="cpu", workdir=tmp_path, honour_mask=False)
    query = "which mountain is the highest"
    s = good.score(query, DOCS)
    assert s.shape == (len(DOCS),) and s.dtype == np.float32
    assert int(s.argmax()) == 4
    np.testing.assert_allclose(good.score(query, DOCS, batch_size=1), s, atol=1e-5)
    assert not np.allclose(blind.score(query, DOCS), s, atol=1e-3)


def test_unknown_model_and_wrong_task_name_the_field(tmp_path):
    with pytest.raises(UnknownTextModelError, match="model: 'tiny-nope'"):
        load_text_embedder("tiny-nope", backend="cpu", workdir=tmp_path)
    with pytest.raises(UnknownTextModelError, match="tiny-bert-reranker"):
        load_reranker("tiny-bert-embedding", backend="cpu", workdir=tmp_path)


def test_word_hash_tokenizer_is_stable_and_pads_statically():
    tok = WordHashTokenizer(vocab_size=100, max_len=8)
    assert tok.encode("Hello world") == tok.encode("hello, WORLD!")
    ids, mask = tok.pad([tok.encode("a b c d e f g h i j"), tok.encode("x")])
    assert ids.shape == mask.shape == (2, 8)
    assert mask[0].sum() == 8 and mask[1].tolist() == [1, 1, 1, 0, 0, 0, 0, 0]
    pair, start = tok.encode_pair("q " * 20, "p")
    assert len(pair) <= 8 and start == 4
