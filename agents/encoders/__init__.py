"""Encoder models measured by the ``encode`` lane and used by the RAG appliance: speech-to-text, image embedding /
zero-shot classification, text embedding and reranking, each built from a config (``tiny-<family>``) or loaded
from a local directory, run with torch on the CPU or a GPU and traced for NeuronCores."""
