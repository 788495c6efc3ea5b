"""The APIs and versions samsa serves, against what Kafka 4.3.1 itself advertises: every API
Kafka serves to clients is served by samsa up to the same version, or listed below with the
reason it is not (yet). samsa also keeps the versions below Kafka 4's floor (KIP-896 removed
them) for the clients of older Kafka versions (README, "Clients of older Kafka versions")."""

from __future__ import annotations

from tests.rawclient import exchange

from samsa.testing import BrokerProcess
from samsa.testing.kafka import KafkaCluster

NOT_SERVED = {
    34: "AlterReplicaLogDirs: moving a replica between a broker's log dirs is not implemented",
    38: "CreateDelegationToken: samsa has no delegation tokens",
    39: "RenewDelegationToken: samsa has no delegation tokens",
    40: "ExpireDelegationToken: samsa has no delegation tokens",
    41: "DescribeDelegationToken: samsa has no delegation tokens",
    55: "DescribeQuorum: a KRaft quorum's; samsa's cluster is coordinated by ZooKeeper",
    57: "UpdateFeatures: samsa has no feature levels to finalize",
    64: "UnregisterBroker: KRaft's; a samsa broker's registration is an ephemeral znode",
    74: "ListConfigResources: client metrics (KIP-714) are not served yet",
    76: "ShareGroupHeartbeat: share groups (KIP-932) are not served yet",
    77: "ShareGroupDescribe: share groups (KIP-932) are not served yet",
    78: "ShareFetch: share groups (KIP-932) are not served yet",
    79: "ShareAcknowledge: share groups (KIP-932) are not served yet",
    80: "AddRaftVoter: KRaft's",
    81: "RemoveRaftVoter: KRaft's",
    83: "InitializeShareGroupState: share groups (KIP-932) are not served yet",
    84: "ReadShareGroupState: share groups (KIP-932) are not served yet",
    85: "WriteShareGroupState: share groups (KIP-932) are not served yet",
    86: "DeleteShareGroupState: share groups (KIP-932) are not served yet",
    87: "ReadShareGroupStateSummary: share groups (KIP-932) are not served yet",
    88: "StreamsGroupHeartbeat: the KIP-1071 streams group protocol is not served",
    89: "StreamsGroupDescribe: the KIP-1071 streams group protocol is not served",
    90: "DescribeShareGroupOffsets: share groups (KIP-932) are not served yet",
    91: "AlterShareGroupOffsets: share groups (KIP-932) are not served yet",
    92: "DeleteShareGroupOffsets: share groups (KIP-932) are not served yet",
}
"""API key → why samsa does not serve an API Kafka 4.3.1 serves."""

BEHIND = {
    1: (17, "Fetch v18 not served yet"),
    15: (5, "DescribeGroups v6 not served yet"),
    35: (4, "DescribeLogDirs v5 not served yet"),
    66: (1, "ListTransactions v2 (a transactional id pattern) not served yet"),
}
"""API key → (samsa's highest version, why) where samsa serves fewer versions than Kafka."""


def _versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    answer = exchange(bootstrap, 18, 3, {"client_software_name": "oracle",
                                         "client_software_version": "1"})  # fmt: skip
    assert answer.error_code == 0
    return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in answer.api_keys}


def test_samsa_serves_every_api_kafka_serves_up_to_its_version_or_says_why_not(
    kafka: KafkaCluster, samsa: BrokerProcess
) -> None:
    theirs, ours = _versions(kafka.bootstrap), _versions(samsa.bootstrap)
    found = []
    for key, (low, high) in sorted(theirs.items()):
        if key in NOT_SERVED:
            if key in ours:
                found.append(f"api {key} is served now: take it off NOT_SERVED")
            continue
        if key not in ours:
            found.append(f"api {key} (Kafka v{low}-{high}) is not served and not listed")
            continue
        expected_high = BEHIND[key][0] if key in BEHIND else high
        if ours[key][1] != expected_high:
            found.append(f"api {key}: samsa up to v{ours[key][1]}, expected v{expected_high}")
        if ours[key][0] > low:
            found.append(f"api {key}: samsa from v{ours[key][0]}, Kafka from v{low}")
    found += [f"api {key} is served by samsa but not by Kafka" for key in ours.keys() - theirs]
    assert not found, "\n".join(found)
