"""The from-scratch lane's image-classification dataset: one ``.npz`` file (a local path or ``s3://`` URI), and a
seeded generator of one, so the lane runs with no download.

Format (``numpy.savez``; read with ``allow_pickle=False``):

* ``x_train``, ``x_test``: ``uint8`` images, ``[N, H, W]`` (one channel) or ``[N, H, W, C]`` (C from 1 to 4), the
  same ``H, W, C`` in both splits;
* ``y_train``, ``y_test``: integer labels, ``[N]``, one per image, each in ``[0, num_classes)``;
* ``num_classes``: an integer scalar, at least 2.

Every problem is one line naming the file and the field (:class:`DatasetError`). Numpy only: the plan checks a
local file with the same code before anything starts.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FIELDS = ("x_train", "y_train", "x_test", "y_test", "num_classes")
MAX_CHANNELS = 4
GENERATED = "generated"


class DatasetError(ValueError):
    """A dataset file that does not hold what the format says (one line: the file, the field, the reason)."""


@dataclass(frozen=True)
class ImageSet:
    x_train: np.ndarray  # uint8 [N, H, W, C]
    y_train: np.ndarray  # int64 [N]
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    source: str  # the file or URI it was read from
    sha256: str
    bytes: int

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(int(d) for d in self.x_train.shape[1:])  # type: ignore[return-value]


def _images(name: str, x: np.ndarray, where: str) -> np.ndarray:
    if x.dtype == object:
        raise DatasetError(
            f"{where}: {name}: images of mixed shapes (an object array); every image must be H x W (x C) alike"
        )
    if x.dtype != np.uint8:
        raise DatasetError(f"{where}: {name}: expected uint8 pixels, got {x.dtype}")
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or not 1 <= x.shape[-1] <= MAX_CHANNELS:
        raise DatasetError(
            f"{where}: {name}: expected [N, H, W] or [N, H, W, C] with C in 1..{MAX_CHANNELS}, "
            f"got shape {list(x.shape)}"
        )
    if x.shape[0] == 0:
        raise DatasetError(f"{where}: {name}: empty split (no images)")
    if min(x.shape[1:3]) < 1:
        raise DatasetError(f"{where}: {name}: images of size {x.shape[1]}x{x.shape[2]}")
    return x


def _labels(name: str, y: np.ndarray, n: int, classes: int, where: str) -> np.ndarray:
    if y.dtype == object or not (np.issubdtype(y.dtype, np.integer) and y.dtype != np.bool_):
        raise DatasetError(f"{where}: {name}: labels must be integers, got {y.dtype}")
    if y.ndim != 1 or y.shape[0] != n:
        raise DatasetError(f"{where}: {name}: expected {n} labels (one per image), got shape {list(y.shape)}")
    bad = (y < 0) | (y >= classes)
    if bad.any():
        i = int(np.argmax(bad))
        raise DatasetError(
            f"{where}: {name}: label {int(y[i])} at index {i} is out of range [0, {classes}) (num_classes {classes})"
        )
    return y.astype(np.int64)


def parse(data: bytes, source: str) -> ImageSet:
    """An :class:`ImageSet` from the bytes of an ``.npz`` file, every field checked (:class:`DatasetError`)."""
    where = f"dataset {source}"
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise DatasetError(f"{where}: not a .npz archive ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DatasetError(f"{where}: not a .npz archive (a single .npy array)")
    arrays = {}
    with archive:
        missing = [f for f in FIELDS if f not in archive.files]
        if missing:
            raise DatasetError(
                f"{where}: {missing[0]}: missing (the archive holds {', '.join(archive.files) or 'nothing'})"
            )
        for f in FIELDS:
            try:
                arrays[f] = archive[f]
            except ValueError as exc:  # an object array: pickled, refused
                if f.startswith("x_"):
                    raise DatasetError(
                        f"{where}: {f}: images of mixed shapes (an object array); every image must be H x W (x C) alike"
                    ) from None
                raise DatasetError(f"{where}: {f}: not a plain array ({str(exc)[:120]})") from None
    k = arrays["num_classes"]
    if k.ndim != 0 or not np.issubdtype(k.dtype, np.integer) or int(k) < 2:
        raise DatasetError(f"{where}: num_classes: expected an integer scalar >= 2, got {k.tolist()!r}")
    classes = int(k)
    x_train = _images("x_train", arrays["x_train"], where)
    x_test = _images("x_test", arrays["x_test"], where)
    if x_train.shape[1:] != x_test.shape[1:]:
        raise DatasetError(
            f"{where}: x_test: images of mixed shapes: {list(x_test.shape[1:])} in x_test, "
            f"{list(x_train.shape[1:])} in x_train"
        )
    y_train = _labels("y_train", arrays["y_train"], x_train.shape[0], classes, where)
    y_test = _labels("y_test", arrays["y_test"], x_test.shape[0], classes, where)
    return ImageSet(x_train, y_train, x_test, y_test, classes, source, hashlib.sha256(data).hexdigest(), len(data))


def load(source: str | Path, s3_client: object | None = None) -> ImageSet:
    """The dataset at a local path or ``s3://`` URI (:class:`DatasetError` when it cannot be read or is malformed)."""
    from agents.training.data import read_source

    text = str(source)
    if not text.startswith("s3://") and not Path(text).is_file():
        raise DatasetError(f"dataset {text}: no such file")
    try:
        data = read_source(text, s3_client)  # type: ignore[arg-type]
    except OSError as exc:
        raise DatasetError(f"dataset {text}: cannot be read ({type(exc).__name__}: {exc})") from None
    return parse(data, text)


