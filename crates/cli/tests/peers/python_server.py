#!/usr/bin/env python3
"""Third-party MCP test peer: a server built on the official Python SDK (PyPI `mcp==2.3.0`).

Installed by scripts/install-peers.sh into .cache/venv; run it with that venv's python
($PYTHON_MCP from .cache/peers.env):

    $PYTHON_MCP tests/peers/python_server.py              # stdio
    $PYTHON_MCP tests/peers/python_server.py --http PORT  # Streamable HTTP, http://127.0.0.1:PORT/mcp
                                                          # (PORT 0 picks a free port)

In HTTP mode it prints `listening http://127.0.0.1:PORT/mcp` on stdout once it accepts
connections. Server name "python-peer"; tools `echo(text) -> text` and `add(a, b) -> a + b`.

The SDK serves both protocol eras in one process: a connection whose first request carries
the 2026-07-28 `_meta` envelope (`io.modelcontextprotocol/protocolVersion` +
`io.modelcontextprotocol/clientCapabilities`, e.g. `server/discover`) is served as
2026-07-28; one that opens with `initialize` is served as 2025-11-25 (or older).
"""

from __future__ import annotations

import argparse
import socket
import sys

from mcp.server import MCPServer

server = MCPServer(
    "python-peer", version="1.0.0", instructions="Test peer for plurnk-mcp.", log_level="WARNING"
)


@server.tool(description="Echo the given text back unchanged.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two numbers and return their sum.")
def add(a: int | float, b: int | float) -> int | float:
    return a + b


def _run_http(port: int) -> None:
    import anyio
    import uvicorn

    host = "127.0.0.1"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]

    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def announce() -> None:
                while not http.started:
                    if http.should_exit:
                        return
                    await anyio.sleep(0.02)
                print(f"listening http://{host}:{port}/mcp", flush=True)

            tg.start_soon(announce)
            await http.serve(sockets=[sock])

    anyio.run(main)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp")
    args = parser.parse_args()
    if args.http is not None:
        _run_http(args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    sys.exit(main())
