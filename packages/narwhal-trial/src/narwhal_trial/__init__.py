"""narwhal_trial."""

__all__: list[str] = []
