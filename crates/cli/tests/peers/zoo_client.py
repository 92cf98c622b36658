#!/usr/bin/env python3
"""The official MCP Python SDK's client (PyPI `mcp==2.3.0`) connecting many servers at once, as
an application built on it would: the other side of the zoo benchmark (examples/zoo.rs), which
times the host connecting the same servers.

    $PYTHON_MCP zoo_client.py '<servers as JSON>'

The servers: {"alias": {"command": C, "args": [...], "env": {...}, "cwd": D} or {"url": U}, ...}.
Each is connected with `Client(server, mode="auto")` (the SDK's default: it probes
server/discover and falls back to initialize) and its tools listed, all at once in one task
group; each stays connected until every one is ready or has failed. A stdio server gets this
process's environment with its own `env` over it (the host gives its servers a few variables of
the daemon's; a server here needs none of the others).

Output, one JSON object on stdout: {"all_ready_ms": N or null, "servers": {alias: {"ready_ms": N,
"revision": V, "tools": N} or {"error": "...", "after_ms": N}}}. Exit 0 when every server was
ready, 1 when one failed, 2 on bad usage.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

# As long as the host allows by default for start and negotiation, and then for listing.
CONNECT_SECONDS = 60
LIST_SECONDS = 60


def leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


async def main(servers: dict[str, Any]) -> int:
    started = time.monotonic()
    report: dict[str, Any] = {}
    settled = anyio.Event()
    remaining = [len(servers)]

    def settle(alias: str, entry: dict[str, Any]) -> None:
        report[alias] = entry
        remaining[0] -= 1
        if remaining[0] == 0:
            settled.set()

    async def connect(alias: str, spec: dict[str, Any]) -> None:
        if "url" in spec:
            server: Any = spec["url"]
        else:
            env = dict(os.environ)
            env.update(spec.get("env") or {})
            server = StdioServerParameters(
                command=spec["command"], args=spec.get("args", []), env=env, cwd=spec.get("cwd")
            )
        try:
            client = Client(server, mode="auto", read_timeout_seconds=LIST_SECONDS)
            with anyio.fail_after(CONNECT_SECONDS + LIST_SECONDS):
                async with client:
                    tools = await client.list_tools()
                    settle(
                        alias,
                        {
                            "ready_ms": round((time.monotonic() - started) * 1000),
                            "revision": client.protocol_version,
                            "tools": len(tools.tools),
                        },
                    )
                    await settled.wait()
        except Exception as error:  # noqa: BLE001 — a failed server is this run's news
            if alias not in report:
                error = leaf(error)
                settle(
                    alias,
                    {
                        "error": f"{type(error).__name__}: {error}"[:300],
                        "after_ms": round((time.monotonic() - started) * 1000),
                    },
                )

    async with anyio.create_task_group() as group:
        for alias, spec in servers.items():
            group.start_soon(connect, alias, spec)
    ready = all("ready_ms" in entry for entry in report.values())
    all_ready = max((entry["ready_ms"] for entry in report.values()), default=0) if ready else None
    sys.stdout.write(json.dumps({"all_ready_ms": all_ready, "servers": report}) + "\n")
    return 0 if ready else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: zoo_client.py '<servers as JSON>'\n")
        sys.exit(2)
    sys.exit(anyio.run(main, json.loads(sys.argv[1])))
