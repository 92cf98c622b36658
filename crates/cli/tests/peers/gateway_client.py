#!/usr/bin/env python3
"""A real MCP client for the gateway tests: the MCP Python SDK's `Client` (PyPI `mcp==2.3.0`).

Installed by scripts/install-peers.sh into .cache/venv; run it with that venv's python
($PYTHON_MCP from .cache/peers.env):

    $PYTHON_MCP tests/peers/gateway_client.py [OPTIONS] --http <url>
    $PYTHON_MCP tests/peers/gateway_client.py [OPTIONS] --stdio <command> [args...]

`--stdio` comes last: everything after it is the server's command line.

Options:
  --plan '<json>'      the plan: a JSON array of steps (or {"steps": [...]})
  --plan-file PATH     the plan from a file (`-`: stdin)
  --revision R         2026-07-28, 2025-11-25 or auto (default). The SDK picks the revision with
                       `Client(mode=...)`: 'auto' (its default) probes server/discover and falls
                       back to initialize; 'legacy' runs initialize (offering 2025-11-25, the
                       newest handshake revision); a modern version string adopts that revision
                       with no probe at all. Here 2025-11-25 is mode='legacy', and 2026-07-28 is
                       mode='2026-07-28' followed by one server/discover at 2026-07-28 whose
                       result is adopted (so capabilities and serverInfo are the server's own); a
                       failed discover fails the connection. --no-discover skips that discover
                       (the SDK's bare pin: synthesized empty capabilities, no serverInfo).
  --timeout-ms N       the bound on connecting and on each step (default 30000); a step's own
                       "timeout_ms" overrides it
  --listen L           auto (default): on a 2026-07-28 connection open subscriptions/listen for
                       tools when the server advertises tools.listChanged (what the TypeScript
                       SDK does on its own); always: open it whatever the server advertises.
                       2025-11-25 list_changed notifications arrive unsolicited either way.
  --elicit '<json>'    answer every form elicitation with action "accept" and this JSON object
                       as its content: the SDK's `Client(elicitation_callback=...)`, which serves
                       both a 2025-11-25 server's elicitation/create request and the
                       elicitation/create input requests of a 2026-07-28 input_required result
                       (the SDK's own SEP-2322 driver answers them through the same callback and
                       retries the request with inputResponses and the echoed requestState, up
                       to 10 rounds). The client then declares the elicitation capability, form
                       mode only (the SDK would declare form and url for any callback; the
                       driver trims it to {"form":{}}); a url-mode elicitation is refused with
                       the SDK's "Elicitation not supported" error. Without --elicit the client
                       has no callback and declares no elicitation: the SDK's default refuses
                       elicitation/create with -32600 "Elicitation not supported", and an
                       input_required result's elicitation fails the call with that error.

The stdio server inherits this process's whole environment (the SDK's default would pass only a
whitelist) and its stderr.

With --elicit every step's line (connected excepted) also has "elicited": the message of each
elicitation the client answered during that step, in order.

Steps: {"op":"list_tools"} {"op":"call","tool":NAME,"arguments":{...}} {"op":"list_resources"}
{"op":"read","uri":URI} {"op":"list_prompts"} {"op":"get_prompt","name":N,"arguments":{...}}
{"op":"wait_tools_changed","timeout_ms":N} {"op":"sleep","ms":N}
{"op":"time_calls","tool":NAME,"arguments":{...},"calls":N,"warmup":W}: W calls, then N calls one
after another, each timed (the gateway benchmark, examples/gateway.rs); its result is
{"latencies_us":[...]} and a call that fails ends the step with that error

Output, one JSON object per line on stdout (diagnostics go to stderr):
  {"op":"connected","protocolVersion":...,"era":"modern"|"legacy","serverInfo":...,
   "capabilities":...,"listening":{"toolsListChanged":true}|null}
  then per step {"op":...,"ok":true,"result":<the SDK's result model as JSON>} or
  {"op":...,"ok":false,"error":{"code":<JSON-RPC code>,"message":...,"data":...}}; an error that
  is no JSON-RPC error has "code":null and "kind" ("timeout", "invalid_result": the SDK refused
  the result, "error"). The SDK's own request
  timeout is a JSON-RPC -32001 with "kind":"timeout".

The list steps walk every page (the SDK returns one page per call; the aggregate is the first
page's result with every page's items and no nextCursor, plus "pages" on the line), all with
cache_mode='refresh', and read uses cache_mode='refresh': every step reaches the server, none is
served from the SDK's response cache. wait_tools_changed consumes one tools list_changed
notification (one that arrived since the previous wait counts), then lists the tools again; its
line has "via": "listen" (an event of the subscriptions/listen stream), "unsolicited" (a 2026-07-28
connection, outside any stream) or "notification" (2025-11-25).

Exit status: 0 when the plan ran to its end (step errors included); 1 when the connection could
not be made; 3 when the connection was lost during the plan (the plan still runs out, its
remaining steps failing); 2 on bad usage.
"""

