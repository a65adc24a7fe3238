"""Whole FlashInfer-Bench datasets: the layout on disk, the run engine, the trace files."""

from .engine import Outcome, RunEvent, RunOptions, RunSummary, Task, run_dataset
from .layout import Dataset, load_dataset

__all__ = ["Dataset", "Outcome", "RunEvent", "RunOptions", "RunSummary", "Task", "load_dataset",
           "run_dataset"]
