"""One ``run``: its settings, the open-loop pacing (absolute due times, schedule misses),
draining the fleet, the request-field probe, judging each offer into its record, the
``requests.jsonl`` writer, the manifest and the summary with its schedule view, all on the event
loop the run chose."""
