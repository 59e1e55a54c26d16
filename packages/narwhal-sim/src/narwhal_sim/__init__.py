"""narwhal_sim."""

__all__: list[str] = []
