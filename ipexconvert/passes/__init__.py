"""Graph passes: one per file, each IR -> IR, registered by name; pipelines per dtype."""
from .base import PASSES, PassOptions, register_pass
from .pipeline import PIPELINES, pipeline_for, run_pipeline

__all__ = ["PASSES", "PassOptions", "register_pass", "PIPELINES", "pipeline_for", "run_pipeline"]
