"""A deterministic toy tokenizer: stable ids in a 32000-id vocabulary and exact counts.

Every ordinary id ``N`` (``FIRST_ORDINARY <= N < VOCAB_SIZE``) has a spelling of three
two-letter syllables (``word(N)``), so ``encode(decode(ids)) == ids``. Other text is split on
whitespace, long words into pieces of at most six characters, and each piece that is not a
spelling hashes (blake2b) to an ordinary id.
"""

from __future__ import annotations

import hashlib

VOCAB_SIZE = 32000
BOS_ID = 1
EOS_ID = 2
FIRST_ORDINARY = 256
_ORDINARY = VOCAB_SIZE - FIRST_ORDINARY
_SYLLABLES = tuple(c + v for c in "bdfgklmnprstvz" for v in "aeiou")  # 70 syllables
_BASE = len(_SYLLABLES)
_SYL_INDEX = {s: i for i, s in enumerate(_SYLLABLES)}
_PIECE = 6


def word(token_id: int) -> str:
    """The spelling of a token id (special ids get ``<s>``-style names)."""
    if token_id == BOS_ID:
        return "<s>"
    if token_id == EOS_ID:
        return "</s>"
    if token_id < FIRST_ORDINARY:
        return f"<0x{token_id:02X}>"
    n = token_id - FIRST_ORDINARY
    return (
        _SYLLABLES[n // (_BASE * _BASE)] + _SYLLABLES[(n // _BASE) % _BASE] + _SYLLABLES[n % _BASE]
    )


def _spelled_id(piece: str) -> int | None:
    if len(piece) != _PIECE:
        return None
    try:
        a, b, c = (_SYL_INDEX[piece[i : i + 2]] for i in (0, 2, 4))
    except KeyError:
        return None
    n = (a * _BASE + b) * _BASE + c
    return FIRST_ORDINARY + n if n < _ORDINARY else None


def _hashed_id(piece: str) -> int:
    digest = hashlib.blake2b(piece.encode("utf-8"), digest_size=8).digest()
    return FIRST_ORDINARY + int.from_bytes(digest, "little") % _ORDINARY


def encode(text: str, *, add_special_tokens: bool = False) -> list[int]:
    """Token ids of ``text`` (a BOS id first when ``add_special_tokens``)."""
    ids = [BOS_ID] if add_special_tokens else []
    for w in text.split():
        for start in range(0, len(w), _PIECE):
            piece = w[start : start + _PIECE]
            spelled = _spelled_id(piece)
            ids.append(spelled if spelled is not None else _hashed_id(piece))
    return ids


def decode(ids: list[int]) -> str:
    """Text of ``ids``: each token is a space followed by its spelling (specials skipped)."""
    return "".join(" " + word(i) for i in ids if i >= FIRST_ORDINARY)


def token_text(token_id: int) -> str:
    """The text one generated token contributes to a completion."""
    return " " + word(token_id)


def generated_id(seed: int, position: int) -> int:
    """The ``position``-th generated token of a request whose prompt digest is ``seed``."""
    x = (seed ^ (position * 0x9E3779B97F4A7C15)) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 29
    return FIRST_ORDINARY + x % _ORDINARY


def prompt_digest(ids: list[int]) -> int:
    """A stable 64-bit digest of a prompt (drives generated ids and the natural EOS point)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(len(ids).to_bytes(8, "little"))
    h.update(b"".join(i.to_bytes(4, "little") for i in ids[:64]))
    h.update(b"".join(i.to_bytes(4, "little") for i in ids[-64:]))
    return int.from_bytes(h.digest(), "little")


def natural_length(digest: int) -> int:
    """Tokens before the model would emit EOS on its own (8..135), used without ``ignore_eos``."""
    return 8 + digest % 128
