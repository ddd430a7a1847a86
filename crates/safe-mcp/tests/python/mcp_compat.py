"""Shared by the end-to-end clients: the official Python MCP SDK, across its 1.x and 2.x names,
and the envelope every tool returns."""
import contextlib


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


@contextlib.asynccontextmanager
async def stdio_session(binary, args, **session_args):
    """An initialized client session with `binary args` over stdio, the server started with
    an empty environment. Yields the session and what `initialize` returned."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=binary, args=args, env={})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, **session_args) as session:
            yield session, await session.initialize()
