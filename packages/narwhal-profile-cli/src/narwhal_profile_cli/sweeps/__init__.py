"""The sweeps: everything that measures a live engine. Preflight (health, ``max_model_len``, the
evidence a profile is bound to, the scheduler settings, the points kept), the prefill, decode and
mixing sweeps with the requests, prompts and ``/metrics`` watch they use, the prefill fit and its
gates, the colocated neighbours' traffic, and the GPU groups that ``--parallel-groups`` runs side by
side and ``--shard`` splits. The sweeps import only the package's foundations (errors, options,
bounds, progress); ``results`` turns what they measured into documents."""
