"""The trial's documents: the pydantic models of what a run writes (``manifest.json``, the lines of
``requests.jsonl``, ``summary.json`` with its ``schedule`` and ``server`` parts, ``server.json``),
of the ``predict`` document, and of what a frontend that is not ours publishes; and reading a
finished run folder back through them. Models and readers only: nothing here measures, predicts or
prints."""
