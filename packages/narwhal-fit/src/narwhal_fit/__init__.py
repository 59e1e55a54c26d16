"""narwhal_fit."""

__all__: list[str] = []
