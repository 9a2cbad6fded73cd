"""``commit_lane``: after a lane's callback, commit the attempt its box proposed (``control_plane.commits``).

The state machine sends ``run_id`` and ``lane`` from the plan (the segment's run, the step's result lane) and
``callback``, what the lane's command answered through its task token (the success output, or the failure's
``{Error, Cause}``), which names the attempt. The results store is the deployment's (``NEURONPIPE_RESULTS_URI``),
never one a payload names. The answer is ``committed`` true (attempt, status) or false (``Commit.Refused`` with a
bounded message); the state machine then records the lane failed with that message. A payload that is not an
object with those fields is answered refused the same way, in one log line."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from control_plane.commits import commit_lane
from control_plane.handlers.observability import logger, metrics, parse_event, tracer
from control_plane.models import RUN_ID_PATTERN
from control_plane.settings import get_settings


class CommitLaneRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    lane: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.@:+-]+$")
    callback: Any = None


@logger.inject_lambda_context(log_event=True, correlation_id_path="run_id")
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    request, message = parse_event(event, CommitLaneRequest)
    if request is None:
        return {"committed": False, "error": "Commit.Refused", "message": f"malformed payload: {message}"[:500]}
    from analytics.store import open_store

    settings = get_settings().require("results_uri")
    answer = commit_lane(open_store(str(settings.results_uri)), request.run_id, request.lane, request.callback)
    if answer["committed"]:
        metrics.add_metric(name="LanesCommitted", unit=MetricUnit.Count, value=1)
        logger.info("lane committed", extra={k: answer[k] for k in ("lane", "attempt", "status")})
    else:
        metrics.add_metric(name="CommitsRefused", unit=MetricUnit.Count, value=1)
        logger.warning("commit refused", extra={"lane": request.lane, "message": answer["message"]})
    return answer
