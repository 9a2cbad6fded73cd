"""Writes the shipped task set: four lm-eval tasks over local JSONL, deterministic, answers unambiguous by construction.

    python -m agents.accuracy.tasks.compose          # (re)write the JSONL and YAML files beside this script
    python -m agents.accuracy.tasks.compose --check  # exit 1 when a committed file differs from what this writes

* ``np_arith`` (200, generate_until): one- and two-step arithmetic word problems; exact match of the last number of
  the answer line (commas ignored).
* ``np_classify`` (100, generate_until): parity, sign and comparison of integers, a one-word label; exact match of
  the first label the answer names.
* ``np_facts`` (80, generate_until): facts of the bundled SFT data (``agents/training/data/instructions.jsonl``, what
  the tiny pipeline fine-tunes on): how its classification examples label each item ("Is tennis a team sport or an
  individual sport?" -> "individual sport"); exact match of the first label the answer names. A fine-tune that
  learned its data should do better here than its base.
* ``np_choice`` (100, multiple_choice, log-likelihood): arithmetic, opposites and category membership, four choices
  each, exactly one right; accuracy of the most likely choice.

Every record keeps the fields its answer was computed from (``kind``, the operands, the item and its source line), so
a test recomputes each answer independently of the text. The YAMLs name their data file relative to themselves; the
accuracy harness resolves it against the YAML's directory (lm-eval alone would resolve it against the working
directory).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TRAINING_DATA = HERE.parents[1] / "training" / "data" / "instructions.jsonl"
SEED = 30  # the seed of every draw below (the shipped task files are this seed's)

COUNTS = {"np_arith": 200, "np_classify": 100, "np_facts": 80, "np_choice": 100}

# ---- np_arith ---------------------------------------------------------------------------------------------------
NAMES = ("Ana", "Ben", "Chloe", "Dev", "Eva", "Farid", "Grace", "Hugo", "Iris", "Jonas", "Keiko", "Liam")
THINGS = ("apples", "pencils", "marbles", "stickers", "books", "stamps", "shells", "cards", "coins", "buttons")
CONTAINERS = ("box", "basket", "drawer", "jar", "bag", "crate")
PEOPLE = ("children", "friends", "students", "players", "neighbours")
GROUPS = ("rows", "shelves", "bags", "boxes", "tables", "packs")


def _arith(rng: random.Random, kind: str) -> dict[str, Any]:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    if kind == "add":
        a, b = rng.randint(12, 480), rng.randint(3, 250)
        q = f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?"
        return {"kind": kind, "a": a, "b": b, "question": q, "answer": a + b}
    if kind == "sub":
        a = rng.randint(40, 900)
        b = rng.randint(1, a - 1)
        box = rng.choice(CONTAINERS)
        q = f"A {box} holds {a} {thing}. {b} of them are taken out. How many {thing} are left in the {box}?"
        return {"kind": kind, "a": a, "b": b, "question": q, "answer": a - b}
    if kind == "mul":
        a, b = rng.randint(2, 40), rng.randint(2, 25)
        group = rng.choice(GROUPS)
        q = f"There are {a} {group} with {b} {thing} in each. How many {thing} are there in total?"
        return {"kind": kind, "a": a, "b": b, "question": q, "answer": a * b}
    if kind == "div":
        b, each = rng.randint(2, 12), rng.randint(2, 30)
        people = rng.choice(PEOPLE)
        q = f"{b * each} {thing} are shared equally among {b} {people}. How many {thing} does each of them get?"
        return {"kind": kind, "a": b * each, "b": b, "question": q, "answer": each}
    if kind == "two_step":
        a, b = rng.randint(2, 15), rng.randint(3, 20)
        c = rng.randint(1, a * b - 1)
        q = f"{name} buys {a} packs of {b} {thing} and gives away {c} of them. How many {thing} does {name} have left?"
        return {"kind": kind, "a": a, "b": b, "c": c, "question": q, "answer": a * b - c}
    a, b = rng.randint(2, 60), rng.randint(2, 12)  # price
    q = f"A ticket costs {a} dollars. How many dollars do {b} tickets cost?"
    return {"kind": "price", "a": a, "b": b, "question": q, "answer": a * b}


ARITH_KINDS = ("add", "sub", "mul", "div", "two_step", "price")


def arith_answer(r: dict[str, Any]) -> int:
    """The answer recomputed from the record's operands (the tests' independent check)."""
    a, b = r["a"], r["b"]
    return {"add": a + b, "sub": a - b, "mul": a * b, "div": a // b, "price": a * b, "two_step": a * b - r.get("c", 0)}[
        r["kind"]
    ]


def np_arith() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(out) < COUNTS["np_arith"]:
        r = _arith(rng, ARITH_KINDS[len(out) % len(ARITH_KINDS)])
        if r["question"] in seen:
            continue
        seen.add(r["question"])
        out.append(
            {"id": f"arith-{len(out):04d}", **{k: v for k, v in r.items() if k != "answer"}, "answer": str(r["answer"])}
        )
    return out


# ---- np_classify ------------------------------------------------------------------------------------------------
CLASSIFY_LABELS = ("even", "odd", "positive", "negative", "zero", "greater", "less", "equal")


def classify_answer(r: dict[str, Any]) -> str:
    if r["kind"] == "parity":
        return "even" if r["a"] % 2 == 0 else "odd"
    if r["kind"] == "sign":
        return "positive" if r["a"] > 0 else "negative" if r["a"] < 0 else "zero"
    return "greater" if r["a"] > r["b"] else "less" if r["a"] < r["b"] else "equal"


def np_classify() -> list[dict[str, Any]]:
    rng = random.Random(SEED + 1)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    kinds = ("parity", "sign", "compare")
    while len(out) < COUNTS["np_classify"]:
        kind = kinds[len(out) % 3]
        if kind == "parity":
            r: dict[str, Any] = {"kind": kind, "a": rng.randint(0, 999)}
            q = f"Is {r['a']} an even or an odd number? Answer with one word: even or odd."
        elif kind == "sign":
            r = {"kind": kind, "a": 0 if len(out) == 1 else rng.randint(-99, 99)}  # zero once, asked early
            q = f"Is {r['a']} positive, negative or zero? Answer with one word: positive, negative or zero."
        else:
            a = rng.randint(-50, 150)
            r = {"kind": kind, "a": a, "b": a if len(out) % 10 == 2 else rng.randint(-50, 150)}
            q = (
                f"Is {r['a']} greater than, less than or equal to {r['b']}? Answer with one word: greater, less "
                "or equal."
            )
        if q in seen:
            continue
        seen.add(q)
        out.append({"id": f"classify-{len(out):04d}", **r, "question": q, "answer": classify_answer(r)})
    return out


# ---- np_facts ---------------------------------------------------------------------------------------------------
_CLASSIFY_PROMPT = re.compile(r"^(?:Classify each of the following as|Which of these are) (.+?)[:?] (.+)$")


def training_labels(path: Path = TRAINING_DATA) -> list[dict[str, Any]]:
    """Every (item, label) the bundled data's classification examples state, in order of first appearance: an
    instruction ``Classify each of the following as OPTIONS: a, b`` (or ``Which of these are OPTIONS? a, b``) and
    its response's ``Item: label`` (or ``Label: item, item``) lines. An item labelled two ways is dropped."""
    found: dict[str, dict[str, Any]] = {}
    conflicted: set[str] = set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        rec = json.loads(line)
        m = _CLASSIFY_PROMPT.match(rec["instruction"]) if rec.get("category") == "classification" else None
        if not m:
            continue
        options, listed = m.group(1), [x.strip() for x in m.group(2).split(",")]
        by_lower = {x.lower(): x for x in listed}
        for out_line in rec["response"].splitlines():
            head, _, tail = out_line.partition(": ")
            values = [v.strip() for v in tail.split(",")]
            if all(v.lower() in by_lower for v in values):  # "Label: item, item"
                pairs = [(by_lower[v.lower()], head) for v in values]
            else:  # "Item: label"
                pairs = [(by_lower.get(head.lower(), head), tail)]
            for item, label in pairs:
                key = item.lower()
                if key in found and found[key]["label"].lower() != label.lower():
                    conflicted.add(key)
                found.setdefault(key, {"item": item, "label": label, "options": options, "source_line": n})
    return [v for k, v in found.items() if k not in conflicted]


