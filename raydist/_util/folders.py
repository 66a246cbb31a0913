"""The default folders every launcher shares (the main job, DyCodeEval problems, the recall
probe), as Hydra interpolations resolved when a job's config is: one place to change them."""

DATA_ROOT = "${oc.env:RAYDIST_DATA_ROOT,../shared/data}"
"""Data sets that no package ships; the ``benchmark`` group reads files below it."""
CACHE_DIR = "${oc.env:RAYDIST_CACHE_DIR,${oc.env:HOME}/.cache/raydist}"
"""Host cache: sdists, wheelhouses, repository snapshots, view preparations, model answers."""
OUTPUT_ROOT = "runs"
"""Run directories live below it."""
