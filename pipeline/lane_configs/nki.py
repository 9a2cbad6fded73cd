"""nki's config: which kernels (a directory or an s3:// prefix of specs and kernel files), how many timed calls.

A local ``kernel_dir`` (the bundled one by default) is read when the config is built: at plan time, so a bad spec is
refused before anything starts (``pipeline.kernels``); an s3:// prefix is read by the lane when it runs, and a bad
spec there fails the lane with the same line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.lane_configs.bounds import KERNEL_CALLS, KERNEL_WARMUP

# the kernels shipped with the harness (agents/kernels/bundled), found by path: planning imports nothing of agents
BUNDLED_KERNELS = Path(__file__).resolve().parents[2] / "agents" / "kernels" / "bundled"


@dataclass
class Config:
    kernel_dir: str | None = field(
        default=None,
        metadata={
            "help": "a local directory or s3:// prefix of kernels (<name>.py and its <name>.toml spec); None: the "
            "bundled kernels. A local directory is read where the plan is made; on AWS give an s3:// prefix"
        },
    )
    kernels: list[str] | None = field(
        default=None, metadata={"help": "the kernels (spec names) to run; None: every spec of kernel_dir"}
    )
    calls: int = field(
        default=200,
        metadata={"help": "timed calls per shape set, for the kernel and for its torch reference", **KERNEL_CALLS},
    )
    warmup: int = field(default=20, metadata={"help": "untimed calls before the timed ones", **KERNEL_WARMUP})

    def __post_init__(self) -> None:
        if self.kernels is not None and (
            not isinstance(self.kernels, list) or not all(isinstance(k, str) for k in self.kernels)
        ):
            raise ValueError(f"kernels: a list of kernel names, got {self.kernels!r}")
        if self.kernel_dir is not None and self.kernel_dir.startswith("s3://"):
            bucket = self.kernel_dir[len("s3://") :].split("/", 1)[0]
            if not bucket:
                raise ValueError(f"kernel_dir: an s3:// URI names a bucket, got {self.kernel_dir!r}")
            return  # read by the lane, on the box
        from pipeline.kernels import KernelSpecError, read_kernel_dir

        root = Path(self.kernel_dir) if self.kernel_dir is not None else BUNDLED_KERNELS
        if self.kernel_dir is None and not root.is_dir():
            return  # a planner without the harness's agents (a Lambda bundle): the box reads them
        try:
            read_kernel_dir(root, self.kernels)
        except KernelSpecError as exc:
            raise ValueError(str(exc)) from None

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "full":
            return cls(calls=1000, warmup=50)
        return cls(calls=50, warmup=5)
