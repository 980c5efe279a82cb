"""The one settings class. Every setting is an environment variable `TAILTUNE_<NAME>` (see docs/operations.md)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "get_settings"]


class Settings(BaseSettings):
    """Where tailtune keeps its state and which external services it talks to.

    Every path default lives under `home`, so `TAILTUNE_HOME=/tmp/x` isolates a whole installation.
    """

    model_config = SettingsConfigDict(env_prefix="TAILTUNE_", extra="ignore")

    home: Path = Field(default=Path(".tailtune"), description="Root of datasets, metadata DB, MLflow, Optuna.")
    database_url: str | None = Field(default=None, description="SQLAlchemy URL of the metadata DB.")
    mlflow_tracking_uri: str | None = Field(default=None, description="MLflow tracking URI.")
    optuna_storage: str | None = Field(default=None, description="Optuna storage URL (RDB) or journal file path.")
    spark_master: str = Field(default="local[*]", description="Spark master URL (local[*] or spark://host:port).")

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def datasets_dir(self) -> Path:
        return self.home_dir / "datasets"

    @property
    def tmp_dir(self) -> Path:
        """Scratch space on the same filesystem as the datasets, so a finished write is one atomic rename."""
        return self.home_dir / "tmp"

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home_dir / 'tailtune.db'}"

    @property
    def resolved_mlflow_tracking_uri(self) -> str:
        return self.mlflow_tracking_uri or f"sqlite:///{self.home_dir / 'mlflow.db'}"

    @property
    def resolved_optuna_storage(self) -> str:
        return self.optuna_storage or str(self.home_dir / "optuna" / "journal.log")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (cached; tests clear the cache with `get_settings.cache_clear()`)."""
    return Settings()
