"""JSON Schemas of the trial's file formats, generated from the pydantic models.

The checked-in copies live in ``packages/narwhal-trial/schemas/``; regenerate them with ``python -m
narwhal_trial.schemas --write packages/narwhal-trial/schemas``.
"""

from __future__ import annotations

from narwhal_store import SchemaSet
from narwhal_trial.documents._comparison import Comparison
from narwhal_trial.documents._prediction import Prediction
from narwhal_trial.documents._records import Manifest, RequestRecord, Summary
from narwhal_trial.documents._server import ServerDoc
from narwhal_trial.edge._document import EdgeSearch
from narwhal_trial.workload._file import Workload

_TRIAL_SCHEMAS = SchemaSet(
    {
        "workload": Workload,
        "manifest": Manifest,
        "request": RequestRecord,  # one line of requests.jsonl
        "summary": Summary,
        "prediction": Prediction,
        "edge": EdgeSearch,  # edge.json of a measured capacity search
        "server": ServerDoc,  # server.json: the server's /metrics deltas over a run
        "comparison": Comparison,  # comparison.json of compare A B
    },
    file_name="trial-{name}.schema.json",
    mode="serialization",  # the documents as the trial writes them
)
SCHEMA_FILES = _TRIAL_SCHEMAS.file_names
"""File name of each schema in the checked-in folder."""
json_schemas = _TRIAL_SCHEMAS.json_schemas
"""``workload``, ``manifest``, ``request``, ``summary``, ``prediction``, ``edge``, ``server``,
``comparison`` → schema."""
schema_bytes = _TRIAL_SCHEMAS.schema_bytes
"""File name → the exact bytes ``write_schemas`` writes."""
write_schemas = _TRIAL_SCHEMAS.write_schemas
"""Write every schema into a folder (created if missing, each file atomically); returns the paths
written."""
schemas_command = _TRIAL_SCHEMAS.command
"""``python -m narwhal_trial.schemas --write DIR``."""
