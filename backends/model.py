"""hpcui's pydantic base model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """Every hpcui model: its validator and serializer are built on first use, not at import
    (``defer_build``). Building ~40 schemas cost ~70 ms of every ``import hpcui.clusters.api`` and
    CLI call, most of them for models that call never touches. Subclasses' own
    ``model_config`` is merged with this one."""

    model_config = ConfigDict(defer_build=True)
