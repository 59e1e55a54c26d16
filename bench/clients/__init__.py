"""The side-by-side client benchmark: narwhal-trial vs AIPerf 0.13.0 vs guidellm 0.8.1.

Entry point: ``bench/bench_clients.py`` (``make bench-clients``). ``counterpart.py`` (the stamping
server) and ``build_tokenizer.py`` (run inside a throwaway venv) are standalone scripts.
"""
