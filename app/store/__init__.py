"""The App's persistence: the `Store` interface and its embedded SQLite implementation."""

from app.store.base import (
    CommandRecord,
    DeliveryRecord,
    InstallationChange,
    InstallationRecord,
    JobKind,
    JobRecord,
    JobState,
    NewJob,
    PrunedJobs,
    Store,
)
from app.store.sqlite import SqliteStore

__all__ = [
    "CommandRecord",
    "DeliveryRecord",
    "InstallationChange",
    "InstallationRecord",
    "JobKind",
    "JobRecord",
    "JobState",
    "NewJob",
    "PrunedJobs",
    "SqliteStore",
    "Store",
]
