"""The run's rules: what a run is made of and how its parts are judged, as plain data and pure functions.

The lane catalogue (``lanes``: boxes, order, needs, gates, timeouts, where each runner and config lives),
each lane's ``Config`` declaration with its defaults, help text and numeric bounds (``lane_configs``), the
config builder (``config``), the graph and outcome rules (``graph``), SLO sets (``slo``), the server
config catalogue (``servers``), the model catalogue (``model_catalogue``), box paths (``boxes``), the one
JSON reader for what a person hands in (``jsonio``) and the metric formulas producers and importers share
(``mfu``, ``steps``).

Everyone imports it and it imports none of ours: stdlib and pydantic only, never ``agents``,
``control_plane``, ``analytics``, ``rehearsal`` or ``infra`` (``tests/unit/test_pipeline_imports.py``).
So the control plane plans and the Lambdas run without the box-side code.
"""
