"""Shared helpers of phub's benchmarks (tools/bench/*) and DPDK tests (tests/dpdk): starting DPDK
processes with timeouts and cleanup, server configs, phub-pktgen and dpdk-testpmd runs, counter parsing,
RESULT lines, JSON and plots."""
