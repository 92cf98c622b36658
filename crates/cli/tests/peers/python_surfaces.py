#!/usr/bin/env python3
"""Third-party MCP test peer exposing every server surface, built on the official Python SDK
(PyPI `mcp==2.3.0`, the `MCPServer` API). Run it with the venv's python ($PYTHON_MCP from
.cache/peers.env):

    $PYTHON_MCP tests/peers/python_surfaces.py              # stdio
    $PYTHON_MCP tests/peers/python_surfaces.py --http PORT  # Streamable HTTP, http://127.0.0.1:PORT/mcp
                                                            # (PORT 0 picks a free port)

In HTTP mode it prints `listening http://127.0.0.1:PORT/mcp` on stdout once it accepts
connections. Server name "python-surfaces". One process serves both protocol eras: a
connection whose first request carries the 2026-07-28 `_meta` envelope is served as
2026-07-28, one that opens with `initialize` as 2025-11-25. tests/peers/SURFACES.md shows
the observed wire shapes of every surface at both revisions.

Surfaces:
  resources   memo://greeting (text/plain "hello from python"), memo://logo (image/png blob),
              template memo://notes/{name} -> "note {name}: ..."
  prompts     greet(name, required) -> user message "Say hello to {name}"; daily_tip() (no args)
  completion  greet.name from ["alice", "albert", "bob"]; memo://notes/{name}.name from
              ["todo", "travel", "groceries"] (prefix match, case-insensitive)
  tools       add_tool(name?)    registers tool `name` (default dynamic_<n>) and announces a
                                 tools list change: notifications/tools/list_changed on the
                                 connection (2025-11-25) / on subscriptions/listen streams (2026-07-28)
              slow(steps, delay_ms)  notifications/progress per step, then "done after {steps} steps"
              ask_name()         form elicitation of `name` through the SDK's Resolve/Elicit API:
                                 elicitation/create mid-call (2025-11-25), input_required +
                                 inputResponses/requestState retry (2026-07-28);
                                 "hello, {name}" or "no name given" (decline/cancel)
              ask_url()          url elicitation (key "visit", elicitationId "visit-1", url
                                 https://example.test/consent): input_required + retry
                                 (2026-07-28), elicitation/create mid-call (2025-11-25);
                                 "visited" on accept, "not visited" otherwise
              ask_name_raw()     same, hand-rolled: InputRequiredResult with key "name" and
                                 requestState "asked:name" (an answer without the echoed state is
                                 asked again); ctx.elicit() on 2025-11-25
              long_job(steps, delay_ms, fail)  io.modelcontextprotocol/tasks: an unsolicited
                                 resultType "task" when the 2026-07-28 request declares the
                                 extension, else runs inline -> "job done after {steps} steps"
              long_job_ask(steps, delay_ms)  task-only: goes input_required inside the task
                                 (tasks/get inputRequests, tasks/update inputResponses);
                                 -32021 without the extension
              task_log()         every task's status and tasks/get count, JSON by task id
              long_job(server_cancels=true)  the task ends cancelled by the server
              long_job(create_delay_ms=N)  the task is created only after N ms
              ask_state_only(rounds)  input_required with only requestState, `rounds` times
              slow_rounds(rounds, delay_ms)  the same, each round sleeping delay_ms first;
                                 round_log() says which rounds finished and which were
                                 cancelled while they slept
              ask_without_state()  input requests without requestState
              ask_nothing()      input_required with empty inputRequests and no requestState (invalid)
              boom()             JSON-RPC error -32012 "boom" with data (not an isError result)
              mixed()            one content block of each kind: text, image, audio,
                                 resource_link, embedded text resource, embedded blob resource

mcp 2.3.0 ships no tasks implementation (the 2025-11-25 core `tasks/*` types are types-only and
not routed; there is no io.modelcontextprotocol/tasks extension). The tasks extension here is
hand-rolled on the SDK's public extension seam (`Extension.intercept_tool_call` +
`MethodBinding`s for tasks/get, tasks/update, tasks/cancel).
"""

