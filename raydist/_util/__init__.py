"""Small pieces every package uses: content hashing, atomic file writes, the model-call protocol,
the name of a sweep job's run directory (``run_dirs``).

Nothing here knows about views, units or Ray; each module is a few functions.
"""

from raydist._util.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_parquet,
    atomic_write_text,
    temporary_beside,
)
from raydist._util.hashing import file_sha256, stable_hash
from raydist._util.protocols import Complete

__all__ = ["Complete", "atomic_write_bytes", "atomic_write_json", "atomic_write_parquet", "atomic_write_text",
           "file_sha256", "stable_hash", "temporary_beside"]
