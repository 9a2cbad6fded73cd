"""IMDSv2 on a loopback stand-in: token first, then the metadata with the token."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from agents.lanes.provenance import imds_rows

META = {
    "instance-id": "i-0abc",
    "instance-type": "inf2.xlarge",
    "ami-id": "ami-035c945d557065665",
    "placement/region": "us-west-2",
    "placement/availability-zone": "us-west-2a",
}


class FakeImds(BaseHTTPRequestHandler):
    def log_message(self, *args):
        return

    def do_PUT(self):
        assert self.headers["X-aws-ec2-metadata-token-ttl-seconds"]
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"tok")

    def do_GET(self):
        if self.headers.get("X-aws-ec2-metadata-token") != "tok":  # IMDSv2 required
            self.send_response(401)
            self.end_headers()
            return
        key = self.path.removeprefix("/latest/meta-data/")
        self.send_response(200 if key in META else 404)
        self.end_headers()
        self.wfile.write(META.get(key, "").encode())


def test_imds_v2_facts_are_read_with_a_token():
    server = HTTPServer(("127.0.0.1", 0), FakeImds)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        rows = imds_rows(2.0, base=f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
    assert {r["name"]: r["value"] for r in rows} == META


def test_off_ec2_every_field_is_null_with_a_reason():
    rows = imds_rows(0.2, base="http://127.0.0.1:9")
    assert rows and all(r["value"] is None and "not on EC2" in r["note"] for r in rows)


def test_ec2_is_recognised_from_local_files_only(tmp_path):
    from agents.lanes.provenance import ec2_evidence

    vendor = tmp_path / "sys_vendor"
    vendor.write_text("Amazon EC2\n")
    other = tmp_path / "other"
    other.write_text("QEMU\n")
    assert ec2_evidence(((str(other), "Amazon EC2"), (str(vendor), "Amazon EC2"))) == str(vendor)
    assert ec2_evidence(((str(other), "Amazon EC2"), (str(tmp_path / "missing"), "ec2"))) is None