from __future__ import annotations

import argparse
import base64
import io
import itertools
import json
import socket
import struct
import sys
import time
import wave
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any

import anyio
from mcp_types import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    Completion,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    MissingRequiredClientCapabilityErrorData,
    PromptReference,
    RequestParams,
    ResourceLink,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    Extension,
    MCPServer,
    MethodBinding,
    Resolve,
    require_client_extension,
)
from mcp.shared.exceptions import MCPError

NAME = "python-surfaces"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

# --------------------------------------------------------------------------------------------
# Small binary payloads


def _png_1x1() -> bytes:
    """A valid 1x1 opaque red PNG (69 bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _wav_silence() -> bytes:
    """A valid 8 kHz mono 8-bit WAV with 8 samples of silence (52 bytes)."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(1)
        w.setframerate(8000)
        w.writeframes(b"\x80" * 8)
    return buf.getvalue()


PNG = _png_1x1()
PNG_B64 = base64.b64encode(PNG).decode()
WAV_B64 = base64.b64encode(_wav_silence()).decode()

GREET_NAMES = ["alice", "albert", "bob"]
NOTE_NAMES = ["todo", "travel", "groceries"]

# --------------------------------------------------------------------------------------------
# The tasks extension (io.modelcontextprotocol/tasks, 2026-07-28), hand-rolled.
#
# Task state is computed lazily from the clock, so no background work outlives a request:
# a task is `working` until created + steps * delay_ms, then (long_job_ask) `input_required`
# until tasks/update answers, then `completed` (or `failed` for long_job(fail=true)).

