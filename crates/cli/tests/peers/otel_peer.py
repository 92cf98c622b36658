#!/usr/bin/env python3
"""Both ends of a traced MCP call, on the official Python SDK (PyPI `mcp==2.3.0`) with
OpenTelemetry's own Python packages (`opentelemetry-sdk`, `opentelemetry-exporter-otlp-proto-http`).

Installed by scripts/install-peers.sh into .cache/otel-venv; run it with that venv's python
($OTEL_PYTHON from .cache/peers.env):

    $OTEL_PYTHON otel_peer.py server --otlp http://127.0.0.1:PORT
        a stdio MCP server ("python-otel-peer", tool `echo(text) -> text`)
    $OTEL_PYTHON otel_peer.py client --otlp http://127.0.0.1:PORT --http URL --tool NAME --text T
        one tools/call through the SDK's Client over Streamable HTTP; prints the result's first
        text block on stdout, and its trace id (hex) on the next line

Each end exports its spans over OTLP/HTTP (protobuf) to `<otlp>/v1/traces` as they end (a simple
processor: a span has reached the collector when its request returns), as service
"python-otel-server" or "python-otel-client". The SDK instruments itself: its client makes a
CLIENT span per request and writes the W3C trace context into the request's `_meta`; its server
makes a SERVER span per request whose parent is the context it reads from `_meta`.
"""

from __future__ import annotations

import argparse
import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor


def export_to(otlp: str, service: str) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=otlp.rstrip("/") + "/v1/traces", timeout=10))
    )
    trace.set_tracer_provider(provider)
    return provider


def serve(otlp: str) -> None:
    from mcp.server import MCPServer

    provider = export_to(otlp, "python-otel-server")
    server = MCPServer("python-otel-peer", version="1.0.0", log_level="WARNING")

    @server.tool(description="Echo the given text back unchanged.")
    def echo(text: str) -> str:
        return text

    try:
        server.run("stdio")
    finally:
        provider.shutdown()


def call(otlp: str, url: str, tool: str, text: str) -> int:
    import anyio
    from mcp import Client

    provider = export_to(otlp, "python-otel-client")
    traced: dict[str, str] = {}

    async def main() -> int:
        with anyio.fail_after(60):
            async with Client(url) as client:
                result = await client.call_tool(tool, {"text": text})
        blocks = [block.text for block in result.content if getattr(block, "type", None) == "text"]
        print(blocks[0] if blocks else "")
        print(traced.get("trace_id", ""))
        return 1 if result.is_error else 0

    # The trace id of the SDK's own CLIENT span for tools/call, read from what is exported.
    class Remember(SpanProcessor):
        def on_end(self, span) -> None:  # type: ignore[override]
            if span.attributes and span.attributes.get("mcp.method.name") == "tools/call":
                traced["trace_id"] = format(span.context.trace_id, "032x")

    provider.add_span_processor(Remember())
    try:
        return anyio.run(main)
    finally:
        provider.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=["server", "client"])
    parser.add_argument("--otlp", required=True, help="the OTLP/HTTP receiver, http://HOST:PORT")
    parser.add_argument("--http", help="the MCP server's Streamable HTTP URL (client)")
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--text", default="traced")
    args = parser.parse_args()
    if args.role == "server":
        serve(args.otlp)
    else:
        if not args.http:
            parser.error("client needs --http URL")
        sys.exit(call(args.otlp, args.http, args.tool, args.text))


if __name__ == "__main__":
    main()
