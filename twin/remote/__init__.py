"""Reaching a fabric whose nodes are not on this machine: only through `exec`.

A fabric deployed by containerlab on another machine, or by clabernetes on
Kubernetes, programs itself at boot (images/mrc-twin-boot). twin cannot open
its nodes' network namespace files, so everything it does there is a command
run inside a node, through one of two transports:

    transport   a node is                      exec in it
    docker      a container on an engine URL   docker -H URL exec [-i] CONTAINER argv
    kubectl     a clabernetes launcher pod     kubectl exec -n NS POD -c C [-i] --
                                                   docker exec [-i] NODE argv

`Transport` (twin.remote.transport) is that one abstraction: find a lab's nodes,
and the argv that runs a command in one. On top of it:

    ship      the code a node needs to run twin's side of a job, as a zip piped
              over the exec's stdin (`python3 -c BOOT`): nothing is installed
    agent     runs inside a host: sends and answers verify's probes with the same
              packets and sockets as twin.verify.prober, results as JSON lines
    probe     `twin verify` on such a lab: one agent per host, all at once
    relay     an endpoint's control socket (newline JSON), relayed over exec's
              stdin and stdout, so twin.endpoints' client works unchanged

The runtimes that use them (twin.runtime.remote: docker-remote, kubectl) attach to
a fabric someone else deployed; they never create or remove its nodes.
"""
