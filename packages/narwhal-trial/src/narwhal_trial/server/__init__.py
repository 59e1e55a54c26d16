"""The server's own view of a run: the engines' and the router's ``/metrics`` pages read around the
measured phase and their deltas (``server.json``), the client's records compared with them, vLLM's
request spans (from the OTLP receiver) joined to the records by request id, what a foreign frontend
publishes, and the engines' launch records."""
