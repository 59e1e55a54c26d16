"""The results: what the command makes of the sweeps' measurements. Each finished engine shaped into
its profile and sidecar entry and written to the store, one write at a time; the refit of TTFT from
retained samples and the merge of separately measured stores, with the checks of their inputs; the
freshness probe's points, references and drift (``--verify``); the fit quality and warnings on
screen; and the command's result, as lines or one
``narwhal.profile.result`` document. The results import the sweeps (for the types of what they
measured) and the package's foundations, never the command layer (``cli``, ``_run``, ``_live``,
``_modes``)."""
