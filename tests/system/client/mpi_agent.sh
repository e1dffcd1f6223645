#!/bin/bash
# The rsh agent that lets mpirun (run in worker 0's namespace) start its daemons in the other workers'
# namespaces: HOST is a worker address 198.18.0.<10+i>; the rest is the command line, as rsh passes it.
# Env: PHUB_NET_PREFIX, the phubnet.Net prefix of the namespaces; PHUB_WORKER_CPUS, if set, the CPUs
# the MPI processes are confined to (as phubnet.Net confines every worker).
host=$1
shift
i=$((${host##*.} - 10))
pin=()
[[ -n ${PHUB_WORKER_CPUS:-} ]] && pin=(taskset -c "$PHUB_WORKER_CPUS")
exec ip netns exec "${PHUB_NET_PREFIX}-w$i" "${pin[@]}" /bin/sh -c "$*"
