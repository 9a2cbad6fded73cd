"""What a variant passes to its server process verbatim, and what it may not: environment variables (``env``)
and command-line arguments (``extra_args``).

A variant's env tunes the runtimes, whose knobs are open-ended (NEURON_RT_*, VLLM_*, OMP_*, CUDA_*, NCCL_*, XLA_*,
MALLOC_*); what it may not do is replace what the launcher sets, or change which code the server runs. Its
extra_args may not repeat a flag a declared field or the launcher sets: argparse keeps the last value given, so a
repeat would silently replace it.
"""

from __future__ import annotations

import re

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# what the launchers set themselves: a variant's env may not replace it (the compile cache, offline mode)
RESERVED_ENV = frozenset(
    {
        "NEURON_COMPILED_ARTIFACTS",
        "NEURON_COMPILE_CACHE_URL",
        "VLLM_NEURON_FRAMEWORK",
        "VLLM_CACHE_ROOT",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "VLLM_CPU_KVCACHE_SPACE",
    }
)
# env names that make the dynamic loader or an interpreter run code of the variant's choosing (a library preloaded,
# a module search path, a startup file, a logging config that instantiates classes): refused whatever the value. A
# denylist, not an allowlist: what a variant may not do is change which code the server runs.
HIJACK_ENV_PREFIXES = ("LD_", "DYLD_", "PYTHON")
HIJACK_ENV = frozenset(
    {
        "PATH",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "IFS",
        "PROMPT_COMMAND",
        "GLIBC_TUNABLES",
        "GCONV_PATH",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "PERL5LIB",
        "PERL5OPT",
        "PERLLIB",
        "RUBYLIB",
        "RUBYOPT",
        "NODE_OPTIONS",
        "NODE_PATH",
        "JAVA_TOOL_OPTIONS",
        "VLLM_LOGGING_CONFIG_PATH",
    }
)
# server flags extra_args may not pass: the declared field each one is, and what the launcher sets
FIELD_FLAGS = {
    "--max-model-len": "max_model_len",
    "--max-num-seqs": "max_num_seqs",
    "--block-size": "block_size",
    "--tensor-parallel-size": "tensor_parallel_size",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--enable-prefix-caching": "enable_prefix_caching",
    "--speculative-config": "speculative",
    "--quantization": "quantization",
    "--override-neuron-config": "override_neuron_config",
    "--additional-config": "override_neuron_config",
    "--enable-lora": "lora",
    "--lora-modules": "lora",
    "--max-lora-rank": "lora.max_lora_rank",
    "--max-loras": "lora.max_loras",
}
LAUNCHER_FLAGS = {
    "--host": "the server listens on 127.0.0.1 only, the box's own side",
    "--port": "the launcher picks a free port",
    "--uds": "the server listens on 127.0.0.1 only",
    "--model": "the served model is the lane's",
    "--served-model-name": "requests name the lane's model",
    "--device": "the backend's devices",
    "--dtype": "the backend's dtype",
}
FLAG_ALIASES = {"-tp": "--tensor-parallel-size", "-q": "--quantization"}


def env_problem(name: str) -> str | None:
    """Why a variant may not set the variable ``name`` (a name the loader or an interpreter runs code from)."""
    if name in HIJACK_ENV or name.startswith(HIJACK_ENV_PREFIXES):
        return (
            "makes the loader or an interpreter run code of the variant's choosing (LD_*, DYLD_*, PYTHON*, shell "
            "and interpreter startup variables); a variant's env tunes the runtimes (NEURON_RT_*, VLLM_*, OMP_*)"
        )
    return None


def extra_arg_problem(arg: str) -> str | None:
    """Why ``arg`` may not be passed verbatim (a flag a declared field or the launcher sets; argparse's abbreviations
    and ``--no-``, ``_`` and ``=value`` spellings included), else None."""
    if not arg.startswith("-"):
        return None  # a value
    name = FLAG_ALIASES.get(arg.split("=", 1)[0], arg.split("=", 1)[0].replace("_", "-"))
    name = "--" + name[5:] if name.startswith("--no-") else name
    owned = [*FIELD_FLAGS, *LAUNCHER_FLAGS]
    flag = name if name in owned else next((f for f in owned if len(name) > 3 and f.startswith(name)), None)
    if flag is None:
        return None
    given = "" if flag == arg else f" (given as {arg!r})"
    if flag in FIELD_FLAGS:
        return f"{flag}{given} is the variant's {FIELD_FLAGS[flag]} field: set it there"
    return f"{flag}{given} is set by the launcher ({LAUNCHER_FLAGS[flag]}); a variant may not pass it"


def source_problem(v: str) -> str | None:
    """Why an adapter source would break a line or reach past what it names: a control character, an s3:// key with
    an empty, '.' or '..' part (a prefix's trailing '/' aside), a local path with a '..' part."""
    if any(ord(c) < 32 or ord(c) == 127 for c in v):
        return "a control character"
    if v.startswith("s3://"):
        parts = v[len("s3://") :].split("/")[1:]
        parts = parts[:-1] if len(parts) > 1 and parts[-1] == "" else parts
        bad = next((p for p in parts if p in ("", ".", "..")), None)
        return None if bad is None else "an empty part" if bad == "" else f"a {bad!r} part"
    return "a '..' part" if ".." in v.split("/") else None
