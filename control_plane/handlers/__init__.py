"""Lambda handlers: thin (powertools, parse, call logic, return). One module per function,
each with ``handler(event, context)``; the CDK stack points at ``control_plane.handlers.<name>.handler``."""
