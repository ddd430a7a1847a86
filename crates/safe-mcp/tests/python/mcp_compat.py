"""Shared by the end-to-end clients: the official Python MCP SDK, across its 1.x and 2.x names."""


def field(obj, *names):
    """The SDK renamed camelCase attributes to snake_case in 2.x; accept either."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    raise AttributeError(f"{type(obj).__name__} has none of {names}")
