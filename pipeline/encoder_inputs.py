"""The ``encode`` lane's user inputs, read and checked: WAV audio (the stdlib ``wave``), images (their headers), JSONL
text. The stdlib only, as the rest of ``pipeline``: an image's header is read here (format and size), its pixels are
decoded by Pillow where the lane runs (agents/encoders/inputs.py), which refuses an undecodable body the same way.

A local path is checked where the plan is made (an ``s3://`` prefix where the lane runs, after download): every
file must decode as the modality's kind and hold something, else one :class:`InputFileError` line naming the file.

* speech_to_text: ``*.wav`` — PCM, 8/16/32-bit, mono or stereo, at least one frame.
* image_embedding / zero_shot: PNG, JPEG, GIF, BMP or WebP files whose header names the format and a size of at
  least 1 px a side.
* text_embedding: ``*.jsonl`` — one object per line with a non-empty ``"text"``.
* rerank: ``*.jsonl`` — one object per line with non-empty ``"query"`` and ``"passage"``.
"""

from __future__ import annotations

import json
import struct
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


def _image_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) from an image file's first bytes, or None where the header is not one of the formats."""
    if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR" and len(head) >= 24:
        return struct.unpack(">II", head[16:24])
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return struct.unpack("<HH", head[6:10])
    if head.startswith(b"BM") and len(head) >= 26:
        width, height = struct.unpack("<ii", head[18:26])
        return width, abs(height)  # a negative height is a top-down bitmap
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP" and len(head) >= 30:
        chunk = head[12:16]
        if chunk == b"VP8X":
            return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
        if chunk == b"VP8 ":
            w, h = struct.unpack("<HH", head[26:30])
            return w & 0x3FFF, h & 0x3FFF
        if chunk == b"VP8L" and head[20] == 0x2F:
            bits = int.from_bytes(head[21:25], "little")
            return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
        return None
    if head.startswith(b"\xff\xd8"):  # JPEG: walk the segments to the first start-of-frame
        i = 2
        while i + 9 < len(head):
            if head[i] != 0xFF:
                return None
            marker = head[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            (length,) = struct.unpack(">H", head[i + 2 : i + 4])
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", head[i + 5 : i + 9])
                return width, height
            i += 2 + length
    return None


def read_image(path: Path) -> ImageFile:
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16)  # a JPEG's frame header follows its metadata segments
    except OSError as exc:
        raise InputFileError(f"{path}: cannot be read ({exc})") from None
    size = _image_size(head)
    if size is None:
        raise InputFileError(f"{path}: not a PNG, JPEG, GIF, BMP or WebP image (its header names none of them)")
    width, height = size
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
