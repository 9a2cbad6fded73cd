"""Bundled prompt sets for the serving lanes (data files; a package so wheels carry them)."""
