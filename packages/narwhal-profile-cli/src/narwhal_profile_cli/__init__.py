"""narwhal_profile_cli."""

__all__: list[str] = []
