"""Shared by the end-to-end clients: the official Python MCP SDK, across its 1.x and 2.x names,
and the envelope every tool returns."""


def field(obj, *names):
    """The SDK renamed camelCase attributes to snake_case in 2.x; accept either."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    raise AttributeError(f"{type(obj).__name__} has none of {names}")


def envelope_of(result):
    """The envelope a tool call returned (its structuredContent)."""
    return field(result, "structured_content", "structuredContent")


async def checked_call(session, tools, name, args):
    """Calls `name` and checks its envelope against the tool's declared output schema.
    Returns the result and its envelope."""
    import jsonschema  # only the clients that check schemas install it

    result = await session.call_tool(name, args)
    found = envelope_of(result)
    assert found is not None, f"{name}: no structuredContent"
    jsonschema.validate(found, field(tools[name], "output_schema", "outputSchema"))
    return result, found
