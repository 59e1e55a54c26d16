"""The measured phase pauses the cyclic GC and restores the caller's GC state afterwards."""

from __future__ import annotations

import gc

import pytest

from narwhal_engine_client import gc_paused


@pytest.mark.parametrize("enabled_before", [True, False])
def test_gc_is_off_and_old_objects_frozen_inside_then_restored(enabled_before: bool) -> None:
    """Inside: GC disabled, pre-existing objects frozen; after (also on error): as before."""
    was = gc.isenabled()
    try:
        (gc.enable if enabled_before else gc.disable)()
        with pytest.raises(RuntimeError), gc_paused():
            assert not gc.isenabled()
            assert gc.get_freeze_count() > 0
            raise RuntimeError("boom")
        assert gc.isenabled() is enabled_before
        assert gc.get_freeze_count() == 0
    finally:
        (gc.enable if was else gc.disable)()
