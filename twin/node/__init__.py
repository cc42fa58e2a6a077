"""What runs inside a node: the runner of a node program (twin.node.runner) and the
eBPF data plane's programs (twin.node.ebpf).

Everything here uses the standard library only, and imports nothing else of twin:
node images carry python3 and this package, bind-mounted, and no pip packages.
"""