from __future__ import annotations

import json
import os
import math
import sys
import time
from collections import deque
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

DEFAULT_TIMEOUT_MS = 30000
MAX_PAGES = 64
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001

USAGE = (
    "usage: gateway_client.py [--plan JSON | --plan-file PATH] [--revision auto|2026-07-28|2025-11-25]\n"
    "       [--no-discover] [--timeout-ms N] [--listen auto|always] [--elicit JSON]\n"
    "       (--http URL | --stdio COMMAND [ARGS...])\n"
)


def usage(message: str) -> None:
    sys.stderr.write(f"gateway_client.py: {message}\n{USAGE}")
    sys.exit(2)


def parse_args(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "revision": "auto",
        "timeout_ms": DEFAULT_TIMEOUT_MS,
        "listen": "auto",
        "discover": True,
        "elicit": None,
        "http": None,
        "stdio": None,
    }
    plan_text = None
    i = 0

    def value() -> str:
        nonlocal i
        if i + 1 >= len(argv):
            usage(f"{argv[i]} needs a value")
        i += 1
        return argv[i]

    while i < len(argv):
        arg = argv[i]
        if arg == "--plan":
            plan_text = value()
        elif arg == "--plan-file":
            path = value()
            plan_text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        elif arg == "--revision":
            opts["revision"] = value()
            if opts["revision"] not in ("auto", "2026-07-28", "2025-11-25"):
                usage(f"unknown revision {opts['revision']}")
        elif arg == "--no-discover":
            opts["discover"] = False
        elif arg == "--timeout-ms":
            try:
                opts["timeout_ms"] = float(value())
            except ValueError:
                usage("--timeout-ms needs a number")
            if opts["timeout_ms"] <= 0:
                usage("--timeout-ms needs a positive number")
        elif arg == "--listen":
            opts["listen"] = value()
            if opts["listen"] not in ("auto", "always"):
                usage(f"unknown listen mode {opts['listen']}")
        elif arg == "--elicit":
            try:
                opts["elicit"] = json.loads(value())
            except ValueError as error:
                usage(f"--elicit is not JSON: {error}")
            if not isinstance(opts["elicit"], dict):
                usage("--elicit needs a JSON object")
        elif arg == "--http":
            opts["http"] = value()
        elif arg == "--stdio":
            if i + 1 >= len(argv):
                usage("--stdio needs a command")
            opts["stdio"] = (argv[i + 1], argv[i + 2 :])
            i = len(argv)
        elif arg in ("-h", "--help"):
            sys.stderr.write(__doc__ or "")
            sys.exit(2)
        else:
            usage(f"unknown argument {arg}")
        i += 1
    if (opts["http"] is None) == (opts["stdio"] is None):
        usage("give exactly one of --http URL and --stdio COMMAND")
    plan: Any = []
    if plan_text is not None:
        try:
            plan = json.loads(plan_text)
        except ValueError as error:
            usage(f"the plan is not JSON: {error}")
        if isinstance(plan, dict) and isinstance(plan.get("steps"), list):
            plan = plan["steps"]
        if not isinstance(plan, list):
            usage("the plan must be a JSON array of steps")
    opts["plan"] = plan
    return opts


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def dump(model: Any) -> Any:
    if model is None:
        return None
    if hasattr(model, "model_dump"):
        return model.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return model


class StepTimeout(Exception):
    pass


def form_only_elicitation() -> None:
    """Trim the SDK's elicitation capability ad to form mode.

    mcp 2.3.0's ClientSession declares `{"form":{},"url":{}}` whenever an elicitation callback is
    set; this driver answers form elicitations only, so the ad it sends (initialize, the
    2026-07-28 `_meta` envelope, server/discover) says `{"form":{}}`.
    """
    from mcp.client.session import ClientSession

    build = ClientSession._build_capabilities

    def build_form_only(self: Any, version: str) -> types.ClientCapabilities:
        caps = build(self, version)
        if caps.elicitation is not None:
            form = types.ElicitationCapability(form=types.FormElicitationCapability())
            caps = caps.model_copy(update={"elicitation": form})
        return caps

    ClientSession._build_capabilities = build_form_only  # type: ignore[method-assign]


