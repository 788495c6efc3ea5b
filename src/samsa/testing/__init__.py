"""Run real samsa brokers in tests: a process on a free loopback port with its own data dir.

For pytest users the plugin (registered under the ``pytest11`` entry point)
provides the session fixture ``samsa_broker`` and the ``samsa_cluster`` fixture
(ZooKeeper and three brokers); outside pytest, use :func:`start_broker` and
:func:`start_cluster` directly.
"""

from samsa.testing.broker import BrokerProcess, start_broker
from samsa.testing.cluster import LocalCluster, start_cluster

__all__ = ["BrokerProcess", "LocalCluster", "start_broker", "start_cluster"]
