"""The ``encode`` lane's user inputs, read and checked: WAV audio (the stdlib ``wave``), images (Pillow), JSONL text.

A local path is checked where the plan is made (an ``s3://`` prefix where the lane runs, after download): every
file must decode as the modality's kind and hold something, else one :class:`InputFileError` line naming the file.

* speech_to_text: ``*.wav`` — PCM, 8/16/32-bit, mono or stereo, at least one frame.
* image_embedding / zero_shot: image files Pillow opens (RGB-convertible, both sides at least 1 px).
* text_embedding: ``*.jsonl`` — one object per line with a non-empty ``"text"``.
* rerank: ``*.jsonl`` — one object per line with non-empty ``"query"`` and ``"passage"``.
"""

from __future__ import annotations

import json
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AUDIO_SUFFIXES = (".wav",)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
TEXT_SUFFIXES = (".jsonl",)
MAX_FILES = 100_000


class InputFileError(ValueError):
    """An input that is missing, empty, undecodable or of the wrong shape: one line naming the file."""


@dataclass(frozen=True)
class AudioFile:
    path: Path
    rate: int
    channels: int
    sample_width: int
    frames: int


@dataclass(frozen=True)
class ImageFile:
    path: Path
    width: int
    height: int


def _suffixes(modality: str) -> tuple[str, ...]:
    if modality == "speech_to_text":
        return AUDIO_SUFFIXES
    if modality in ("image_embedding", "zero_shot"):
        return IMAGE_SUFFIXES
    return TEXT_SUFFIXES


def input_files(modality: str, path: Path) -> list[Path]:
    """The files of ``path`` (itself, or a directory's files with the modality's suffixes, sorted)."""
    if not path.exists():
        raise InputFileError(f"{path}: no such file or directory")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in _suffixes(modality))
    if not files:
        raise InputFileError(f"{path}: no {'/'.join(_suffixes(modality))} file in the directory")
    return files[:MAX_FILES]


def read_audio(path: Path) -> AudioFile:
    try:
        with wave.open(str(path), "rb") as w:
            out = AudioFile(path, w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes())
    except (wave.Error, EOFError, OSError) as exc:
        raise InputFileError(f"{path}: not a PCM WAV file ({exc})") from None
    if out.frames < 1:
        raise InputFileError(f"{path}: no audio frames")
    if out.sample_width not in (1, 2, 4) or out.channels not in (1, 2) or out.rate < 1000:
        raise InputFileError(
            f"{path}: unsupported WAV shape ({out.channels} channels, {8 * out.sample_width}-bit, {out.rate} Hz)"
        )
    return out


def read_image(path: Path) -> ImageFile:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im.verify()
        with Image.open(path) as im:
            im.convert("RGB")
            width, height = im.size
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InputFileError(f"{path}: not an image Pillow can decode ({exc})") from None
    if width < 1 or height < 1:
        raise InputFileError(f"{path}: an empty image ({width}x{height})")
    return ImageFile(path, width, height)


def read_jsonl(path: Path, keys: tuple[str, ...]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(f"{path}: not UTF-8 text ({exc})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj: Any = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputFileError(f"{path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict) or not all(isinstance(obj.get(k), str) and obj[k].strip() for k in keys):
            raise InputFileError(f"{path}:{n}: an object with non-empty {', '.join(repr(k) for k in keys)} strings")
        rows.append({k: obj[k] for k in keys})
    if not rows:
        raise InputFileError(f"{path}: no rows")
    return rows


def read_inputs(modality: str, path: Path) -> list[Any]:
    """Every input under ``path``, decoded enough to know it is usable (audio and images: their headers and pixels;
    text: the rows)."""
    files = input_files(modality, path)
    if modality == "speech_to_text":
        return [read_audio(p) for p in files]
    if modality in ("image_embedding", "zero_shot"):
        return [read_image(p) for p in files]
    keys = ("query", "passage") if modality == "rerank" else ("text",)
    return [row for p in files for row in read_jsonl(p, keys)]
