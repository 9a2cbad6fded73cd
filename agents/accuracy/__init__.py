"""The accuracy lane's engine: lm-eval against the served endpoint, its per-sample rows, the shipped task set.

``harness`` runs lm-eval (imported inside its functions: nothing that tests import pulls lm-eval in at module level);
``taskfiles`` reads lm-eval task YAMLs and points their data files at local copies; ``tasks/`` is the task set written
for this project (``tasks/compose.py`` writes it).
"""