def fact_labels(facts: list[dict[str, Any]]) -> list[str]:
    """The labels np_facts answers with, lower case, longest first (so "non-renewable" is found before "renewable")."""
    return sorted({f["label"].lower() for f in facts}, key=lambda s: (-len(s), s))


PROPER_LABELS = frozenset({"europe", "asia", "africa", "south america"})  # written capitalised


def np_facts(path: Path = TRAINING_DATA) -> list[dict[str, Any]]:
    pairs = training_labels(path)
    labels = set(fact_labels(pairs))
    out = []
    for p in pairs:
        words = set(re.findall(r"[a-z-]+", p["item"].lower())) | {p["item"].lower()}
        if words & labels:  # an item named like a label ("wind"): the first label an answer names would be ambiguous
            continue
        options_text = p["options"]
        label = p["label"].title() if p["label"].lower() in PROPER_LABELS else p["label"].lower()
        out.append(
            {
                "id": f"facts-{len(out):04d}",
                "kind": "training_label",
                "item": p["item"],
                "options": options_text,
                "source_line": p["source_line"],
                "question": f"In the training data, is {p['item']} {options_text}?",
                "answer": label,
            }
        )
        if len(out) == COUNTS["np_facts"]:
            break
    return out


# ---- np_choice --------------------------------------------------------------------------------------------------
OPPOSITES = (
    ("hot", "cold"),
    ("big", "small"),
    ("up", "down"),
    ("fast", "slow"),
    ("open", "closed"),
    ("full", "empty"),
    ("early", "late"),
    ("high", "low"),
    ("wet", "dry"),
    ("left", "right"),
    ("win", "lose"),
    ("push", "pull"),
    ("buy", "sell"),
    ("above", "below"),
    ("inside", "outside"),
    ("first", "last"),
    ("true", "false"),
    ("happy", "sad"),
    ("rich", "poor"),
    ("thick", "thin"),
    ("long", "short"),
    ("arrive", "leave"),
    ("always", "never"),
    ("north", "south"),
    ("east", "west"),
    ("question", "answer"),
    ("begin", "end"),
    ("accept", "refuse"),
    ("asleep", "awake"),
    ("add", "subtract"),
)
CATEGORIES: dict[str, tuple[str, ...]] = {
    "colour": ("red", "blue", "green", "yellow", "purple", "pink", "brown"),
    "fruit": ("apple", "pear", "banana", "grape", "lemon", "mango", "kiwi", "melon"),
    "metal": ("iron", "copper", "zinc", "tin", "nickel", "aluminium"),
    "animal": ("dog", "horse", "rabbit", "tiger", "sheep", "goat", "mouse", "camel"),
    "tool": ("hammer", "saw", "drill", "wrench", "chisel", "screwdriver"),
}