TASK_TOOLS = {"long_job", "long_job_ask"}
TASK_TTL_MS = 300_000


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class _Task:
    task_id: str
    tool: str
    steps: int
    delay_ms: int
    fail: bool
    created: float
    cancels: bool = False
    answer: ElicitResult | None = None
    answered_at: float | None = None
    cancelled_at: float | None = None
    polls: int = 0

    @property
    def poll_interval_ms(self) -> int:
        return max(50, min(self.delay_ms, 1000))

    @property
    def work_done_at(self) -> float:
        return self.created + self.steps * self.delay_ms / 1000

    def detailed(self) -> dict[str, Any]:
        """The DetailedTask for the current moment (tasks/get result minus resultType)."""
        now = time.time()
        base: dict[str, Any] = {
            "taskId": self.task_id,
            "createdAt": _iso(self.created),
            "ttlMs": TASK_TTL_MS,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.cancelled_at is not None:
            return {**base, "status": "cancelled", "lastUpdatedAt": _iso(self.cancelled_at),
                    "statusMessage": "cancelled by the client"}
        if self.cancels and now >= self.work_done_at:
            return {**base, "status": "cancelled", "lastUpdatedAt": _iso(self.work_done_at),
                    "statusMessage": "cancelled by the server"}
        if now < self.work_done_at:
            done = int((now - self.created) / (self.delay_ms / 1000)) if self.delay_ms else self.steps
            return {**base, "status": "working", "lastUpdatedAt": _iso(self.created),
                    "statusMessage": f"step {min(done, self.steps)}/{self.steps}"}
        if self.tool == "long_job_ask":
            if self.answer is None:
                return {**base, "status": "input_required", "lastUpdatedAt": _iso(self.work_done_at),
                        "statusMessage": "waiting for a name",
                        "inputRequests": {"name": _name_request().model_dump(
                            by_alias=True, mode="json", exclude_none=True)}}
            assert self.answered_at is not None
            if self.answer.action == "accept" and self.answer.content and "name" in self.answer.content:
                text = f"hello, {self.answer.content['name']}"
            else:
                text = "no name given"
            return {**base, "status": "completed", "lastUpdatedAt": _iso(self.answered_at),
                    "result": {"content": [{"type": "text", "text": text}], "isError": False}}
        if self.fail:
            return {**base, "status": "failed", "lastUpdatedAt": _iso(self.work_done_at),
                    "statusMessage": "long_job failed on purpose",
                    "error": {"code": -32011, "message": "long_job failed on purpose",
                              "data": {"steps": self.steps}}}
        return {**base, "status": "completed", "lastUpdatedAt": _iso(self.work_done_at),
                "result": {"content": [{"type": "text", "text": f"job done after {self.steps} steps"}],
                           "isError": False}}


class _TaskIdParams(RequestParams):
    model_config = ConfigDict(populate_by_name=True, extra="allow")
    task_id: str = Field(alias="taskId")


class _TaskUpdateParams(_TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


def _client_declares(ctx: ServerRequestContext[Any, Any], identifier: str) -> bool:
    caps = ctx.session.client_capabilities
    return bool(caps and caps.extensions and identifier in caps.extensions)


def _missing_tasks_capability() -> MCPError:
    data = MissingRequiredClientCapabilityErrorData(
        required_capabilities=ClientCapabilities(extensions={TASKS_EXTENSION: {}})
    )
    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message="long_job_ask runs only as a task: declare the io.modelcontextprotocol/tasks extension",
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


class TasksExtension(Extension):
    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self._tasks: dict[str, _Task] = {}
        self._ids = itertools.count(1)

    def methods(self) -> list[MethodBinding]:
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", _TaskIdParams, self._get, protocol_versions=modern),
            MethodBinding("tasks/update", _TaskUpdateParams, self._update, protocol_versions=modern),
            MethodBinding("tasks/cancel", _TaskIdParams, self._cancel, protocol_versions=modern),
        ]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if params.name == "ask_nothing":
            # The SDK will not build this invalid result, so it is written out by hand.
            return {"resultType": "input_required", "inputRequests": {}}
        if params.name not in TASK_TOOLS:
            return await call_next(ctx)
        as_task = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and _client_declares(ctx, TASKS_EXTENSION)
        if not as_task:
            if params.name == "long_job_ask":
                raise _missing_tasks_capability()
            return await call_next(ctx)  # long_job runs inline
        args = params.arguments or {}
        try:
            steps = int(args.get("steps", 3))
            delay_ms = int(args.get("delay_ms", 200))
        except (TypeError, ValueError):
            raise MCPError(code=INVALID_PARAMS, message="steps and delay_ms must be integers") from None
        if steps < 0 or delay_ms < 0:
            raise MCPError(code=INVALID_PARAMS, message="steps and delay_ms must not be negative")
        # A server slow to create its Task: the creation spends the caller's deadline too.
        create_delay_ms = args.get("create_delay_ms", 0)
        if isinstance(create_delay_ms, int) and create_delay_ms > 0:
            await anyio.sleep(create_delay_ms / 1000)
        task = _Task(
            task_id=f"task-{next(self._ids)}",
            tool=params.name,
            steps=steps,
            delay_ms=delay_ms,
            fail=bool(args.get("fail", False)),
            created=time.time(),
            cancels=bool(args.get("server_cancels", False)),
        )
        self._tasks[task.task_id] = task
        # CreateTaskResult: the seed state, always `working` (steps=0 completes on the first poll).
        return {
            "resultType": "task",
            "taskId": task.task_id,
            "status": "working",
            "statusMessage": f"step 0/{steps}",
            "createdAt": _iso(task.created),
            "lastUpdatedAt": _iso(task.created),
            "ttlMs": TASK_TTL_MS,
            "pollIntervalMs": task.poll_interval_ms,
        }

    def _lookup(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> _Task:
        require_client_extension(ctx, TASKS_EXTENSION)
        task = self._tasks.get(task_id)
        if task is None or time.time() > task.created + TASK_TTL_MS / 1000:
            raise MCPError(code=INVALID_PARAMS, message=f"Failed to retrieve task: Task not found: {task_id}")
        return task

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: _TaskIdParams) -> dict[str, Any]:
        task = self._lookup(ctx, params.task_id)
        task.polls += 1
        return {"resultType": "complete", **task.detailed()}

    def log(self) -> dict[str, Any]:
        """Every task's status and how many times it was polled (the task_log tool)."""
        return {task.task_id: {"status": task.detailed()["status"], "polls": task.polls}
                for task in self._tasks.values()}

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: _TaskUpdateParams) -> dict[str, Any]:
        task = self._lookup(ctx, params.task_id)
        key = "name"
        # Only the currently outstanding key counts; anything else is ignored (spec SHOULD).
        if task.detailed()["status"] == "input_required" and key in params.input_responses:
            task.answer = ElicitResult.model_validate(params.input_responses[key])
            task.answered_at = time.time()
        return {"resultType": "complete"}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: _TaskIdParams) -> dict[str, Any]:
        task = self._lookup(ctx, params.task_id)
        if task.detailed()["status"] in ("working", "input_required"):
            task.cancelled_at = time.time()
        return {"resultType": "complete"}


