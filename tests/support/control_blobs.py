"""An in-memory stand-in for the results bucket's control objects (``control_plane.control_data.Blobs``)."""

from __future__ import annotations


class Blobs:
    bucket = "bkt"

    def __init__(self):
        self.objects: dict[str, bytes] = {}

    def get(self, key):
        return self.objects.get(key)

    def put(self, key, body):
        self.objects[key] = body

    def put_new(self, key, body):
        if key in self.objects:
            raise FileExistsError(key)
        self.objects[key] = body