def check_file(path: str | Path) -> str | None:
    """The one-line problem of a local dataset file (None: it is well-formed). The plan's check."""
    try:
        load(path)
    except DatasetError as exc:
        return str(exc)
    return None


def glyphs(
    train: int, test: int, size: int, classes: int, channels: int = 1, noise: float = 40.0, seed: int = 0
) -> dict[str, np.ndarray]:
    """A seeded image-classification set, learnable but not trivial: each class is a glyph of strokes (bars,
    rings, diagonals, dots drawn on a ``size`` grid from the seed), every image its class's glyph shifted by up to
    an eighth of the side, scaled in contrast, over a random background level, with Gaussian pixel noise of
    ``noise`` grey levels. The arrays are the ``.npz`` format's fields."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / max(1, size - 1)
    protos = []
    for _ in range(classes):
        g = np.zeros((size, size), np.float32)
        for _stroke in range(3):
            kind = rng.integers(0, 4)
            cx, cy = rng.uniform(0.25, 0.75, 2)
            w = rng.uniform(0.06, 0.12)
            if kind == 0:  # a bar, horizontal or vertical
                d = np.abs((yy if rng.integers(0, 2) else xx) - (cy if rng.integers(0, 2) else cx))
            elif kind == 1:  # a ring
                d = np.abs(np.hypot(xx - cx, yy - cy) - rng.uniform(0.15, 0.3))
            elif kind == 2:  # a diagonal
                s = 1.0 if rng.integers(0, 2) else -1.0
                d = np.abs((yy - cy) - s * (xx - cx)) / np.sqrt(2.0)
            else:  # a dot
                d = np.hypot(xx - cx, yy - cy) - 2 * w
            g = np.maximum(g, np.clip(1.0 - np.maximum(d, 0) / w, 0, 1))
        protos.append(g)
    shift = max(1, size // 8)
    tint = rng.uniform(0.6, 1.0, (classes, channels)).astype(np.float32)  # a class's colour (one grey: channels 1)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, classes, n)
        x = np.empty((n, size, size, channels), np.uint8)
        for i in range(n):
            g = np.roll(protos[y[i]], tuple(rng.integers(-shift, shift + 1, 2)), axis=(0, 1))
            img = rng.uniform(0, 60) + rng.uniform(120, 195) * g[..., None] * tint[y[i]]
            img = img + rng.normal(0, noise, (size, size, channels))
            x[i] = np.clip(img, 0, 255).astype(np.uint8)
        return (x[..., 0] if channels == 1 else x), y.astype(np.int64)

    x_train, y_train = draw(train)
    x_test, y_test = draw(test)
    return {
        "x_train": x_train,
        "y_train": y_train,
        "x_test": x_test,
        "y_test": y_test,
        "num_classes": np.int64(classes),
    }


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path
