"""Each lane's ``Config``: one module per lane, the runner that consumes it stays in ``agents.lanes.<lane>``.

A Config is a dataclass whose fields carry ``help`` and, for numbers, ``min``/``max`` in their metadata
(``pipeline.config``); ``for_profile(profile)`` gives the ``tiny``/``full`` defaults. The lane catalogue
names each one (``LaneSpec.config``, ``"pipeline.lane_configs.<lane>:Config"``), so the planner checks a
request's overrides against it without importing the box-side runners.
"""
