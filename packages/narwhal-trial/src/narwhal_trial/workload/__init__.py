"""The workload: ``prepare``'s seed completion and token-id pool, the workload file
(``workload.json``) with its deterministic prompt sampler, and its schedule, a production trace's
window or synthetic arrivals and lengths. In this package "schedule" means a workload's own arrival
times; the client's timing is "pacing" (``run``), the engines' is "engine settings"
(``predictor``)."""
