"""The checks around a trial: ``check``, the runbook's pre-trial items, and ``reconcile``, the
client's records matched against the router's journal."""