def choice_answer(r: dict[str, Any]) -> str:
    """The right choice's text, from the record's fields."""
    if r["kind"] == "arith":
        return str(r["a"] + r["b"] if r["op"] == "+" else r["a"] - r["b"] if r["op"] == "-" else r["a"] * r["b"])
    if r["kind"] == "opposite":
        return dict(OPPOSITES)[r["word"]]
    return next(c for c in r["choices"] if c in CATEGORIES[r["category"]])


def _arith_choice(rng: random.Random) -> dict[str, Any]:
    op = rng.choice("+-*")
    a, b = (rng.randint(2, 12), rng.randint(2, 12)) if op == "*" else (rng.randint(10, 99), rng.randint(1, 60))
    if op == "-" and b > a:
        a, b = b, a
    right = a + b if op == "+" else a - b if op == "-" else a * b
    wrong: set[int] = set()
    while len(wrong) < 3:
        w = right + rng.choice((-10, -2, -1, 1, 2, 10))
        if w >= 0 and w != right:
            wrong.add(w)
    choices = [str(x) for x in sorted(wrong | {right})]
    rng.shuffle(choices)
    word = {"+": "plus", "-": "minus", "*": "times"}[op]
    return {"kind": "arith", "a": a, "b": b, "op": op, "question": f"What is {a} {word} {b}?", "choices": choices}


def _opposite_choice(rng: random.Random, word: str, answer: str) -> dict[str, Any]:
    pool = sorted({w for pair in OPPOSITES for w in pair} - {word, answer})
    choices = [answer, *rng.sample(pool, 3)]
    rng.shuffle(choices)
    return {"kind": "opposite", "word": word, "question": f'What is the opposite of "{word}"?', "choices": choices}


def _category_choice(rng: random.Random, category: str) -> dict[str, Any]:
    right = rng.choice(CATEGORIES[category])
    others = sorted(w for c, ws in CATEGORIES.items() if c != category for w in ws)
    choices = [right, *rng.sample(others, 3)]
    rng.shuffle(choices)
    article = "an" if category[0] in "aeiou" else "a"
    return {
        "kind": "category",
        "category": category,
        "question": f"Which of these is {article} {category}?",
        "choices": choices,
    }


def np_choice() -> list[dict[str, Any]]:
    rng = random.Random(SEED + 2)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    opposites = list(OPPOSITES)
    categories = sorted(CATEGORIES)
    while len(out) < COUNTS["np_choice"]:
        i = len(out)
        if i < 40:
            r = _arith_choice(rng)
        elif i < 70:
            word, answer = opposites[(i - 40) % len(opposites)]
            r = _opposite_choice(rng, word, answer)
        else:
            r = _category_choice(rng, categories[(i - 70) % len(categories)])
        key = r["question"] + "|" + "|".join(sorted(r["choices"]))
        if key in seen:
            continue
        seen.add(key)
        r["label"] = r["choices"].index(choice_answer(r))
        out.append({"id": f"choice-{i:04d}", **r})
    return out


