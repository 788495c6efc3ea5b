"""``samsa console``: a web console for a Kafka cluster (samsa or any Kafka-compatible
broker) — topics, messages, consumer groups and their lag — served by uvicorn.

It is a process of its own, as Kafka's consoles are: it reaches the cluster with
samsa's asyncio clients like any other client. It listens on 127.0.0.1 unless told
otherwise (it has no login), and prints ``samsa console ready on http://HOST:PORT`` once
it accepts connections (``--port 0`` picks a free port). ``--read-only`` serves the
pages without the forms that change anything.

The console needs the ``console`` extra (``pip install 'samsa[console]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys

from samsa.cli.session import (
    ToolError,
    UsageError,
    add_connection_arguments,
    check_reachable,
    client_properties,
    run_tool,
)

__all__ = ["build_parser", "run"]

PROG = "samsa console"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="A web console for a Kafka cluster: topics, messages, consumer groups.",
    )
    add_connection_arguments(parser, "--command-config")
    parser.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080)")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; the console has no login)",
    )
    parser.add_argument(
        "--read-only", action="store_true", help="show the cluster; offer no changes"
    )
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how often the throughput chart samples the log end offsets (default 5)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa console`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _execute(options: argparse.Namespace) -> int:
    try:
        import uvicorn

        from samsa.console.app import create_app
        from samsa.console.state import ConsoleSettings
    except ImportError as exc:
        raise ToolError(
            f"the console needs the console extra ({exc.name} is missing): "
            "pip install 'samsa[console]'"
        ) from exc
    from samsa.client.config import admin_config

    if not 0 <= options.port <= 65535:
        raise UsageError("--port must be 0-65535")
    if options.sample_interval <= 0:
        raise UsageError("--sample-interval must be above 0")
    props = client_properties(options.bootstrap_server, options.client_config)
    check_reachable(admin_config(props))
    settings = ConsoleSettings(props, options.read_only, options.sample_interval)
    try:
        listener = socket.create_server((options.host, options.port))
    except OSError as exc:
        raise ToolError(f"cannot listen on {options.host}:{options.port}: {exc.strerror or exc}; "
                        "choose another --port") from exc  # fmt: skip
    host, port = listener.getsockname()[:2]
    config = uvicorn.Config(create_app(settings), log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)

    async def serve() -> None:
        server_task = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started and not server_task.done():
            await asyncio.sleep(0.02)
        if server.started:
            print(f"{PROG} ready on http://{host}:{port}", flush=True)
        await server_task

    try:
        import uvloop
    except ImportError:  # uvloop is optional: the stdlib loop serves the same
        asyncio.run(serve())
    else:
        uvloop.run(serve())
    listener.close()
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(run(argparse.Namespace(argv=sys.argv[1:])))
