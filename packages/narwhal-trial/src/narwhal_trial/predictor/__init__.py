"""``predict``: the fleet as the predictor sees it (each engine's fits, their spread, its profiled
domain and engine settings), the virtual-time fleet that replays a trial, one rate's attainment and
the search for the edge, the throughput bound and the sustainable rate, and the calibration against
a measured run."""
