"""MRC, the Multipath Reliable Connection RoCEv2 extension: the twin's endpoint side.

    wire        the packet format (IPv6/IPv6/UDP 4791/BTH/RETH/MRC/ICRC), encoders, a
                hot-path DataTemplate, and decode; pure, docs/mrc-wire.md has the tables
    framing     how a host's packets cross the fabric (its outer headers, per path)
    evset       a QP's entropy values: the paths its packets are sprayed over
    modes, cc   a sending QP's mode and congestion control, by name; dcqcn the RoCE
                baseline's
    transport   the reliability engine of one QP, pure (the Python reference)
    core        which transport runs: the compiled core (_fastpath, built from the
                _*.c units; build_hash) or the reference, chosen once (core.choose)
    buffer      registered memory with guard bytes
    loop        the packet loop: sockets, QPs and the data path
    control     the control protocol (ops, their arguments checked by twin.validate,
                replies, a client); server its unix socket; endpoint the daemon
    counters, stats, exposition   what an endpoint counts, typed, and as Prometheus text
    sim, trace, fuzz, difffuzz    a simulated fabric, recorded inputs replayed, hostile
                packets, and a differential fuzzer of the transport

Submodules are imported explicitly (`from twin.mrc import wire`); this package imports
none of them, so importing one never pulls in the rest.
"""
