"""Importers: other harnesses' results into our tables, through ``conform`` and the store's commit protocol.

``analytics.importers.torchneuronx`` reads the hand-run predecessor's repository (docs/guides/import.md).
"""
