// Package bench holds allot's end-to-end benchmarks: API server throughput
// against raw etcd, watch fan-out latency, cached LIST of many objects, and
// (later) scheduler_perf-style workloads. Results and the machine they ran
// on are reported in README.md. CI runs every benchmark once as a smoke
// test (-benchtime 1x); set ALLOT_BENCH_OBJECTS to shrink the big ones.
package bench
