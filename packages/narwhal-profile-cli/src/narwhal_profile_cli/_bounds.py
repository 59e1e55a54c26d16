"""The options' defaults and bounds: cited by their help text (``_command_line``), enforced by
their validation (``_options``) and by the preflight's minimums."""

from __future__ import annotations

DEFAULT_PREFILL_LENS = "256,512,1024,2048,4096,8192,12288,16384"
DEFAULT_DECODE_INPUT_LENS = "512,4096,8192"
DEFAULT_DECODE_CONCURRENCY = "1,4,16,48"
DEFAULT_DECODE_TOKENS = "64"
DEFAULT_PREFILL_REPEATS = "3"
DEFAULT_DECODE_REPEATS = "1"
# the mixing point (--mixing): streams per point, prefills injected into them, repeats per point
DEFAULT_MIXING_CONCURRENCY = 4
DEFAULT_MIXING_PREFILLS = 4
DEFAULT_MIXING_REPEATS = 1
# the freshness probe (--verify): the drift past which an engine fails
DEFAULT_THRESHOLD = "0.10"

# The reference's minimums: distinct values a list must hold, and the smallest scalar values.
MIN_PREFILL_LENS = 3
MIN_DECODE_INPUT_LENS = 2
MIN_DECODE_CONCURRENCY = 2
MIN_DECODE_TOKENS = 3
MIN_PREFILL_REPEATS = 3
MIN_DECODE_REPEATS = 1
MIN_MIXING_LENS = 2  # a mixing fit needs two prefill lengths

# Upper bounds (README "Bounds"), checked before any engine is contacted: a value past them is a
# typo or a request no engine could serve (vLLM's max_num_seqs tops out at 1024 on the largest GPUs;
# token counts beyond 2^20 exceed every served context), and it would otherwise build one request
# body per stream or repeat before any engine could refuse it.
MAX_TOKENS = 1_048_576  # prompt lengths, decode tokens, neighbour token counts
MAX_DECODE_CONCURRENCY = 1024
MAX_DECODE_TOKENS = 65_536
MAX_PREFILL_REPEATS = 100
MAX_DECODE_REPEATS = 100
MAX_MIXING_PREFILLS = 100
MAX_MIXING_REPEATS = 100
MAX_LIST_VALUES = 64  # distinct values in one list option
MAX_RATE = 1000.0  # neighbour requests per second
