"""The fabric compiler, pure (no root, no kernel): what a lab will be.

    spec     a fabric spec, validated once -> a frozen FabricSpec
    model    FabricSpec -> Fabric: nodes, links, planes, T1s, names
    usid     the uSID addressing plan (F3216)
    paths    source-routed paths between hosts; the EV -> path formula
    plan     Fabric -> every node's routes, SIDs and addresses (NodePlan)
    routing  the routing modes: static-srv6 (default) or bgp, and the typed bgp: section
    bgp      routing: bgp's addressing (host links per plane), ASNs, router IDs, and
             each router's expected sessions, announcements and ECMP
    frr      routing: bgp's per-router FRR files (frr.conf, daemons)
    render   plan -> containerlab topology and per-node configs (a node with
             MRC_TWIN_BOOT=1 programs itself from them at boot: images/mrc-twin-boot)
    clabernetes  the rendered lab as a clabernetes Topology + ConfigMaps (Kubernetes)
    size     the full-scale calculator (two-tier multi-plane vs three-tier)
"""
