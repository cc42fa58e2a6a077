"""MRC, the Multipath Reliable Connection RoCEv2 extension: the twin's endpoint side.

    wire        the packet format (IPv6/IPv6/UDP 4791/BTH/RETH/MRC/ICRC), encoders, a
                hot-path DataTemplate, and decode; pure, docs/mrc-wire.md has the tables

Submodules are imported explicitly (`from twin.mrc import wire`); this package imports
none of them, so importing one never pulls in the rest.
"""
