"""The encode lane's inputs as arrays: made by the project (seeded, deterministic, no download) or read from the
user's files (:mod:`pipeline.encoder_inputs` checks them; here they are decoded into samples).

* audio: 16 kHz mono float32 — synthesised as voiced "syllables" (a pitch with its harmonics under a formant-like
  envelope, gaps between them), or a WAV file resampled (linear) and cut or zero-padded to the shape's seconds;
* images: RGB uint8 drawn with Pillow (shapes in seeded colours on a seeded background) or a file, resized to the
  shape's side;
* texts: sentences written from a fixed word list, about the shape's token count; rerank pairs are a query and a
  passage that shares some of its words.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

SAMPLE_RATE = 16_000
_WORDS = (
    "river stone cloud forest engine piano garden silver window ocean candle winter rocket harbor lantern meadow "
    "copper violin desert glacier orchard thunder pepper marble falcon canyon ribbon"
).split()


def synth_audio(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    out = np.zeros(n, dtype=np.float64)
    pos = 0.0
    while pos < seconds:
        dur = rng.uniform(0.12, 0.3)
        f0 = rng.uniform(90, 220)
        mask = (t >= pos) & (t < pos + dur)
        env = np.sin(np.pi * (t[mask] - pos) / dur) ** 2
        voice = sum(np.sin(2 * np.pi * f0 * k * t[mask]) / k for k in range(1, 6))
        out[mask] += 0.3 * env * voice
        pos += dur + rng.uniform(0.03, 0.12)
    out += 0.003 * rng.standard_normal(n)
    return out.astype(np.float32)


def read_wav(path: Path, seconds: float) -> np.ndarray:
    import wave

    with wave.open(str(path), "rb") as w:
        rate, channels, width, frames = w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()
        raw = w.readframes(frames)
    dtype = {1: np.uint8, 2: np.int16, 4: np.int32}[width]
    x = np.frombuffer(raw, dtype=dtype).astype(np.float64)
    x = (x - 128.0) / 128.0 if width == 1 else x / float(2 ** (8 * width - 1))
    x = x.reshape(-1, channels).mean(axis=1)
    if rate != SAMPLE_RATE and len(x) > 1:
        src = np.arange(len(x)) / rate
        x = np.interp(np.arange(int(len(x) * SAMPLE_RATE / rate)) / SAMPLE_RATE, src, x)
    n = int(seconds * SAMPLE_RATE)
    return np.pad(x[:n], (0, max(0, n - len(x)))).astype(np.float32)


def draw_image(side: int, seed: int) -> np.ndarray:
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    im = Image.new("RGB", (side, side), tuple(rng.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(im)
    for _ in range(3):
        x0, y0 = rng.randrange(side), rng.randrange(side)
        x1, y1 = min(side, x0 + rng.randrange(2, side)), min(side, y0 + rng.randrange(2, side))
        fill = tuple(rng.randrange(256) for _ in range(3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x0, y0, x1, y1], fill=fill)
    return np.asarray(im, dtype=np.uint8)


def read_image(path: Path, side: int) -> np.ndarray:
    """The file's pixels, RGB at the shape's side; a body Pillow cannot decode (its header passed the plan's check,
    pipeline.encoder_inputs) is the same one line naming the file."""
    from PIL import Image, UnidentifiedImageError

    from pipeline.encoder_inputs import InputFileError

    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB").resize((side, side)), dtype=np.uint8)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InputFileError(f"{path}: not an image Pillow can decode ({exc})") from None


def write_text(words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(max(1, words)))


def write_pair(words: int, seed: int) -> tuple[str, str]:
    rng = random.Random(seed)
    passage = write_text(words, seed)
    query = " ".join(rng.sample(passage.split(), min(4, len(passage.split()))))
    return query, passage


def audio_items(shape: int, items: int, seed: int, files: list[Path] | None) -> list[np.ndarray]:
    if files:
        return [read_wav(files[i % len(files)], shape) for i in range(items)]
    return [synth_audio(shape, seed + i) for i in range(items)]


def image_items(shape: int, items: int, seed: int, files: list[Path] | None) -> list[np.ndarray]:
    if files:
        return [read_image(files[i % len(files)], shape) for i in range(items)]
    return [draw_image(shape, seed + i) for i in range(items)]


def text_items(shape: int, items: int, seed: int, rows: list[dict[str, str]] | None) -> list[str]:
    if rows:
        return [rows[i % len(rows)]["text"] for i in range(items)]
    return [write_text(shape - 2, seed + i) for i in range(items)]


def pair_items(shape: int, items: int, seed: int, rows: list[dict[str, str]] | None) -> list[tuple[str, str]]:
    if rows:
        return [(rows[i % len(rows)]["query"], rows[i % len(rows)]["passage"]) for i in range(items)]
    return [write_pair(shape // 2, seed + i) for i in range(items)]