# ---- the YAMLs --------------------------------------------------------------------------------------------------
def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's escapes are YAML's)."""
    return json.dumps(text, ensure_ascii=False)


HEADER = "# Written by agents/accuracy/tasks/compose.py: edit that script, not this file.\n"


def _common(name: str, output_type: str, summary: str) -> list[str]:
    return [
        HEADER.rstrip("\n"),
        f"# {summary}",
        "tag:",
        "  - np_shipped",
        f"task: {name}",
        "dataset_path: json",
        "dataset_name: null",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {name}.jsonl",
        "test_split: test",
        f"output_type: {output_type}",
        "num_fewshot: 0",
        'doc_to_text: "Question: {{question}}\\nAnswer:"',
    ]


def _generate_yaml(name: str, summary: str, pattern: str, group_select: int, lowercase: bool, max_gen_toks: int) -> str:
    lines = _common(name, "generate_until", summary) + [
        'doc_to_target: "{{answer}}"',
        "generation_kwargs:",
        "  until:",
        '    - "\\n"',
        '    - "Question:"',
        f"  max_gen_toks: {max_gen_toks}",
        "  do_sample: false",
        "  temperature: 0.0",
        "filter_list:",
        "  - name: answer",
        "    filter:",
        "      - function: regex",
        f"        regex_pattern: {_q(pattern)}",
        f"        group_select: {group_select}",
    ]
    if lowercase:
        lines += ["      - function: lowercase"]
    lines += [
        "      - function: take_first",
        "metric_list:",
        "  - metric: exact_match",
        "    aggregation: mean",
        "    higher_is_better: true",
        "    ignore_case: true",
        "    ignore_punctuation: false",
        "    regexes_to_ignore:",
        '      - ","',
        "metadata:",
        "  version: 1.0",
    ]
    return "\n".join(lines) + "\n"


def _labels_pattern(labels: list[str] | tuple[str, ...]) -> str:
    ordered = sorted(labels, key=lambda s: (-len(s), s))
    return r"(?i)\b(" + "|".join(re.escape(x).replace(r"\ ", " ") for x in ordered) + r")\b"


def _choice_yaml() -> str:
    lines = _common(
        "np_choice",
        "multiple_choice",
        "multiple choice by log-likelihood: arithmetic, opposites, category membership; four choices, one right",
    ) + [
        'doc_to_choice: "{{choices}}"',
        'doc_to_target: "{{label}}"',
        "metric_list:",
        "  - metric: acc",
        "    aggregation: mean",
        "    higher_is_better: true",
        "metadata:",
        "  version: 1.0",
    ]
    return "\n".join(lines) + "\n"


def compose(training_data: Path = TRAINING_DATA) -> dict[str, str]:
    """File name -> text of every file of the shipped task set."""
    facts = np_facts(training_data)
    data: dict[str, list[dict[str, Any]]] = {
        "np_arith": np_arith(),
        "np_classify": np_classify(),
        "np_facts": facts,
        "np_choice": np_choice(),
    }
    files = {
        f"{name}.jsonl": "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
        for name, rows in data.items()
    }
    files["np_arith.yaml"] = _generate_yaml(
        "np_arith",
        "arithmetic word problems; exact match of the last number of the answer line",
        r"(-?\d[\d,]*)",
        -1,
        False,
        16,
    )
    files["np_classify.yaml"] = _generate_yaml(
        "np_classify",
        "parity, sign and comparison of integers; exact match of the first label named",
        _labels_pattern(CLASSIFY_LABELS),
        0,
        True,
        8,
    )
    files["np_facts.yaml"] = _generate_yaml(
        "np_facts",
        "labels the bundled SFT data gives its classification items; exact match of the first label named",
        _labels_pattern(fact_labels(training_labels(training_data))),
        0,
        True,
        8,
    )
    files["np_choice.yaml"] = _choice_yaml()
    return files


def main(argv: list[str] | None = None, out_dir: Path = HERE, emit: Callable[[str], None] = print) -> int:
    p = argparse.ArgumentParser(prog="python -m agents.accuracy.tasks.compose", description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 when a committed file differs from what this writes")
    args = p.parse_args(argv)
    files = compose()
    stale = [
        name
        for name, text in files.items()
        if not (out_dir / name).is_file() or (out_dir / name).read_text(encoding="utf-8") != text
    ]
    if args.check:
        for name in stale:
            emit(f"{out_dir / name}: differs from what compose.py writes (run python -m agents.accuracy.tasks.compose)")
        return 1 if stale else 0
    for name in stale:
        (out_dir / name).write_text(files[name], encoding="utf-8")
        emit(f"wrote {out_dir / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
