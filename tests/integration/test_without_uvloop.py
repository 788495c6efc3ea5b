"""samsa's clients and broker where uvloop is not installed (it is an optional speed-up)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from samsa.testing import BrokerProcess

# ``sys.modules[name] = None`` makes every ``import name`` raise ImportError,
# as on a machine where the package is not installed.
WITHOUT_UVLOOP = "import sys; sys.modules['uvloop'] = None\n"


def test_sync_clients_produce_and_consume_without_uvloop(samsa_broker: BrokerProcess) -> None:
    script = WITHOUT_UVLOOP + textwrap.dedent(
        f"""
        from samsa import Consumer, Producer
        bootstrap = {samsa_broker.bootstrap!r}
        with Producer({{"bootstrap.servers": bootstrap}}) as producer:
            producer.send("no-uvloop", b"v", key=b"k").result(30)
        consumer = Consumer({{"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                              "group.id": "no-uvloop"}})
        consumer.subscribe(["no-uvloop"])
        records = []
        for _ in range(60):
            records += consumer.poll(1.0)
            if records:
                break
        consumer.close()
        assert "uvloop" not in sys.modules or sys.modules["uvloop"] is None
        print([(r.key, r.value) for r in records])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(b'k', b'v')]"
