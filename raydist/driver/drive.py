"""The driver: one planned ``Job`` run in its run directory.

    plan (raydist.driver.plan) -> execute (raydist.cluster.execute) -> compile -> report

``run_job`` holds the run directory (one launch at a time, mirrored to ``storage``), hands
the whole ``Job`` to the executor in ``raydist.cluster.execute``, then compiles the tables
and writes the summary (``raydist.driver.report``). Rows are written through one
``RowSink`` per run directory, as they arrive.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

from raydist._util.files import atomic_write_json, atomic_write_text
from raydist._util.run_dirs import write_record
from raydist._util.storage import StorageCopyError, StorageError, mirrored, open_storage
from raydist.cluster.execute import ClusterRefused, execute_job
from raydist.cluster.job import Job
from raydist.driver.plan import JobError
from raydist.driver.report import compile_tables, exit_status, report
from raydist.outcomes import InfrastructureError, classify_exception
from raydist.results import ResultStore, RunDirBusy, run_dir_lock
from raydist.results.budget import BUDGET_FILE
from raydist.sandbox.image_ledger import stamp


def run_job(job: Job, *, execute: Callable[..., dict] | None = None, record: Mapping[str, str] | None = None) -> int:
    """Run the units of ``job`` that are not finished yet, then write ``gate.json`` (the
    validity gate's verdict, when it ran), ``runs.parquet``, ``steps.parquet``, ``preds/`` and
    ``summary.md`` in ``job.run_dir``, ``images.json`` (``raydist.cluster.run_images``: the images the
    launch used, built or pulled, and their bytes on the node) with each image stamped in the ledger
    under ``cache_dir`` (``raydist.sandbox.image_ledger``), print the
    summary and return the exit status (``raydist.driver.report.exit_status``: 0, 1, 3 or 130),
    and ``budget.json`` (``raydist.results.budget.Spending``): what the model calls spent and
    the units ``job.budget`` kept from starting.

    One launch at a time holds ``job.run_dir`` (``raydist.results.run_dir_lock``): a second
    one raises ``JobError`` at once, naming the directory and the holder's pid. With
    ``job.storage``, the run directories are mirrored there (``raydist._util.storage.mirrored``:
    filled from it first, each row copied as written, everything copied at the end); a storage
    that cannot be written raises ``JobError`` naming ``storage`` before anything runs. SIGTERM and
    Ctrl-C stop scheduling; rows already written stay and the tables are compiled from them.
    Raises ``InfrastructureError`` (one line: what failed, what to do) for Docker that cannot
    be reached, a missing base image, a full disk, a storage that cannot take the run's files
    (naming it; the same command finishes the copy) and a model server that does not start;
    ``JobError`` for a setting the cluster cannot satisfy.

    ``record`` (file name -> text, ``raydist.launcher.config_record``) is written to
    ``<run_dir>/.hydra/`` once the run directory is held, before any unit starts: a launch
    refused before then (by the plan, or a run directory in use) leaves an earlier launch's
    record as it was.

    ``execute`` is what each unit's Ray task runs (``raydist.cluster.scheduler.run_units``;
    None: ``raydist.cluster.unit.execute_unit``, the sandboxed agent and grading)."""
    try:
        if job.storage is not None:
            open_storage(job.storage)
    except StorageError as exc:
        raise JobError(str(exc)) from exc
    try:
        with run_dir_lock(job.run_dir), mirrored(job.mirror, job.run_dir):
            gate_dir = job.gate.store_dir if job.gate is not None else None
            with mirrored(job.gate.mirror if job.gate is not None else None, gate_dir or job.run_dir):
                write_record(job.run_dir, record)
                store = ResultStore(job.run_dir, mirror=job.mirror)
                gate_store = ResultStore(job.gate.store_dir, mirror=job.gate.mirror) if job.gate is not None else None
                try:
                    done = execute_job(job, store, gate_store, execute=execute)
                except ClusterRefused as exc:
                    raise JobError(str(exc)) from exc
                table = compile_tables(job, store, done.ran)
                status = exit_status(table, interrupted=done.interrupted, spending=done.spending)
                text = report(job, table, done.verdict, interrupted=done.interrupted, spending=done.spending)
                if done.verdict is not None:  # the validity gate's verdict on this launch's views
                    atomic_write_text(job.run_dir / "gate.json", done.verdict.to_json())
                if done.spending is not None:
                    done.spending.write(job.run_dir)
                elif (job.run_dir / BUDGET_FILE).exists():
                    (job.run_dir / BUDGET_FILE).unlink()  # nothing ran: an earlier launch's record no longer applies
                if done.images is not None:  # what the launch's images take (raydist.sandbox.footprint)
                    atomic_write_json(job.run_dir / "images.json", done.images, indent=1)
                    _stamp_ledger(job, done.images)
                atomic_write_text(job.run_dir / "summary.md", text)
                print(text, flush=True)
                return status
    except RunDirBusy as exc:
        raise JobError(str(exc)) from exc
    except StorageCopyError as exc:  # the rows and tables are on this disk; the storage lacks some
        raise _storage_failure(exc, job) from exc
    except OSError as exc:  # the storage could not be read or written
        raise _disk_failure(exc) from exc


def _stamp_ledger(job: Job, images: Mapping) -> None:
    """Stamp the launch's ``images`` (``images.json``) in the image ledger under ``cache_dir``. A
    ledger that cannot be read or written (damaged since the plan read it, a full disk) costs the
    launch nothing it did: one line on stderr says so and what to do, and the summary and exit
    status follow as if it had been stamped (the ledger only orders ``raydist images prune``)."""
    try:
        stamp(job.settings.cache_dir, images["images"], when=images["started"], launch=str(job.run_dir))
    except (ValueError, OSError) as exc:
        print(f"raydist: warning: the image ledger was not updated ({exc}); the run's images are in "
              f"{job.run_dir / 'images.json'}", file=sys.stderr, flush=True)


def _storage_failure(exc: StorageCopyError, job: Job) -> InfrastructureError:
    """A copy to ``storage`` that failed (at the end of a launch, or of a row): the run directory
    on this disk keeps every file, and the same command copies what the storage lacks."""
    _, cause = classify_exception(exc)
    return InfrastructureError(f"{exc}; every file is kept in {job.run_dir}: free space in storage={job.storage} "
                               "(or fix what the error names) and run the same command again to finish the copy",
                               cause=cause)


def _disk_failure(exc: OSError) -> InfrastructureError:
    """A failed read or write of the host: a full disk says to free space, anything else to check
    the path or connection the error names."""
    _, cause = classify_exception(exc)  # disk_full, connection, or the error's type name
    if cause == "disk_full":
        return InfrastructureError(f"{exc}; free space or choose another output_root (finished rows are kept)",
                                   cause=cause)
    return InfrastructureError(f"{exc}; check the path or connection named there (finished rows are kept)",
                               cause=cause)