# --------------------------------------------------------------------------------------------
# The server

TASKS = TasksExtension()

server = MCPServer(
    NAME,
    version="1.0.0",
    instructions="Surface-by-surface test peer for plurnk-mcp.",
    log_level="WARNING",
    extensions=[TASKS],
)

# 2025-11-25 derives `listChanged` from NotificationOptions passed to
# create_initialization_options(), which MCPServer always calls without any (so it would
# advertise false). Default them to true here so the legacy `initialize` result admits the
# list-changed notifications this peer sends. (2026-07-28 derives listChanged from
# subscriptions/listen being served; server/discover reports true on its own.)
_lowlevel = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]
_create_init_options = _lowlevel.create_initialization_options


def _init_options_with_list_changed(notification_options=None, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
    if notification_options is None:
        notification_options = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
    return _create_init_options(notification_options, *args, **kwargs)


_lowlevel.create_initialization_options = _init_options_with_list_changed  # type: ignore[method-assign]


# ---- resources -------------------------------------------------------------------------------


@server.resource("memo://greeting", name="greeting", description="A plain-text greeting.", mime_type="text/plain")
def greeting() -> str:
    return "hello from python"


@server.resource("memo://logo", name="logo", description="A 1x1 red PNG.", mime_type="image/png")
def logo() -> bytes:
    return PNG


@server.resource("memo://notes/{name}", name="note", description="A note by name.", mime_type="text/plain")
def note(name: str) -> str:
    return f"note {name}: remember the {name}"


# ---- prompts ---------------------------------------------------------------------------------


@server.prompt(description="Greet someone by name.")
def greet(name: str) -> str:
    return f"Say hello to {name}"


@server.prompt(description="A tip of the day; takes no arguments.")
def daily_tip() -> str:
    return "Tip: small commits are easier to review."


# ---- completion ------------------------------------------------------------------------------


def _prefixed(values: list[str], typed: str) -> Completion:
    hits = [v for v in values if v.lower().startswith(typed.lower())]
    return Completion(values=hits, total=len(hits), has_more=False)


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
    if isinstance(ref, PromptReference) and ref.name == "greet" and argument.name == "name":
        return _prefixed(GREET_NAMES, argument.value)
    if isinstance(ref, ResourceTemplateReference) and ref.uri == "memo://notes/{name}" and argument.name == "name":
        return _prefixed(NOTE_NAMES, argument.value)
    return None  # -> {"completion": {"values": []}}


# ---- tools -----------------------------------------------------------------------------------

_dynamic_ids = itertools.count(1)


def _make_dynamic_tool(tool_name: str):  # type: ignore[no-untyped-def]
    def dynamic() -> str:
        return f"dynamic tool {tool_name} called"

    return dynamic


@server.tool(description="Announce that resource `uri` was updated (notifications/resources/updated).",
             structured_output=False)
async def touch(ctx: Context, uri: str) -> str:
    # 2026-07-28: to subscriptions/listen streams whose filter names the URI.
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"


@server.tool(description="Register a new tool (default name dynamic_<n>) and announce a tools list change.",
             structured_output=False)
async def add_tool(ctx: Context, name: str | None = None) -> str:
    tool_name = name or f"dynamic_{next(_dynamic_ids)}"
    if any(t.name == tool_name for t in await server.list_tools()):
        raise MCPError(code=INVALID_PARAMS, message=f"tool {tool_name!r} already exists")
    server.add_tool(_make_dynamic_tool(tool_name), name=tool_name,
                    description=f"Added at runtime by add_tool; returns 'dynamic tool {tool_name} called'.",
                    structured_output=False)
    # 2026-07-28: publish to the subscriptions/listen bus (stamped with the listen request's id).
    await ctx.notify_tools_changed()
    # 2025-11-25: notifications/tools/list_changed on the connection's standalone channel
    # (stdio: stdout; HTTP: the GET SSE stream). The SDK drops this on 2026 connections.
    await ctx.session.send_tool_list_changed()
    return f"added tool {tool_name}"


@server.tool(description="Every task's status and poll count, as JSON keyed by task id.",
             structured_output=False)
def task_log() -> str:
    return json.dumps(TASKS.log())


@server.tool(description="Report progress for each step, then return 'done after {steps} steps'.",
             structured_output=False)
async def slow(ctx: Context, steps: int = 3, delay_ms: int = 50) -> str:
    for i in range(1, steps + 1):
        await anyio.sleep(delay_ms / 1000)
        await ctx.report_progress(i, steps, f"step {i}/{steps}")
    return f"done after {steps} steps"


class NameForm(BaseModel):
    name: str = Field(description="Your name")


def ask_for_name() -> Elicit[NameForm]:
    return Elicit("What is your name?", NameForm)


@server.tool(description="Ask the user for a name (form elicitation) and greet them.", structured_output=False)
def ask_name(answer: Annotated[ElicitationResult[NameForm], Resolve(ask_for_name)]) -> str:
    if isinstance(answer, AcceptedElicitation):
        return f"hello, {answer.data.name}"
    return "no name given"


def _name_request() -> ElicitRequest:
    return ElicitRequest(
        params=ElicitRequestFormParams(
            message="What is your name?",
            requested_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        )
    )


@server.tool(description="ask_name, hand-rolled: InputRequiredResult with key 'name' and requestState.",
             structured_output=False)
async def ask_name_raw(ctx: Context) -> str | InputRequiredResult:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answer = (ctx.input_responses or {}).get("name")
        if answer is None or ctx.request_state != "asked:name":
            return InputRequiredResult(input_requests={"name": _name_request()}, request_state="asked:name")
        if not isinstance(answer, ElicitResult):
            raise MCPError(code=INVALID_PARAMS, message="inputResponses.name is not an elicitation result")
    else:
        params = _name_request().params
        answer = await ctx.session.elicit_form(params.message, params.requested_schema, ctx.request_id)
    if answer.action == "accept" and answer.content and isinstance(answer.content.get("name"), str):
        return f"hello, {answer.content['name']}"
    return "no name given"


@server.tool(description="Asks the user to visit a URL (url elicitation); 'visited' once accepted.",
             structured_output=False)
async def ask_url(ctx: Context) -> str | InputRequiredResult:
    message, url, elicitation_id = "Consent at the provider", "https://example.test/consent", "visit-1"
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answer = (ctx.input_responses or {}).get("visit")
        if answer is None or ctx.request_state != "asked:url":
            request = ElicitRequest(params=ElicitRequestURLParams(message=message, url=url,
                                                                  elicitation_id=elicitation_id))
            return InputRequiredResult(input_requests={"visit": request}, request_state="asked:url")
        if not isinstance(answer, ElicitResult):
            raise MCPError(code=INVALID_PARAMS, message="inputResponses.visit is not an elicitation result")
    else:
        answer = await ctx.session.elicit_url(message, url, elicitation_id)
    return "visited" if answer.action == "accept" else "not visited"


@server.tool(description="Asks only for its requestState back, `rounds` times (no input requests), then "
                         "returns 'done after {rounds} state-only rounds'.", structured_output=False)
async def ask_state_only(ctx: Context, rounds: int = 3) -> str | InputRequiredResult:
    state = ctx.request_state or "round:0"
    done = int(state.split(":")[1])
    if done < rounds:
        return InputRequiredResult(request_state=f"round:{done + 1}")
    return f"done after {rounds} state-only rounds"


# What each slow_rounds round did: "finished:<round>", or "cancelled:<round>" when the client
# cancelled it while it slept.
_ROUNDS: list[str] = []


@server.tool(description="Each round sleeps delay_ms, then asks for its requestState back; after `rounds` "
                         "rounds returns 'done after {rounds} slow rounds'.", structured_output=False)
async def slow_rounds(ctx: Context, rounds: int = 4, delay_ms: int = 1000) -> str | InputRequiredResult:
    done = int((ctx.request_state or "round:0").split(":")[1])
    try:
        await anyio.sleep(delay_ms / 1000)
    except anyio.get_cancelled_exc_class():
        _ROUNDS.append(f"cancelled:{done + 1}")
        raise
    _ROUNDS.append(f"finished:{done + 1}")
    if done + 1 < rounds:
        return InputRequiredResult(request_state=f"round:{done + 1}")
    return f"done after {rounds} slow rounds"


@server.tool(description="What each slow_rounds round did, as a JSON list.", structured_output=False)
def round_log() -> str:
    return json.dumps(_ROUNDS)


@server.tool(description="Asks for a name with no requestState; 'hello, {name}' once answered.",
             structured_output=False)
async def ask_without_state(ctx: Context) -> str | InputRequiredResult:
    answer = (ctx.input_responses or {}).get("name")
    if answer is None:
        return InputRequiredResult(input_requests={"name": _name_request()})
    if isinstance(answer, ElicitResult) and answer.content and isinstance(answer.content.get("name"), str):
        return f"hello, {answer.content['name']}"
    return "no name given"


@server.tool(description="Answers input_required with neither input requests nor requestState (invalid).",
             structured_output=False)
async def ask_nothing(ctx: Context) -> str:
    return "never reached: the tasks extension answers it"


@server.tool(description="Runs as an io.modelcontextprotocol/tasks task when the client declares the extension "
                         "(2026-07-28); otherwise inline. Returns 'job done after {steps} steps'.",
             structured_output=False)
async def long_job(steps: int = 3, delay_ms: int = 200, fail: bool = False,
                   server_cancels: bool = False) -> str:
    await anyio.sleep(steps * delay_ms / 1000)
    if fail:
        raise MCPError(code=-32011, message="long_job failed on purpose", data={"steps": steps})
    return f"job done after {steps} steps"


@server.tool(description="Task-only (io.modelcontextprotocol/tasks): asks for a name inside the task via "
                         "tasks/get inputRequests + tasks/update.", structured_output=False)
async def long_job_ask(steps: int = 1, delay_ms: int = 100) -> str:
    raise _missing_tasks_capability()  # only reached if the interceptor let it through


@server.tool(description="Fail with JSON-RPC error -32012 (not an isError result).")
def boom() -> str:
    raise MCPError(code=-32012, message="boom", data={"reason": "boom() always fails", "retryable": False})


@server.tool(description="Return one content block of each kind.")
def mixed() -> CallToolResult:
    return CallToolResult(
        content=[
            TextContent(text="plain text"),
            ImageContent(data=PNG_B64, mime_type="image/png"),
            AudioContent(data=WAV_B64, mime_type="audio/wav"),
            ResourceLink(uri="memo://greeting", name="greeting", mime_type="text/plain"),
            EmbeddedResource(resource=TextResourceContents(uri="memo://notes/todo", mime_type="text/plain",
                                                           text="note todo: remember the todo")),
            EmbeddedResource(resource=BlobResourceContents(uri="memo://logo", mime_type="image/png", blob=PNG_B64)),
        ]
    )


# --------------------------------------------------------------------------------------------
# Entry points


def _run_http(port: int) -> None:
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
