#!/usr/bin/env python3
"""A bounded load of real MCP clients through the load balancer (crates/cli/tests/replicas.rs).

The MCP Python SDK's `Client` (PyPI `mcp==2.3.0`, in .cache/venv): CLIENTS clients of each
revision (2025-11-25 sessions, `mode='legacy'`; 2026-07-28 stateless requests), each calling
TOOL one call after another for SECONDS seconds, every call bounded by a timeout (a call that
reaches it is counted as hung). Each legacy client's requests are watched on the wire for the
`Mcp-Session-Id` they carry, so a client that had to initialize again shows two ids.

    $PYTHON_MCP balancer_load.py URL TOOL SECONDS CLIENTS

Output, on stdout, one JSON object: {"calls": [[revision, client, start, end, outcome,
detail], ...], "sessions": {client: [ids...]}, "connect_failures": N}; times are the wall
clock (time.time()); outcome is "ok", "error" or "hung".
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

CALL_TIMEOUT = 10.0


async def one_client(url: str, tool: str, revision: str, index: int, until: float, out: dict[str, Any]) -> None:
    name = f"{revision}#{index}"
    seen: list[str] = []

    async def on_request(request: httpx2.Request) -> None:
        sent = request.headers.get("mcp-session-id")
        if sent and sent not in seen:
            seen.append(sent)

    http = httpx2.AsyncClient(event_hooks={"request": [on_request]}, timeout=httpx2.Timeout(CALL_TIMEOUT, read=None))
    mode = "legacy" if revision == "2025-11-25" else "2026-07-28"
    client = Client(
        streamable_http_client(url, http_client=http),
        mode=mode,
        read_timeout_seconds=CALL_TIMEOUT,
        client_info=types.Implementation(name=f"balancer-load-{name}", version="1"),
    )
    connected = False
    # The call in flight, if any: the SDK ends a legacy client whose POST loses its connection
    # (the killed replica) from its own task group, so that call is recorded here.
    current: dict[str, float] = {}
    # One cancel scope bounds connecting and is then lifted: a scope entered and left around
    # the connect alone would break the order of the task groups the client opens.
    with anyio.CancelScope(deadline=anyio.current_time() + CALL_TIMEOUT) as scope:
        try:
            async with client:
                if mode == "2026-07-28":
                    raw = await client.session.send_discover("2026-07-28")
                    client.session.adopt(types.DiscoverResult.model_validate(raw))
                connected = True
                scope.deadline = math.inf
                await calls(client, tool, revision, name, until, out, current)
        except Exception as error:  # noqa: BLE001 — counted, not fatal
            if not connected:
                sys.stderr.write(f"balancer_load.py: {name} could not connect: {error!r}\n")
                out["connect_failures"] += 1
            else:
                sys.stderr.write(f"balancer_load.py: {name} ended: {error!r}\n")
                if "start" in current:
                    detail = f"client ended: {error!r}"[:200]
                    out["calls"].append([revision, name, current["start"], time.time(), "error", detail])
    if scope.cancelled_caught and not connected:
        out["connect_failures"] += 1
    if revision == "2025-11-25":
        out["sessions"][name] = seen


async def calls(
    client: Client, tool: str, revision: str, name: str, until: float, out: dict[str, Any], current: dict[str, float]
) -> None:
    n = 0
    while time.time() < until:
        n += 1
        start = time.time()
        current["start"] = start
        outcome, detail = "ok", ""
        try:
            with anyio.fail_after(CALL_TIMEOUT + 1):
                result = await client.call_tool(tool, {"text": f"{name}-{n}"})
            if result.is_error:
                outcome, detail = "error", "tool error"
        except TimeoutError:
            outcome, detail = "hung", ""
        except Exception as error:  # noqa: BLE001 — every failure is counted with its words
            outcome, detail = "error", repr(error)[:200]
        out["calls"].append([revision, name, start, time.time(), outcome, detail])
        current.pop("start", None)
        if outcome != "ok":
            # A failed call is tried again after a breath, as a client would.
            await anyio.sleep(0.05)


async def main() -> int:
    if len(sys.argv) != 5:
        sys.stderr.write(__doc__ or "")
        return 2
    url, tool, seconds, clients = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    until = time.time() + seconds
    out: dict[str, Any] = {"calls": [], "sessions": {}, "connect_failures": 0}
    async with anyio.create_task_group() as tg:
        for revision in ("2025-11-25", "2026-07-28"):
            for index in range(clients):
                tg.start_soon(one_client, url, tool, revision, index, until, out)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
