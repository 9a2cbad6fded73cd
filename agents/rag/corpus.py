"""The rag lane's corpus, its chunks and its retrieval probes.

The shipped corpus (``data/corpus.md``, a field station's handbook that exists nowhere else) has one fact per
paragraph; each shipped probe (``data/probes.json``) asks for one of them and names the text that answers it
(``expected``). A probe is a hit at k when a chunk among the first k retrieved contains its expected text
(case-insensitive), as the predecessor's probes were scored.

Chunking (:data:`CHUNKING` says it in the rows): Markdown paragraphs (blank-line separated), headings dropped, a
paragraph longer than ``max_chars`` split at sentence ends (a sentence longer than that at ``max_chars``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).parent / "data"
SHIPPED_CORPUS = DATA / "corpus.md"
SHIPPED_PROBES = DATA / "probes.json"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class CorpusInputError(ValueError):
    """A corpus or probe file that is missing, empty or not what it must be: its message names the file."""


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    source: str
    text: str


@dataclass(frozen=True)
class Probe:
    probe_id: str
    question: str
    expected: str

    def found_in(self, text: str) -> bool:
        return self.expected.lower() in text.lower()


def chunking(max_chars: int) -> str:
    return f"markdown paragraphs, headings dropped, split at sentence ends beyond {max_chars} characters"


def chunk_text(text: str, source: str, max_chars: int) -> list[Chunk]:
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(line.strip() for line in para.strip().splitlines() if not line.lstrip().startswith("#"))
        if not para:
            continue
        piece = ""
        for sentence in _SENTENCE.split(para):
            while len(sentence) > max_chars:
                if piece:
                    out.append(piece)
                    piece = ""
                out.append(sentence[:max_chars])
                sentence = sentence[max_chars:]
            if piece and len(piece) + 1 + len(sentence) > max_chars:
                out.append(piece)
                piece = sentence
            else:
                piece = f"{piece} {sentence}".strip()
        if piece:
            out.append(piece)
    stem = Path(source).stem
    return [Chunk(f"{stem}:{i:04d}", source, t) for i, t in enumerate(out)]


def read_corpus(path: str | None) -> tuple[str, str]:
    """(text, source) of the corpus file (None: the shipped one); :class:`CorpusInputError` naming the file when it is
    missing, not UTF-8 text or empty."""
    p = Path(path) if path else SHIPPED_CORPUS
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorpusInputError(f"corpus: {p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusInputError(f"corpus: {p}: {type(exc).__name__}: {exc}") from None
    if not text.strip():
        raise CorpusInputError(f"corpus: {p}: empty")
    return text, "shipped:corpus.md" if path is None else str(p)


def read_probes(path: str | None) -> list[Probe]:
    """The probes (None: the shipped ones): a JSON list of {id, question, expected}."""
    p = Path(path) if path else SHIPPED_PROBES
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorpusInputError(f"probes: {p}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusInputError(f"probes: {p}: {type(exc).__name__}: {exc}") from None
    if not isinstance(data, list) or not data:
        raise CorpusInputError(f"probes: {p}: expected a non-empty JSON list of {{id, question, expected}}")
    probes = []
    for i, d in enumerate(data):
        ok = isinstance(d, dict) and all(
            isinstance(d.get(k), str) and d.get(k).strip() for k in ("id", "question", "expected")
        )
        if not ok:
            raise CorpusInputError(f"probes: {p}: item {i}: expected non-empty strings id, question, expected")
        probes.append(Probe(d["id"], d["question"], d["expected"]))
    if len({x.probe_id for x in probes}) != len(probes):
        raise CorpusInputError(f"probes: {p}: a probe id is given twice")
    return probes
