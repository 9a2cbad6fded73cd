"""The handlers' powertools objects (one service, one metrics namespace), and the one way a handler turns an
event it cannot parse into one log line and a structured refusal."""

from __future__ import annotations

from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.parser import parse
from pydantic import BaseModel, ValidationError

from control_plane.lean import METRICS_NAMESPACE as NAMESPACE
from control_plane.lean import SERVICE, describe_bad_event
from control_plane.models import describe_validation_error

Model = TypeVar("Model", bound=BaseModel)

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


def parse_event(event: Any, model: type[Model]) -> tuple[Model | None, str | None]:
    """(the parsed event, None), or (None, the one-line reason, already logged as a warning)."""
    try:
        return parse(event=event, model=model), None
    except (ValidationError, ValueError, TypeError) as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, ValidationError) else exc
        problem = describe_validation_error(cause) if isinstance(cause, ValidationError) else str(exc)
        message = describe_bad_event(event, " | ".join(problem.splitlines()))
        logger.warning(message)
        return None, message
