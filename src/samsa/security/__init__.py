"""What broker and clients share to secure a connection: SCRAM (:mod:`.scram`), JAAS
configuration strings (:mod:`.jaas`) and TLS contexts and principals (:mod:`.tls`).

Everything here is pure computation or file reading — no sockets — so the broker's
authenticators and samsa's clients run the same code for each side of an exchange.
"""
