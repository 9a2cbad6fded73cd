"""How ``instructions.jsonl`` was composed (run ``python -m agents.training.data.compose`` to rebuild it).

Hand-written passages, answers, lists and short pieces (all written for this
project) plus a few templated families (classification, unit conversion,
arithmetic word problems) drawn with a fixed seed, in dolly-15k's record format:
``instruction``, ``context``, ``response``, ``category``. The output is
deterministic; the committed JSONL is what the lanes read.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from agents.training.data.passages import PASSAGES
from agents.training.data.prose import BRAINSTORMING, CREATIVE, GENERAL_QA, OPEN_QA

OUT = Path(__file__).with_name("instructions.jsonl")
SEED = 20240915

CLASS_SCHEMES: list[tuple[str, dict[str, str]]] = [
    (
        "a fruit or a vegetable",
        {
            "apple": "fruit",
            "carrot": "vegetable",
            "banana": "fruit",
            "broccoli": "vegetable",
            "mango": "fruit",
            "spinach": "vegetable",
            "pear": "fruit",
            "leek": "vegetable",
            "cherry": "fruit",
            "cabbage": "vegetable",
            "apricot": "fruit",
            "parsnip": "vegetable",
            "plum": "fruit",
            "celery": "vegetable",
            "kiwi": "fruit",
            "turnip": "vegetable",
        },
    ),
    (
        "a mammal, a bird, a fish or a reptile",
        {
            "dolphin": "mammal",
            "eagle": "bird",
            "salmon": "fish",
            "iguana": "reptile",
            "bat": "mammal",
            "penguin": "bird",
            "trout": "fish",
            "tortoise": "reptile",
            "otter": "mammal",
            "heron": "bird",
            "cod": "fish",
            "gecko": "reptile",
            "whale": "mammal",
            "sparrow": "bird",
            "tuna": "fish",
            "crocodile": "reptile",
        },
    ),
    (
        "a string, wind or percussion instrument",
        {
            "violin": "string",
            "flute": "wind",
            "snare drum": "percussion",
            "cello": "string",
            "oboe": "wind",
            "xylophone": "percussion",
            "harp": "string",
            "clarinet": "wind",
            "timpani": "percussion",
            "guitar": "string",
            "bassoon": "wind",
            "tambourine": "percussion",
            "viola": "string",
            "trumpet": "wind",
            "cymbal": "percussion",
            "banjo": "string",
        },
    ),
    (
        "in Europe, Asia, Africa or South America",
        {
            "Portugal": "Europe",
            "Vietnam": "Asia",
            "Kenya": "Africa",
            "Chile": "South America",
            "Norway": "Europe",
            "Mongolia": "Asia",
            "Ghana": "Africa",
            "Peru": "South America",
            "Austria": "Europe",
            "Nepal": "Asia",
            "Senegal": "Africa",
            "Uruguay": "South America",
            "Estonia": "Europe",
            "Laos": "Asia",
            "Namibia": "Africa",
            "Colombia": "South America",
        },
    ),
    (
        "a renewable or a non-renewable energy source",
        {
            "wind": "renewable",
            "coal": "non-renewable",
            "solar": "renewable",
            "natural gas": "non-renewable",
            "geothermal": "renewable",
            "oil": "non-renewable",
            "hydroelectric": "renewable",
            "peat": "non-renewable",
            "tidal": "renewable",
            "uranium": "non-renewable",
        },
    ),
    (
        "an inner planet or an outer planet",
        {
            "Mercury": "inner planet",
            "Venus": "inner planet",
            "Earth": "inner planet",
            "Mars": "inner planet",
            "Jupiter": "outer planet",
            "Saturn": "outer planet",
            "Uranus": "outer planet",
            "Neptune": "outer planet",
        },
    ),
    (
        "a programming language or a database",
        {
            "Python": "programming language",
            "PostgreSQL": "database",
            "Rust": "programming language",
            "SQLite": "database",
            "Go": "programming language",
            "MongoDB": "database",
            "Haskell": "programming language",
            "Redis": "database",
            "Kotlin": "programming language",
            "Cassandra": "database",
            "Fortran": "programming language",
            "DuckDB": "database",
        },
    ),
    (
        "a team sport or an individual sport",
        {
            "football": "team sport",
            "tennis": "individual sport",
            "rugby": "team sport",
            "golf": "individual sport",
            "volleyball": "team sport",
            "archery": "individual sport",
            "hockey": "team sport",
            "fencing": "individual sport",
            "basketball": "team sport",
            "high jump": "individual sport",
            "water polo": "team sport",
            "marathon running": "individual sport",
        },
    ),
]

CONVERSIONS: list[tuple[str, str, float, str]] = [
    ("kilometres", "metres", 1000, "There are 1,000 metres in a kilometre"),
    ("hours", "minutes", 60, "There are 60 minutes in an hour"),
    ("kilograms", "grams", 1000, "There are 1,000 grams in a kilogram"),
    ("litres", "millilitres", 1000, "There are 1,000 millilitres in a litre"),
    ("days", "hours", 24, "There are 24 hours in a day"),
    ("weeks", "days", 7, "There are 7 days in a week"),
    ("feet", "inches", 12, "There are 12 inches in a foot"),
    ("minutes", "seconds", 60, "There are 60 seconds in a minute"),
]

WORD_PROBLEMS: list[tuple[str, str]] = [
    (
        "A baker makes {a} loaves in the morning and {b} in the afternoon. How many loaves does she make in a day?",
        "add",
    ),
    (
        "A train has {a} passengers and {b} more get on at the next station. How many passengers are on the train now?",
        "add",
    ),
    ("A library had {a} books and lent out {b} of them. How many books are still on the shelves?", "sub"),
    ("A farmer plants {a} rows of beans with {b} plants in each row. How many bean plants are there?", "mul"),
    ("A crate holds {b} bottles. How many bottles are in {a} crates?", "mul"),
    (
        "A cyclist rode {a} kilometres on Saturday and {b} kilometres on Sunday. How far did she ride over the "
        "weekend?",
        "add",
    ),
    ("A school has {a} pupils and {b} of them walk to school. How many pupils do not walk to school?", "sub"),
]


def _classification(rng: random.Random) -> list[dict]:
    out = []
    for label, items in CLASS_SCHEMES:
        names = sorted(items)
        for _ in range(6):
            chosen = rng.sample(names, k=min(len(names), rng.randint(4, 7)))
            if rng.random() < 0.5:
                instruction = f"Classify each of the following as {label}: {', '.join(chosen)}"
                response = "\n".join(f"{n[0].upper() + n[1:]}: {items[n]}" for n in chosen)
            else:
                instruction = f"Which of these are {label}? " + ", ".join(chosen)
                groups: dict[str, list[str]] = {}
                for n in chosen:
                    groups.setdefault(items[n], []).append(n)
                response = "\n".join(f"{k[0].upper() + k[1:]}: {', '.join(v)}" for k, v in sorted(groups.items()))
            out.append({"instruction": instruction, "context": "", "response": response, "category": "classification"})
    return out


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,}"


def _conversions(rng: random.Random) -> list[dict]:
    out = []
    for big, small, factor, fact in CONVERSIONS:
        for _ in range(3):
            n = rng.choice([2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 2.5, 1.5])
            out.append(
                {
                    "instruction": f"How many {small} are in {_fmt(n)} {big}?",
                    "context": "",
                    "response": f"{fact}, so {_fmt(n)} {big} is {_fmt(n)} × {_fmt(factor)} = "
                    f"{_fmt(n * factor)} {small}.",
                    "category": "open_qa",
                }
            )
    return out


def _word_problems(rng: random.Random) -> list[dict]:
    out = []
    for template, op in WORD_PROBLEMS:
        for _ in range(4):
            a, b = rng.randint(12, 90), rng.randint(3, 11)
            if op == "add":
                ans, why = a + b, f"{a} + {b} = {a + b}"
            elif op == "sub":
                ans, why = a - b, f"{a} − {b} = {a - b}"
            else:
                ans, why = a * b, f"{a} × {b} = {a * b}"
            out.append(
                {
                    "instruction": template.format(a=a, b=b),
                    "context": "",
                    "response": f"{why}, so the answer is {ans}.",
                    "category": "general_qa",
                }
            )
    return out


def _from_passages() -> list[dict]:
    out = []
    for p in PASSAGES:
        for q, a in p["qa"]:
            out.append({"instruction": q, "context": p["text"], "response": a, "category": "closed_qa"})
        out.append(
            {
                "instruction": f"Summarise this passage about {p['title'].lower()} in one or two sentences.",
                "context": p["text"],
                "response": p["summary"],
                "category": "summarization",
            }
        )
        inst, resp = p["extract"]
        out.append({"instruction": inst, "context": p["text"], "response": resp, "category": "information_extraction"})
    return out


def compose() -> list[dict]:
    rng = random.Random(SEED)
    records = (
        _from_passages()
        + [{"instruction": q, "context": "", "response": a, "category": "open_qa"} for q, a in OPEN_QA]
        + [{"instruction": q, "context": "", "response": a, "category": "general_qa"} for q, a in GENERAL_QA]
        + [{"instruction": q, "context": "", "response": a, "category": "brainstorming"} for q, a in BRAINSTORMING]
        + [{"instruction": q, "context": "", "response": a, "category": "creative_writing"} for q, a in CREATIVE]
        + _classification(rng)
        + _conversions(rng)
        + _word_problems(rng)
    )
    rng.shuffle(records)
    return records


def main() -> None:
    records = compose()
    with open(OUT, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} records to {OUT}")


if __name__ == "__main__":
    main()
