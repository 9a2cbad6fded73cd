"""The handlers' powertools objects (one service, one metrics namespace)."""
from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "neuronpipe"
NAMESPACE = "NeuronPipelines"

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
