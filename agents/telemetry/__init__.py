"""Telemetry: a sampler thread over pluggable sensors, writing long-format `telemetry` rows.

A sensor returns rows ``{"source", "metric", "device", "value", "unit", "note"}``;
the sampler stamps ``ts`` and ``t_mono_ns``. A sensor the platform does not
expose returns its metric with ``value=None`` and a ``note`` saying why: never
zero, never interpolated.

A load point shorter than the interval could fall between two samples and be left out of every table (no
telemetry inside its window: rules 7 and 15). So the lane passes :meth:`TelemetrySampler.point_phase` to
``run_point`` as its phase hook: when a point's first measured request goes out, the sampler takes one extra
sample :data:`POINT_SAMPLE_LEAD_S` later, inside the point's window (from the first request sent to the last
completed) for any point longer than that; the regular samples go on as scheduled. One extra sample per point,
not a faster sampler: the sensors (nvidia-smi, a server's /metrics) are not polled harder while the server is
under test.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any, Protocol

log = logging.getLogger(__name__)

POINT_SAMPLE_LEAD_S = 0.05  # after a point's first measured request is sent: its in-window sample


class Sensor(Protocol):
    name: str

    def sample(self) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class TelemetrySampler:
    def __init__(self, sensors: list[Sensor] | None = None, interval_s: float = 1.0):
        self.sensors: list[Sensor] = list(sensors or [])
        self.interval_s = interval_s
        self.rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._extra_at: float | None = None  # monotonic time of a point's in-window sample, when one is due
        self._thread: threading.Thread | None = None
        self._failed: set[str] = set()

    def add_sensor(self, sensor: Sensor) -> None:
        with self._lock:
            self.sensors.append(sensor)

    def sample_once(self) -> None:
        ts = datetime.now(timezone.utc)
        mono = time.perf_counter_ns()
        with self._lock:
            sensors = list(self.sensors)
        batch = []
        for sensor in sensors:
            try:
                for row in sensor.sample():
                    batch.append({"ts": ts, "t_mono_ns": mono, **row})
            except Exception as exc:  # noqa: BLE001 - a broken sensor must not kill the lane; it is reported once
                if sensor.name not in self._failed:
                    self._failed.add(sensor.name)
                    log.warning("telemetry sensor %s failed: %s: %s", sensor.name, type(exc).__name__, exc)
                    batch.append(
                        {
                            "ts": ts,
                            "t_mono_ns": mono,
                            "source": sensor.name,
                            "metric": "sensor_error",
                            "value": None,
                            "unit": None,
                            "note": f"{type(exc).__name__}: {exc}",
                        }
                    )
        with self._lock:
            self.rows.extend(batch)

    def peak(self, metric: str, since_ns: int, until_ns: int) -> float | None:
        """The highest value of ``metric`` sampled between two ``perf_counter_ns`` stamps (None: no sample in that
        window had a value: the sensor is absent or said nothing)."""
        with self._lock:
            values = [
                r["value"]
                for r in self.rows
                if r.get("metric") == metric and r.get("value") is not None and since_ns <= r["t_mono_ns"] <= until_ns
            ]
        return max(values, default=None)

    def point_phase(self, phase: str) -> None:
        """``run_point``'s phase hook: on ``first_sent``, one sample :data:`POINT_SAMPLE_LEAD_S` from now."""
        if phase == "first_sent":
            self._extra_at = time.monotonic() + POINT_SAMPLE_LEAD_S
            self._wake.set()

    def _loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self.sample_once()
            next_t += self.interval_s
            while not self._stop.is_set():
                extra = self._extra_at
                due = next_t if extra is None else min(next_t, extra)
                if time.monotonic() >= due:
                    if extra is not None and due == extra:
                        self._extra_at = None
                        self.sample_once()  # the point's in-window sample; the regular schedule is unchanged
                        continue
                    break
                if self._wake.wait(due - time.monotonic()):
                    self._wake.clear()

    def start(self) -> TelemetrySampler:
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=10)
        self.sample_once()  # one closing sample so short lanes still have a window end
        for sensor in self.sensors:
            try:
                sensor.close()
            except Exception:  # noqa: BLE001 - closing a sensor is best effort  # pragma: no cover
                pass
        with self._lock:
            return list(self.rows)

    def __enter__(self) -> TelemetrySampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def default_sensors(backend: str) -> list[Sensor]:
    """Host sensors always; the accelerator's where the backend has one."""
    from agents.telemetry.host import HostSensor

    sensors: list[Sensor] = [HostSensor()]
    if backend == "neuron":
        try:
            from agents.telemetry.neuron_monitor import NeuronMonitorSensor

            sensors.append(NeuronMonitorSensor())
        except Exception as exc:  # noqa: BLE001 - absent sensor is a NULL row, not a crash
            log.warning("neuron-monitor unavailable: %s", exc)
    elif backend == "cuda":
        try:
            from agents.telemetry.nvidia import NvidiaSmiSensor

            sensors.append(NvidiaSmiSensor())
        except Exception as exc:  # noqa: BLE001 - a GPU sensor that cannot start leaves the others sampling
            log.warning("nvidia-smi sensor unavailable: %s", exc)
    return sensors
