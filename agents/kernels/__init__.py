"""The nki lane's engine: kernel directories fetched (``source``), inputs generated and references evaluated
(``inputs``), and the stages run on a kernel — simulate, compile, device, timings — into rows (``stages``). The
specs themselves are ``pipeline.kernels``'s (read at plan time too); ``bundled/`` holds the kernels shipped."""
