"""One Lambda execution environment: ``python -I -S lambda_worker.py CODE_DIR LAYER_DIR MODULE.FUNCTION``.

Run isolated and without ``site``: ``sys.path`` is the standard library, then exactly the function's code
(``/var/task``) and its layer (``/opt/python``), as in the Lambda Python runtime. Stdlib only here. The handler is
imported once (the cold start; an import failure answers every invocation with ``Runtime.ImportModuleError``, as
Lambda does); each stdin line is one invocation ``{"event": ..., "request_id": ..., "deadline_ms": ...}``; each
answer is one line on the protocol descriptor (the original stdout). The handler's own stdout goes to stderr: the
function's log.
"""

import importlib
import json
import os
import sys
import time
import traceback


class Context:
    def __init__(self, request: dict) -> None:
        env = os.environ
        self.function_name = env.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = int(env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.invoked_function_arn = request.get("function_arn", "")
        self.aws_request_id = request.get("request_id", "")
        self.log_group_name = env.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = env.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self._deadline_ms = request.get("deadline_ms") or (time.time() * 1000 + 900_000)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int(self._deadline_ms - time.time() * 1000))


def _error(exc: BaseException, error_type: str | None = None, message: str | None = None) -> dict:
    return {
        "errorType": error_type or type(exc).__name__,
        "errorMessage": message or str(exc),
        "stackTrace": traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:],
    }


def main() -> int:
    code_dir, layer_dir, handler = sys.argv[1], sys.argv[2], sys.argv[3]
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.path[:0] = [code_dir, layer_dir]
    module_name, _, function_name = handler.rpartition(".")
    function, init_error = None, None
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except Exception as exc:  # noqa: BLE001 - Lambda answers every invocation of a broken package with this
        init_error = _error(exc, "Runtime.ImportModuleError", f"Unable to import module '{module_name}': {exc}")
        print(json.dumps({"init_error": init_error}), file=sys.stderr)
    protocol.write(json.dumps({"ready": True, "sys_path": sys.path, "init_error": init_error}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        if init_error is not None:
            protocol.write(json.dumps({"error": init_error}) + "\n")
            continue
        try:
            result = function(request["event"], Context(request))
            answer = {"result": result}
            json.dumps(answer)
        except Exception as exc:  # noqa: BLE001 - a handler's error is the invocation's answer, as Lambda's
            answer = {"error": _error(exc)}
        sys.stderr.flush()
        protocol.write(json.dumps(answer, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
