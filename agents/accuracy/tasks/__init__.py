"""The shipped task set: lm-eval YAML tasks over local JSONL, written by ``compose.py`` (both committed)."""
