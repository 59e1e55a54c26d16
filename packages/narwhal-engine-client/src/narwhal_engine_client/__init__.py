"""narwhal_engine_client."""

__all__: list[str] = []
