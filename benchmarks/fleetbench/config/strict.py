"""The base of every config section: unknown keys and wrong types fail on load and on assignment."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel"]


class StrictModel(BaseModel):
    """A config model that rejects unknown keys and validates values on assignment as well as on load."""

    # A misspelt key would otherwise be ignored silently and the run would measure the default.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
