"""After a rehearsed run: what a user does next — pull the bucket's results, build the report from the mirror —
and whether that report has the sections of the one the finalize Lambda wrote to the bucket.

The Lambda's report (no matplotlib in the layer) and the mirror's (plots where matplotlib is installed) differ
in plot links; their section headings must not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
REPORT_FILES = ("REPORT.html", "comparison.json")  # besides REPORT.md: control_plane.handlers.finalize_run


class ReportCheckError(RuntimeError):
    """The bucket has no report for the run, or the pull/report after it failed."""


@dataclass(frozen=True)
class ReportCheck:
    bucket_report_uri: str
    mirror_dir: Path
    report_dir: Path
    bucket_sections: tuple[str, ...]
    mirror_sections: tuple[str, ...]
    attempts_pulled: int

    @property
    def same_sections(self) -> bool:
        return self.bucket_sections == self.mirror_sections

    def line(self) -> str:
        verdict = (
            "the same sections"
            if self.same_sections
            else f"DIFFERENT sections (bucket {list(self.bucket_sections)}, mirror {list(self.mirror_sections)})"
        )
        return (
            f"report in the bucket: {self.bucket_report_uri}; pull ({self.attempts_pulled} attempt(s)) + "
            f"report from the mirror: {self.report_dir / 'REPORT.md'}: {verdict} ({len(self.mirror_sections)})"
        )


def sections(markdown: str) -> tuple[str, ...]:
    """The ``## `` headings of a REPORT.md, in order."""
    return tuple(m.group(1).strip() for m in SECTION.finditer(markdown))


def pull_and_report(s3_client: Any, results_uri: str, reports_prefix: str, run_id: str, workdir: Path) -> ReportCheck:
    """``neuronpipe pull`` then ``neuronpipe report`` on the mirror, as a user would after the run."""
    from analytics.mirror import pull
    from analytics.report.files import build_report_files
    from analytics.store import LocalStore, S3Store

    bucket = results_uri.removeprefix("s3://").split("/", 1)[0]
    key = f"{reports_prefix.strip('/')}/{run_id}/REPORT.md"
    try:
        bucket_text = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    except Exception as exc:  # any S3 error means the same: no report where it should be
        raise ReportCheckError(f"no report at s3://{bucket}/{key}: {type(exc).__name__}: {exc}") from exc
    for name in REPORT_FILES:  # the page and the comparison beside REPORT.md, as finalize writes them
        other = key.rsplit("/", 1)[0] + "/" + name
        try:
            s3_client.head_object(Bucket=bucket, Key=other)
        except Exception as exc:  # any S3 error means the same: no such file
            raise ReportCheckError(f"no {name} at s3://{bucket}/{other}: {type(exc).__name__}: {exc}") from exc
    mirror_dir, report_dir = workdir / "mirror", workdir / "report"
    try:
        summary = pull(S3Store(results_uri, client=s3_client), LocalStore(mirror_dir), run_ids=[run_id])
        build_report_files(str(mirror_dir), [run_id], report_dir)
    except Exception as exc:  # reported with the step that failed
        raise ReportCheckError(f"pull + report from the mirror failed: {type(exc).__name__}: {exc}") from exc
    return ReportCheck(
        f"s3://{bucket}/{key}",
        mirror_dir,
        report_dir,
        sections(bucket_text),
        sections((report_dir / "REPORT.md").read_text()),
        summary.markers_copied,
    )