def leaf(error: BaseException) -> BaseException:
    """The first leaf of an exception group (the SDK's task groups wrap transport errors)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def describe_error(error: BaseException) -> dict[str, Any]:
    error = leaf(error)
    if isinstance(error, MCPError):
        out: dict[str, Any] = {"code": error.code, "message": error.message}
        if error.data is not None:
            out["data"] = error.data
        if error.code == REQUEST_TIMEOUT:
            out["kind"] = "timeout"
        return out
    if isinstance(error, ValidationError):
        # The SDK refused the server's result (e.g. a 2026-07-28 result without resultType).
        return {"code": None, "kind": "invalid_result", "message": str(error)}
    if isinstance(error, (StepTimeout, TimeoutError)):
        return {"code": None, "kind": "timeout", "message": str(error) or "timed out"}
    return {"code": None, "kind": "error", "message": f"{type(error).__name__}: {error}"}


class ToolsChanged:
    """Tools list_changed notifications not yet consumed by a wait, each with how it came."""

    def __init__(self) -> None:
        self.pending: deque[str] = deque()
        self.wake = anyio.Event()

    def push(self, via: str) -> None:
        self.pending.append(via)
        self.wake.set()

    async def wait(self, seconds: float) -> str:
        with anyio.move_on_after(seconds):
            while not self.pending:
                wake = self.wake
                await wake.wait()
                if self.wake is wake:
                    self.wake = anyio.Event()
            return self.pending.popleft()
        raise StepTimeout(f"no tools list_changed notification within {seconds * 1000:.0f} ms")


async def main(opts: dict[str, Any]) -> int:
    timeout = opts["timeout_ms"] / 1000
    changed = ToolsChanged()
    state: dict[str, Any] = {"modern": False, "lost": False, "connected": False}

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            sys.stderr.write(f"gateway_client.py: transport error: {message!r}\n")
            return
        if isinstance(message, types.ToolListChangedNotification):
            params = dump(message.params) or {}
            stamped = SUBSCRIPTION_ID_KEY in (params.get("_meta") or {})
            if stamped:
                return  # a listen-stream event: the subscription iterator delivers it
            changed.push("unsolicited" if state["modern"] else "notification")

    elicitation_callback = None
    if opts["elicit"] is not None:
        form_only_elicitation()
        state["elicited"] = []
        answer = opts["elicit"]

        async def elicitation_callback(_context: Any, params: Any) -> types.ElicitResult | types.ErrorData:
            if isinstance(params, types.ElicitRequestURLParams) or getattr(params, "mode", None) == "url":
                sys.stderr.write(f"gateway_client.py: refusing a url-mode elicitation: {params.message!r}\n")
                return types.ErrorData(code=types.INVALID_REQUEST, message="Elicitation not supported")
            state["elicited"].append(params.message)
            return types.ElicitResult(action="accept", content=answer)

    mode = {"auto": "auto", "2025-11-25": "legacy", "2026-07-28": "2026-07-28"}[opts["revision"]]
    if opts["http"] is not None:
        server: Any = opts["http"]
    else:
        command, args = opts["stdio"]
        server = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    client = Client(
        server,
        mode=mode,
        read_timeout_seconds=timeout,
        message_handler=on_message,
        elicitation_callback=elicitation_callback,
        client_info=types.Implementation(name="plurnk-gateway-test-py", version="2.3.0"),
    )

    # The client lives inside one cancel scope whose deadline bounds connecting, then is lifted:
    # a scope entered and left around the connect alone would break the LIFO order of the task
    # groups the client opens.
    exit_code = 1
    with anyio.CancelScope(deadline=anyio.current_time() + timeout) as scope:
        try:
            async with client:
                session = client.session
                if mode == "2026-07-28" and opts["discover"]:
                    raw = await session.send_discover("2026-07-28")
                    session.adopt(types.DiscoverResult.model_validate(raw))
                scope.deadline = math.inf
                state["connected"] = True
                exit_code = await run_plan(opts, client, state, changed)
        except Exception as error:  # noqa: BLE001 — report any connect failure, then exit 1
            if state["connected"]:
                raise
            sys.stderr.write(f"gateway_client.py: could not connect: {json.dumps(describe_error(error))}\n")
            return 1
    if scope.cancelled_caught and not state["connected"]:
        sys.stderr.write(f"gateway_client.py: could not connect within {opts['timeout_ms']:.0f} ms\n")
        return 1
    return exit_code


async def run_plan(opts: dict[str, Any], client: Client, state: dict[str, Any], changed: ToolsChanged) -> int:
    timeout = opts["timeout_ms"] / 1000
    version = client.protocol_version
    state["modern"] = version in MODERN_PROTOCOL_VERSIONS
    caps = client.server_capabilities

    exit_code = 0
    async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
        listening = None
        advertised = bool(caps and caps.tools and caps.tools.list_changed)
        if state["modern"] and (advertised or opts["listen"] == "always"):
            try:
                with anyio.fail_after(timeout):
                    subscription = await stack.enter_async_context(client.listen(tools_list_changed=True))
                listening = dump(subscription.honored)

                async def drain() -> None:
                    try:
                        async for _event in subscription:
                            changed.push("listen")
                    except Exception as error:  # noqa: BLE001 — SubscriptionLost and the like
                        sys.stderr.write(f"gateway_client.py: subscription ended: {error!r}\n")

                tg.start_soon(drain)
            except Exception as error:  # noqa: BLE001
                sys.stderr.write(
                    f"gateway_client.py: subscriptions/listen failed: {json.dumps(describe_error(error))}\n"
                )
        emit(
            {
                "op": "connected",
                "protocolVersion": version,
                "era": "modern" if state["modern"] else "legacy",
                "serverInfo": dump(client.server_info),
                "capabilities": dump(caps),
                "listening": listening,
            }
        )

        async def all_pages(fetch: Any, key: str) -> tuple[Any, int]:
            first = await fetch(None)
            out = dump(first)
            items = out.get(key, [])
            cursor, pages, seen = first.next_cursor, 1, set()
            while cursor is not None:
                if cursor in seen or pages >= MAX_PAGES:
                    raise RuntimeError(f"{key} pagination did not converge after {pages} pages")
                seen.add(cursor)
                page = await fetch(cursor)
                items.extend(dump(page).get(key, []))
                cursor, pages = page.next_cursor, pages + 1
            out[key] = items
            out.pop("nextCursor", None)
            return out, pages

        def lister(op: str) -> tuple[Any, str]:
            if op == "list_tools":
                return (lambda c: client.list_tools(cursor=c, cache_mode="refresh")), "tools"
            if op == "list_resources":
                return (lambda c: client.list_resources(cursor=c, cache_mode="refresh")), "resources"
            return (lambda c: client.list_prompts(cursor=c, cache_mode="refresh")), "prompts"

        for step in opts["plan"]:
            op = step.get("op") if isinstance(step, dict) else None
            line: dict[str, Any] = {"op": op}
            if opts["elicit"] is not None:
                state["elicited"] = []
            try:
                if op == "wait_tools_changed":
                    via = await changed.wait(step.get("timeout_ms", opts["timeout_ms"]) / 1000)
                    with anyio.fail_after(timeout):
                        result, pages = await all_pages(*lister("list_tools"))
                    line.update(ok=True, via=via, result=result, pages=pages)
                elif op == "sleep":
                    await anyio.sleep(step.get("ms", 0) / 1000)
                    line.update(ok=True, result={})
                elif op == "time_calls":
                    arguments = step.get("arguments") or {}
                    latencies = []
                    for n in range(step.get("warmup", 0) + step.get("calls", 1)):
                        started = time.perf_counter()
                        res = await client.call_tool(step["tool"], arguments)
                        elapsed = time.perf_counter() - started
                        if res.is_error:
                            raise RuntimeError(f"call {n} was a tool error: {dump(res)}")
                        if n >= step.get("warmup", 0):
                            latencies.append(round(elapsed * 1e6))
                    line.update(ok=True, result={"latencies_us": latencies})
                else:
                    bound = step.get("timeout_ms", opts["timeout_ms"]) / 1000
                    with anyio.fail_after(bound):
                        if op in ("list_tools", "list_resources", "list_prompts"):
                            result, pages = await all_pages(*lister(op))
                            line.update(ok=True, result=result, pages=pages)
                        elif op == "call":
                            res = await client.call_tool(step["tool"], step.get("arguments") or {})
                            line.update(ok=True, result=dump(res))
                        elif op == "read":
                            res = await client.read_resource(step["uri"], cache_mode="refresh")
                            line.update(ok=True, result=dump(res))
                        elif op == "get_prompt":
                            res = await client.get_prompt(step["name"], step.get("arguments") or {})
                            line.update(ok=True, result=dump(res))
                        else:
                            raise ValueError(f"unknown op {op!r}")
            except TimeoutError:
                bound_ms = step.get("timeout_ms", opts["timeout_ms"]) if op != "wait_tools_changed" else opts["timeout_ms"]
                message = f"{op} did not finish within {bound_ms:.0f} ms"
                line.update(ok=False, error={"code": None, "kind": "timeout", "message": message})
            except Exception as error:  # noqa: BLE001 — a step error is reported, never fatal
                if isinstance(error, MCPError) and error.code == CONNECTION_CLOSED:
                    state["lost"] = True
                if isinstance(error, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)):
                    state["lost"] = True
                line.update(ok=False, error=describe_error(error))
            if opts["elicit"] is not None:
                line["elicited"] = state["elicited"]
            emit(line)
        tg.cancel_scope.cancel()
    if state["lost"]:
        sys.stderr.write("gateway_client.py: the connection was lost during the plan\n")
        exit_code = 3
    return exit_code


if __name__ == "__main__":
    options = parse_args(sys.argv[1:])
    code = anyio.run(main, options)
    sys.stdout.flush()
    sys.exit(code)
