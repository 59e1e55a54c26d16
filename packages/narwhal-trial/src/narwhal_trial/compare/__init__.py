"""``compare``: two deployments' trials, edges and profiles side by side, with a verdict per
measure: the difference in attainment (Newcombe's interval), the shift in TTFT and TPOT quantiles
(bootstrap over requests), whether two edges' brackets separate, and each engine's fits against
the other's; each says better, worse or no detectable difference at a confidence, with the
smallest difference the sample could have detected."""
