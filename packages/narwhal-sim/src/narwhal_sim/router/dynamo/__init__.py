"""The router standing in for NVIDIA Dynamo's OpenAI frontend (``--router-mimic dynamo``): the
router (``_router``), what the frontend says on the wire (``_wire``), how it relays an engine's
stream (``_relay``) and its ``/metrics`` page (``_metrics``)."""
