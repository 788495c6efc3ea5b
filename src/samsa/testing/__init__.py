"""Run real samsa brokers in tests: a process on a free loopback port with its own data dir.

For pytest users the plugin (registered under the ``pytest11`` entry point)
provides the session fixture ``samsa_broker``; outside pytest, use
:func:`start_broker` directly.
"""

from samsa.testing.broker import BrokerProcess, start_broker

__all__ = ["BrokerProcess", "start_broker"]
