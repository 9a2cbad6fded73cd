"""The result store on S3: create-only writes through S3's conditional PUT (If-None-Match)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from analytics.store.base import ObjectInfo, ResultStore, _sha256_stream
from analytics.store.markers import AlreadyExistsError, ArtifactNotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_s3 import S3Client


# Transfers of big files (a merged 8B model is ~16 GB in 5 GB shards, a compile cache 1.2 GB): parts in parallel.
# The predecessor measured the AWS CLI's defaults at 9 MB/s and 30 concurrent 64 MB parts at about 92 MB/s; eight
# threads of 64 MiB parts keep a part buffer per thread (512 MiB) within an inf2.xlarge's 16 GiB.
PART_BYTES = 64 * 2**20
SINGLE_PUT_MAX_BYTES = 128 * 2**20  # above this a file goes as a multipart upload, its parts in parallel
TRANSFER_THREADS = 8


COMMITS_ENV = "NEURONPIPE_COMMITS"  # "propose" on a box: its markers are proposals the control plane commits


class S3Store(ResultStore):
    """``s3://bucket/prefix`` through boto3 (client injected; created only when absent)."""

    def __init__(self, uri: str, client: S3Client | None = None, proposes: bool | None = None):
        """``proposes``: commit by proposal (see :class:`ResultStore`); default from ``NEURONPIPE_COMMITS``."""
        if not uri.startswith("s3://"):
            raise ValueError(f"not an s3:// URI: {uri!r}")
        rest = uri[5:]
        self.bucket, _, prefix = rest.partition("/")
        self.prefix = prefix.strip("/")
        self.root = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        if client is None:
            import boto3

            client = boto3.client("s3")
        self.client = client
        if proposes is None:
            import os

            proposes = os.environ.get(COMMITS_ENV, "") == "propose"
        self.proposes = proposes

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _create_only(self, key: str, write: Any) -> None:
        """Run ``write()`` (a conditional create: S3 If-None-Match); the service's refusal is AlreadyExistsError."""
        from botocore.exceptions import ClientError

        try:
            write()
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise AlreadyExistsError(f"{self.uri(key)} exists; results are never overwritten") from exc
            raise

    def put_bytes(self, key: str, data: bytes) -> None:
        self._create_only(
            key, lambda: self.client.put_object(Bucket=self.bucket, Key=self._k(key), Body=data, IfNoneMatch="*")
        )

    def put_file(self, key: str, local_path: Path) -> None:
        """Create-only like :meth:`put_bytes`: S3 refuses the write when the key exists (If-None-Match on the
        single PUT, or on completing a multipart upload for files past :data:`SINGLE_PUT_MAX_BYTES`)."""
        local_path = Path(local_path)

        def write() -> None:
            if local_path.stat().st_size <= SINGLE_PUT_MAX_BYTES:
                with local_path.open("rb") as body:
                    self.client.put_object(Bucket=self.bucket, Key=self._k(key), Body=body, IfNoneMatch="*")
            else:
                self._put_multipart(key, local_path)

        self._create_only(key, write)

    def _put_multipart(self, key: str, local_path: Path) -> None:
        """Parts of :data:`PART_BYTES` uploaded by :data:`TRANSFER_THREADS` threads, each reading its own slice;
        the completion is the conditional create (If-None-Match), so a key that exists is never replaced."""
        from concurrent.futures import ThreadPoolExecutor

        size = local_path.stat().st_size
        upload = self.client.create_multipart_upload(Bucket=self.bucket, Key=self._k(key))
        uid = upload["UploadId"]

        def one(number: int) -> dict[str, Any]:
            with local_path.open("rb") as fh:
                fh.seek((number - 1) * PART_BYTES)
                chunk = fh.read(PART_BYTES)
            part = self.client.upload_part(
                Bucket=self.bucket, Key=self._k(key), UploadId=uid, PartNumber=number, Body=chunk
            )
            return {"ETag": part["ETag"], "PartNumber": number}

        try:
            numbers = range(1, max(1, -(-size // PART_BYTES)) + 1)
            with ThreadPoolExecutor(max_workers=TRANSFER_THREADS) as pool:
                parts = list(pool.map(one, numbers))
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=self._k(key), UploadId=uid, MultipartUpload={"Parts": parts}, IfNoneMatch="*"
            )
        except BaseException:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=self._k(key), UploadId=uid)
            raise

    def objects(self, prefix: str = "") -> list[ObjectInfo]:
        out = []
        strip = len(self.prefix) + 1 if self.prefix else 0
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._k(prefix)):
            for obj in page.get("Contents", []):
                out.append(ObjectInfo(obj["Key"][strip:], int(obj["Size"]), obj["LastModified"].timestamp()))
        return sorted(out, key=lambda o: o.key)

    def sha256(self, key: str) -> str:
        from botocore.exceptions import ClientError

        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._k(key))["Body"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise ArtifactNotFoundError(f"{self.uri(key)} not found") from exc
            raise
        return _sha256_stream(body)

    def get_bytes(self, key: str) -> bytes:
        from botocore.exceptions import ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._k(key))["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise ArtifactNotFoundError(f"{self.uri(key)} not found") from exc
            raise

    def download(self, key: str, local_path: Path) -> None:
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        if not self.exists(key):
            raise ArtifactNotFoundError(f"{self.uri(key)} not found")
        from boto3.s3.transfer import TransferConfig

        self.client.download_file(
            self.bucket,
            self._k(key),
            str(local_path),
            Config=TransferConfig(
                multipart_threshold=SINGLE_PUT_MAX_BYTES,
                multipart_chunksize=PART_BYTES,
                max_concurrency=TRANSFER_THREADS,
            ),
        )

    def list_keys(self, prefix: str) -> list[str]:
        out = []
        strip = len(self.prefix) + 1 if self.prefix else 0
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._k(prefix)):
            for obj in page.get("Contents", []):
                out.append(obj["Key"][strip:])
        return sorted(out)

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._k(key))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def size_of(self, key: str) -> int | None:
        from botocore.exceptions import ClientError

        try:
            return int(self.client.head_object(Bucket=self.bucket, Key=self._k(key))["ContentLength"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._k(key)}"
