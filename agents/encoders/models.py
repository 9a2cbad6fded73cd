"""Encoder tasks: a model of a family, for one modality and one input shape, as graphs with static shapes and the
host-side step that chains them.

A :class:`EncoderTask` says which graphs to place (:mod:`agents.encoders.placement`), what their example inputs
are for a batch size, how raw items become the first graph's arrays, and how one batch runs through the placed
graphs to one output row per item (what the numerics gate compares and the timing times):

* speech_to_text (Whisper): log-mel features of a window as long as the workload's longest clip (a 30 s window
  for a hub Whisper, its own), the encoder graph, then ``decode_tokens`` greedy steps of the decoder graph over a
  static token buffer (causal: the padding after the current step changes nothing before it). Output: the decoder's
  logits of every step.
* image_embedding: the image tower's projected embedding. zero_shot: the image-to-label logits against the
  workload's label prompts (tokenised once, part of the graph's inputs). Images of another side than the model's
  interpolate its position embeddings.
* text_embedding / rerank: :mod:`agents.encoders.text`'s heads (pooled embedding; span-cosine cross-encoder score).

``tiny-<family>`` models are built from a config here, seeded; a hub id loads with ``transformers`` where the lane
runs (the box's hub cache), never at plan time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from agents.encoders.text import TINY_TEXT_MODELS, _embedding_head, _span_cosine_head
from agents.encoders.tokens import WordHashTokenizer

Call = Callable[..., tuple[np.ndarray, ...]]
# in every graph's fingerprint (the compile cache's key): a change to a tiny family's config bumps it, so a trace of
# the old architecture is never read back as the new one
TINY_VERSION = 1
MEAN = np.array([0.5, 0.5, 0.5], dtype=np.float32)
STD = np.array([0.5, 0.5, 0.5], dtype=np.float32)


@dataclass
class EncoderTask:
    model: str
    family: str
    modality: str
    shape: int
    graphs: dict[str, Any]  # name -> torch.nn.Module
    examples: Callable[[int], dict[str, list[np.ndarray]]]  # batch size -> each graph's example inputs
    encode: Callable[[list[Any]], list[np.ndarray]]  # raw items -> the first graph's arrays, item axis first
    forward: Callable[[dict[str, Call], list[np.ndarray]], np.ndarray]  # placed calls, a batch -> (b, k)
    fingerprint: dict[str, Any] = field(default_factory=dict)  # what shapes the graphs besides the input shapes
    # the Hugging Face model (or hub id) an exporter builds the "encoder" graph from, where the pair has an export
    # route (pipeline.encoders.EXPORT_ROUTES); None: no route
    source: Any = None


def _torch_seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def _as_tensor(out: Any) -> Any:
    return getattr(out, "pooler_output", out)


# ---- speech (Whisper) --------------------------------------------------------------------------------------------
def _whisper(model_name: str, window_s: int, decode_tokens: int, seed: int) -> tuple[Any, Any]:
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    if model_name.startswith("tiny-"):
        _torch_seed(seed)
        cfg = WhisperConfig(
            vocab_size=512,
            num_mel_bins=80,
            d_model=64,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=128,
            decoder_ffn_dim=128,
            max_source_positions=window_s * 50,
            max_target_positions=max(64, decode_tokens + 1),
            decoder_start_token_id=1,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        )
        model = WhisperForConditionalGeneration(cfg)
        extractor = WhisperFeatureExtractor(feature_size=80, chunk_length=window_s)
    else:
        model = WhisperForConditionalGeneration.from_pretrained(model_name)
        extractor = WhisperFeatureExtractor.from_pretrained(model_name)
    return model.float().eval(), extractor


def speech_task(model_name: str, shape: int, window_s: int, decode_tokens: int, seed: int) -> EncoderTask:
    import torch

    model, extractor = _whisper(model_name, window_s, decode_tokens, seed)
    frames = extractor.nb_max_frames
    length = decode_tokens + 1
    start = int(model.config.decoder_start_token_id)

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = model.model.encoder

        def forward(self, mel: Any) -> Any:
            return self.encoder(input_features=mel).last_hidden_state

    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.decoder = model.model.decoder
            self.proj = model.proj_out

        def forward(self, ids: Any, hidden: Any) -> Any:
            out = self.decoder(input_ids=ids, encoder_hidden_states=hidden, use_cache=False).last_hidden_state
            return self.proj(out)

    d_model = int(model.config.d_model)
    positions = frames // 2

    def examples(b: int) -> dict[str, list[np.ndarray]]:
        return {
            "encoder": [np.zeros((b, extractor.feature_size, frames), dtype=np.float32)],
            "decoder": [np.full((b, length), start, dtype=np.int64), np.zeros((b, positions, d_model), np.float32)],
        }

    def encode(items: list[Any]) -> list[np.ndarray]:
        feats = extractor(list(items), sampling_rate=extractor.sampling_rate, return_tensors="np")
        return [feats["input_features"].astype(np.float32)]

    def forward(calls: dict[str, Call], batch: list[np.ndarray]) -> np.ndarray:
        (hidden,) = calls["encoder"](batch[0])
        b = batch[0].shape[0]
        ids = np.full((b, length), start, dtype=np.int64)
        logits = None
        for step in range(decode_tokens):
            (logits,) = calls["decoder"](ids, hidden)
            ids[:, step + 1] = logits[:, step].argmax(-1)
        assert logits is not None
        return logits[:, :decode_tokens].reshape(b, -1)

    return EncoderTask(
        model_name,
        "whisper",
        "speech_to_text",
        shape,
        {"encoder": Encoder(), "decoder": Decoder()},
        examples,
        encode,
        forward,
        {"window_s": window_s, "decode_tokens": decode_tokens, "seed": seed, "tiny": TINY_VERSION},
    )


# ---- images (CLIP, SigLIP) ---------------------------------------------------------------------------------------
def _vision_model(model_name: str, family: str, seed: int) -> Any:
    if not model_name.startswith("tiny-"):
        from transformers import AutoModel

        return AutoModel.from_pretrained(model_name).float().eval()
    _torch_seed(seed)
    text = {
        "vocab_size": 512,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "max_position_embeddings": 16,
    }
    vision = {
        "image_size": 32,
        "patch_size": 8,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
    }
    text.update(eos_token_id=2, bos_token_id=1, pad_token_id=0)
    if family == "clip":
        from transformers import CLIPConfig, CLIPModel

        return CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=32)).float().eval()
    from transformers import SiglipConfig, SiglipModel

    return SiglipModel(SiglipConfig(text_config=text, vision_config=vision)).float().eval()


def image_task(
    model_name: str, family: str, modality: str, shape: int, labels: Sequence[str], seed: int
) -> EncoderTask:
    import torch

    model = _vision_model(model_name, family, seed)
    tok = WordHashTokenizer(int(model.config.text_config.vocab_size), 16)
    label_ids, label_mask = tok.pad([tok.encode(f"a photo of {label}") for label in labels])

    class ImageEmbedding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, pixels: Any) -> Any:
            return _as_tensor(self.model.get_image_features(pixel_values=pixels, interpolate_pos_encoding=True))

    class ZeroShot(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, pixels: Any, ids: Any, mask: Any) -> Any:
            kw = {"attention_mask": mask} if family == "clip" else {}
            out = self.model(pixel_values=pixels, input_ids=ids, interpolate_pos_encoding=True, **kw)
            return out.logits_per_image

    zero_shot = modality == "zero_shot"

    def examples(b: int) -> dict[str, list[np.ndarray]]:
        px = np.zeros((b, 3, shape, shape), dtype=np.float32)
        return {"encoder": [px, label_ids, label_mask] if zero_shot else [px]}

    def encode(items: list[Any]) -> list[np.ndarray]:
        x = np.stack(items).astype(np.float32) / 255.0
        return [((x - MEAN) / STD).transpose(0, 3, 1, 2).copy()]

    def forward(calls: dict[str, Call], batch: list[np.ndarray]) -> np.ndarray:
        args = [batch[0], label_ids, label_mask] if zero_shot else [batch[0]]
        (out,) = calls["encoder"](*args)
        return out.reshape(batch[0].shape[0], -1)

    return EncoderTask(
        model_name,
        family,
        modality,
        shape,
        {"encoder": ZeroShot() if zero_shot else ImageEmbedding()},
        examples,
        encode,
        forward,
        {"labels": list(labels), "seed": seed, "tiny": TINY_VERSION},
        _source(model_name, model, family, modality),
    )


# ---- text (embedding, rerank) ------------------------------------------------------------------------------------
def text_task(model_name: str, family: str, modality: str, shape: int, seed: int) -> EncoderTask:
    if model_name.startswith("tiny-"):
        spec = replace(TINY_TEXT_MODELS[model_name], max_len=shape)
        backbone = spec.build(seed)
        tok: Any = WordHashTokenizer(spec.vocab, shape)
        pooling = spec.pooling
    else:
        from transformers import AutoModel, AutoTokenizer

        backbone = AutoModel.from_pretrained(model_name).float().eval()
        tok = AutoTokenizer.from_pretrained(model_name)
        pooling = "last" if family.startswith("qwen3") and modality == "text_embedding" else "mean"
    rerank = modality == "rerank"
    head = _span_cosine_head(backbone) if rerank else _embedding_head(backbone, pooling)

    def examples(b: int) -> dict[str, list[np.ndarray]]:
        ids = np.zeros((b, shape), dtype=np.int64)
        if rerank:
            span = np.ones((b, shape), dtype=np.float32)
            return {"encoder": [ids, np.ones_like(ids), span, span]}
        return {"encoder": [ids, np.ones_like(ids)]}

    def encode(items: list[Any]) -> list[np.ndarray]:
        if not isinstance(tok, WordHashTokenizer):
            if rerank:
                enc = tok(
                    [q for q, _ in items],
                    [p for _, p in items],
                    padding="max_length",
                    truncation=True,
                    max_length=shape,
                    return_tensors="np",
                )
            else:
                enc = tok(list(items), padding="max_length", truncation=True, max_length=shape, return_tensors="np")
            ids, mask = enc["input_ids"].astype(np.int64), enc["attention_mask"].astype(np.int64)
            if not rerank:
                return [ids, mask]
            first = np.array([len(tok(q, truncation=True, max_length=shape // 2)["input_ids"]) for q, _ in items])
            ends = mask.sum(1)
        elif rerank:
            pairs = [tok.encode_pair(q, p) for q, p in items]
            ids, mask = tok.pad([x for x, _ in pairs])
            first = np.array([s for _, s in pairs])
            ends = mask.sum(1) - 1
        else:
            return list(tok.pad([tok.encode(t) for t in items]))
        pos = np.arange(shape)[None, :]
        query = ((pos >= 1) & (pos < first[:, None] - 1)).astype(np.float32)
        passage = ((pos >= first[:, None]) & (pos < ends[:, None])).astype(np.float32)
        return [ids, mask, query, passage]

    def forward(calls: dict[str, Call], batch: list[np.ndarray]) -> np.ndarray:
        (out,) = calls["encoder"](*batch)
        return out.reshape(batch[0].shape[0], -1)

    return EncoderTask(
        model_name,
        family,
        modality,
        shape,
        {"encoder": head},
        examples,
        encode,
        forward,
        {"seed": seed, "tiny": TINY_VERSION},
        _source(model_name, backbone, family, modality),
    )


def _source(model_name: str, model: Any, family: str, modality: str) -> Any:
    from pipeline.encoders import EXPORT_ROUTES

    if (family, modality) not in EXPORT_ROUTES:
        return None
    return model if model_name.startswith("tiny-") else model_name


def build_task(workload: Any, shape: int, seed: int) -> EncoderTask:
    """The task of ``workload`` (a :class:`pipeline.encoders.EncodeWorkload`) at ``shape``."""
    family, modality = workload.family, workload.modality
    if modality == "speech_to_text":
        window = max(workload.shapes) if workload.model.startswith("tiny-") else 30
        return speech_task(workload.model, shape, window, workload.decode_tokens, seed)
    if modality in ("image_embedding", "zero_shot"):
        return image_task(workload.model, family, modality, shape, workload.labels, seed)
    return text_task(workload.model, family, modality, shape, seed)
