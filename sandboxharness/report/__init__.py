"""Exports and reports of a dataset: Parquet/CSV tables (``export``), one self-contained
HTML page (``html``, plots by ``svg``) and FlashInfer-Bench's text views (``fibviews``).
Entry points: :func:`sandboxharness.report.build.export_dataset` and ``build_report``."""
