"""``samsa console``: a web console for a Kafka cluster (samsa or any Kafka-compatible
broker) — topics, messages, consumer groups and their lag — served by uvicorn.

It is a process of its own, as Kafka's consoles are: it reaches the cluster with
samsa's asyncio clients like any other client. It listens on 127.0.0.1 unless told
otherwise, and prints ``samsa console ready on http://HOST:PORT`` once it accepts
connections (``--port 0`` picks a free port). ``--read-only`` serves the pages without
the forms that change anything.

It answers only requests naming an allowed host: 127.0.0.1, localhost, ::1 and the
address it listens on, with its port, and each ``--allowed-host``. Users log in with
HTTP basic: with ``--auth-token-file``, as anyone with the token in that file as the
password; otherwise, when the client properties use SASL, as a user of the cluster
(the console logs in to the broker as them and acts as them). Without either there is
no login. Every change is logged at INFO with who made it.

The console needs the ``console`` extra (``pip install 'samsa[console]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
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
        help="address to listen on (default 127.0.0.1)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="a host name (or address) browsers may reach the console by, besides "
        "127.0.0.1, localhost, ::1 and --host; without a port, on any port (repeatable)",
    )
    parser.add_argument(
        "--auth-token-file",
        metavar="FILE",
        help="require HTTP basic login with the token in FILE (its first line) as the "
        "password; without it, a console whose client properties use SASL requires a "
        "login as a user of the cluster",
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
        from samsa.console.guard import default_hosts, parse_host
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
    for entry in options.allowed_host:
        try:
            parse_host(entry)
        except ValueError as exc:
            raise UsageError(f"--allowed-host {exc}") from None
    token = _read_token(options.auth_token_file) if options.auth_token_file else None
    props = client_properties(options.bootstrap_server, options.client_config)
    check_reachable(admin_config(props))
    try:
        listener = socket.create_server((options.host, options.port))
    except OSError as exc:
        raise ToolError(f"cannot listen on {options.host}:{options.port}: {exc.strerror or exc}; "
                        "choose another --port") from exc  # fmt: skip
    host, port = listener.getsockname()[:2]
    settings = ConsoleSettings(
        props,
        options.read_only,
        options.sample_interval,
        allowed_hosts=(*default_hosts(options.host, port), *options.allowed_host),
        auth_token=token,
    )
    # Every change the console makes is logged at INFO, whatever the tools' level.
    console_log = logging.getLogger("samsa.console")
    if console_log.getEffectiveLevel() > logging.INFO:
        console_log.setLevel(logging.INFO)
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


def _read_token(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            token = file.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"cannot read --auth-token-file {path}: {exc}") from exc
    if len(token) < 8:
        raise UsageError(f"the token in {path} is shorter than 8 characters")
    return token


if __name__ == "__main__":
    sys.exit(run(argparse.Namespace(argv=sys.argv[1:])))
