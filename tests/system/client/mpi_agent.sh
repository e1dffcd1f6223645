#!/bin/bash
# The rsh agent that lets mpirun (run in one host's namespace) start its daemons in the other hosts'
# namespaces: HOST is a host's address; the rest is the command line, as rsh passes it.
# Env: PHUB_NET_PREFIX, the prefix of the namespaces; PHUB_NET_LAYOUT, how an address names its namespace:
#   phubnet (default)  198.18.0.<10+i>  ->  <prefix>-w<i>     (tests/system/client/phubnet.py's workers)
#   testbed            198.18.R.<10+I>  ->  <prefix>-hR-I     (tools/testbed/testbed.py's hosts)
# PHUB_WORKER_CPUS, if set, the CPUs the MPI processes are confined to (as phubnet.Net confines every worker).
host=$1
shift
last=${host##*.}
case ${PHUB_NET_LAYOUT:-phubnet} in
  phubnet) ns="${PHUB_NET_PREFIX}-w$((last - 10))" ;;
  testbed) rest=${host%.*}; ns="${PHUB_NET_PREFIX}-h${rest##*.}-$((last - 10))" ;;
  *) echo "mpi_agent.sh: unknown PHUB_NET_LAYOUT ${PHUB_NET_LAYOUT}" >&2; exit 2 ;;
esac
pin=()
[[ -n ${PHUB_WORKER_CPUS:-} ]] && pin=(taskset -c "$PHUB_WORKER_CPUS")
exec ip netns exec "$ns" "${pin[@]}" /bin/sh -c "$*"
