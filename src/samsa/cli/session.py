"""What the admin tools share: client properties, reaching the cluster, and turning a
failure into a message that says what to do next and an exit code.

Exit codes follow the usual convention of command-line tools: 0 done, 1 the command
failed (the broker refused, timed out or cannot be reached), 2 the command line is wrong.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.errors import ConfigError, KafkaError, SamsaError

if TYPE_CHECKING:
    from samsa.client.admin import Admin
    from samsa.client.config import ClientConfig

__all__ = [
    "DeliveryFailures",
    "PrintVersion",
    "ToolError",
    "UsageError",
    "add_connection_arguments",
    "check_reachable",
    "client_properties",
    "only_with",
    "open_admin",
    "parse_key_values",
    "reason",
    "run_tool",
]

START_A_BROKER = "is a broker running? start one with `make run` or `samsa serve`"


class ToolError(SamsaError):
    """Raised by a tool when it cannot do what was asked; the message says what to do."""


class UsageError(ToolError):
    """Raised when the command line asks for something impossible (exit code 2)."""


class PrintVersion(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked for.

    Every subcommand takes it, as every kafka-*.sh tool does; it prints one line on
    stdout and exits 0, whatever else the command line says.
    """

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS,
            help="print the version of samsa and exit",
        )  # fmt: skip

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"samsa {samsa_version()}")
        parser.exit()


def samsa_version() -> str:
    """The installed package's version (the source tree's when run from a checkout)."""
    try:
        return importlib.metadata.version("samsa")
    except importlib.metadata.PackageNotFoundError:
        from samsa import __version__

        return __version__


class DeliveryFailures:
    """Counts records a producer could not deliver; prints the first few reasons.

    Its methods run on the producer's thread (delivery callbacks).
    """

    SHOWN = 10

    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.count = 0

    def record(self, error: BaseException) -> None:
        self.count += 1
        if self.count <= self.SHOWN:
            detail = reason(error) if isinstance(error, KafkaError) else str(error)
            print(f"{self.prog}: a record was not delivered: {detail}", file=sys.stderr)

    def on_delivery(self, _metadata: object, error: BaseException | None) -> None:
        """A producer's ``on_delivery`` callback."""
        if error is not None:
            self.record(error)

    def exit_code(self) -> int:
        """0, or 1 after saying how many records were lost."""
        if not self.count:
            return 0
        print(f"{self.prog}: {self.count} record(s) were not delivered", file=sys.stderr)
        return 1


def reason(exc: KafkaError) -> str:
    """What a broker said, with its error name once (the admin client's message often
    repeats it: "[CODE] topic 't': [CODE] why")."""
    detail = str(exc.args[0]) if exc.args else ""
    return detail if f"[{exc.name}]" in detail else str(exc)


def add_connection_arguments(
    parser: argparse.ArgumentParser, config_flag: str, *, broker_list: bool = False
) -> None:
    """``--bootstrap-server`` and the flag naming a file of client properties.

    ``broker_list``: ``--broker-list`` is accepted as another name of ``--bootstrap-server``
    (deprecated in Kafka, still typed).
    """
    parser.add_argument(
        "--bootstrap-server",
        *(["--broker-list"] if broker_list else []),
        dest="bootstrap_server",
        required=True,
        metavar="HOST:PORT",
        help="the broker(s) to connect to, comma-separated (required)",
    )
    parser.add_argument(
        config_flag,
        dest="client_config",
        type=Path,
        metavar="FILE",
        help="a properties file of client configs (request.timeout.ms, "
        "default.api.timeout.ms, client.id…)",
    )


def only_with(options: argparse.Namespace, flag: str, actions: str, given: object) -> None:
    """A usage error when ``flag`` is ``given`` without any of ``actions`` (option names)."""
    if given and not any(getattr(options, a) for a in actions.split()):
        names = " or ".join(f"--{a.replace('_', '-')}" for a in actions.split())
        raise UsageError(f"{flag} works only with {names}")


def parse_key_values(items: list[str] | None, flag: str) -> dict[str, str]:
    """``k=v`` strings (a repeatable flag) as a dict; a missing '=' is a usage error."""
    values: dict[str, str] = {}
    for item in items or []:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise UsageError(f"{flag} {item!r} is not KEY=VALUE")
        values[key.strip()] = value.strip()
    return values


def client_properties(
    bootstrap_server: str | None,
    config_file: Path | None,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Properties from ``config_file``, then ``overrides``, then the bootstrap servers
    (when given; one of the others must name them otherwise)."""
    from samsa.broker.config import parse_properties

    props: dict[str, Any] = {}
    if config_file is not None:
        try:
            props.update(parse_properties(config_file.read_text()))
        except OSError as exc:
            raise ToolError(
                f"cannot read {config_file}: {exc.strerror or exc}; check the path"
            ) from exc
    props.update(overrides or {})
    if bootstrap_server is not None:
        props["bootstrap.servers"] = bootstrap_server
    if not props.get("bootstrap.servers"):
        raise UsageError("name the cluster with --bootstrap-server HOST:PORT")
    return props


def check_reachable(config: ClientConfig) -> None:
    """Fail fast, with a hint, when no bootstrap server accepts a connection: a client
    would otherwise retry until its timeout (a minute by default) passes."""
    from samsa.client.config import parse_bootstrap

    servers = parse_bootstrap(config["bootstrap.servers"])
    timeout_ms = min(config["socket.connection.setup.timeout.ms"], config["request.timeout.ms"])
    reasons = []
    for host, port in servers:
        try:
            with socket.create_connection((host, port), timeout=max(timeout_ms, 1) / 1000):
                return
        except OSError as exc:
            reasons.append(exc.strerror or type(exc).__name__)
    names = ", ".join(f"{host}:{port}" for host, port in servers)
    why = "; ".join(sorted(set(reasons)))
    raise ToolError(f"cannot reach {names} ({why}): {START_A_BROKER}")


def open_admin(args: argparse.Namespace, overrides: Mapping[str, str] | None = None) -> Admin:
    """An admin client for ``--bootstrap-server``, once a broker there accepts connections."""
    from samsa.client.admin import Admin
    from samsa.client.config import admin_config

    props = client_properties(args.bootstrap_server, args.client_config, overrides)
    check_reachable(admin_config(props))
    return Admin(props)


def run_tool(
    parser: argparse.ArgumentParser,
    argv: list[str],
    body: Callable[[argparse.Namespace], int],
) -> int:
    """Parse ``argv`` (argparse exits 2 on bad flags) and run ``body`` on the options,
    printing any failure as one line on stderr; the exit code."""
    from samsa.client.errors import ClientTimeoutError

    if "--version" not in parser._option_string_actions:
        parser.add_argument("--version", action=PrintVersion)
    options = parser.parse_args(argv)
    try:
        return body(options)
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    except ToolError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
    except ConfigError as exc:
        print(f"{parser.prog}: {exc}: fix the client properties", file=sys.stderr)
    except ClientTimeoutError as exc:
        print(
            f"{parser.prog}: {exc}: the broker accepted a connection but did not answer in time;"
            " check its log, or give it longer with default.api.timeout.ms in the client"
            " properties file",
            file=sys.stderr,
        )
    except KafkaError as exc:
        print(f"{parser.prog}: {reason(exc)}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    return 1
