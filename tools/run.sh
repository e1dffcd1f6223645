#!/usr/bin/env bash
# The README's run command: build phub, boot phub-server on its embedded default config (config/phub.lua)
# behind a veth pair, drive its two jobs with verified demo workers in a network namespace for a few
# seconds, print every worker's summary, the aggregate goodput and the server's counters, clean up.
# Env: PHUB_RUN_SECONDS (default 4), PHUB_RUN_PS_ROUNDS (default 75 per second). Run as root.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

"$root/tools/setup.sh"
"$root/tools/build.sh" build

build="$root/build"
server_exe="$build/app/phub-server/phub-server"
worker_exe="$build/tools/phub-demo/phub-demo-worker"
seconds=${PHUB_RUN_SECONDS:-4}
ps_rounds=${PHUB_RUN_PS_ROUNDS:-$((75 * seconds))}
iface=phub0                 # the default config's af_packet interface
ns="phub-run-$$"            # the workers' namespace (198.18.0.0/24; the server is 198.18.0.1)
peer=phub0w
logs=$(mktemp -d /tmp/phub-run.XXXXXX)
server_pid=""
worker_pids=()
created_link=0

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${worker_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -INT "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  if ip netns list | grep -qw "$ns"; then
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  fi
  ((created_link)) && ip link del "$iface" 2>/dev/null || true
  rm -rf "$logs"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "run: $*" >&2
  exit 1
}

[[ $EUID -eq 0 ]] || fail "must run as root (veth, network namespace, af_packet)"
[[ -x $server_exe && -x $worker_exe ]] || fail "build did not produce $server_exe and $worker_exe"
if ip link show "$iface" >/dev/null 2>&1; then
  fail "interface $iface already exists (another phub run or test?); remove it with: ip link del $iface"
fi

echo "run: veth $iface <-> $ns/$peer (workers 198.18.0.2/24, server 198.18.0.1)"
ip netns add "$ns"
ip link add "$iface" type veth peer name "$peer" netns "$ns"
created_link=1
ip link set "$iface" up
ip -n "$ns" link set lo up
ip -n "$ns" addr add 198.18.0.2/24 dev "$peer"
ip -n "$ns" link set "$peer" up
# The server reads the veth with af_packet, which cannot take UDP GSO super-packets: the kernel segments them.
# With TX checksum offload a veth passes an unfinished UDP checksum, which the server's software check
# (ports[].udp_checksum = "verify") refuses: the kernel completes it instead.
ip netns exec "$ns" ethtool -K "$peer" tx-udp-segmentation off >/dev/null 2>&1 || true
ip netns exec "$ns" ethtool -K "$peer" tx off >/dev/null 2>&1 || true

echo "run: starting $server_exe (embedded default config)"
timeout $((seconds + 90)) "$server_exe" --duration $((seconds + 60)) >"$logs/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 200); do
  grep -q "phub: ready" "$logs/server.log" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$logs/server.log" >&2; fail "phub-server exited during start-up"; }
  sleep 0.1
done
grep -q "phub: ready" "$logs/server.log" || { cat "$logs/server.log" >&2; fail "phub-server not ready after 20 s"; }
grep "^phub:" "$logs/server.log" | sed 's/^/  /'

echo "run: 4 workers of demo-allreduce for ${seconds}s, 2 workers of demo-ps for $ps_rounds rounds"
start_worker() {  # name, then worker arguments
  local name=$1
  shift
  # The workers run on CPU 0, the server's lcores on CPU 1 (config/phub.lua): like workers on their own hosts.
  timeout $((seconds + 60)) ip netns exec "$ns" taskset -c 0 "$worker_exe" "$@" >"$logs/$name.out" 2>"$logs/$name.err" &
  worker_pids+=($!)
  names+=("$name")
}
names=()
for rank in 0 1 2 3; do start_worker "allreduce-$rank" --job demo-allreduce --rank "$rank" --seconds "$seconds"; done
for rank in 0 1; do start_worker "ps-$rank" --job demo-ps --rank "$rank" --rounds "$ps_rounds"; done

failed=0
for i in "${!worker_pids[@]}"; do
  if ! wait "${worker_pids[$i]}"; then
    failed=$((failed + 1))
    echo "run: worker ${names[$i]} FAILED" >&2
  fi
done
worker_pids=()
for name in "${names[@]}"; do
  sed 's/^/  /' "$logs/$name.out"
  [[ -s $logs/$name.err ]] && sed 's/^/  /' "$logs/$name.err" >&2
done
awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^goodput=/) { v = substr($i, 9); sub(/Gbit\/s/, "", v); sum += v; n++ } }
     END { printf "run: aggregate goodput %.3f Gbit/s over %d workers (gradient bytes reduced per second)\n", sum, n }' \
  "$logs"/*.out

# Resends and timer expiries, next to what the server saw: a push sent again that the server already had
# (a duplicate) was late, not lost.
sum_field() { cat "$logs"/*.out | grep -o " $1=[0-9]*" | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }'; }
resent=$(sum_field retransmits)
expiries=$(sum_field timeouts)
echo "run: stopping the server"
kill -INT "$server_pid"
server_status=0
wait "$server_pid" || server_status=$?
server_pid=""
grep -E "^(lcore|job|drops|port)" "$logs/server.log" | sed 's/^/  /'
dups=$(grep -E "^job " "$logs/server.log" | grep -o ' duplicates [0-9]*' | awk '{ s += $2 } END { print s + 0 }')
echo "run: the workers sent $resent packets again (pushes, inits, pulls); the server had $dups of those pushes already"
echo "run: (late, not lost);"
echo "run: their retransmit timers expired $expiries times, each a header-only rerequest for a result not back"
echo "run: yet: six workers share CPU 0, so a worker that waits for the CPU finds its timer past due"
if ((server_status != 0)); then
  tail -20 "$logs/server.log" >&2
  fail "phub-server exited with status $server_status"
fi
((failed == 0)) || fail "$failed worker(s) failed"
echo "run: OK: every result element verified"
