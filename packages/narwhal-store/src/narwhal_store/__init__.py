"""narwhal_store."""

__all__: list[str] = []
