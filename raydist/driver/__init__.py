"""The main job's driver: settings (``config``), the phases of a launch (``plan`` plans,
``phases`` runs, ``report`` compiles and reports), the driver that calls them in order
(``drive.run_job``) and the plan printed without running anything (``dry_run``)."""
